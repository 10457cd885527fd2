//! kiln: fused LLM-inference kernels written once in Rust, run on every backend.
//!
//! - [`Device`]: a backend to launch on (`cpu`, `sim`, and the GPU backends when present).
//! - [`Tensor`]: shape + dtype + bytes on a device.
//! - [`ops`]: one typed, validated function per kernel; each returns which path ran ([`Ran`]).
//! - [`ports`]: the per-kernel port tables, [`select_port`] and [`has_port`].
//! - [`launch()`]: the generic entry (`kiln run`, the parity harness) by [`KernelId`].
//! - [`parity`]: the harness that checks every port against the reference chain.
//! - [`timing`]: launches and copies timed on the device's clock, for benchmarks.
//! - [`quant`]: MLX affine weight formats, the quantizer, and GGUF files repacked exactly into them.

// Vocabulary: imports nothing above it.
mod backend;
pub mod case;
mod device;
mod error;
pub mod gpu;
mod host;
pub mod port;
pub mod quant;
mod scratch;
mod storage;
mod tensor;
// Backends: import vocabulary only.
mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "rocm")]
pub mod rocm;
mod sim;
#[cfg(feature = "wgpu")]
pub mod wgpu;
// The one place naming every backend, then the kernel list's expansion and the port tables.
mod catalog;
pub mod ports;
pub mod reference;
mod registry;
// Launch, ops and the harnesses above them.
#[cfg(test)]
mod collective_tests;
pub mod debug;
pub mod launch;
pub mod ops;
pub mod paged;
pub mod parity;
pub mod rng;
#[cfg(all(test, feature = "rocm"))]
mod rocm_tests;
pub mod timing;

pub use backend::Backend;
/// The cudarc driver API kiln is built against: an engine hands kiln its CUDA streams of this
/// version ([`Device::cuda_on_stream`]) and captures graphs with it.
pub use cudarc::driver as cuda_api;
pub(crate) use device::DeviceKind;
pub use device::{Device, MemorySpace};
pub use error::{DeviceError, DeviceState, PortError};
pub use host::SimConfig;
pub use kiln_math::{self as math, DType, KernelId};
pub use launch::{launch, Arg, FallbackReason, Mode, Path, Ran};
pub use port::{Port, Slot};
pub use ports::{has_port, select_port, KernelPorts};
pub use registry::{devices, unavailable_reason, DeviceReport};
pub use scratch::scratch_bytes;
pub use tensor::Tensor;
