//! GGUF tensors repacked into kiln's layouts exactly: no re-quantization, and the repacked
//! tensor's `scale·q + bias` (f32) equals ggml's `dequantize_row_*` value for every element.
//!
//! Block layouts follow ggml's `ggml-common.h`; the folds are exact because every product
//! involved (an f16 times a code of at most 8 bits, or times a 6/8-bit sub-block scale) fits
//! f32's 24-bit significand, so only the final sum rounds, as in ggml. One difference remains:
//! where ggml computes `(q − 8)·d` and gets −0 for a negative `d`, `8d + (−8d)` gives +0.
//!
//! | ggml | bits | group | scale | bias |
//! |---|---|---|---|---|
//! | Q4_0 | 4 | 32 | d | −8d |
//! | Q4_1 | 4 | 32 | d | m |
//! | Q5_0 | 5 | 32 | d | −16d |
//! | Q5_1 | 5 | 32 | d | m |
//! | Q8_0 | 8 (code q + 128) | 32 | d | −128d |
//! | Q4_K | 4 | 32 | d·sc | −dmin·m |
//! | Q5_K | 5 | 32 | d·sc | −dmin·m |
//! | Q6_K | 6 | 16 | d·sc | −32·d·sc |
//!
//! Scales are f16 for the 32-element types when every scale and bias is an f16 value (−8d and
//! −128d can overflow f16), else f32; the K-quants' folded scales are f32.

use super::format::encode_scale;
use super::{pack_codes, AffineFormat, AffineTensor, GgmlType, RepackError};
use kiln_math::{f16_bits_to_f32, f32_to_f16_bits, DType};

/// A GGUF tensor in one of kiln's layouts.
#[derive(Clone, Debug, PartialEq)]
pub enum Repacked {
    /// An unquantized tensor: its little-endian bytes as stored (f32, f16 or bf16).
    Dense {
        /// The element type.
        dtype: DType,
        /// The bytes, row-major with the row length (`dims[0]`) fastest.
        bytes: Vec<u8>,
    },
    /// A block-quantized tensor as `[rows, dims[0]]` affine codes, rows = the other dims' product.
    Affine(AffineTensor),
}

/// One ggml block type: its geometry, kiln's format for it, and its decoder.
struct BlockType {
    elements: usize,
    bytes: usize,
    bits: u32,
    group_size: usize,
    /// f16 where exact (the 32-element types), else f32.
    scale_dtype: DType,
    decode: fn(&[u8], &mut BlockOut),
}

/// Where a decoder writes one block: a code per element, a scale and bias per group.
struct BlockOut<'a> {
    codes: &'a mut [u32],
    scales: &'a mut [f32],
    biases: &'a mut [f32],
}

/// The block types kiln repacks.
const BLOCK_TYPES: [(GgmlType, BlockType); 8] = [
    (
        GgmlType::Q4_0,
        BlockType {
            elements: 32,
            bytes: 18,
            bits: 4,
            group_size: 32,
            scale_dtype: DType::F16,
            decode: decode_q4_0,
        },
    ),
    (
        GgmlType::Q4_1,
        BlockType {
            elements: 32,
            bytes: 20,
            bits: 4,
            group_size: 32,
            scale_dtype: DType::F16,
            decode: decode_q4_1,
        },
    ),
    (
        GgmlType::Q5_0,
        BlockType {
            elements: 32,
            bytes: 22,
            bits: 5,
            group_size: 32,
            scale_dtype: DType::F16,
            decode: decode_q5_0,
        },
    ),
    (
        GgmlType::Q5_1,
        BlockType {
            elements: 32,
            bytes: 24,
            bits: 5,
            group_size: 32,
            scale_dtype: DType::F16,
            decode: decode_q5_1,
        },
    ),
    (
        GgmlType::Q8_0,
        BlockType {
            elements: 32,
            bytes: 34,
            bits: 8,
            group_size: 32,
            scale_dtype: DType::F16,
            decode: decode_q8_0,
        },
    ),
    (
        GgmlType::Q4K,
        BlockType {
            elements: 256,
            bytes: 144,
            bits: 4,
            group_size: 32,
            scale_dtype: DType::F32,
            decode: decode_q4_k,
        },
    ),
    (
        GgmlType::Q5K,
        BlockType {
            elements: 256,
            bytes: 176,
            bits: 5,
            group_size: 32,
            scale_dtype: DType::F32,
            decode: decode_q5_k,
        },
    ),
    (
        GgmlType::Q6K,
        BlockType {
            elements: 256,
            bytes: 210,
            bits: 6,
            group_size: 16,
            scale_dtype: DType::F32,
            decode: decode_q6_k,
        },
    ),
];

