//! kiln-math: every kiln kernel's math and body, once.
//!
//! Kernels are generic Rust functions over an [`Element`] type and the [`Block`] they run in.
//! The same source is compiled for the host (the engine's `cpu` and `sim` backends), for
//! `nvptx64-nvidia-cuda`, for `amdgcn-amd-amdhsa`, and translated to WGSL. `no_std`, no alloc.
#![no_std]
#![warn(missing_docs)]
// nvptx converts f16 in hardware (element.rs); GPUs take exp2 and fma from their instructions (fast_math.rs).
#![cfg_attr(
    any(target_arch = "nvptx64", target_arch = "amdgpu"),
    feature(f16, core_intrinsics)
)]
#![cfg_attr(
    any(target_arch = "nvptx64", target_arch = "amdgpu"),
    allow(internal_features)
)]
// nvptx rounds bf16 through inline PTX (element.rs).
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch))]

mod block;
mod element;
mod exact_math;
mod fast_math;
#[cfg(feature = "half")]
mod half_types;
mod kernel;
pub mod kernels;
mod list;
pub mod local_memory;
mod non_finite;
pub mod random;
pub mod sampling;
mod view;
pub mod wave_mma;
mod wide_mul;

pub use block::{
    argmax_beats, max_total, scratch_words, shared_bytes_total, wave_mma_shuffled, Block,
};
pub use element::{
    f16_bits_to_f32, f16_bits_to_f32_soft, f32_to_bf16_bits, f32_to_f16_bits, f32_to_f16_bits_soft,
    is_16bit, is_bf16, Bf16, DType, Element, Scalar, F16,
};
pub use exact_math::{expm1_rounded_pair, expm1f_nonpositive, expm1f_nonpositive_branchless};
pub use fast_math::{exp2_approx, exp2_poly, ln_1p_unit, mul_add, sqrt_rn};
/// The `half` crate, whose `f16` and `bf16` are [`Scalar`]s with the `half` feature.
#[cfg(feature = "half")]
pub use half;
pub use kernel::{
    shape, KernelDef, Launch, LaunchBound, ParamError, ParamField, ParamKind, ParamValue, Params,
    ShapeError, Waves,
};
pub use kernels::KernelId;
pub use list::{BufferDesc, Elem, WAVES};
pub use non_finite::{is_neg_infinity, max_keeping_nan, nan_unless_finite};
pub use view::{Access, Dst, Rw, Src, View};
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use view::{Probe, SourceSite, ViewFault};
