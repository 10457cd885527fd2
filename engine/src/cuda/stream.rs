//! The stream a device enqueues on, and the last kernel enqueued there.

use super::context::Loaded;
use crate::DeviceError;
use cudarc::driver::{result, sys, CudaStream};
use std::sync::{Arc, Mutex};

/// A stream of a loaded context, and the last kernel enqueued on it (a fault seen by a later
/// synchronisation is reported against it).
pub(crate) struct Stream {
    pub(super) shared: Arc<Loaded>,
    pub(super) stream: Arc<CudaStream>,
    pub(super) last_kernel: Mutex<&'static str>,
}

impl Stream {
    pub(super) fn raw(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    /// Waits for the stream; a fault of the work it waited for loses the context.
    pub(super) fn sync(&self) -> Result<(), DeviceError> {
        self.shared.enter()?;
        // SAFETY: a live stream of the bound context.
        unsafe { result::stream::synchronize(self.raw()) }.map_err(|e| {
            let kernel = *self.last_kernel.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.launch_error(kernel, "cuStreamSynchronize", e)
        })
    }

    pub(super) fn capturing(&self) -> bool {
        // SAFETY: a live stream.
        unsafe { result::stream::is_capturing(self.raw()) }
            .is_ok_and(|s| s != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }
}
