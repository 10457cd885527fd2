//! Recorded launches: what a closure enqueues on the device's stream, captured once as a CUDA
//! graph and replayed as one unit, so the replays cost the device's time and not the host's
//! per-launch issue cost (the way peers time small kernels: graph replay).

use super::context::other;
use super::CudaGpu;
use crate::{DeviceError, PortError};
use cudarc::driver::{result, sys};

/// An instantiated graph of the device's stream, destroyed on drop.
pub(super) struct Recording {
    exec: sys::CUgraphExec,
}

impl Drop for Recording {
    fn drop(&mut self) {
        // SAFETY: instantiated by `record` and not used after this.
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
        }
    }
}

impl CudaGpu {
    /// Captures what `pass` enqueues on the stream (launches only: an allocation or a
    /// synchronisation inside the capture is refused) into an instantiated graph.
    pub(super) fn record(
        &self,
        pass: &mut dyn FnMut() -> Result<(), PortError>,
    ) -> Result<Recording, PortError> {
        self.enter()?;
        let stream = self.stream.raw();
        // Thread-local mode: another thread's unrelated CUDA calls do not break the capture.
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: a live, non-default stream of the bound context.
        unsafe { result::stream::begin_capture(stream, mode) }
            .map_err(|e| other("cuStreamBeginCapture", e))?;
        let enqueued = pass();
        // The capture always ends, so a failed pass leaves the stream usable.
        // SAFETY: the capture begun above.
        let ended = unsafe { result::stream::end_capture(stream) };
        enqueued?;
        let graph = ended.map_err(|e| other("cuStreamEndCapture", e))?;
        // SAFETY: `graph` was just captured; the executable keeps its own copy.
        let exec = unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) };
        // SAFETY: not used after instantiation.
        unsafe {
            let _ = result::graph::destroy(graph);
        }
        let exec = exec.map_err(|e| other("cuGraphInstantiate", e))?;
        Ok(Recording { exec })
    }

    /// Enqueues one replay of `r` on the stream.
    pub(super) fn replay(&self, r: &Recording) -> Result<(), DeviceError> {
        // SAFETY: an instantiated graph of this context, launched on its stream.
        unsafe { result::graph::launch(r.exec, self.stream.raw()) }
            .map_err(|e| other("cuGraphLaunch", e))
    }
}
