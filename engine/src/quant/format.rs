//! MLX's affine layout (spec §13): the format, the tensor, and the LSB-first code stream.
//!
//! A row of K codes at b bits is one little-endian bit stream: code `i` occupies stream bits
//! `[i·b, (i+1)·b)`, and u32 word `w` holds stream bits `[32w, 32w+32)`, lowest bit first. For
//! power-of-two bits that is `32/b` codes per word with code `j` at bit `j·b` (4-bit: the first
//! code is the lowest nibble); for 3, 5 and 6 bits codes straddle bytes and words (3-bit: 8 codes
//! per 3 bytes; 5-bit: 8 per 5; 6-bit: 4 per 3), as MLX packs them.

use super::FormatError;
use kiln_math::{f16_bits_to_f32, f32_to_bf16_bits, f32_to_f16_bits, DType};

/// Bits per code that MLX's affine mode supports.
pub const SUPPORTED_BITS: [u32; 6] = [2, 3, 4, 5, 6, 8];
/// Group sizes: MLX's 32, 64 and 128, plus 16 for GGUF Q6_K's sub-blocks.
pub const SUPPORTED_GROUP_SIZES: [u32; 4] = [16, 32, 64, 128];

/// An affine quantization format: `w = scale·q + bias` per group of `group_size` consecutive
/// elements of a row, `q` an unsigned `bits`-bit code, scale and bias stored as `scale_dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AffineFormat {
    bits: u32,
    group_size: u32,
    scale_dtype: DType,
}

impl AffineFormat {
    /// A validated format: bits in {2, 3, 4, 5, 6, 8}, group size in {16, 32, 64, 128} (16 is
    /// for GGUF Q6_K's sub-blocks; MLX's own are 32, 64 and 128), scales and biases f32, f16 or
    /// bf16.
    pub fn new(bits: u32, group_size: u32, scale_dtype: DType) -> Result<Self, FormatError> {
        if !SUPPORTED_BITS.contains(&bits) {
            return Err(FormatError::Bits(bits));
        }
        if !SUPPORTED_GROUP_SIZES.contains(&group_size) {
            return Err(FormatError::GroupSize(group_size));
        }
        if !matches!(scale_dtype, DType::F32 | DType::F16 | DType::Bf16) {
            return Err(FormatError::ScaleDtype(scale_dtype));
        }
        Ok(AffineFormat {
            bits,
            group_size,
            scale_dtype,
        })
    }

    /// Bits per code.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Elements per group (one scale and one bias each).
    pub fn group_size(&self) -> u32 {
        self.group_size
    }

    /// The dtype scales and biases are stored in.
    pub fn scale_dtype(&self) -> DType {
        self.scale_dtype
    }

    /// The largest code, `2^bits − 1`.
    pub fn max_code(&self) -> u32 {
        (1 << self.bits) - 1
    }

    /// u32 words per row of `k` codes (`k·bits/32`); refuses rows that do not fill whole words.
    pub fn packed_words(&self, k: usize) -> Result<usize, FormatError> {
        let bits = k
            .checked_mul(self.bits as usize)
            .ok_or(FormatError::Overflow { rows: 1, cols: k })?;
        if !bits.is_multiple_of(32) {
            return Err(FormatError::PartialWord {
                cols: k,
                bits: self.bits,
            });
        }
        Ok(bits / 32)
    }

    /// Groups per row of `k` elements; refuses rows that do not split into whole groups.
    pub fn groups(&self, k: usize) -> Result<usize, FormatError> {
        let gs = self.group_size as usize;
        if !k.is_multiple_of(gs) {
            return Err(FormatError::PartialGroup {
                cols: k,
                group_size: self.group_size,
            });
        }
        Ok(k / gs)
    }
}

/// A quantized `[N, K]` matrix in MLX's layout: `w_q [N, K·bits/32]` u32 words, and `scales`,
/// `biases [N, K/group_size]` as little-endian bytes of the format's scale dtype.
#[derive(Clone, Debug, PartialEq)]
pub struct AffineTensor {
    format: AffineFormat,
    rows: usize,
    cols: usize,
    w_q: Vec<u32>,
    scales: Vec<u8>,
    biases: Vec<u8>,
}

