//! The cpu backend: the kernel body with a serial block (one thread, wave 1) per grid block,
//! blocks spread over the cores. An out-of-bounds view access or shared-memory request becomes
//! `DeviceError::KernelFault` (recorded by the block's fault probe, no unwinding: the body runs
//! on with the access refused); a shuffle outside the wave of 1 becomes `LaneOutOfWave` with its
//! source line; a body that makes no progress for the watchdog's limit (a stride of 0, say) is
//! stopped at its next Block call as `KernelFault { detail: "no progress after N s …" }`. Any
//! other panic in the body is a `KernelFault` too where panics unwind.

use crate::host::{
    block_index, halt_hung, panic_message, place, watchdog_limit, FirstError, HostBuf, HostLaunch,
    HostStop, ViewSource, Watchdog,
};
use crate::DeviceError;
use kiln_math::{scratch_words, Block, Probe, Rw, Scalar, SourceSite, View, ViewFault};
use rayon::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::ptr::NonNull;
use std::sync::OnceLock;

/// Probe tag of the block's shared memory (global buffers are tagged by their list index).
const SHARED_TAG: u32 = u32::MAX;

/// A block's fault probe: sees only refused view accesses, keeps the first as its error.
pub(crate) struct CpuFaults<'a> {
    kernel: &'static str,
    idx: [u32; 3],
    buffer_names: &'a [&'static str],
    first: FirstError,
}

impl CpuFaults<'_> {
    fn record(&self, e: DeviceError) {
        self.first.record(e)
    }

    fn fault(&self, detail: String) {
        self.record(DeviceError::KernelFault {
            kernel: self.kernel,
            backend: crate::Backend::Cpu,
            block: Some(self.idx),
            detail,
            state: crate::DeviceState::Usable,
        })
    }
}

impl Probe for CpuFaults<'_> {
    fn read(&self, _buf: u32, _byte: usize, _at: SourceSite) {}
    fn write(&self, _buf: u32, _byte: usize, _at: SourceSite) {}
    fn fault(&self, buf: u32, fault: ViewFault, at: SourceSite) {
        let what = match buf {
            SHARED_TAG => "shared memory".to_string(),
            k => format!(
                "buffer `{}`",
                self.buffer_names.get(k as usize).copied().unwrap_or("?")
            ),
        };
        CpuFaults::fault(self, format!("{fault} of {what} at {}", place(at)))
    }
}

/// The views of one block of a host launch, each tapped by the block's fault probe.
pub(crate) struct CpuViews<'a> {
    bufs: &'a [HostBuf],
    faults: NonNull<dyn Probe + 'a>,
}

// SAFETY: raw device pointers of one launch, as on a GPU; the probe is Sync.
unsafe impl Sync for CpuViews<'_> {}

impl ViewSource for CpuViews<'_> {
    fn view<V: View>(&self, k: usize) -> V {
        let b = self.bufs[k];
        // SAFETY: the launcher checked dtype and length of every buffer against the list; the
        // probe lives on the stack of the block that uses the views.
        unsafe { V::from_raw_parts(b.ptr, b.len).with_fault_probe(erase(self.faults), k as u32) }
    }
}

/// The probe pointer without its lifetime, as `View::with_fault_probe` takes it.
///
/// # Safety
/// The probe outlives every view it is attached to.
unsafe fn erase<'a>(p: NonNull<dyn Probe + 'a>) -> NonNull<dyn Probe> {
    // SAFETY: per the contract; only the lifetime changes.
    unsafe { std::mem::transmute::<NonNull<dyn Probe + 'a>, NonNull<dyn Probe>>(p) }
}

/// One block, one thread.
pub(crate) struct CpuBlock<'a> {
    kernel: &'static str,
    idx: [u32; 3],
    grid: [u32; 3],
    shared: *mut u8,
    shared_len: usize,
    watchdog: &'a Watchdog,
    faults: &'a CpuFaults<'a>,
}

const SCRATCH_BYTES: usize = scratch_words(1, 1) as usize * 4;

impl CpuBlock<'_> {
    /// Every Block call is a chance to stop a hung body (loops call them: strides, ids).
    #[track_caller]
    #[inline(always)]
    fn watch(&self) {
        if let Some(detail) = self.watchdog.check(Location::caller()) {
            halt_hung(DeviceError::KernelFault {
                kernel: self.kernel,
                backend: crate::Backend::Cpu,
                block: Some(self.idx),
                detail,
                state: crate::DeviceState::Usable,
            })
        }
    }
}

impl CpuBlock<'_> {
    fn probe(&self) -> NonNull<dyn Probe> {
        // SAFETY: the probe lives on the stack of the block run, which outlives its views.
        unsafe { erase(NonNull::from(self.faults as &dyn Probe)) }
    }
}