fn block_type(t: GgmlType) -> Option<&'static BlockType> {
    BLOCK_TYPES.iter().find(|(g, _)| *g == t).map(|(_, b)| b)
}

/// Repacks tensor `name` of type `ggml_type` with ggml dims `dims` (row length first) from its
/// GGUF bytes; F32/F16/BF16 come back dense, the block types as [`AffineTensor`]s.
pub fn repack(
    name: &str,
    ggml_type: GgmlType,
    dims: &[u64],
    data: &[u8],
) -> Result<Repacked, RepackError> {
    let shape_error = |why| RepackError::Shape {
        tensor: name.to_string(),
        dims: dims.to_vec(),
        ggml_type,
        why,
    };
    let (&cols, outer) = dims.split_first().ok_or(shape_error("no dimensions"))?;
    let rows = outer
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .and_then(|r| usize::try_from(r).ok())
        .ok_or(shape_error("the element count overflows"))?;
    let cols = usize::try_from(cols).map_err(|_| shape_error("the row length overflows"))?;
    let elements = rows
        .checked_mul(cols)
        .ok_or(shape_error("the element count overflows"))?;
    let check_length = |expected: usize| {
        if data.len() == expected {
            Ok(())
        } else {
            Err(RepackError::Length {
                tensor: name.to_string(),
                expected,
                got: data.len(),
            })
        }
    };
    let dense = match ggml_type {
        GgmlType::F32 => Some(DType::F32),
        GgmlType::F16 => Some(DType::F16),
        GgmlType::Bf16 => Some(DType::Bf16),
        _ => None,
    };
    if let Some(dtype) = dense {
        let bytes = elements
            .checked_mul(dtype.size())
            .ok_or(shape_error("the byte count overflows"))?;
        check_length(bytes)?;
        return Ok(Repacked::Dense {
            dtype,
            bytes: data.to_vec(),
        });
    }
    let block = block_type(ggml_type).ok_or_else(|| RepackError::Unsupported {
        tensor: name.to_string(),
        ggml_type,
    })?;
    if !cols.is_multiple_of(block.elements) {
        return Err(shape_error(
            "the row length is not a whole number of blocks",
        ));
    }
    let blocks_per_row = cols / block.elements;
    let bytes = rows
        .checked_mul(blocks_per_row)
        .and_then(|b| b.checked_mul(block.bytes))
        .ok_or(shape_error("the byte count overflows"))?;
    check_length(bytes)?;
    repack_blocks(name, block, rows, cols, data)
}

fn repack_blocks(
    name: &str,
    block: &BlockType,
    rows: usize,
    cols: usize,
    data: &[u8],
) -> Result<Repacked, RepackError> {
    let format_error = |source| RepackError::Format {
        tensor: name.to_string(),
        source,
    };
    let groups_per_block = block.elements / block.group_size;
    let groups_per_row = cols / block.group_size;
    let mut row_codes = vec![0u32; cols];
    let mut scales = vec![0f32; rows * groups_per_row];
    let mut biases = vec![0f32; rows * groups_per_row];
    let mut w_q = Vec::with_capacity(rows * (cols * block.bits as usize / 32));
    let row_bytes = cols / block.elements * block.bytes;
    // Every row is a whole number of words (blocks are 32 or 256 codes), so rows pack apart.
    for (row, row_data) in data.chunks_exact(row_bytes.max(1)).take(rows).enumerate() {
        let row_groups = row * groups_per_row..(row + 1) * groups_per_row;
        let (row_scales, row_biases) = (&mut scales[row_groups.clone()], &mut biases[row_groups]);
        for (i, bytes) in row_data.chunks_exact(block.bytes).enumerate() {
            let groups = i * groups_per_block..(i + 1) * groups_per_block;
            let mut out = BlockOut {
                codes: &mut row_codes[i * block.elements..(i + 1) * block.elements],
                scales: &mut row_scales[groups.clone()],
                biases: &mut row_biases[groups],
            };
            (block.decode)(bytes, &mut out);
            if let Some(&value) = out
                .scales
                .iter()
                .chain(&*out.biases)
                .find(|v| !v.is_finite())
            {
                return Err(RepackError::NonFiniteScale {
                    tensor: name.to_string(),
                    block: row * (cols / block.elements) + i,
                    value,
                });
            }
        }
        w_q.extend(pack_codes(&row_codes, block.bits).map_err(format_error)?);
    }
    let is_f16 = |v: &f32| f16_bits_to_f32(f32_to_f16_bits(*v)).to_bits() == v.to_bits();
    let dtype = if block.scale_dtype == DType::F16 && scales.iter().chain(&biases).all(is_f16) {
        DType::F16
    } else {
        DType::F32
    };
    let mut scale_bytes = Vec::with_capacity(scales.len() * dtype.size());
    let mut bias_bytes = Vec::with_capacity(biases.len() * dtype.size());
    for (&s, &b) in scales.iter().zip(&biases) {
        encode_scale(dtype, s, &mut scale_bytes);
        encode_scale(dtype, b, &mut bias_bytes);
    }
    let format =
        AffineFormat::new(block.bits, block.group_size as u32, dtype).map_err(format_error)?;
    AffineTensor::from_parts(format, rows, cols, w_q, scale_bytes, bias_bytes)
        .map(Repacked::Affine)
        .map_err(format_error)
}

