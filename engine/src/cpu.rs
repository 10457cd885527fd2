//! The cpu backend: the kernel body with a serial block (one thread, wave 1) per grid block,
//! blocks spread over the cores. A panic in the body (an out-of-bounds view access) becomes
//! `DeviceError::KernelFault`.

use crate::host::{block_index, panic_message, HostBuf, HostLaunch, ViewSource};
use crate::DeviceError;
use kiln_math::{scratch_words, Block, Rw, Scalar, View};
use rayon::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

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
pub(crate) struct CpuBlock {
    idx: [u32; 3],
    grid: [u32; 3],
    shared: *mut u8,
    shared_len: usize,
}

const SCRATCH_BYTES: usize = scratch_words(1, 1) as usize * 4;

impl Block for CpuBlock {
    const WAVE: u32 = 1;
    fn thread(&self) -> u32 {
        0
    }
    fn size(&self) -> u32 {
        1
    }
    fn block_x(&self) -> u32 {
        self.idx[0]
    }
    fn block_y(&self) -> u32 {
        self.idx[1]
    }
    fn block_z(&self) -> u32 {
        self.idx[2]
    }
    fn grid_x(&self) -> u32 {
        self.grid[0]
    }
    fn grid_y(&self) -> u32 {
        self.grid[1]
    }
    fn grid_z(&self) -> u32 {
        self.grid[2]
    }
    fn barrier(&self) {}
    fn shuffle_xor(&self, v: u32, mask: u32) -> u32 {
        // Only lane 0 exists: folds from WAVE / 2 = 0 never call this, so any other mask is a
        // width the body assumed.
        if mask != 0 {
            let at = std::panic::Location::caller();
            panic!(
                "kiln: {}:{}:{}: shuffle_xor with mask {mask} reaches outside the wave of 1 (fold from WAVE / 2, never a fixed width)",
                at.file(),
                at.line(),
                at.column()
            );
        }
        v
    }
    fn scratch(&self) -> Rw<u32> {
        // SAFETY: the shared allocation starts with the scratch words.
        unsafe { Rw::from_raw_parts(self.shared, SCRATCH_BYTES / 4) }
    }
    fn shared<T: Scalar>(&self, offset: usize, len: usize) -> Rw<T> {
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
    (0..n).into_par_iter().try_for_each_init(
        || vec![0u64; words],
        |shm, lin| {
            let b = CpuBlock {
                idx: block_index(lin, l.grid),
                grid: l.grid,
                shared: shm.as_mut_ptr() as *mut u8,
                shared_len: words * 8,
            };
            catch_unwind(AssertUnwindSafe(|| f(&b, &views))).map_err(|p| DeviceError::KernelFault {
                kernel: l.kernel,
                backend: crate::Backend::Cpu,
                block: Some(b.idx),
                detail: panic_message(p.as_ref()),
                state: crate::DeviceState::Usable,
            })
        },
    )
}
