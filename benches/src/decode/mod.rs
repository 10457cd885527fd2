//! The decode driver: a Llama-architecture GGUF model, or an MLX model directory, generating
//! text through kiln's public op API alone — the worked example of an engine over kiln.
//!
//! - [`ModelFile`] / [`Checkpoint`]: a GGUF file or an MLX directory (`config.json`,
//!   `model*.safetensors`, `tokenizer.json`) opened for generation.
//! - [`LlamaConfig`]: the model's shape from the GGUF's `llama.*` metadata or the directory's
//!   `config.json` ([`MlxConfig`]: llama, qwen3, qwen3_moe, MLX's quantization block).
//! - [`Weights`]: every tensor in kiln's affine layout (a GGUF's repacked exactly, an MLX
//!   directory's taken as stored) and uploaded (q/k/v stacked into one projection, gate/up
//!   interleaved for `qlinear_silu_mul`, a tied LM head reusing the embedding table).
//! - [`Tokenizer`]: byte-level BPE from the GGUF's vocabulary and merges, or the directory's
//!   `tokenizer.json`, and the chat template.
//! - [`export_mlx`]: a GGUF written as an MLX directory (its quantized tensors repacked
//!   exactly, q/k rows back in Hugging Face's order).
//! - [`KvCache`]: per-layer paged K/V pools and one device block table.
//! - [`Model`]: the decode step, every op a kiln op, its activations, residual and KV pools in
//!   an [`ActDtype`] (f32, or bf16) chosen when it is built; [`Sampler`]: greedy, temperature and
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

mod act;
#[cfg(test)]
mod act_tests;
mod activations;
mod batch_greedy;
mod bench;
mod checkpoint;
mod compare;
mod config;
mod error;
mod generate;
mod hybrid;
mod kv;
mod mlx_config;
mod mlx_export;
mod mlx_weights;
mod model;
mod projection;
mod report;
mod rope_order;
mod safetensors_dir;
mod sampler;
mod synthetic;
mod tokenizer;
mod tokenizer_json;
mod weights;
mod widen;

pub use act::ActDtype;
pub use batch_greedy::BatchGreedy;
pub use bench::{
    run_decode_bench, shares, DecodeBenchConfig, DecodeBenchReport, DecodeLoop, DecodeMemory,
    KernelShare,
};
pub use checkpoint::{Checkpoint, MlxDir, ModelFile};
pub use compare::{compare, CompareError, CompareOptions, Comparison, Pair};
pub use config::{HybridConfig, LayerKind, LlamaConfig, Mamba2Config, MixerKind, MoeConfig};
pub use error::DecodeError;
pub use generate::{generate, trace_logits, GenerateReport, StopReason, TextStream};
pub use hybrid::{HybridLayer, HybridMoe, Mamba2Weights, Mixer};
pub use kv::{KvCache, PAGE_SIZE};
pub use mlx_config::{MlxConfig, MlxQuantization, QuantSpec};
pub use mlx_export::export_mlx;
pub use model::Model;
pub use report::{utc_date, RunInfo, CSV_HEADER};
pub use safetensors_dir::SafetensorsDir;
pub use sampler::{Sampler, SamplerKind, SamplingParams};
pub use synthetic::{
    granite_4_0_h_tiny, llama_3_1_8b, model_shape, model_shapes, nemotron_3_nano_30b_a3b,
    qwen3_30b_a3b, tiny_hybrid, tiny_llama, tiny_moe, ModelShape,
};
pub use tokenizer::Tokenizer;
pub use weights::{
    read_matrix, GateUp, HostMatrix, LayerWeights, Matrix, Mlp, QkNorm, QkvProjection, Weights,
};
