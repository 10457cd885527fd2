//! The reference chains: each fused kernel as a composition of simple host ops, written from
//! the spec and independently of the fused bodies. They are the fallback when a device has no
//! port, and the parity harness's oracle. Each module also declares its parity cases
//! (`cases`) and the shapes `kiln bench` times it at (`bench_cases`: model shapes, or its parity
//! cases when it has none).
//!
//! Intermediate values are computed in f64 and rounded to `T` exactly where the unfused chain
//! stores a tensor.

pub mod fused_add3_layer_norm;
pub mod fused_add_rms_norm;
pub mod fused_rope_qk_append;
pub mod fused_xielu;
pub mod gumbel_max_merge;
pub mod gumbel_max_sample;
pub mod ops;
pub mod paged_attention_decode;
pub mod paged_attention_decode_v2_partial;
pub mod paged_attention_merge_states;
pub mod paged_cases;
pub mod rejection_sample;
pub mod sampling;
pub mod speculative_accept;
