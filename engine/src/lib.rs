//! kiln: fused LLM-inference kernels written once in Rust, run on every backend.
//!
//! - [`Device`]: a backend to launch on (`cpu`, `sim`, and the GPU backends when present).
//! - [`Tensor`]: shape + dtype + bytes on a device.
//! - [`ops`]: one typed, validated function per kernel; each returns which path ran ([`Ran`]).
//! - [`ports`]: the per-kernel port tables, [`select_port`] and [`has_port`].
//! - [`launch()`]: the generic entry (`kiln run`, the parity harness) by [`KernelId`].
//! - `parity`, `timing`, `debug`, `rng`, `reference` (feature `harness`): the parity harness and
//!   its reference chains, launches timed on the device's clock, the sim as a body debugger.
//! - [`quant`]: MLX affine weight formats, the quantizer, and GGUF files repacked exactly into them.
#![warn(missing_docs)]

// Vocabulary: imports nothing above it.
mod backend;
#[cfg(feature = "harness")]
pub mod case;
mod device;
mod error;
pub mod gpu;
mod host;
pub mod port;
pub mod quant;
mod tensor;
// Backends: import vocabulary only.
mod cpu;
mod cuda;
pub mod rocm;
mod sim;
#[cfg(feature = "wgpu")]
pub mod wgpu;
// The one place naming every backend, then the kernel list's expansion and the port tables.
mod catalog;
pub mod ports;
#[cfg(feature = "harness")]
pub mod reference;
#[cfg(not(feature = "harness"))]
mod reference;
mod registry;
// Launch, ops and the harnesses above them.
#[cfg(test)]
mod collective_tests;
#[cfg(feature = "harness")]
pub mod debug;
pub mod launch;
pub mod ops;
pub mod paged;
#[cfg(feature = "harness")]
pub mod parity;
#[cfg(any(test, feature = "harness"))]
pub mod rng;
#[cfg(test)]
mod rocm_tests;
#[cfg(feature = "harness")]
pub mod timing;

pub use backend::Backend;
pub(crate) use device::DeviceKind;
pub use device::{Device, MemorySpace};
pub use error::{DeviceError, PortError};
pub use host::SimConfig;
pub use kiln_math::{self as math, DType, KernelId};
pub use launch::{launch, Arg, FallbackReason, Mode, Path, Ran};
pub use port::{Port, Slot};
pub use ports::{has_port, select_port, KernelPorts};
pub use registry::{devices, unavailable_reason, DeviceReport};
pub use tensor::Tensor;
