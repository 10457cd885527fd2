//! The device errors every part of the wgpu backend reports.

use crate::DeviceError;
use kiln_math::KernelId;

/// A launch of `kernel` refused or failed for `detail`.
pub(super) fn launch_err(kernel: KernelId, detail: String) -> DeviceError {
    DeviceError::Launch {
        kernel: kernel.name(),
        detail,
    }
}

/// Any other device error.
pub(super) fn other(msg: impl Into<String>) -> DeviceError {
    DeviceError::Other(msg.into())
}
