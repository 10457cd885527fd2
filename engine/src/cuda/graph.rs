//! Recorded launches: what a closure enqueues on the device's stream, captured once as a CUDA
//! graph and replayed as one unit, so the replays cost the device's time and not the host's
//! per-launch issue cost (the way peers time small kernels: graph replay).

use super::context::other;
use super::stream::Stream;
use super::CudaGpu;
use crate::gpu::GpuRecording;
use crate::{DeviceError, PortError};
use cudarc::driver::{result, sys};
use std::sync::Arc;

/// An instantiated graph of the device's stream, destroyed on drop.
pub(super) struct Recording {
    exec: sys::CUgraphExec,
    stream: Arc<Stream>,
}

// SAFETY: a graph executable is a driver handle usable from any thread of its context; the
// replay binds the context first, and launches on one stream are ordered by the driver.
unsafe impl Send for Recording {}
unsafe impl Sync for Recording {}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Recording({:?})", self.exec)
    }
}

impl GpuRecording for Recording {
    fn replay(&self) -> Result<(), DeviceError> {
        self.stream.shared.enter()?;
        // SAFETY: an instantiated graph of this context, launched on its stream.
        unsafe { result::graph::launch(self.exec, self.stream.raw()) }
            .map_err(|e| other("cuGraphLaunch", e))
    }
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
        let recording = Recording {
            exec,
            stream: self.stream.clone(),
        };
        // Uploaded now, so that a graph's first replay (a decode step's only one) does not
        // pay the upload: Llama-3.1-8B's graph steps spent ~300 µs more host gap than eager.
        // SAFETY: the executable instantiated above, on the stream it replays on.
        unsafe { result::graph::upload(recording.exec, stream) }
            .map_err(|e| other("cuGraphUpload", e))?;
        Ok(recording)
    }
}
