//! The cpu backend: the kernel body with a serial block (one thread, wave 1) per grid block,
//! blocks spread over the cores. A panic in the body (an out-of-bounds view access) becomes
//! `DeviceError::KernelFault`; a shuffle outside the wave of 1 becomes `LaneOutOfWave` with its
//! source line; a body that makes no progress for the watchdog's limit (a stride of 0, say) is
//! stopped at its next Block call as `KernelFault { detail: "no progress after N s …" }`.

use crate::host::{
    block_index, panic_message, stop, watchdog_limit, HostBuf, HostLaunch, HostStop, ViewSource,
    Watchdog,
};
use crate::DeviceError;
use kiln_math::{scratch_words, Block, Rw, Scalar, View};
use rayon::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::OnceLock;

/// The views of a host launch, unprobed.
pub(crate) struct CpuViews<'a>(&'a [HostBuf]);

// SAFETY: raw device pointers shared by the blocks of one launch, as on a GPU.
unsafe impl Sync for CpuViews<'_> {}

impl ViewSource for CpuViews<'_> {
    fn view<V: View>(&self, k: usize) -> V {
        let b = self.0[k];
        // SAFETY: the launcher checked dtype and length of every buffer against the list.
        unsafe { V::from_raw_parts(b.ptr, b.len) }
    }
}

/// One block, one thread.
pub(crate) struct CpuBlock<'a> {
    kernel: &'static str,
    idx: [u32; 3],
    grid: [u32; 3],
    shared: *mut u8,
    shared_len: usize,
    watchdog: &'a Watchdog,
}

const SCRATCH_BYTES: usize = scratch_words(1, 1) as usize * 4;

impl CpuBlock<'_> {
    /// Every Block call is a chance to stop a hung body (loops call them: strides, ids).
    #[track_caller]
    #[inline(always)]
    fn watch(&self) {
        if let Some(detail) = self.watchdog.check(Location::caller()) {
            stop(DeviceError::KernelFault {
                kernel: self.kernel,
                backend: crate::Backend::Cpu,
                block: Some(self.idx),
                detail,
                state: crate::DeviceState::Usable,
            })
        }
    }
}

impl Block for CpuBlock<'_> {
    const WAVE: u32 = 1;
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
            let at = Location::caller();
            stop(DeviceError::LaneOutOfWave {
                kernel: self.kernel,
                block: self.idx,
                lane: 0,
                source_lane: mask,
                wave: 1,
                at: format!("{}:{}:{}", at.file(), at.line(), at.column()),
            });
        }
        self.watch();
        v
    }
    #[track_caller]
    fn scratch(&self) -> Rw<u32> {
        self.watch();
        // SAFETY: the shared allocation starts with the scratch words.
        unsafe { Rw::from_raw_parts(self.shared, SCRATCH_BYTES / 4) }
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
            panic!("kiln: shared memory request at {offset} of {len} elements exceeds the launch's {} bytes", self.shared_len);
        }
        // SAFETY: in range and aligned, checked above.
        unsafe { Rw::from_raw_parts(self.shared.add(start), len) }
    }
}

/// Runs `f` once per block of the grid, in parallel over blocks.
pub(crate) fn run<F>(l: &HostLaunch, f: F) -> Result<(), DeviceError>
where
    F: Fn(&CpuBlock, &CpuViews) + Sync,
{
    let n = l.grid.iter().map(|&g| g as u64).product::<u64>();
    let views = CpuViews(l.bufs);
    let words = l.shared.max(SCRATCH_BYTES).div_ceil(8);
    // Read once: the environment lookup would cost more than a small launch.
    static LIMIT: OnceLock<std::time::Duration> = OnceLock::new();
    let watchdog = Watchdog::new(*LIMIT.get_or_init(watchdog_limit));
    (0..n).into_par_iter().try_for_each_init(
        || vec![0u64; words],
        |shm, lin| {
            let b = CpuBlock {
                kernel: l.kernel,
                idx: block_index(lin, l.grid),
                grid: l.grid,
                shared: shm.as_mut_ptr() as *mut u8,
                shared_len: words * 8,
                watchdog: &watchdog,
            };
            let ran = catch_unwind(AssertUnwindSafe(|| f(&b, &views)));
            watchdog.progress();
            ran.map_err(|p| match p.downcast::<HostStop>() {
                Ok(stopped) => stopped.0,
                Err(p) => DeviceError::KernelFault {
                    kernel: l.kernel,
                    backend: crate::Backend::Cpu,
                    block: Some(b.idx),
                    detail: panic_message(p.as_ref()),
                    state: crate::DeviceState::Usable,
                },
            })
        },
    )
}
