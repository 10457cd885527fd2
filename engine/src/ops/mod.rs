//! The op API: one typed function per kernel, documenting its shapes. Every op validates its
//! inputs before any launch, takes the fallback when the device has no port, and says which
//! path ran.

mod bitlinear;
mod embedding;
mod gated_delta;
mod gather_qmm;
pub mod kernel;
mod moe;
mod moe_block;
mod qlinear;
mod rejection;
mod ssm;
pub use bitlinear::bitlinear;
pub use embedding::{embedding, embedding_affine, embedding_scratch_bytes};
pub use gated_delta::gated_delta_step;
pub use gather_qmm::{
    gather_qmm, gather_qmm_indexed, gather_qmm_scratch_bytes, gather_qmm_tiled, gather_qmm_topk,
    gather_sort, scatter_unsort, GatherTiling, StackedExperts,
};
pub use moe::{
    moe_experts, moe_experts_routed, moe_route, moe_scratch_bytes, MoeActivation, MoeExperts,
    MoeRan, MoeRouter,
};
pub use moe_block::{
    moe_block, moe_block_on, moe_block_routed, moe_block_scratch_bytes, MoeBlock, MoeBlockPath,
    MoeBlockRan, MoeGate, SharedExpert, SORTED_MIN_SLOTS,
};
pub use qlinear::{interleave_rows, qlinear, qlinear_silu_mul, QuantizedWeight};
pub use rejection::{
    rejection_path, rejection_sample, rejection_sample_on, rejection_sample_words,
    rejection_scratch_bytes, rejection_seg_len, RejectionPath, SamplingFilters,
    REJECTION_SEGMENTED_FROM,
};
pub use ssm::{
    causal_conv1d_update, gated_rms_norm, mamba1_selective_scan, ssm_update, TimeStepLimits,
};

use crate::launch::Ran;
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::fused_add3_layer_norm::Add3LayerNormParams;
use kiln_math::kernels::fused_add_rms_norm::AddRmsNormParams;
use kiln_math::kernels::fused_rope_qk_append::RopeAppendParams;
use kiln_math::kernels::fused_xielu::XieluParams;
use kiln_math::kernels::gumbel_max_merge::GumbelMergeParams;
use kiln_math::kernels::gumbel_max_sample::{
    splits_for_resident, GumbelMaxSample, GumbelParams, MAX_SPLITS,
};
use kiln_math::kernels::speculative_accept::{
    SpeculativeParams, RULE_GREEDY, RULE_SAMPLER_MATCH, RULE_STOCHASTIC,
};
use kiln_math::{DType, KernelId};

/// Residual add + RMSNorm (spec §3), in place on the residual stream.
///
/// Shapes: `x` and `residual` `[.., D]` (same shape), `weight` `[D]`, `out` `[.., D]`; all one
/// dtype (f32, f16 or bf16). Afterwards `residual = rnd(x + residual)` and
/// `out = rnd(weight · rnd(residual / sqrt(mean(residual²) + eps)))` per row.
pub fn fused_add_rms_norm(
    dev: &Device,
    x: &Tensor,
    residual: &mut Tensor,
    weight: &Tensor,
    eps: f32,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = AddRmsNormParams {
        eps,
        weight_bias: 0.0,
        ..Default::default()
    };
    kernel::fused_add_rms_norm(dev, &p, x, residual, weight, out)
}

/// [`fused_add_rms_norm`] with Gemma's gain `(1 + weight)`, the `+1` folded in the weight's dtype.
pub fn fused_add_rms_norm_gemma(
    dev: &Device,
    x: &Tensor,
    residual: &mut Tensor,
    weight: &Tensor,
    eps: f32,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = AddRmsNormParams {
        eps,
        weight_bias: 1.0,
        ..Default::default()
    };
    kernel::fused_add_rms_norm(dev, &p, x, residual, weight, out)
}

