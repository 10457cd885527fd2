//! The wgpu backend: WGSL modules translated from kiln-math by `cargo xtask kernels` and
//! embedded from `engine/artifacts/wgsl/`, run through wgpu on Vulkan (Metal on macOS, DX12 on
//! Windows; wgpu's GL backend is not built, so a GL-only machine has no wgpu device rather than
//! one without subgroups).
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
//! read-back; `timing` benchmark timing; `stream`
//! the adapter's plain read and copy kernels.

mod device;
mod errors;
mod faults;
mod memory;
mod modules;
mod pipelines;
mod slot;
mod state;
mod stream;
mod timing;

/// The wgpu crate kiln is built against: an engine hands kiln its devices, queues and buffers
/// of this version.
pub use ::wgpu as api;
pub(crate) use device::open;
pub use device::{open_with, Options};
pub use memory::WgpuMemory;
pub(crate) use slot::slot;
pub use state::{Timer, WgpuDevice};