/// The f16 at byte `at` of a block, widened.
fn half(block: &[u8], at: usize) -> f32 {
    f16_bits_to_f32(u16::from_le_bytes([block[at], block[at + 1]]))
}

/// 32 nibbles from 16 bytes: elements 0..16 are the low nibbles, 16..32 the high ones.
fn nibbles(qs: &[u8], codes: &mut [u32]) {
    for (j, &q) in qs.iter().take(16).enumerate() {
        codes[j] = (q & 0xf) as u32;
        codes[j + 16] = (q >> 4) as u32;
    }
}

/// Adds Q5_0/Q5_1's fifth bits: bit `j` of the little-endian `qh` is element `j`'s.
fn fifth_bits(qh: &[u8], codes: &mut [u32]) {
    let qh = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    for (j, code) in codes.iter_mut().enumerate().take(32) {
        *code |= ((qh >> j) & 1) << 4;
    }
}

fn decode_q4_0(b: &[u8], out: &mut BlockOut) {
    let d = half(b, 0);
    nibbles(&b[2..18], out.codes);
    out.scales[0] = d;
    out.biases[0] = -8.0 * d;
}

fn decode_q4_1(b: &[u8], out: &mut BlockOut) {
    nibbles(&b[4..20], out.codes);
    out.scales[0] = half(b, 0);
    out.biases[0] = half(b, 2);
}

fn decode_q5_0(b: &[u8], out: &mut BlockOut) {
    let d = half(b, 0);
    nibbles(&b[6..22], out.codes);
    fifth_bits(&b[2..6], out.codes);
    out.scales[0] = d;
    out.biases[0] = -16.0 * d;
}

fn decode_q5_1(b: &[u8], out: &mut BlockOut) {
    nibbles(&b[8..24], out.codes);
    fifth_bits(&b[4..8], out.codes);
    out.scales[0] = half(b, 0);
    out.biases[0] = half(b, 2);
}

fn decode_q8_0(b: &[u8], out: &mut BlockOut) {
    let d = half(b, 0);
    for (code, &q) in out.codes.iter_mut().zip(&b[2..34]) {
        // Signed q becomes the unsigned code q + 128; the bias takes the 128 back.
        *code = (q as i8 as i32 + 128) as u32;
    }
    out.scales[0] = d;
    out.biases[0] = -128.0 * d;
}

/// Sub-block `j`'s 6-bit (scale, min) from a K-quant's 12 packed bytes: j < 4 in the low six
/// bits of bytes j and j+4; j ≥ 4 in a nibble of byte j+4 plus the top two bits of j−4 and j.
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Q4_K/Q5_K's folded per-group scales `d·sc` and biases `−dmin·m` (8 groups of 32).
fn k_scales(b: &[u8], out: &mut BlockOut) {
    let (d, dmin) = (half(b, 0), half(b, 2));
    for g in 0..8 {
        let (sc, m) = scale_min_k4(g, &b[4..16]);
        out.scales[g] = d * sc as f32;
        out.biases[g] = -(dmin * m as f32);
    }
}

fn decode_q4_k(b: &[u8], out: &mut BlockOut) {
    k_scales(b, out);
    // Each 64-element chunk: 32 bytes, low nibbles first, then the high nibbles.
    for (c, qs) in b[16..144].chunks_exact(32).enumerate() {
        for (l, &q) in qs.iter().enumerate() {
            out.codes[64 * c + l] = (q & 0xf) as u32;
            out.codes[64 * c + 32 + l] = (q >> 4) as u32;
        }
    }
}

fn decode_q5_k(b: &[u8], out: &mut BlockOut) {
    k_scales(b, out);
    let qh = &b[16..48];
    // As Q4_K, plus a fifth bit per element: chunk c's low half in bit 2c of qh[l], high in 2c+1.
    for (c, qs) in b[48..176].chunks_exact(32).enumerate() {
        for (l, &q) in qs.iter().enumerate() {
            let high = qh[l] >> (2 * c);
            out.codes[64 * c + l] = (q & 0xf) as u32 | ((high & 1) as u32) << 4;
            out.codes[64 * c + 32 + l] = (q >> 4) as u32 | ((high >> 1 & 1) as u32) << 4;
        }
    }
}

