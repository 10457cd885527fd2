//! ggml's tensor types (the `ggml_type` ids GGUF files store) and their block geometry.

use core::fmt;

/// A ggml tensor type, by its GGUF id; ids this table does not know are kept as `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    /// IEEE binary32.
    F32,
    /// IEEE binary16.
    F16,
    /// 4-bit codes, one f16 scale per 32: `(q − 8)·d`.
    Q4_0,
    /// 4-bit codes, f16 scale and min per 32: `q·d + m`.
    Q4_1,
    /// 5-bit codes (fifth bits apart), f16 scale per 32: `(q − 16)·d`.
    Q5_0,
    /// 5-bit codes (fifth bits apart), f16 scale and min per 32: `q·d + m`.
    Q5_1,
    /// Signed 8-bit codes, f16 scale per 32: `q·d`.
    Q8_0,
    /// Signed 8-bit codes with a scale and a scaled sum per 32 (a dot-product operand).
    Q8_1,
    /// 2-bit K-quant (super-blocks of 256).
    Q2K,
    /// 3-bit K-quant (super-blocks of 256).
    Q3K,
    /// 4-bit K-quant: 8 groups of 32 per 256, 6-bit scales and mins.
    Q4K,
    /// 5-bit K-quant: 8 groups of 32 per 256, 6-bit scales and mins.
    Q5K,
    /// 6-bit K-quant: 16 groups of 16 per 256, int8 scales.
    Q6K,
    /// 8-bit K-quant (a dot-product operand).
    Q8K,
    /// IQ2_XXS (lattice codebook).
    Iq2Xxs,
    /// IQ2_XS (lattice codebook).
    Iq2Xs,
    /// IQ3_XXS (lattice codebook).
    Iq3Xxs,
    /// IQ1_S (lattice codebook).
    Iq1S,
    /// IQ4_NL (non-linear 4-bit table).
    Iq4Nl,
    /// IQ3_S (lattice codebook).
    Iq3S,
    /// IQ2_S (lattice codebook).
    Iq2S,
    /// IQ4_XS (non-linear 4-bit table, super-blocks).
    Iq4Xs,
    /// 8-bit integer.
    I8,
    /// 16-bit integer.
    I16,
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
    /// IEEE binary64.
    F64,
    /// IQ1_M (lattice codebook).
    Iq1M,
    /// bfloat16.
    Bf16,
    /// Ternary, 1.6875 bits per weight.
    Tq1_0,
    /// Ternary, 2 bits per weight.
    Tq2_0,
    /// MXFP4 (e2m1 codes, e8m0 scale per 32).
    Mxfp4,
    /// NVFP4 (e2m1 codes, e4m3 scale per 16).
    Nvfp4,
    /// 1-bit codes, f16 scale per 128.
    Q1_0,
    /// 2-bit codes, f16 scale per 64.
    Q2_0,
    /// An id outside this table (a removed or newer type).
    Other(u32),
}

