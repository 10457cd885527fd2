//! The wgpu backend: WGSL modules translated from kiln-math at build time (`build.rs`), run
//! through wgpu on Vulkan (Metal on macOS, DX12 on Windows; wgpu's GL backend is not built, so
//! a GL-only machine has no wgpu device rather than one without subgroups).
//!
//! The wave the kernels see is the adapter's subgroup size when the adapter has SUBGROUP and a
//! single subgroup size; otherwise the modules' workgroup-memory variant runs with blocks of 64
//! threads that are one emulated wave of 64.
//! Pipelines are specialised per kernel × dtype × block size × shared words and cached for the
//! process.
//!
//! One job a file: `modules` holds the embedded WGSL table, its `KILN_WGSL_DIR` override and
//! the module lookup; `slot` the port slot; `device` opening the device and its `GpuDevice`
//! impl; `pipelines` the pipeline cache and launch preparation; `memory` allocations and
//! read-back; `timing` benchmark timing.

mod device;
mod memory;
mod modules;
mod pipelines;
mod slot;
mod timing;

pub(crate) use device::open;
pub use device::{open_with, Options, WgpuDevice};
pub use memory::WgpuMemory;
pub(crate) use slot::slot;
pub use timing::Timer;

use crate::DeviceError;
use kiln_math::KernelId;

/// A launch of `kernel` refused or failed for `detail`.
fn launch_err(kernel: KernelId, detail: String) -> DeviceError {
    DeviceError::Launch {
        kernel: kernel.name(),
        detail,
    }
}

/// Any other device error.
fn other(msg: impl Into<String>) -> DeviceError {
    DeviceError::Other(msg.into())
}