impl AffineTensor {
    /// Assembles a tensor from its parts, checking every length against the shape; `scales`
    /// and `biases` are raw little-endian bytes of `format.scale_dtype()`.
    pub fn from_parts(
        format: AffineFormat,
        rows: usize,
        cols: usize,
        w_q: Vec<u32>,
        scales: Vec<u8>,
        biases: Vec<u8>,
    ) -> Result<Self, FormatError> {
        let overflow = FormatError::Overflow { rows, cols };
        let words = rows
            .checked_mul(format.packed_words(cols)?)
            .ok_or(overflow.clone())?;
        let scale_bytes = rows
            .checked_mul(format.groups(cols)?)
            .and_then(|g| g.checked_mul(format.scale_dtype.size()))
            .ok_or(overflow)?;
        for (what, expected, got) in [
            ("w_q", words, w_q.len()),
            ("scales (bytes)", scale_bytes, scales.len()),
            ("biases (bytes)", scale_bytes, biases.len()),
        ] {
            if expected != got {
                return Err(FormatError::Length {
                    what,
                    expected,
                    got,
                });
            }
        }
        Ok(AffineTensor {
            format,
            rows,
            cols,
            w_q,
            scales,
            biases,
        })
    }

    /// The format.
    pub fn format(&self) -> AffineFormat {
        self.format
    }

    /// Rows (N, output features).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Elements per row (K, input features).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Groups per row (`K / group_size`).
    pub fn groups_per_row(&self) -> usize {
        self.cols / self.format.group_size as usize
    }

    /// The packed codes, `[N, K·bits/32]` row-major.
    pub fn w_q(&self) -> &[u32] {
        &self.w_q
    }

    /// The scales' little-endian bytes, `[N, K/group_size]` of the scale dtype.
    pub fn scales_bytes(&self) -> &[u8] {
        &self.scales
    }

    /// The biases' little-endian bytes, `[N, K/group_size]` of the scale dtype.
    pub fn biases_bytes(&self) -> &[u8] {
        &self.biases
    }

    /// Group `group`'s scale of row `row`, widened to f32; `None` out of range.
    pub fn scale(&self, row: usize, group: usize) -> Option<f32> {
        self.group_value(&self.scales, row, group)
    }

    /// Group `group`'s bias of row `row`, widened to f32; `None` out of range.
    pub fn bias(&self, row: usize, group: usize) -> Option<f32> {
        self.group_value(&self.biases, row, group)
    }

    /// The code of element `(row, col)`; `None` out of range.
    pub fn code(&self, row: usize, col: usize) -> Option<u32> {
        if row >= self.rows || col >= self.cols {
            return None;
        }
        let words_per_row = self.w_q.len() / self.rows;
        let words = &self.w_q[row * words_per_row..(row + 1) * words_per_row];
        Some(read_code(words, self.format.bits, col))
    }

    /// The parts: `(format, rows, cols, w_q, scales, biases)`.
    pub fn into_parts(self) -> (AffineFormat, usize, usize, Vec<u32>, Vec<u8>, Vec<u8>) {
        (
            self.format,
            self.rows,
            self.cols,
            self.w_q,
            self.scales,
            self.biases,
        )
    }

    fn group_value(&self, bytes: &[u8], row: usize, group: usize) -> Option<f32> {
        let groups = self.groups_per_row();
        if row >= self.rows || group >= groups {
            return None;
        }
        let size = self.format.scale_dtype.size();
        let at = (row * groups + group) * size;
        Some(decode_scale(
            self.format.scale_dtype,
            bytes.get(at..at + size)?,
        ))
    }
}

/// Little-endian bytes as u32 words, the last zero-padded: how the `qlinear` kernels read
/// 16-bit scales and biases (two per word).
pub fn pack_le_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        })
        .collect()
}

/// Appends `value` rounded to `dtype` (nearest even) as little-endian bytes; `dtype` is one of
/// the scale dtypes [`AffineFormat::new`] accepts.
pub(crate) fn encode_scale(dtype: DType, value: f32, out: &mut Vec<u8>) {
    match dtype {
        DType::F16 => out.extend_from_slice(&f32_to_f16_bits(value).to_le_bytes()),
        DType::Bf16 => out.extend_from_slice(&f32_to_bf16_bits(value).to_le_bytes()),
        _ => out.extend_from_slice(&value.to_le_bytes()),
    }
}

/// Widens one stored scale or bias (`bytes` is exactly `dtype.size()` long) to f32.
pub(crate) fn decode_scale(dtype: DType, bytes: &[u8]) -> f32 {
    match (dtype, bytes) {
        (DType::F16, &[a, b]) => f16_bits_to_f32(u16::from_le_bytes([a, b])),
        (DType::Bf16, &[a, b]) => f32::from_bits((u16::from_le_bytes([a, b]) as u32) << 16),
        (_, &[a, b, c, d]) => f32::from_le_bytes([a, b, c, d]),
        _ => f32::NAN,
    }
}

