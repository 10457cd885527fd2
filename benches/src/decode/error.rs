//! Why loading a model or decoding with it failed: every bad input is one of these, naming what
//! was wrong, never a panic.

use kiln::quant::{GgufError, RepackError};
use kiln::PortError;

/// An error of the decode driver.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The GGUF file could not be read or parsed.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// A file of a model directory (`config.json`, a safetensors shard, …) could not be read
    /// or parsed.
    #[error("`{path}`: {why}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        why: String,
    },
    /// The GGUF's `general.architecture` or the `config.json`'s `model_type` is not one the
    /// driver runs.
    #[error(
        "unsupported architecture `{0}` (the decode driver runs llama, and from MLX \
         directories qwen3 and qwen3_moe)"
    )]
    UnsupportedArch(String),
    /// A metadata key the model needs is absent.
    #[error("metadata key `{0}` is missing")]
    MissingMeta(String),
    /// A metadata value has the wrong type or an impossible value.
    #[error("metadata key `{key}`: {why}")]
    BadMeta {
        /// The key.
        key: String,
        /// What is wrong with its value.
        why: String,
    },
    /// A tensor the architecture needs is absent.
    #[error("tensor `{0}` is missing")]
    MissingTensor(String),
    /// A tensor's shape is not the one the config implies.
    #[error("tensor `{tensor}` has dims {got:?}, expected {expected:?}")]
    TensorShape {
        /// The tensor.
        tensor: String,
        /// Its ggml dims, row length first.
        got: Vec<u64>,
        /// The dims the config implies.
        expected: Vec<u64>,
    },
    /// A tensor whose type or layout the driver cannot use where it sits.
    #[error("tensor `{tensor}`: {why}")]
    BadTensor {
        /// The tensor.
        tensor: String,
        /// Why.
        why: String,
    },
    /// A quantized tensor that kiln's repack refuses.
    #[error(transparent)]
    Repack(#[from] RepackError),
    /// The tokenizer could not be built, or refused a text or an id.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The chat template could not be rendered.
    #[error("chat template: {0}")]
    Template(String),
    /// A token id past the vocabulary.
    #[error("token id {id} is past the vocabulary of {vocab}")]
    TokenOutOfVocab {
        /// The id.
        id: u32,
        /// Tokens in the vocabulary.
        vocab: usize,
    },
    /// The sequence would outgrow the KV cache.
    #[error("position {position} is past the KV cache's {capacity} tokens")]
    ContextFull {
        /// The position asked for.
        position: usize,
        /// Tokens the cache holds.
        capacity: usize,
    },
    /// Sampling settings out of range.
    #[error("sampling: {0}")]
    Sampling(String),
    /// A model shape name the decode bench does not know.
    #[error("unknown model shape {0}")]
    UnknownModel(String),
    /// An activation dtype the driver does not run.
    #[error("activation dtype `{got}`: {why}")]
    ActDtype {
        /// What was asked for.
        got: String,
        /// Why it is refused, and what is accepted.
        why: String,
    },
    /// A decode bench setting out of range.
    #[error("decode bench: {0}")]
    Bench(String),
    /// A kiln op, tensor or device refused or failed.
    #[error("kiln: {0}")]
    Kiln(#[from] PortError),
}
