//! Typed errors of the quant module: a bad format or shape.

use kiln_math::DType;

/// An affine format, shape or buffer that MLX's layout refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FormatError {
    /// Bits outside {2, 3, 4, 5, 6, 8}.
    #[error("affine quantization takes 2, 3, 4, 5, 6 or 8 bits, not {0}")]
    Bits(u32),
    /// A group size outside {16, 32, 64, 128}.
    #[error("the group size must be 16, 32, 64 or 128, not {0}")]
    GroupSize(u32),
    /// Scales and biases must be a float dtype.
    #[error("scales and biases are f32, f16 or bf16, not {}", .0.name())]
    ScaleDtype(DType),
    /// A row whose codes do not fill whole u32 words.
    #[error("a row of {cols} codes at {bits} bits does not fill whole u32 words")]
    PartialWord {
        /// Elements per row (K).
        cols: usize,
        /// Bits per code.
        bits: u32,
    },
    /// A row that does not split into whole groups.
    #[error("a row of {cols} elements does not split into groups of {group_size}")]
    PartialGroup {
        /// Elements per row (K).
        cols: usize,
        /// Elements per group.
        group_size: u32,
    },
    /// A buffer whose length does not match the shape.
    #[error("{what} holds {got} elements where the shape needs {expected}")]
    Length {
        /// Which buffer.
        what: &'static str,
        /// The length the shape implies.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// The shape's sizes overflow `usize`.
    #[error("a {rows}×{cols} tensor is too large to address")]
    Overflow {
        /// Rows (N).
        rows: usize,
        /// Elements per row (K).
        cols: usize,
    },
    /// A code wider than the format's bits.
    #[error("code {code} at element {index} does not fit in {bits} bits")]
    CodeTooWide {
        /// The element.
        index: usize,
        /// The code.
        code: u32,
        /// Bits per code.
        bits: u32,
    },
    /// A code index past the end of the packed words.
    #[error("code {index} is past the end of {words} packed words")]
    CodeIndex {
        /// The code asked for.
        index: usize,
        /// Packed words available.
        words: usize,
    },
    /// A weight that is NaN or infinite (MLX's min/max would be meaningless).
    #[error("weight {index} is {value}: only finite weights quantize")]
    NonFinite {
        /// The element.
        index: usize,
        /// Its value.
        value: f32,
    },
}
