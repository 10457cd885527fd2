//! The decode driver: a Llama-architecture GGUF model generating text through kiln's public op
//! API alone — the worked example of an engine over kiln.
//!
//! - [`LlamaConfig`]: the model's shape from the GGUF's `llama.*` metadata.
//! - [`Weights`]: every tensor repacked exactly into kiln's affine layout and uploaded (q/k/v
//!   stacked into one projection, gate/up interleaved for `qlinear_silu_mul`, a tied LM head
//!   reusing the embedding table).
//! - [`Tokenizer`]: byte-level BPE from the GGUF's vocabulary and merges, and its chat template.
//! - [`KvCache`]: per-layer paged K/V pools and one device block table.
//! - [`Model`]: the decode step, every op a kiln op; [`Sampler`]: greedy, temperature and
//!   top-k/top-p/min-p through kiln's samplers; [`generate`]: prefill token by token, then
//!   sampling with the text streamed.
//!
//! Buffers are made when the model and sampler are made; a warm step allocates nothing on the
//! device (a test checks `Device::allocations`).
//!
//! `kiln bench --decode` runs the same model at real shapes with synthetic weights
//! ([`ModelShape`], [`Weights::synthetic`], [`run_decode_bench`]): tok/s, GPU time and host
//! gap per token, the per-kernel profile, peak memory within its bound, a CSV row per model,
//! and [`compare`] for two such CSV files.

mod bench;
mod compare;
mod config;
mod error;
mod generate;
mod kv;
mod model;
mod report;
mod sampler;
mod synthetic;
mod tokenizer;
mod weights;

pub use bench::{
    run_decode_bench, shares, DecodeBenchConfig, DecodeBenchReport, DecodeLoop, DecodeMemory,
    KernelShare,
};
pub use compare::{compare, CompareError, CompareOptions, Comparison, Pair};
pub use config::{LlamaConfig, MoeConfig};
pub use error::DecodeError;
pub use generate::{generate, trace_logits, GenerateReport, StopReason, TextStream};
pub use kv::{KvCache, PAGE_SIZE};
pub use model::Model;
pub use report::{utc_date, RunInfo, CSV_HEADER};
pub use sampler::{Sampler, SamplerKind, SamplingParams};
pub use synthetic::{
    llama_3_1_8b, model_shape, model_shapes, qwen3_30b_a3b, tiny_llama, tiny_moe, ModelShape,
};
pub use tokenizer::Tokenizer;
pub use weights::{
    read_matrix, GateUp, HostMatrix, LayerWeights, Matrix, Mlp, QkNorm, QkvProjection, Weights,
};

use kiln::quant::GgufFile;
use kiln::Device;
use std::path::Path;

/// A GGUF model opened for generation: its tokenizer, and the file to load weights from once
/// the cache size is known.
pub struct ModelFile {
    /// The parsed file.
    pub file: GgufFile,
    /// Its config.
    pub config: LlamaConfig,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
}

impl ModelFile {
    /// Opens `path` and reads its config and tokenizer (no tensor data yet).
    pub fn open(path: impl AsRef<Path>) -> Result<ModelFile, DecodeError> {
        ModelFile::from_gguf(GgufFile::open(path)?)
    }

    /// Reads the config and tokenizer of a parsed file (one in memory, say).
    pub fn from_gguf(file: GgufFile) -> Result<ModelFile, DecodeError> {
        let config = LlamaConfig::from_gguf(&file)?;
        let tokenizer = Tokenizer::from_gguf(&file)?;
        if tokenizer.vocab() != config.vocab {
            return Err(DecodeError::BadMeta {
                key: "tokenizer.ggml.tokens".into(),
                why: format!(
                    "{} tokens for a vocabulary of {}",
                    tokenizer.vocab(),
                    config.vocab
                ),
            });
        }
        Ok(ModelFile {
            file,
            config,
            tokenizer,
        })
    }

    /// Loads the weights onto `dev` with a KV cache of `capacity` tokens.
    pub fn load(&mut self, dev: &Device, capacity: usize) -> Result<Model, DecodeError> {
        let weights = Weights::load(&mut self.file, &self.config, dev)?;
        Model::new(self.config.clone(), weights, dev, capacity)
    }
}
