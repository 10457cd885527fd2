//! kiln: fused LLM-inference kernels written once in Rust, run on every backend.
//!
//! - [`Device`]: a backend to launch on (`cpu`, `sim`, and the GPU backends when present).
//! - [`Tensor`]: shape + dtype + bytes on a device.
//! - [`ops`]: one typed, validated function per kernel; each returns which path ran ([`Ran`]).
//! - [`ports`]: the per-kernel port tables, [`select_port`] and [`has_port`].
//! - [`launch()`]: the generic entry (`kiln run`, the parity harness) by [`KernelId`].
//! - [`parity`]: the harness that checks every port against the reference chain.
//! - [`timing`]: launches and copies timed on the device's clock, for benchmarks.

mod backend;
#[cfg(test)]
mod collective_tests;
mod cpu;
mod cuda;
pub mod debug;
mod device;
mod error;
pub mod gpu;
mod kernels;
pub mod launch;
pub mod ops;
pub mod paged;
pub mod parity;
pub mod ports;
pub mod quant;
pub mod reference;
pub mod rng;
pub mod rocm;
mod sim;
mod tensor;
pub mod timing;
#[cfg(feature = "wgpu")]
pub mod wgpu;

pub use backend::Backend;
pub(crate) use device::DeviceKind;
pub use device::{devices, unavailable_reason, Device, DeviceReport, MemorySpace, SimConfig};
pub use error::{DeviceError, PortError};
pub use kiln_math::{self as math, DType, KernelId};
pub use launch::{launch, Arg, FallbackReason, Mode, Path, Ran};
pub use ports::{has_port, select_port, KernelPorts, Port, Slot};
pub use tensor::Tensor;