/// Packs `codes` into MLX's LSB-first stream of u32 words (the last word zero-padded); refuses
/// unsupported bits and codes wider than `bits`.
pub fn pack_codes(codes: &[u32], bits: u32) -> Result<Vec<u32>, FormatError> {
    if !SUPPORTED_BITS.contains(&bits) {
        return Err(FormatError::Bits(bits));
    }
    let total_bits = codes
        .len()
        .checked_mul(bits as usize)
        .ok_or(FormatError::Overflow {
            rows: 1,
            cols: codes.len(),
        })?;
    let mut words = vec![0u32; total_bits.div_ceil(32)];
    for (index, &code) in codes.iter().enumerate() {
        if code >> bits != 0 {
            return Err(FormatError::CodeTooWide { index, code, bits });
        }
        let bit = index * bits as usize;
        let (word, shift) = (bit / 32, (bit % 32) as u32);
        words[word] |= code << shift;
        // A code straddling two words puts its high bits at the bottom of the next one.
        if shift + bits > 32 {
            words[word + 1] |= code >> (32 - shift);
        }
    }
    Ok(words)
}

/// Code `index` of an LSB-first stream of `bits`-bit codes packed in `words`.
pub fn unpack_code(words: &[u32], bits: u32, index: usize) -> Result<u32, FormatError> {
    if !SUPPORTED_BITS.contains(&bits) {
        return Err(FormatError::Bits(bits));
    }
    let end = index
        .checked_add(1)
        .and_then(|n| n.checked_mul(bits as usize));
    match end {
        Some(end) if end <= words.len() * 32 => Ok(read_code(words, bits, index)),
        _ => Err(FormatError::CodeIndex {
            index,
            words: words.len(),
        }),
    }
}