/// `(type, GGUF id, ggml name, elements per block, bytes per block)`, from ggml's type traits.
const TABLE: [(GgmlType, u32, &str, u64, u64); 35] = [
    (GgmlType::F32, 0, "F32", 1, 4),
    (GgmlType::F16, 1, "F16", 1, 2),
    (GgmlType::Q4_0, 2, "Q4_0", 32, 18),
    (GgmlType::Q4_1, 3, "Q4_1", 32, 20),
    (GgmlType::Q5_0, 6, "Q5_0", 32, 22),
    (GgmlType::Q5_1, 7, "Q5_1", 32, 24),
    (GgmlType::Q8_0, 8, "Q8_0", 32, 34),
    (GgmlType::Q8_1, 9, "Q8_1", 32, 36),
    (GgmlType::Q2K, 10, "Q2_K", 256, 84),
    (GgmlType::Q3K, 11, "Q3_K", 256, 110),
    (GgmlType::Q4K, 12, "Q4_K", 256, 144),
    (GgmlType::Q5K, 13, "Q5_K", 256, 176),
    (GgmlType::Q6K, 14, "Q6_K", 256, 210),
    (GgmlType::Q8K, 15, "Q8_K", 256, 292),
    (GgmlType::Iq2Xxs, 16, "IQ2_XXS", 256, 66),
    (GgmlType::Iq2Xs, 17, "IQ2_XS", 256, 74),
    (GgmlType::Iq3Xxs, 18, "IQ3_XXS", 256, 98),
    (GgmlType::Iq1S, 19, "IQ1_S", 256, 50),
    (GgmlType::Iq4Nl, 20, "IQ4_NL", 32, 18),
    (GgmlType::Iq3S, 21, "IQ3_S", 256, 110),
    (GgmlType::Iq2S, 22, "IQ2_S", 256, 82),
    (GgmlType::Iq4Xs, 23, "IQ4_XS", 256, 136),
    (GgmlType::I8, 24, "I8", 1, 1),
    (GgmlType::I16, 25, "I16", 1, 2),
    (GgmlType::I32, 26, "I32", 1, 4),
    (GgmlType::I64, 27, "I64", 1, 8),
    (GgmlType::F64, 28, "F64", 1, 8),
    (GgmlType::Iq1M, 29, "IQ1_M", 256, 56),
    (GgmlType::Bf16, 30, "BF16", 1, 2),
    (GgmlType::Tq1_0, 34, "TQ1_0", 256, 54),
    (GgmlType::Tq2_0, 35, "TQ2_0", 256, 66),
    (GgmlType::Mxfp4, 39, "MXFP4", 32, 17),
    (GgmlType::Nvfp4, 40, "NVFP4", 64, 36),
    (GgmlType::Q1_0, 41, "Q1_0", 128, 18),
    (GgmlType::Q2_0, 42, "Q2_0", 64, 18),
];

impl GgmlType {
    /// The type a GGUF file's id names.
    pub fn from_id(id: u32) -> GgmlType {
        TABLE
            .iter()
            .find(|row| row.1 == id)
            .map_or(GgmlType::Other(id), |row| row.0)
    }

    /// The GGUF id.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::Other(id) => id,
            known => Self::row(known).map_or(u32::MAX, |row| row.1),
        }
    }

    /// ggml's name for the type (`"Q4_K"`); `None` for `Other`.
    pub fn name(self) -> Option<&'static str> {
        Self::row(self).map(|row| row.2)
    }

    /// `(elements, bytes)` per block; `None` for `Other`.
    pub fn block(self) -> Option<(u64, u64)> {
        Self::row(self).map(|row| (row.3, row.4))
    }

    /// Bytes of a tensor of `elements` elements, `None` if the type is unknown, the elements do
    /// not fill whole blocks, or the size overflows.
    pub fn tensor_bytes(self, elements: u64) -> Option<u64> {
        let (per_block, bytes) = self.block()?;
        if !elements.is_multiple_of(per_block) {
            return None;
        }
        (elements / per_block).checked_mul(bytes)
    }

    fn row(t: GgmlType) -> Option<&'static (GgmlType, u32, &'static str, u64, u64)> {
        TABLE.iter().find(|row| row.0 == t)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "ggml type {}", self.id()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_unknown_ids_are_kept() {
        for row in TABLE {
            assert_eq!(GgmlType::from_id(row.1), row.0);
            assert_eq!(row.0.id(), row.1);
        }
        assert_eq!(GgmlType::from_id(4), GgmlType::Other(4));
        assert_eq!(GgmlType::Other(4).to_string(), "ggml type 4");
        assert_eq!(GgmlType::Q6K.to_string(), "Q6_K");
    }

    #[test]
    fn tensor_bytes_need_whole_blocks() {
        assert_eq!(GgmlType::Q4_1.tensor_bytes(64), Some(40));
        assert_eq!(GgmlType::Q6K.tensor_bytes(512), Some(420));
        assert_eq!(GgmlType::Q4_0.tensor_bytes(48), None);
        assert_eq!(GgmlType::Other(99).tensor_bytes(32), None);
        assert_eq!(GgmlType::F32.tensor_bytes(u64::MAX), None);
    }
}
