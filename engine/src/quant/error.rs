//! Typed errors of the quant module: a bad format or shape, a GGUF tensor that cannot be
//! repacked, and a GGUF file that cannot be read.

use super::GgmlType;
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

/// A GGUF tensor that cannot be repacked into kiln's layouts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RepackError {
    /// A ggml type kiln has no exact layout for.
    #[error("tensor {tensor}: ggml type {ggml_type} has no kiln layout")]
    Unsupported {
        /// The tensor's name.
        tensor: String,
        /// Its type.
        ggml_type: GgmlType,
    },
    /// Dimensions that the type's blocks cannot tile, or that overflow.
    #[error("tensor {tensor}: dims {dims:?} do not fit {ggml_type}: {why}")]
    Shape {
        /// The tensor's name.
        tensor: String,
        /// Its ggml dims (row length first).
        dims: Vec<u64>,
        /// Its type.
        ggml_type: GgmlType,
        /// What is wrong.
        why: &'static str,
    },
    /// Bytes that do not match the dims.
    #[error("tensor {tensor}: {got} bytes where {expected} are needed")]
    Length {
        /// The tensor's name.
        tensor: String,
        /// The byte count the dims imply.
        expected: usize,
        /// The byte count given.
        got: usize,
    },
    /// A block scale (d, m or dmin) that is NaN or infinite: no affine form reproduces it.
    #[error("tensor {tensor}: block {block} has a non-finite scale {value}")]
    NonFiniteScale {
        /// The tensor's name.
        tensor: String,
        /// The block (in storage order).
        block: usize,
        /// The scale.
        value: f32,
    },
    /// The affine layout refused the result (cannot happen for shapes that passed `Shape`).
    #[error("tensor {tensor}: {source}")]
    Format {
        /// The tensor's name.
        tensor: String,
        /// The layout's complaint.
        source: FormatError,
    },
}

/// A GGUF file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The operating system failed to open or read the file.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file does not start with `GGUF`.
    #[error("not a GGUF file (magic {0:02x?})")]
    BadMagic([u8; 4]),
    /// A version other than 2 or 3 (v1 used 32-bit counts; a big-endian file reads as a huge one).
    #[error("GGUF version {0} is not supported (2 and 3 are)")]
    Version(u32),
    /// The file ends inside a field.
    #[error("the file ends at byte {len} while reading {what} at byte {at}")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Where it starts.
        at: u64,
        /// The file's length.
        len: u64,
    },
    /// A count or length that the rest of the file cannot hold (a corrupted length).
    #[error("{what} at byte {at} claims {count} items, more than the file's remaining {remaining} bytes hold")]
    Length {
        /// What was being read.
        what: &'static str,
        /// Where the count sits.
        at: u64,
        /// The count read.
        count: u64,
        /// Bytes left in the file.
        remaining: u64,
    },
    /// A metadata value type id outside the GGUF spec.
    #[error("metadata value type {id} at byte {at} is unknown")]
    ValueType {
        /// The id read.
        id: u32,
        /// Where it sits.
        at: u64,
    },
    /// A bool byte other than 0 or 1.
    #[error("bool at byte {at} is {value}, not 0 or 1")]
    Bool {
        /// Where it sits.
        at: u64,
        /// The byte.
        value: u8,
    },
    /// A string that is not UTF-8.
    #[error("the string at byte {at} is not UTF-8")]
    Utf8 {
        /// Where the string's bytes start.
        at: u64,
    },
    /// Arrays nested deeper than the reader follows.
    #[error("arrays nest deeper than {limit} levels at byte {at}")]
    Nesting {
        /// Where the innermost array starts.
        at: u64,
        /// The deepest nesting read.
        limit: usize,
    },
    /// A key or tensor name that appears twice.
    #[error("{what} {name:?} appears twice")]
    Duplicate {
        /// "metadata key" or "tensor".
        what: &'static str,
        /// The name.
        name: String,
    },
    /// `general.alignment` that is not a non-zero power of two.
    #[error("general.alignment is {0}, not a non-zero power of two")]
    Alignment(String),
    /// A tensor whose shape or placement is invalid.
    #[error("tensor {tensor}: {why}")]
    Tensor {
        /// The tensor's name.
        tensor: String,
        /// What is wrong.
        why: String,
    },
    /// A tensor name the file does not hold.
    #[error("no tensor named {0:?}")]
    NoTensor(String),
    /// The writer was given inconsistent input.
    #[error("cannot write: {0}")]
    Write(String),
}