/// The effective xIELU scales from a checkpoint's raw `alpha_p`, `alpha_n` and `beta`:
/// `(softplus(alpha_p_raw), beta + softplus(alpha_n_raw))`, in f32 with the stable softplus
/// `max(z, 0) + log1p(exp(-|z|))`.
pub fn xielu_alphas(alpha_p_raw: f32, alpha_n_raw: f32, beta: f32) -> (f32, f32) {
    // libm's expf, not ssm_update's in-kernel 2^x form: run once per checkpoint, exact is free.
    let softplus = |z: f32| z.max(0.0) + libm::log1pf(libm::expf(-z.abs()));
    (softplus(alpha_p_raw), beta + softplus(alpha_n_raw))
}

/// xIELU activation (spec §10), elementwise, byte-identical to the unfused graph on the host.
///
/// Shapes: `x` any shape, `out` the shape of `x`; one dtype (f32, f16 or bf16). `alpha_p`,
/// `alpha_n` are the effective scales ([`xielu_alphas`]); `eps` clamps the negative branch
/// (checkpoint default −1e-6). Per element `out = α_p·x² + β·x` if `x > 0`, else
/// `α_n·(expm1(min(x, ε)) − x) + β·x`, each intermediate rounded to the dtype.
pub fn fused_xielu(
    dev: &Device,
    x: &Tensor,
    alpha_p: f32,
    alpha_n: f32,
    beta: f32,
    eps: f32,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = XieluParams {
        alpha_p,
        alpha_n,
        beta,
        eps,
        ..Default::default()
    };
    kernel::fused_xielu(dev, &p, x, out)
}

/// Cohere2's parallel-residual join + LayerNorm (spec §11), both outputs.
///
/// Shapes: `attn`, `mlp`, `residual`, `x_out`, `h_out` `[.., D]` (same shape, `D ≤ 6656`),
/// `weight [D]`, `bias [D]` or `[1]` (one value broadcast: pass zeros for a norm without bias);
/// one dtype (f32, f16 or bf16). Per row `x_out = rnd(rnd(attn + mlp) + residual)` and
/// `h_out = rnd(weight · (x_out − mean) / sqrt(var + eps) + bias)`, statistics in f32.
#[allow(clippy::too_many_arguments)] // one tensor per buffer, plus eps
pub fn fused_add3_layer_norm(
    dev: &Device,
    attn: &Tensor,
    mlp: &Tensor,
    residual: &Tensor,
    weight: &Tensor,
    bias: &Tensor,
    eps: f32,
    x_out: &mut Tensor,
    h_out: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = Add3LayerNormParams {
        eps,
        ..Default::default()
    };
    kernel::fused_add3_layer_norm(dev, &p, attn, mlp, residual, weight, bias, x_out, h_out)
}

/// RoPE settings of [`fused_rope_qk_append`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    /// Leading dims of each head that rotate (even); 0 rotates the whole head.
    pub dims: u32,
    /// Frequency base (10000 for Llama 2, 500000 for Llama 3).
    pub base: f32,
    /// Multiplies positions (1 for none).
    pub scale: f32,
    /// Interleaved pairs `(2i, 2i+1)`; otherwise half-split pairs `(i, i + dims/2)`.
    pub traditional: bool,
}

/// Where [`fused_rope_qk_append`] writes K and V.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvLayout {
    /// `[B, Hkv, L, D]`: the dense KV slab.
    DenseSlab,
    /// `[B, L, Hkv, D]`: rows of a paged pool.
    PagedRows,
}