impl Block for CpuBlock<'_> {
    const WAVE: u32 = 1;
    #[inline(always)]
    fn mul_wide(&self, a: u32, b: u32) -> (u32, u32) {
        kiln_math::random::mul_wide_u64(a, b)
    }
    #[track_caller]
    fn thread(&self) -> u32 {
        self.watch();
        0
    }
    #[track_caller]
    fn size(&self) -> u32 {
        self.watch();
        1
    }
    #[track_caller]
    fn block_x(&self) -> u32 {
        self.watch();
        self.idx[0]
    }
    #[track_caller]
    fn block_y(&self) -> u32 {
        self.watch();
        self.idx[1]
    }
    #[track_caller]
    fn block_z(&self) -> u32 {
        self.watch();
        self.idx[2]
    }
    #[track_caller]
    fn grid_x(&self) -> u32 {
        self.watch();
        self.grid[0]
    }
    #[track_caller]
    fn grid_y(&self) -> u32 {
        self.watch();
        self.grid[1]
    }
    #[track_caller]
    fn grid_z(&self) -> u32 {
        self.watch();
        self.grid[2]
    }
    #[track_caller]
    fn barrier(&self) {
        self.watch();
    }
    #[track_caller]
    fn shuffle_xor(&self, v: u32, mask: u32) -> u32 {
        // Only lane 0 exists: folds from WAVE / 2 = 0 never call this, so any other mask is a
        // width the body assumed.
        if mask != 0 {
            self.faults.record(DeviceError::LaneOutOfWave {
                kernel: self.kernel,
                block: self.idx,
                lane: 0,
                source_lane: mask,
                wave: 1,
                at: place(Location::caller()),
            });
        }
        self.watch();
        v
    }
    #[track_caller]
    fn scratch(&self) -> Rw<u32> {
        self.watch();
        // SAFETY: the shared allocation starts with the scratch words; the probe outlives the block.
        unsafe {
            Rw::from_raw_parts(self.shared, SCRATCH_BYTES / 4)
                .with_fault_probe(self.probe(), SHARED_TAG)
        }
    }
    #[track_caller]
    fn shared<T: Scalar>(&self, offset: usize, len: usize) -> Rw<T> {
        self.watch();
        let start = SCRATCH_BYTES + offset;
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|n| n.checked_add(start));
        if bytes.is_none_or(|end| end > self.shared_len)
            || !start.is_multiple_of(std::mem::align_of::<T>())
        {
            let at = place(Location::caller());
            self.faults.fault(format!("shared memory request at {offset} of {len} elements exceeds the launch's {} bytes, at {at}", self.shared_len));
            // An empty view: the body runs on, its accesses refused.
            // SAFETY: no element is reachable through a view of length 0.
            return unsafe {
                Rw::from_raw_parts(self.shared, 0).with_fault_probe(self.probe(), SHARED_TAG)
            };
        }
        // SAFETY: in range and aligned, checked above; the probe outlives the block.
        unsafe {
            Rw::from_raw_parts(self.shared.add(start), len)
                .with_fault_probe(self.probe(), SHARED_TAG)
        }
    }
}

/// Runs `f` once per block of the grid, in parallel over blocks.
pub(crate) fn run<F>(l: &HostLaunch, f: F) -> Result<(), DeviceError>
where
    F: Fn(&CpuBlock, &CpuViews) + Sync,
{
    let n = l.grid.iter().map(|&g| g as u64).product::<u64>();
    let words = l.shared.max(SCRATCH_BYTES).div_ceil(8);
    // Read once: the environment lookup would cost more than a small launch.
    static LIMIT: OnceLock<std::time::Duration> = OnceLock::new();
    let watchdog = Watchdog::new(*LIMIT.get_or_init(watchdog_limit));
    (0..n).into_par_iter().try_for_each_init(
        || vec![0u64; words],
        |shm, lin| {
            let idx = block_index(lin, l.grid);
            let faults = CpuFaults {
                kernel: l.kernel,
                idx,
                buffer_names: l.buffer_names,
                first: FirstError::default(),
            };
            let views = CpuViews {
                bufs: l.bufs,
                faults: NonNull::from(&faults as &dyn Probe),
            };
            let b = CpuBlock {
                kernel: l.kernel,
                idx,
                grid: l.grid,
                shared: shm.as_mut_ptr() as *mut u8,
                shared_len: words * 8,
                watchdog: &watchdog,
                faults: &faults,
            };
            let ran = catch_unwind(AssertUnwindSafe(|| f(&b, &views)));
            watchdog.progress();
            if let Err(p) = ran {
                faults.record(match p.downcast::<HostStop>() {
                    Ok(stopped) => stopped.0,
                    Err(p) => DeviceError::KernelFault {
                        kernel: l.kernel,
                        backend: crate::Backend::Cpu,
                        block: Some(idx),
                        detail: panic_message(p.as_ref()),
                        state: crate::DeviceState::Usable,
                    },
                });
            }
            faults.first.take().map_or(Ok(()), Err)
        },
    )
}
