//! One module per kernel: its params, its `KernelDef` and its body.

pub mod decode_attention;
pub mod fused_add3_layer_norm;
pub mod fused_add_rms_norm;
pub mod fused_rope_qk_append;
pub mod fused_xielu;
pub mod gumbel_max_merge;
pub mod gumbel_max_sample;
pub mod paged_attention_decode;
pub mod paged_attention_decode_v2_partial;
pub mod paged_attention_merge_states;
pub mod rejection_sample;
pub mod speculative_accept;
