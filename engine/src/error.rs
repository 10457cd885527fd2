//! Typed errors. Callers take the fallback on `NoPort` and `WaveMismatch`; everything else is
//! the caller's bug (`InvalidShape`) or the device's (`Device`).

use crate::Backend;
use kiln_math::KernelId;

/// Why a kernel could not run (or did not run) on a device.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PortError {
    /// The backend has no port of this kernel for this dtype.
    #[error("[{kernel}] no {backend} port: {reason}")]
    NoPort {
        kernel: &'static str,
        backend: Backend,
        reason: String,
    },
    /// The port was built for another wave width than the device runs.
    #[error("[{kernel}] the port is built for wave {built} and the device runs wave {device}")]
    WaveMismatch {
        kernel: &'static str,
        built: u32,
        device: u32,
    },
    /// A shape, dtype, parameter or argument that the kernel refuses; found before any launch.
    #[error("[{kernel}] invalid input: {msg}")]
    InvalidShape { kernel: &'static str, msg: String },
    /// The device failed: a driver error, a trapped kernel, or an emulator finding.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

impl PortError {
    /// Whether the caller should take the fallback (the port is absent or held back).
    pub fn is_fallback(&self) -> bool {
        matches!(
            self,
            PortError::NoPort { .. } | PortError::WaveMismatch { .. }
        )
    }

    pub(crate) fn invalid(kernel: KernelId, msg: impl Into<String>) -> PortError {
        PortError::InvalidShape {
            kernel: kernel.name(),
            msg: msg.into(),
        }
    }
}

/// A failure on the device side.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeviceError {
    /// The kernel trapped (an out-of-bounds view access or an explicit panic in the body).
    #[error("[{kernel}] kernel fault in block {block:?}: {message}")]
    KernelFault {
        kernel: &'static str,
        block: [u32; 3],
        message: String,
    },
    /// Threads of one block (or wave) did not all reach the same barrier or collective.
    #[error("[{kernel}] divergent barrier in block {block:?}: {detail}")]
    Divergence {
        kernel: &'static str,
        block: [u32; 3],
        detail: String,
    },
    /// Two threads touched the same element between two barriers, at least one writing.
    #[error("[{kernel}] race in block {block:?}: {detail}")]
    Race {
        kernel: &'static str,
        block: [u32; 3],
        detail: String,
    },
    /// A shuffle named a lane outside the wave (a fold that assumed a wider wave).
    #[error("[{kernel}] {at}: lane {lane} of block {block:?} shuffled with lane {source_lane}, outside its wave of {wave} (fold from WAVE / 2, never a fixed width)")]
    LaneOutOfWave {
        kernel: &'static str,
        block: [u32; 3],
        lane: u32,
        source_lane: u32,
        wave: u32,
        /// `file:line:column` of the shuffle in the kernel source.
        at: String,
    },
    /// The launch asked for something the device cannot do (block size, shared memory, …).
    #[error("[{kernel}] launch refused: {detail}")]
    Launch {
        kernel: &'static str,
        detail: String,
    },
    /// A buffer or device operation outside a kernel failed.
    #[error("device error: {0}")]
    Other(String),
}