/// q/k RoPE + K/V append layout in one dispatch (spec §4).
///
/// Shapes: `qkv [B, L, (Hq + 2·Hkv)·D]` (Q heads, then K heads, then V heads; `D` even),
/// `q_out [B, Hq, L, D]`, `k_out`/`v_out` `[B, Hkv, L, D]` ([`KvLayout::DenseSlab`]) or
/// `[B, L, Hkv, D]` ([`KvLayout::PagedRows`]); one dtype (f32, f16 or bf16). Token `t` of the
/// window sits at position `position_base + t`. Q and K are rotated, V is copied; nothing is
/// written into a cache: the caller appends `k_out`/`v_out`.
#[allow(clippy::too_many_arguments)] // one tensor per buffer, plus the RoPE settings
pub fn fused_rope_qk_append(
    dev: &Device,
    qkv: &Tensor,
    rope: Rope,
    position_base: i32,
    layout: KvLayout,
    q_out: &mut Tensor,
    k_out: &mut Tensor,
    v_out: &mut Tensor,
) -> Result<Ran, PortError> {
    if !(rope.base.is_finite() && rope.base > 0.0) {
        return Err(PortError::InvalidShape {
            kernel: KernelId::FusedRopeQkAppend.name(),
            msg: format!("rope base is {}, must be positive", rope.base),
        });
    }
    let p = RopeAppendParams {
        rope_dims: rope.dims,
        log2_base: (rope.base as f64).log2() as f32,
        scale: rope.scale,
        position_base,
        traditional: rope.traditional as u32,
        layout: match layout {
            KvLayout::DenseSlab => 0,
            KvLayout::PagedRows => 1,
        },
        ..Default::default()
    };
    kernel::fused_rope_qk_append(dev, &p, qkv, q_out, k_out, v_out)
}

/// One token per row from `softmax(logits / temperature)` by Gumbel-max (spec §5).
///
/// Shapes: `logits [B, V]` (f32, f16 or bf16; −inf entries allowed), `index [B]` u32. `key` is
/// the Philox key: draw a fresh one per call (the same key and logits give the same tokens on
/// every backend, however the rows are split). `temperature > 0`. A row that is all −inf yields
/// index 0. Rows are split over blocks by spec §5's rule with the device's resident blocks as
/// the target ([`gumbel_splits_on`]).
pub fn gumbel_max_sample(
    dev: &Device,
    logits: &Tensor,
    key: [u32; 2],
    temperature: f32,
    index: &mut Tensor,
) -> Result<Ran, PortError> {
    // A malformed shape is refused by the split launch.
    let splits = match *logits.shape() {
        [rows, vocab] => gumbel_splits_on(dev, logits.dtype(), rows, vocab),
        _ => 1,
    };
    gumbel_max_sample_split(dev, logits, key, temperature, splits, index)
}

/// Spec §5's split count for `rows × vocab` logits: enough blocks per row that a small batch
/// fills the device (64 blocks in all), at most one per chunk of 1024 entries and at most 64.
pub fn gumbel_splits(rows: usize, vocab: usize) -> usize {
    kiln_math::kernels::gumbel_max_sample::splits_for(rows, vocab)
}

/// The split count [`gumbel_max_sample`] takes on `dev`: as many blocks as the GPU holds of the
/// kernel at once, in one wave ([`splits_for_resident`]), so 64 rows of a large vocabulary fill
/// an H100 instead of taking one block each; spec §5's rule where the device cannot say.
pub fn gumbel_splits_on(dev: &Device, dtype: DType, rows: usize, vocab: usize) -> usize {
    match gumbel_resident_blocks(dev, dtype, rows, vocab) {
        Some(resident) => splits_for_resident(rows, vocab, resident),
        None => gumbel_splits(rows, vocab),
    }
}

/// Blocks of `gumbel_max_sample` that `dev` holds at once for `rows × vocab` logits of `dtype`;
/// `None` on the host ports, which cannot say.
pub fn gumbel_resident_blocks(
    dev: &Device,
    dtype: DType,
    rows: usize,
    vocab: usize,
) -> Option<usize> {
    let p = GumbelParams {
        rows: rows as u32,
        vocab: vocab as u32,
        splits: 1,
        ..Default::default()
    };
    let block = <GumbelMaxSample as kiln_math::KernelDef>::launch(&p).block;
    let words = kiln_math::Params::words(&p);
    crate::launch::resident_blocks(dev, KernelId::GumbelMaxSample, dtype, words, block)
}

/// Scratch bytes [`gumbel_max_sample_split`] takes for `rows` rows of `splits` splits (the
/// per-split maxima and their indices), for [`Device::reserve_scratch`].
pub fn gumbel_scratch_bytes(rows: usize, splits: usize) -> usize {
    crate::scratch_bytes(&[(DType::F32, rows * splits), (DType::U32, rows * splits)])
}

