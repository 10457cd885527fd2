//! Quantized weights on the host: MLX's affine format and its quantizer.
//!
//! This is vocabulary: it imports `kiln-math`'s element types and nothing from the backends,
//! launch, ops or parity, so the decode driver and the kernels' tests can share it.
//!
//! - [`AffineFormat`] / [`AffineTensor`]: MLX's layout (`w_q [N, K·bits/32]` u32, `scales` and
//!   `biases [N, K/group]`), with [`pack_codes`] and [`unpack_code`] for its LSB-first bit stream.
//! - [`quantize`] / [`dequantize`]: MLX's affine quantizer (spec §13) and `w = scale·q + bias`.
#![warn(missing_docs)]

mod affine;
mod error;
mod format;

pub use affine::{dequantize, quantize, quantize_with, MlxQuantizer};
pub use error::FormatError;
pub use format::{pack_codes, unpack_code, AffineFormat, AffineTensor};