fn decode_q6_k(b: &[u8], out: &mut BlockOut) {
    let (ql, qh, sc, d) = (&b[0..128], &b[128..192], &b[192..208], half(b, 208));
    // Two halves of 128: ql gives low nibbles (64 bytes), qh two high bits per element (32).
    for h in 0..2 {
        let (ql, qh, codes) = (&ql[64 * h..], &qh[32 * h..], &mut out.codes[128 * h..]);
        for l in 0..32 {
            let (lo, hi, top) = (ql[l] as u32, ql[l + 32] as u32, qh[l] as u32);
            codes[l] = (lo & 0xf) | (top & 3) << 4;
            codes[l + 32] = (hi & 0xf) | (top >> 2 & 3) << 4;
            codes[l + 64] = (lo >> 4) | (top >> 4 & 3) << 4;
            codes[l + 96] = (hi >> 4) | (top >> 6 & 3) << 4;
        }
    }
    for (g, &s) in sc.iter().enumerate() {
        let scale = d * s as i8 as f32;
        out.scales[g] = scale;
        out.biases[g] = -32.0 * scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::dequantize;

    fn affine(r: Repacked) -> AffineTensor {
        match r {
            Repacked::Affine(t) => t,
            Repacked::Dense { .. } => panic!("expected an affine tensor"),
        }
    }

    #[test]
    fn q4_0_block_by_hand() {
        // d = 0.5 (f16 0x3800); byte j holds element j (low nibble) and j + 16 (high nibble).
        let mut block = vec![0x00, 0x38];
        block.extend((0..16u8).map(|j| j | (15 - j) << 4));
        let t = affine(repack("t", GgmlType::Q4_0, &[32, 1], &block).unwrap());
        assert_eq!(t.format().scale_dtype(), DType::F16);
        assert_eq!((t.scale(0, 0), t.bias(0, 0)), (Some(0.5), Some(-4.0)));
        let w = dequantize(&t);
        for j in 0..16 {
            assert_eq!(w[j], (j as f32 - 8.0) * 0.5);
            assert_eq!(w[j + 16], (7.0 - j as f32) * 0.5);
        }
    }

    #[test]
    fn q8_0_bias_overflowing_f16_falls_back_to_f32() {
        // d = 1024 (f16 0x6400): −128d = −131072 is beyond f16, so scales go to f32.
        let mut block = vec![0x00, 0x64];
        block.extend((0..32).map(|j| (j as i8 - 16) as u8));
        let t = affine(repack("t", GgmlType::Q8_0, &[32], &block).unwrap());
        assert_eq!(t.format().scale_dtype(), DType::F32);
        assert_eq!(t.bias(0, 0), Some(-131072.0));
        let w = dequantize(&t);
        assert!(w
            .iter()
            .enumerate()
            .all(|(j, &v)| v == (j as f32 - 16.0) * 1024.0));
    }

    #[test]
    fn dense_types_pass_through() {
        let bytes: Vec<u8> = (0..16).collect();
        assert_eq!(
            repack("n", GgmlType::Bf16, &[4, 2], &bytes),
            Ok(Repacked::Dense {
                dtype: DType::Bf16,
                bytes: bytes.clone()
            })
        );
        assert!(matches!(
            repack("n", GgmlType::F32, &[4, 2], &bytes),
            Err(RepackError::Length {
                expected: 32,
                got: 16,
                ..
            })
        ));
    }

    #[test]
    fn refusals_name_the_tensor() {
        let err = repack("blk.0.attn_q.weight", GgmlType::Q3K, &[256], &[0; 110]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tensor blk.0.attn_q.weight: ggml type Q3_K has no kiln layout"
        );
        assert!(matches!(
            repack("t", GgmlType::Q4K, &[128], &[0; 72]),
            Err(RepackError::Shape { .. })
        ));
        assert!(matches!(
            repack("t", GgmlType::Q4_0, &[], &[]),
            Err(RepackError::Shape { .. })
        ));
        assert!(matches!(
            repack("t", GgmlType::Q4_0, &[32, u64::MAX], &[]),
            Err(RepackError::Shape { .. })
        ));
        // d = +inf (f16 0x7c00).
        let mut block = vec![0x00, 0x7c];
        block.extend([0u8; 16]);
        assert!(matches!(
            repack("t", GgmlType::Q4_0, &[32], &block),
            Err(RepackError::NonFiniteScale { block: 0, .. })
        ));
    }
}