/// [`gumbel_max_sample`] with `splits` blocks per row (1 ..= 64); the token does not depend on
/// it. With more than one split, `gumbel_max_merge` takes the first maximum over the splits on
/// the device: a comparison of the splits' (value, index) pairs in the order the splits use
/// themselves, so every split count gives the same bits, without a copy back to the host.
pub fn gumbel_max_sample_split(
    dev: &Device,
    logits: &Tensor,
    key: [u32; 2],
    temperature: f32,
    splits: usize,
    index: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = KernelId::GumbelMaxSample;
    let rows = match *logits.shape() {
        [rows, _] => rows,
        _ => return Err(PortError::invalid(kernel, "logits must be [rows, vocab]")),
    };
    if index.shape() != [rows] {
        return Err(PortError::shape(kernel, "index", &[rows], index.shape()));
    }
    if !(1..=MAX_SPLITS).contains(&splits) {
        return Err(PortError::invalid(
            kernel,
            format!("splits is {splits}, must be in 1..={MAX_SPLITS}"),
        ));
    }
    let p = GumbelParams {
        key0: key[0],
        key1: key[1],
        temperature,
        ..Default::default()
    };
    let mut scratch = dev.scratch(gumbel_scratch_bytes(rows, splits))?;
    if splits == 1 {
        // One split: the kernel's per-split index is the token.
        let mut vals = scratch.tensor(DType::F32, &[rows])?;
        return kernel::gumbel_max_sample(dev, &p, logits, &mut vals, index);
    }
    let mut vals = scratch.tensor(DType::F32, &[rows, splits])?;
    let mut idxs = scratch.tensor(DType::U32, &[rows, splits])?;
    let split = kernel::gumbel_max_sample(dev, &p, logits, &mut vals, &mut idxs)?;
    let merge = kernel::gumbel_max_merge(dev, &GumbelMergeParams::default(), &vals, &idxs, index)?;
    // Report the fallback if either step took it.
    Ok(if merge.is_fallback() { merge } else { split })
}

/// How [`speculative_accept`] decides whether the target keeps a draft token (spec §6.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcceptRule {
    /// Modified rejection sampling: accept `t` iff `u · q(t) ≤ p(t)`; on rejection emit from
    /// `normalize(max(p − q, 0))`. Needs the exact `q` each draft was drawn from.
    Stochastic,
    /// Draw `x ~ p`, emit it, keep going iff it equals the draft.
    SamplerMatch,
    /// `x = argmax p` (greedy target), emit it, keep going iff it equals the draft.
    Greedy,
}

/// Speculative-decoding acceptance (spec §6.6): per row, walks the drafts in order, emits the
/// accepted ones and one more token (the correction at the first rejection, or a bonus token
/// from the last position when every draft is accepted). Emitted tokens follow the target law.
///
/// Shapes: `target_probs [B, N+1, V]` (the target's distribution at each verify position,
/// f32), `draft_probs [B, N, V]` (f32; read by [`AcceptRule::Stochastic`] only),
/// `draft_tokens [B, N]` u32 (an id ≥ V is rejected); outputs `tokens [B, N+1]` u32 (the
/// emitted tokens, then `u32::MAX`) and `emitted [B]` u32 (accepted drafts + 1). `key` is the
/// Philox key, fresh per call.
#[allow(clippy::too_many_arguments)] // one tensor per buffer, plus rule and key
pub fn speculative_accept(
    dev: &Device,
    target_probs: &Tensor,
    draft_probs: &Tensor,
    draft_tokens: &Tensor,
    rule: AcceptRule,
    key: [u32; 2],
    tokens: &mut Tensor,
    emitted: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = SpeculativeParams {
        key0: key[0],
        key1: key[1],
        rule: match rule {
            AcceptRule::Stochastic => RULE_STOCHASTIC,
            AcceptRule::SamplerMatch => RULE_SAMPLER_MATCH,
            AcceptRule::Greedy => RULE_GREEDY,
        },
        ..Default::default()
    };
    kernel::speculative_accept(
        dev,
        &p,
        target_probs,
        draft_probs,
        draft_tokens,
        tokens,
        emitted,
    )
}

pub use crate::paged::launch::{
    paged_attention_decode, paged_attention_decode_v2_partial, paged_attention_merge_states,
};
