//! CUDA allocations (kiln's own and callers' borrowed ones) and their copies, ordered on the
//! stream of the device that made them.

use super::context::other;
use super::stream::Stream;
use crate::gpu::DeviceMemory;
use crate::DeviceError;
use cudarc::driver::{result, sys};
use std::any::Any;
use std::sync::Arc;

/// One device region: kiln's allocation (freed on drop) or a caller's (never freed).
pub(crate) struct CudaMem {
    pub(super) stream: Arc<Stream>,
    pub(super) ptr: sys::CUdeviceptr,
    pub(super) len: usize,
    pub(super) owned: bool,
}

// SAFETY: a device address; every access goes through the driver with the context bound.
unsafe impl Send for CudaMem {}
unsafe impl Sync for CudaMem {}

impl std::fmt::Debug for CudaMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let whose = if self.owned { "kiln's" } else { "borrowed" };
        write!(f, "CudaMem({:#x}, {} bytes, {whose})", self.ptr, self.len)
    }
}

impl CudaMem {
    fn range(&self, offset: usize, len: usize) -> Result<(), DeviceError> {
        if offset.checked_add(len).is_some_and(|end| end <= self.len) {
            Ok(())
        } else {
            Err(DeviceError::Other(format!(
                "cuda: {len} bytes at {offset} outside a region of {}",
                self.len
            )))
        }
    }
}

impl DeviceMemory for CudaMem {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), DeviceError> {
        self.range(offset, out.len())?;
        // The work queued before the read finishes first (and reports its fault).
        self.stream.sync()?;
        // SAFETY: the range lies inside the region (checked above); the copy is synchronous.
        unsafe { result::memcpy_dtoh_sync(out, self.ptr + offset as u64) }
            .map_err(|e| other("cuMemcpyDtoH", e))
    }
    fn write(&self, offset: usize, data: &[u8]) -> Result<(), DeviceError> {
        self.write_enqueued(offset, data)?;
        self.stream.sync()
    }
    fn write_enqueued(&self, offset: usize, data: &[u8]) -> Result<(), DeviceError> {
        self.range(offset, data.len())?;
        // A captured copy reads its host address again at every replay, long after `data` is
        // gone: a recording holds device-side work only.
        if self.stream.capturing() {
            return Err(DeviceError::Other(format!(
                "a copy of {} host bytes cannot be recorded into a CUDA graph (a replay would read \
                 host memory the caller has freed): write device buffers before recording or \
                 between replays",
                data.len()
            )));
        }
        self.stream.shared.enter()?;
        // SAFETY: inside the region (checked above). From pageable host memory the driver
        // stages `data` before returning, so the caller may drop it at once.
        unsafe { result::memcpy_htod_async(self.ptr + offset as u64, data, self.stream.raw()) }
            .map_err(|e| other("cuMemcpyHtoDAsync", e))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for CudaMem {
    fn drop(&mut self) {
        // After a fault the context is lost and its memory with it: nothing to free. During a
        // capture the graph may still name the region: keep it (a bounded leak, never a
        // dangling address in a replay).
        if !self.owned || self.stream.capturing() || self.stream.shared.enter().is_err() {
            return;
        }
        // Work queued on the stream may still use the region.
        let _ = self.stream.sync();
        // SAFETY: allocated by cuMemAlloc and freed once.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}
