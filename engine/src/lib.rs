//! kiln: fused LLM-inference kernels written once in Rust, run on every backend.
//!
//! - [`Device`]: a backend to launch on (`cpu`, `sim`, and the GPU backends when present):
//!   [`Device::best`], [`Device::open`], or on the engine's own stream or queue
//!   (`Device::cuda_on_stream`, `Device::rocm_on_stream`, `Device::wgpu_from`).
//! - [`Tensor`]: a dtype, a shape and a byte offset over memory on a device — kiln's own, or
//!   the engine's (`Tensor::from_device_ptr`, `Tensor::from_wgpu_buffer`,
//!   [`Tensor::from_host_ptr`]) — with views ([`Tensor::view`], [`Tensor::view_bytes`]).
//! - [`ops`]: one typed, validated function per kernel; each returns which path ran ([`Ran`]).
//!   Ops enqueue; reads and [`Device::sync`] wait. Temporaries come from a per-device scratch
//!   region that is reused ([`Device::reserve_scratch`]), so a warm step allocates nothing.
//! - [`paged`]: paged decode attention, its tables and plans; [`paged::DeviceBlockTable`] for
//!   steps that upload nothing (CUDA graph capture).
//! - [`PortError`] / [`DeviceError`]: typed refusals (dtype, shape, parameter) and device
//!   failures (unavailable, out of memory, kernel fault and the state it left).
//! - [`ports`]: the per-kernel port tables, [`select_port`] and [`has_port`].
//! - [`launch()`]: the generic entry (`kiln run`, the parity harness) by [`KernelId`].
//! - `parity`, `timing`, `debug`, `rng`, `reference` (feature `harness`): the parity harness and
//!   its reference chains, launches timed on the device's clock, the sim as a body debugger.
//! - [`quant`]: MLX affine weight formats, the quantizer, and GGUF files repacked exactly into them.
//!
//! Features: `cuda`, `rocm`, `wgpu` (the backends, all on by default; a backend compiled out is
//! reported absent), `half` (`half::f16`/`bf16` as tensor elements), `harness`.
//!
//! # Quickstart
//!
//! Residual add + RMSNorm over an engine's own host buffer, then Gumbel sampling; the same code
//! runs on a GPU with the buffer from `Tensor::from_device_ptr` and the device from
//! `Device::cuda_on_stream` (see `docs/embedding.md` and `examples/embed`).
//!
//! ```
//! use kiln::{ops, DType, Device, Tensor};
//!
//! let dev = Device::cpu(); // or Device::best()
//! let (rows, dim, vocab) = (2, 64, 100);
//! // The engine's memory: x, residual, weight, out back to back.
//! let mut arena = vec![0.5f32; 3 * rows * dim + dim];
//! // SAFETY: `arena` outlives every view of it and nothing else touches it meanwhile.
//! let whole = unsafe {
//!     Tensor::from_host_ptr(&dev, arena.as_mut_ptr() as *mut u8, DType::F32, &[arena.len()])
//! }?;
//! let x = whole.view(0, &[rows, dim])?;
//! let mut residual = whole.view(rows * dim, &[rows, dim])?;
//! let weight = whole.view(2 * rows * dim, &[dim])?;
//! let mut out = whole.view(2 * rows * dim + dim, &[rows, dim])?;
//! let ran = ops::fused_add_rms_norm(&dev, &x, &mut residual, &weight, 1e-5, &mut out)?;
//! assert!(!ran.is_fallback());
//!
//! let logits = Tensor::from_f32(&dev, DType::F32, &[rows, vocab], &vec![0.0; rows * vocab])?;
//! let mut tokens = Tensor::zeros(&dev, DType::U32, &[rows])?;
//! ops::gumbel_max_sample(&dev, &logits, [7, 11], 1.0, &mut tokens)?;
//! dev.sync()?;
//! assert!(tokens.to_vec::<u32>()?.iter().all(|&t| (t as usize) < vocab));
//! drop((x, residual, weight, out, whole));
//! // The results are in the engine's buffer: residual = x + residual = 1, out = 0.5 · rms-normalised 1.
//! assert_eq!(arena[rows * dim], 1.0);
//! assert!((arena[2 * rows * dim + dim] - 0.5).abs() < 1e-5);
//! # Ok::<(), kiln::PortError>(())
//! ```
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
#[cfg(all(test, feature = "rocm"))]
mod rocm_tests;
#[cfg(feature = "harness")]
pub mod timing;
#[cfg(test)]
mod wave_mma_tests;

pub use backend::Backend;
/// The cudarc driver API kiln is built against: an engine hands kiln its CUDA streams of this
/// version ([`Device::cuda_on_stream`]) and captures graphs with it.
#[cfg(feature = "cuda")]
pub use cudarc::driver as cuda_api;
pub(crate) use device::DeviceKind;
pub use device::{Device, LaunchTime, MemorySpace};
pub use error::{DeviceError, DeviceState, PortError};
pub use host::{watchdog_limit, SimConfig};
pub use kiln_math::{self as math, DType, KernelId};
pub use launch::{launch, Arg, FallbackReason, Mode, Path, Ran};
pub use port::{Port, Slot};
pub use ports::{has_port, select_port, KernelPorts};
pub use registry::{devices, unavailable_reason, DeviceReport};
pub use scratch::scratch_bytes;
pub use tensor::Tensor;
