//! Quantized weights on the host: MLX's affine format, its quantizer, and GGUF files repacked
//! exactly into it.
//!
//! This is vocabulary: it imports `kiln-math`'s element types and nothing from the backends,
//! launch, ops or parity, so the decode driver and the kernels' tests can share it.
//!
//! - [`AffineFormat`] / [`AffineTensor`]: MLX's layout (`w_q [N, K·bits/32]` u32, `scales` and
//!   `biases [N, K/group]`), with [`pack_codes`] and [`unpack_code`] for its LSB-first bit stream.
//! - [`quantize`] / [`dequantize`]: MLX's affine quantizer (spec §13) and `w = scale·q + bias`.
//! - [`GgmlType`]: ggml's tensor types and their block geometry.
//! - [`repack`]: a GGUF tensor's blocks as an [`AffineTensor`] (or dense bytes), with no
//!   re-quantization: the repacked tensor dequantizes to ggml's values exactly.
//! - [`GgufFile`]: a GGUF v2/v3 reader (metadata as [`MetaValue`]s, tensor infos, tensor bytes);
//!   [`GgufWriter`] builds files for tests.
#![warn(missing_docs)]

mod affine;
mod error;
mod format;
mod ggml_type;
mod gguf_blocks;
mod gguf_file;
mod gguf_meta;
mod gguf_writer;

pub use affine::{dequantize, quantize, quantize_with, MlxQuantizer};
pub use error::{FormatError, GgufError, RepackError};
#[cfg(feature = "harness")]
pub(crate) use format::encode_scale;
pub use format::{pack_codes, pack_le_words, unpack_code, AffineFormat, AffineTensor};
pub use ggml_type::GgmlType;
pub use gguf_blocks::{repack, Repacked};
pub use gguf_file::{GgufFile, TensorInfo};
pub use gguf_meta::{MetaValue, ValueType, DEFAULT_ALIGNMENT};
pub use gguf_writer::GgufWriter;
