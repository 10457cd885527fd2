//! Typed errors. Callers take the fallback on `NoPort` and `WaveMismatch`; everything else is
//! the caller's bug (dtype, shape, parameter: [`PortError::is_invalid_input`]) or the device's
//! (`Device`).

use crate::Backend;
use kiln_math::{DType, KernelId, ShapeError};

/// Why a kernel could not run (or did not run) on a device.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PortError {
    /// The backend has no port of this kernel for this dtype.
    #[error("[{kernel}] no {backend} port: {reason}")]
    NoPort {
        /// The kernel.
        kernel: &'static str,
        /// The backend without a port.
        backend: Backend,
        /// Why (not built, not compiled in, refused by the device).
        reason: String,
    },
    /// The port was built for another wave width than the device runs.
    #[error("[{kernel}] the port is built for wave {built} and the device runs wave {device}")]
    WaveMismatch {
        /// The kernel.
        kernel: &'static str,
        /// The wave the port was compiled for.
        built: u32,
        /// The wave the device runs.
        device: u32,
    },
    /// A buffer's dtype is not the one the kernel takes there.
    #[error("[{kernel}] `{buffer}` is {}, must be {}", got.name(), expected.name())]
    DtypeMismatch {
        /// The kernel (or tensor method) that refused.
        kernel: &'static str,
        /// The buffer's name in the kernel list.
        buffer: &'static str,
        /// The dtype the kernel takes there.
        expected: DType,
        /// The dtype given.
        got: DType,
    },
    /// The kernel has no version for this element type.
    #[error("[{kernel}] dtype {} is not supported (supported: {})", got.name(), names(supported))]
    UnsupportedDtype {
        /// The kernel.
        kernel: &'static str,
        /// The dtype given.
        got: DType,
        /// The dtypes it has.
        supported: &'static [DType],
    },
    /// A buffer's shape is not the one the kernel needs there.
    #[error("[{kernel}] `{buffer}` has shape {got:?}, must be {expected:?}")]
    ShapeMismatch {
        /// The kernel (or tensor method) that refused.
        kernel: &'static str,
        /// The buffer's name.
        buffer: &'static str,
        /// The shape it must have.
        expected: Vec<usize>,
        /// The shape given.
        got: Vec<usize>,
    },
    /// The kernel's shape binding refused the buffers' shapes or a parameter (a count that
    /// must match, a dimension out of range).
    #[error("[{kernel}] invalid shape: {error}")]
    Shape {
        /// The kernel.
        kernel: &'static str,
        /// What the binding found.
        error: ShapeError,
    },
    /// A parameter, table or argument that the kernel refuses; found before any launch.
    #[error("[{kernel}] invalid input: {msg}")]
    InvalidShape {
        /// The kernel.
        kernel: &'static str,
        /// What is wrong, in words.
        msg: String,
    },
    /// A token id at or past the vocabulary (the rows of the table); found before any launch.
    #[error("[{kernel}] id {id} at position {position} is outside the vocabulary of {vocab} rows")]
    IdOutOfRange {
        /// The kernel.
        kernel: &'static str,
        /// Where in the ids it is.
        position: usize,
        /// The id.
        id: u32,
        /// The rows of the table.
        vocab: usize,
    },
    /// An expert id at or past the experts a MoE layer stacks; found before any launch.
    #[error("[{kernel}] expert {id} at slot {position} is outside the layer's {experts} experts")]
    ExpertOutOfRange {
        /// The kernel.
        kernel: &'static str,
        /// Which slot (token·K + k) holds it.
        position: usize,
        /// The id.
        id: u32,
        /// Experts in the layer.
        experts: usize,
    },
    /// A row index at or past the rows of the matrix it gathers from (`gather_qmm`'s
    /// `lhs_idx` against the rows of `lhs`); found before any launch.
    #[error("[{kernel}] row {row} at slot {position} is outside the {rows} rows of lhs")]
    LhsRowOutOfRange {
        /// The kernel.
        kernel: &'static str,
        /// Which slot holds it.
        position: usize,
        /// The row index.
        row: u32,
        /// Rows of `lhs`.
        rows: usize,
    },
    /// The device failed: a driver error, a trapped kernel, or an emulator finding.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