/// [`unpack_code`] for an index and bits already checked to lie inside `words`.
pub(crate) fn read_code(words: &[u32], bits: u32, index: usize) -> u32 {
    let bit = index * bits as usize;
    let (word, shift) = (bit / 32, (bit % 32) as u32);
    let low = words[word] as u64;
    let high = if shift + bits > 32 {
        words[word + 1] as u64
    } else {
        0
    };
    (((high << 32 | low) >> shift) as u32) & ((1 << bits) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn format_validation_refuses_what_mlx_refuses() {
        assert!(AffineFormat::new(4, 64, DType::Bf16).is_ok());
        assert_eq!(
            AffineFormat::new(7, 64, DType::F16),
            Err(FormatError::Bits(7))
        );
        assert_eq!(
            AffineFormat::new(1, 64, DType::F16),
            Err(FormatError::Bits(1))
        );
        assert_eq!(
            AffineFormat::new(4, 48, DType::F16),
            Err(FormatError::GroupSize(48))
        );
        assert_eq!(
            AffineFormat::new(4, 64, DType::U32),
            Err(FormatError::ScaleDtype(DType::U32))
        );
    }

    #[test]
    fn words_and_groups_per_row() {
        let f3 = AffineFormat::new(3, 32, DType::F16).unwrap();
        assert_eq!(f3.packed_words(32), Ok(3));
        assert_eq!(f3.packed_words(64), Ok(6));
        assert_eq!(
            f3.packed_words(16),
            Err(FormatError::PartialWord { cols: 16, bits: 3 })
        );
        assert_eq!(f3.groups(96), Ok(3));
        assert_eq!(
            f3.groups(80),
            Err(FormatError::PartialGroup {
                cols: 80,
                group_size: 32
            })
        );
        let f6 = AffineFormat::new(6, 16, DType::F32).unwrap();
        assert_eq!(f6.packed_words(256), Ok(48));
        assert_eq!(f6.groups(256), Ok(16));
        assert_eq!(f6.max_code(), 63);
    }

    #[test]
    fn four_bit_first_element_is_the_lowest_nibble() {
        let words = pack_codes(&[1, 2, 3, 4, 5, 6, 7, 8], 4).unwrap();
        assert_eq!(words, vec![0x8765_4321]);
        assert_eq!(bytes_of(&words), vec![0x21, 0x43, 0x65, 0x87]);
    }

    #[test]
    fn power_of_two_bits_put_code_j_at_bit_j_times_bits() {
        for bits in [2u32, 4, 8] {
            let per_word = 32 / bits;
            let codes: Vec<u32> = (0..2 * per_word)
                .map(|i| (i * 7 + 1) % (1 << bits))
                .collect();
            let words = pack_codes(&codes, bits).unwrap();
            assert_eq!(words.len(), 2);
            for (i, &c) in codes.iter().enumerate() {
                let (w, j) = (i / per_word as usize, i as u32 % per_word);
                assert_eq!(
                    (words[w] >> (j * bits)) & ((1 << bits) - 1),
                    c,
                    "bits {bits} i {i}"
                );
            }
        }
    }

    #[test]
    #[allow(clippy::unusual_byte_groupings)] // The byte literals are grouped by code.
    fn three_bit_packs_eight_codes_per_three_bytes() {
        // Codes 0..8: stream bits 0b111_110_101_100_011_010_001_000 fill exactly 24 bits.
        let codes: Vec<u32> = (0..32).map(|i| i % 8).collect();
        let words = pack_codes(&codes, 3).unwrap();
        assert_eq!(words.len(), 3);
        let bytes = bytes_of(&words);
        let triple = [0b10_001_000u8, 0b1_100_011_0, 0b111_110_10];
        for chunk in bytes.chunks(3) {
            assert_eq!(chunk, triple);
        }
        // Code 10 straddles words 0 and 1 (bits 30..33).
        assert_eq!(unpack_code(&words, 3, 10), Ok(2));
    }

    #[test]
    fn five_and_six_bit_streams_straddle_bytes() {
        // 5-bit: 8 codes per 5 bytes; 6-bit: 4 codes per 3 bytes.
        let five = pack_codes(&[31, 0, 31, 0, 31, 0, 31, 0], 5).unwrap();
        assert_eq!(
            bytes_of(&five)[..5],
            [0x1f, 0x7c, 0xf0, 0xc1, 0x07],
            "{five:x?}"
        );
        let six = pack_codes(&[1, 2, 3, 4], 6).unwrap();
        assert_eq!(bytes_of(&six)[..3], [0x81, 0x30, 0x10]);
    }

    #[test]
    fn pack_then_unpack_round_trips_for_every_bits() {
        for bits in SUPPORTED_BITS {
            let codes: Vec<u32> = (0..320u32)
                .map(|i| i.wrapping_mul(2_654_435_761) >> (32 - bits))
                .collect();
            let words = pack_codes(&codes, bits).unwrap();
            assert_eq!(words.len(), 320 * bits as usize / 32);
            for (i, &c) in codes.iter().enumerate() {
                assert_eq!(unpack_code(&words, bits, i), Ok(c), "bits {bits} code {i}");
            }
        }
    }

    #[test]
    fn pack_and_unpack_refuse_bad_input() {
        assert_eq!(
            pack_codes(&[16], 4),
            Err(FormatError::CodeTooWide {
                index: 0,
                code: 16,
                bits: 4
            })
        );
        assert_eq!(pack_codes(&[0], 7), Err(FormatError::Bits(7)));
        assert_eq!(
            unpack_code(&[0], 4, 8),
            Err(FormatError::CodeIndex { index: 8, words: 1 })
        );
        assert_eq!(
            unpack_code(&[0], 4, usize::MAX),
            Err(FormatError::CodeIndex {
                index: usize::MAX,
                words: 1
            })
        );
    }

    #[test]
    fn tensor_parts_are_checked_and_read_back() {
        let f = AffineFormat::new(4, 32, DType::F16).unwrap();
        let codes: Vec<u32> = (0..64).map(|i| i % 16).collect();
        let w_q = pack_codes(&codes, 4).unwrap();
        let mut scales = Vec::new();
        let mut biases = Vec::new();
        for g in 0..2 {
            encode_scale(DType::F16, 0.5 + g as f32, &mut scales);
            encode_scale(DType::F16, -1.0 - g as f32, &mut biases);
        }
        let t = AffineTensor::from_parts(f, 2, 32, w_q.clone(), scales.clone(), biases.clone())
            .unwrap();
        assert_eq!(t.scale(1, 0), Some(1.5));
        assert_eq!(t.bias(0, 0), Some(-1.0));
        assert_eq!(t.scale(2, 0), None);
        assert_eq!(t.code(1, 3), Some(codes[32 + 3]));
        assert_eq!(t.code(0, 32), None);
        let short = AffineTensor::from_parts(f, 2, 32, w_q[..7].to_vec(), scales, biases);
        assert_eq!(
            short,
            Err(FormatError::Length {
                what: "w_q",
                expected: 8,
                got: 7
            })
        );
    }
}