fn names(dtypes: &[DType]) -> String {
    dtypes
        .iter()
        .map(|d| d.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl PortError {
    /// Whether the caller should take the fallback (the port is absent or held back).
    pub fn is_fallback(&self) -> bool {
        matches!(
            self,
            PortError::NoPort { .. } | PortError::WaveMismatch { .. }
        )
    }

    /// Whether the caller's input was refused before anything ran (dtype, shape, parameter).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            PortError::DtypeMismatch { .. }
                | PortError::UnsupportedDtype { .. }
                | PortError::ShapeMismatch { .. }
                | PortError::Shape { .. }
                | PortError::InvalidShape { .. }
                | PortError::IdOutOfRange { .. }
                | PortError::ExpertOutOfRange { .. }
                | PortError::LhsRowOutOfRange { .. }
        )
    }

    pub(crate) fn invalid(kernel: KernelId, msg: impl Into<String>) -> PortError {
        PortError::InvalidShape {
            kernel: kernel.name(),
            msg: msg.into(),
        }
    }

    pub(crate) fn shape(
        kernel: KernelId,
        buffer: &'static str,
        expected: &[usize],
        got: &[usize],
    ) -> PortError {
        PortError::ShapeMismatch {
            kernel: kernel.name(),
            buffer,
            expected: expected.to_vec(),
            got: got.to_vec(),
        }
    }
}

/// What a fault left the device able to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceState {
    /// The device (and its memory) can be used again: host backends, the sim and wgpu, whose
    /// kernels report a fault through a flag instead of trapping.
    Usable,
    /// The device context is lost for the rest of the process (a trapped CUDA or HIP kernel):
    /// every later call on it returns `DeviceUnavailable`; open another context or restart.
    Lost,
}

/// A failure on the device side.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeviceError {
    /// The backend cannot be opened or used here (no driver, no adapter, compiled out, or a
    /// context lost to an earlier fault).
    #[error("{backend} is unavailable: {reason}")]
    DeviceUnavailable {
        /// The backend asked for.
        backend: Backend,
        /// Why it cannot run.
        reason: String,
    },
    /// An allocation the device refused.
    #[error("{backend}: out of memory: {requested} bytes requested{}", available.map(|a| format!(", {a} free")).unwrap_or_default())]
    OutOfMemory {
        /// The backend that refused.
        backend: Backend,
        /// Bytes asked for.
        requested: usize,
        /// Bytes free on the device, when it says.
        available: Option<usize>,
    },
    /// The kernel trapped (an out-of-bounds view access or an explicit panic in the body).
    #[error("[{kernel}] kernel fault on {backend}{}: {detail} (device {state:?})", block.map(|b| format!(" in block {b:?}")).unwrap_or_default())]
    KernelFault {
        /// The kernel that faulted (on an asynchronous backend: the last one enqueued before the
        /// synchronisation that saw the fault).
        kernel: &'static str,
        /// The backend it ran on.
        backend: Backend,
        /// The faulting block when the backend knows it.
        block: Option<[u32; 3]>,
        /// What trapped, in words.
        detail: String,
        /// Whether the device can be used again.
        state: DeviceState,
    },
    /// Threads of one block (or wave) did not all reach the same barrier or collective.
    #[error("[{kernel}] divergent barrier in block {block:?}: {detail}")]
    Divergence {
        /// The kernel.
        kernel: &'static str,
        /// The block where the emulator saw it.
        block: [u32; 3],
        /// Which threads reached what.
        detail: String,
    },
    /// Two threads touched the same element between two barriers, at least one writing.
    #[error("[{kernel}] race in block {block:?}: {detail}")]
    Race {
        /// The kernel.
        kernel: &'static str,
        /// The block where the emulator saw it.
        block: [u32; 3],
        /// The element and the threads.
        detail: String,
    },
    /// A shuffle named a lane outside the wave (a fold that assumed a wider wave).
    #[error("[{kernel}] {at}: lane {lane} of block {block:?} shuffled with lane {source_lane}, outside its wave of {wave} (fold from WAVE / 2, never a fixed width)")]
    LaneOutOfWave {
        /// The kernel.
        kernel: &'static str,
        /// The block.
        block: [u32; 3],
        /// The lane that shuffled.
        lane: u32,
        /// The lane it named.
        source_lane: u32,
        /// The wave width it ran at.
        wave: u32,
        /// `file:line:column` of the shuffle in the kernel source.
        at: String,
    },
    /// The launch asked for something the device cannot do (block size, shared memory, …).
    #[error("[{kernel}] launch refused: {detail}")]
    Launch {
        /// The kernel.
        kernel: &'static str,
        /// What was refused.
        detail: String,
    },
    /// A buffer or device operation outside a kernel failed.
    #[error("device error: {0}")]
    Other(String),
}
