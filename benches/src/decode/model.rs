//! The Llama decode step as kiln ops, one token per sequence of a batch decoded in lockstep
//! (every sequence at the same position), over buffers made once: embedding (affine or dense) →
//! per layer [add+RMSNorm → q/k/v projection → RoPE+append into the paged cache → paged decode
//! attention → output projection → add+RMSNorm → SwiGLU MLP] → final add+RMSNorm → LM head.
//! Activations are `[B, …]` in the model's [`ActDtype`] (f32 by default, or bf16: the
//! residual, every projection's input and output, the KV pools; attention's query and output
//! stay f32, as `paged_decode_planned` requires): every projection runs the batch's rows in one
//! launch (`qlinear` reads the weights once for up to `MAX_M` rows). Logits: `qlinear`'s `y`
//! has `x`'s dtype, and the samplers read f32 (the greedy draw and the filtered sampler take
//! nothing else), so for f32 logits the LM head runs on the final normed row widened exactly to
//! f32 and writes them in f32 (widening bf16 logits instead is a gather per vocabulary entry,
//! far dearer than the head's f32 `x`); logits in the activation dtype take it at that dtype.
//!
//! RoPE+append and the q/k head norms run once per sequence: each sequence's K/V slot is a row
//! of its own pages, and a projection's output for a batch is `[B, N]`, so a sequence's q, k and
//! v are contiguous only in its own row. Where q, k and v come from separate projections at
//! batch > 1, their rows are gathered into each sequence's row of the fused layout (the dense
//! `embedding` kernel as a device row copy).
//!
//! The residual stream is carried by `fused_add_rms_norm`: the embedding is written into the
//! residual and the first norm adds a row of zeros, so every later norm adds the sublayer's
//! output in the same pass that normalises it.

use super::activations::{Activations, LastOut, MlpActivations};
use super::hybrid::{mamba2_step, MambaStates, Mixer};
use super::weights::{GateUp, Mlp, QkNorm, QkvProjection, Weights};
use super::{ActDtype, DecodeError, KvCache, LlamaConfig, Matrix, MixerKind};
use kiln::math::kernels::embedding::EmbeddingParams;
use kiln::math::kernels::embedding_affine::EmbeddingAffineParams;
use kiln::math::kernels::fused_silu_mul::SiluMulParams;
use kiln::math::kernels::qlinear::{scale_code, MAX_M};
use kiln::ops::{
    self, embedding_scratch_bytes, moe_block_on, moe_block_scratch_bytes, moe_scratch_bytes,
    KvLayout, MoeBlockPath, MoeRouter, Rope,
};
use kiln::paged::paged_decode_planned;
use kiln::quant::GgufFile;
use kiln::{DType, Device, Tensor};

/// Where a step's token ids come from, one per sequence.
#[derive(Clone, Copy)]
enum Tokens<'t> {
    /// The host (checked against the vocabulary, uploaded through the scratch region).
    Host(&'t [u32]),
    /// A u32 `[B]` on the device.
    Device(&'t Tensor),
}

/// A Llama model on a device with its KV cache for a batch of sequences: feed it one token
/// per sequence per position.
pub struct Model {
    cfg: LlamaConfig,
    dev: Device,
    weights: Weights,
    kv: KvCache,
    /// A hybrid stack's Mamba2 states.
    states: Option<MambaStates>,
    acts: Activations,
    batch: usize,
    act: ActDtype,
}

impl Model {
    /// Loads `f`'s weights onto `dev` with a KV cache of `capacity` tokens (at most the
    /// model's trained context).
    pub fn load(f: &mut GgufFile, dev: &Device, capacity: usize) -> Result<Model, DecodeError> {
        let cfg = LlamaConfig::from_gguf(f)?;
        let weights = Weights::load(f, &cfg, dev)?;
        Model::new(cfg, weights, dev, capacity)
    }

    /// A model over weights already on `dev`, for one sequence.
    pub fn new(
        cfg: LlamaConfig,
        weights: Weights,
        dev: &Device,
        capacity: usize,
    ) -> Result<Model, DecodeError> {
        Model::batched(cfg, weights, dev, capacity, 1)
    }

    /// A model over weights already on `dev` for `batch` sequences (1 to `MAX_M`) decoded in
    /// lockstep, each with a cache of `capacity` tokens.
    pub fn batched(
        cfg: LlamaConfig,
        weights: Weights,
        dev: &Device,
        capacity: usize,
        batch: usize,
    ) -> Result<Model, DecodeError> {
        Model::with_act_dtype(cfg, weights, dev, capacity, batch, ActDtype::F32)
    }

    /// [`Model::batched`] with activations, residual and KV pools in `act`; the weights' dense
    /// tensors are rounded into it once ([`Weights::convert_dense`]).
    pub fn with_act_dtype(
        cfg: LlamaConfig,
        mut weights: Weights,
        dev: &Device,
        capacity: usize,
        batch: usize,
        act: ActDtype,
    ) -> Result<Model, DecodeError> {
        if batch == 0 || batch > MAX_M {
            return Err(DecodeError::Bench(format!(
                "batch {batch}: a step runs 1 to {MAX_M} sequences (one projection launch)"
            )));
        }
        let split_mlp = weights.layers.iter().any(|l| {
            matches!(
                l.mlp,
                Mlp::Dense {
                    gate_up: GateUp::Split { .. },
                    ..
                }
            )
        });
        // The step's temporaries come from the scratch region: sized now, a warm step (and a
        // recorded one) allocates nothing.
        let mut scratch = embedding_scratch_bytes(batch);
        if let (Some(m), Some(Mlp::Moe { experts, .. })) =
            (cfg.moe, weights.layers.first().map(|l| &l.mlp))
        {
            scratch = scratch.max(moe_scratch_bytes(experts, batch, m.k));
        }
        for moe in weights.hybrid.iter().filter_map(|l| l.moe.as_ref()) {
            scratch = scratch.max(moe_block_scratch_bytes(&moe.block, batch, act.dtype()));
        }
        dev.reserve_scratch(scratch)?;
        let count = |kind| {
            weights
                .hybrid
                .iter()
                .filter(|l| l.mixer_kind() == Some(kind))
                .count()
        };
        let (attention_layers, states) = match &cfg.hybrid {
            None => (weights.layers.len(), None),
            Some(hy) => {
                let mamba = count(MixerKind::Mamba2);
                let states = MambaStates::new(dev, &hy.mamba, mamba, batch, act.dtype())?;
                (count(MixerKind::Attention), Some(states))
            }
        };
        let capacity = capacity.min(cfg.context);
        weights.convert_dense(act.dtype())?;
        Ok(Model {
            kv: KvCache::new(dev, &cfg, attention_layers, capacity, batch, act.dtype())?,
            states,
            acts: Activations::new(dev, &cfg, split_mlp, batch, act)?,
            cfg,
            dev: dev.clone(),
            weights,
            batch,
            act,
        })
    }

    /// The dtype of its activations, residual stream and KV pools.
    pub fn act_dtype(&self) -> ActDtype {
        self.act
    }

    /// Sequences each step runs.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The model's config.
    pub fn config(&self) -> &LlamaConfig {
        &self.cfg
    }

    /// The device it runs on.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Tokens the KV cache holds per sequence.
    pub fn capacity(&self) -> usize {
        self.kv.capacity()
    }

    /// Device bytes of weights one decode step reads: each weight once for the whole batch;
    /// of MoE experts, the share the batch's tokens route to (see
    /// [`Weights::bytes_read_per_step`]).
    pub fn weight_bytes_read_per_step(&self) -> usize {
        self.weights.bytes_read_per_step(&self.cfg, self.batch)
    }

    /// Device bytes of the weights and of the per-sequence caches (the KV pools and a hybrid
    /// stack's Mamba2 states).
    pub fn bytes(&self) -> (usize, usize) {
        let states = self.states.as_ref().map_or(0, MambaStates::bytes);
        (self.weights.bytes(), self.kv.bytes() + states)
    }

    /// Device bytes of the Mamba2 states (both copies of each).
    pub fn state_bytes(&self) -> usize {
        self.states.as_ref().map_or(0, MambaStates::bytes)
    }

    /// Layers with attention (those the KV cache holds pools for).
    pub fn attention_layers(&self) -> usize {
        self.kv.layers()
    }

    /// The Mamba2 states' bytes (waits for the device; empty without Mamba2 layers): what a
    /// run saves to repeat decode steps from the same point, since unlike the KV rows of a
    /// position the states carry every earlier step.
    pub fn save_states(&self) -> Result<Vec<Vec<u8>>, DecodeError> {
        Ok(match &self.states {
            Some(s) => s.snapshot()?,
            None => Vec::new(),
        })
    }

    /// Puts back what [`Model::save_states`] read.
    pub fn restore_states(&mut self, saved: &[Vec<u8>]) -> Result<(), DecodeError> {
        match &mut self.states {
            Some(s) => s.restore(saved),
            None if saved.is_empty() => Ok(()),
            None => Err(DecodeError::Bench("no Mamba2 states to restore".into())),
        }
    }

    /// Runs `token` at `position` (its K and V join the cache; earlier positions must have run
    /// in this sequence) and writes the next-token logits into `logits [1, vocab]` (f32, or the
    /// activation dtype: see the module doc).
    /// Everything is enqueued; read `logits` to wait. A model of batch 1 only.
    pub fn step(
        &mut self,
        token: u32,
        position: usize,
        logits: &mut Tensor,
    ) -> Result<(), DecodeError> {
        self.step_batch(&[token], position, logits)
    }

    /// [`Model::step`] for every sequence: `tokens[b]` at `position` of sequence `b`, the
    /// logits into `logits [B, vocab]`.
    pub fn step_batch(
        &mut self,
        tokens: &[u32],
        position: usize,
        logits: &mut Tensor,
    ) -> Result<(), DecodeError> {
        self.check_tokens(tokens)?;
        self.kv.see_through(position)?;
        self.run(Tokens::Host(tokens), position, Some(logits))
    }

    /// [`Model::step`] for a prompt token whose logits nobody reads: its K and V join the
    /// cache, and the final norm and the LM head (a vocabulary-wide projection) are skipped.
    pub fn prefill_step(&mut self, token: u32, position: usize) -> Result<(), DecodeError> {
        self.prefill_batch(&[token], position)
    }

    /// [`Model::prefill_step`] for every sequence: `tokens[b]` at `position` of sequence `b`.
    pub fn prefill_batch(&mut self, tokens: &[u32], position: usize) -> Result<(), DecodeError> {
        self.check_tokens(tokens)?;
        self.kv.see_through(position)?;
        self.run(Tokens::Host(tokens), position, None)
    }

    /// Makes the cache visible through `position` for [`Model::enqueue_step`] (the step's
    /// attention plan, enqueued host-to-device writes).
    pub fn set_position(&mut self, position: usize) -> Result<(), DecodeError> {
        self.kv.see_through(position)
    }

    /// The launches of [`Model::step_batch`] alone, the token ids read on the device from
    /// `tokens` (u32 `[B]`, say the sampler's output; an id past the vocabulary embeds as
    /// zeros), after [`Model::set_position`]: no host data goes to the device, so what this
    /// enqueues can be recorded once per position and replayed (a CUDA graph).
    pub fn enqueue_step(
        &mut self,
        tokens: &Tensor,
        position: usize,
        logits: &mut Tensor,
    ) -> Result<(), DecodeError> {
        if tokens.dtype() != DType::U32 || tokens.numel() != self.batch {
            return Err(DecodeError::Bench(format!(
                "the device tokens must be {} u32, got {} {:?}",
                self.batch,
                tokens.dtype().name(),
                tokens.shape()
            )));
        }
        self.run(Tokens::Device(tokens), position, Some(logits))
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<(), DecodeError> {
        if tokens.len() != self.batch {
            return Err(DecodeError::Bench(format!(
                "{} tokens for a batch of {}",
                tokens.len(),
                self.batch
            )));
        }
        match tokens.iter().find(|&&t| t as usize >= self.cfg.vocab) {
            Some(&id) => Err(DecodeError::TokenOutOfVocab {
                id,
                vocab: self.cfg.vocab,
            }),
            None => Ok(()),
        }
    }

    fn run(
        &mut self,
        tokens: Tokens,
        position: usize,
        logits: Option<&mut Tensor>,
    ) -> Result<(), DecodeError> {
        let cfg = &self.cfg;
        let position_i32 = i32::try_from(position).map_err(|_| DecodeError::ContextFull {
            position,
            capacity: self.kv.capacity(),
        })?;
        let (dev, a, eps) = (&self.dev, &mut self.acts, cfg.rms_eps);
        match (&self.weights.embed, tokens) {
            (Matrix::Quantized(t), Tokens::Host(ids)) => {
                ops::embedding_affine(dev, t, ids, &mut a.residual)?
            }
            (Matrix::Dense(t), Tokens::Host(ids)) => ops::embedding(dev, t, ids, &mut a.residual)?,
            (Matrix::Quantized(t), Tokens::Device(ids)) => {
                let format = t.format();
                let p = EmbeddingAffineParams {
                    bits: format.bits(),
                    group_size: format.group_size(),
                    scale_dtype: scale_code(format.scale_dtype()),
                    ..Default::default()
                };
                let (w_q, scales, biases) = t.buffers();
                ops::kernel::embedding_affine(dev, &p, ids, w_q, scales, biases, &mut a.residual)?
            }
            (Matrix::Dense(t), Tokens::Device(ids)) => {
                let p = EmbeddingParams::default();
                ops::kernel::embedding(dev, &p, ids, t, &mut a.residual)?
            }
        };
        let rope = Rope {
            dims: cfg.rope_dims as u32,
            base: cfg.rope_base,
            scale: 1.0,
            // GGUF's llama q/k rows are permuted for ggml's adjacent-pair rotation; HF/MLX
            // checkpoints keep the half-split order.
            traditional: cfg.rope_traditional,
        };
        if !self.weights.hybrid.is_empty() {
            return self.run_hybrid(position, logits);
        }
        let mut x = &a.zeros;
        for (l, w) in self.weights.layers.iter().enumerate() {
            ops::fused_add_rms_norm(dev, x, &mut a.residual, &w.attn_norm, eps, &mut a.h)?;
            let at = Attend {
                layer: l,
                cache: l,
                position,
                rope: Some((rope, position_i32)),
            };
            attend(dev, cfg, &self.kv, a, &w.qkv, w.qk_norm.as_ref(), &w.wo, at)?;
            ops::fused_add_rms_norm(dev, &a.o, &mut a.residual, &w.ffn_norm, eps, &mut a.h)?;
            match (&w.mlp, &mut a.mlp) {
                (Mlp::Dense { gate_up, down }, MlpActivations::Dense { gate, act }) => {
                    match (gate_up, gate) {
                        (GateUp::Interleaved(gu), _) => {
                            ops::qlinear_silu_mul(dev, &a.h, gu, None, act)?;
                        }
                        (GateUp::Split { gate, up }, Some((g, u))) => {
                            gate.apply(dev, &a.h, g)?;
                            up.apply(dev, &a.h, u)?;
                            let p = SiluMulParams::default();
                            ops::kernel::fused_silu_mul(dev, &p, g, u, act)?;
                        }
                        (GateUp::Split { .. }, None) => {
                            unreachable!("split MLP buffers are made for split weights")
                        }
                    }
                    down.apply(dev, act, &mut a.down)?;
                }
                (
                    Mlp::Moe {
                        router, experts, ..
                    },
                    MlpActivations::Moe {
                        logits,
                        ids,
                        scores,
                    },
                ) => {
                    let renormalize = cfg.moe.is_some_and(|m| m.renormalize);
                    router.apply(dev, &a.h, logits)?;
                    let rule = MoeRouter::Softmax { renormalize };
                    ops::moe_route(dev, logits, rule, None, ids, scores)?;
                    ops::moe_experts_routed(dev, &a.h, experts, ids, scores, 8, &mut a.down)?;
                }
                _ => {
                    return Err(DecodeError::BadTensor {
                        tensor: format!("blk.{l}.ffn"),
                        why: "the layer's MLP is not the kind the config says".into(),
                    })
                }
            }
            x = &a.down;
        }
        let Some(logits) = logits else {
            return Ok(());
        };
        let last = if self.weights.layers.is_empty() {
            LastOut::Zeros
        } else {
            LastOut::Down
        };
        let head = self.weights.lm_head.as_ref().unwrap_or(&self.weights.embed);
        a.norm_and_head(dev, &self.weights.output_norm, eps, last, head, logits)
    }

    /// The layers of a hybrid stack after the embedding (in `acts.residual`), then the head.
    fn run_hybrid(
        &mut self,
        position: usize,
        logits: Option<&mut Tensor>,
    ) -> Result<(), DecodeError> {
        let (cfg, dev, a) = (&self.cfg, &self.dev, &mut self.acts);
        let eps = cfg.rms_eps;
        // Which buffer holds the sublayer output the next norm adds.
        let mut pending_o = false;
        let (mut attention, mut mamba) = (0, 0);
        let mut first = true;
        for (l, layer) in self.weights.hybrid.iter().enumerate() {
            if let Some((norm, mixer)) = &layer.mixer {
                let x = if first {
                    &a.zeros
                } else if pending_o {
                    &a.o
                } else {
                    &a.down
                };
                ops::fused_add_rms_norm(dev, x, &mut a.residual, norm, eps, &mut a.h)?;
                match mixer {
                    Mixer::Attention { qkv, wo } => {
                        let at = Attend {
                            layer: l,
                            cache: attention,
                            position,
                            rope: None,
                        };
                        attend(dev, cfg, &self.kv, a, qkv, None, wo, at)?;
                        attention += 1;
                    }
                    Mixer::Mamba2(w) => {
                        let states = self.states.as_mut().ok_or_else(|| {
                            DecodeError::Bench("a Mamba2 layer without states".into())
                        })?;
                        let acts = a.mamba.as_mut().ok_or_else(|| {
                            DecodeError::Bench("a Mamba2 layer without its buffers".into())
                        })?;
                        let parity = position % 2;
                        mamba2_step(dev, cfg, w, states, mamba, parity, acts, &a.h, &mut a.o)?;
                        mamba += 1;
                    }
                }
                (pending_o, first) = (true, false);
            }
            if let Some(moe) = &layer.moe {
                let x = if first {
                    &a.zeros
                } else if pending_o {
                    &a.o
                } else {
                    &a.down
                };
                ops::fused_add_rms_norm(dev, x, &mut a.residual, &moe.norm, eps, &mut a.h)?;
                // The fused decode kernels at every batch a step takes (≤ MAX_M tokens): each
                // token's sum is then the bits it has decoded alone.
                moe_block_on(
                    dev,
                    &a.h,
                    &moe.block,
                    Some(MoeBlockPath::Fused),
                    &mut a.down,
                )?;
                (pending_o, first) = (false, false);
            }
        }
        let Some(logits) = logits else {
            return Ok(());
        };
        let last = if first {
            LastOut::Zeros
        } else if pending_o {
            LastOut::O
        } else {
            LastOut::Down
        };
        let head = self.weights.lm_head.as_ref().unwrap_or(&self.weights.embed);
        a.norm_and_head(dev, &self.weights.output_norm, eps, last, head, logits)
    }
}

/// The layer's q/k/v projection into `a.qkv [B, (Hq + 2·Hkv)·D]`, each sequence's row laid
/// out as RoPE+append reads it: q heads, k heads, v heads, q and k head-normalised where the
/// model has q/k norms.
fn project_qkv(
    dev: &Device,
    cfg: &LlamaConfig,
    layer: usize,
    qkv: &QkvProjection,
    qk_norm: Option<&QkNorm>,
    a: &mut Activations,
) -> Result<(), DecodeError> {
    let batch = a.h.shape()[0];
    let ms = match qkv {
        QkvProjection::Fused(m) if qk_norm.is_none() => {
            m.apply(dev, &a.h, &mut a.qkv)?;
            return Ok(());
        }
        QkvProjection::Split(ms) => ms,
        QkvProjection::Fused(_) => {
            return Err(DecodeError::BadTensor {
                tensor: format!("blk.{layer}.attn_q_norm"),
                why: "q/k head norms need q, k and v as three projections".into(),
            })
        }
    };
    let (nq, nkv, d) = (cfg.heads, cfg.kv_heads, cfg.head_dim);
    let width = cfg.qkv_width();
    // Column offset in a row, width and head count of q, k and v, and the head norm gain
    // of each (none for v, none without q/k norms).
    let parts = [
        (0, nq * d, nq, qk_norm.map(|n| &n.q)),
        (nq * d, nkv * d, nkv, qk_norm.map(|n| &n.k)),
        ((nq + nkv) * d, nkv * d, nkv, None),
    ];
    for (m, &(col, cols, heads, gain)) in ms.iter().zip(&parts) {
        // At batch 1 a part without a norm is a contiguous slice of the row: written in place.
        if batch == 1 && gain.is_none() {
            m.apply(dev, &a.h, &mut a.qkv.view(col, &[1, cols])?)?;
            continue;
        }
        let raw = a.raw.as_ref().ok_or_else(|| {
            DecodeError::Bench("no staging rows for separate q/k/v projections".into())
        })?;
        // Parts lie one after another in `raw`, each `[B, cols]`.
        let mut staged = raw.view(batch * col, &[batch, cols])?;
        m.apply(dev, &a.h, &mut staged)?;
        for b in 0..batch {
            let at = b * width + col;
            match gain {
                Some(gain) => {
                    // Adding zeros leaves the staged rows as they were.
                    let zeros = a.head_zeros.view(0, &[heads, d])?;
                    let mut rows = raw.view(batch * col + b * cols, &[heads, d])?;
                    let mut out = a.qkv.view(at, &[heads, d])?;
                    ops::fused_add_rms_norm(dev, &zeros, &mut rows, gain, cfg.rms_eps, &mut out)?;
                }
                None => {
                    let ids = a.seq_ids.as_ref().ok_or_else(|| {
                        DecodeError::Bench("no sequence ids for the row gather".into())
                    })?;
                    let p = EmbeddingParams::default();
                    let mut out = a.qkv.view(at, &[1, cols])?;
                    ops::kernel::embedding(dev, &p, &ids.view(b, &[1])?, &staged, &mut out)?;
                }
            }
        }
    }
    Ok(())
}

/// Where an attention sublayer reads and writes: its layer (for errors), its cache pools, the
/// position its K/V join, and RoPE with the position it rotates by (`None`: no positional
/// encoding — rotating by position 0 is the identity, and RoPE+append still appends).
struct Attend {
    layer: usize,
    cache: usize,
    position: usize,
    rope: Option<(Rope, i32)>,
}

/// Attention for `a.h [B, hidden]` into `a.o [B, hidden]`: the q/k/v projection, RoPE+append
/// per sequence, paged decode over every sequence's cache, the output projection.
#[allow(clippy::too_many_arguments)] // the sublayer's weights, cache and activations
fn attend(
    dev: &Device,
    cfg: &LlamaConfig,
    kv: &KvCache,
    a: &mut Activations,
    qkv: &QkvProjection,
    qk_norm: Option<&QkNorm>,
    wo: &Matrix,
    at: Attend,
) -> Result<(), DecodeError> {
    project_qkv(dev, cfg, at.layer, qkv, qk_norm, a)?;
    let identity = Rope {
        dims: cfg.head_dim as u32,
        base: cfg.rope_base,
        scale: 1.0,
        traditional: false,
    };
    let (rope, rotate_by) = at.rope.unwrap_or((identity, 0));
    let width = cfg.qkv_width();
    for b in 0..a.h.shape()[0] {
        let (mut k_row, mut v_row) = kv.slot(at.cache, b, at.position)?;
        ops::fused_rope_qk_append(
            dev,
            &a.qkv_rows.view(b * width, &[1, 1, width])?,
            rope,
            rotate_by,
            KvLayout::PagedRows,
            &mut a.rope_q(b)?,
            &mut k_row,
            &mut v_row,
        )?;
    }
    a.widen_q(dev)?;
    let (k_pool, v_pool, plan) = kv.layer(at.cache);
    paged_decode_planned(dev, &a.q_heads, k_pool, v_pool, plan, 0.0, &mut a.attn)?;
    a.project_attn(dev, wo)
}

#[cfg(test)]
mod tests {
    use super::super::synthetic::{tiny_hybrid, tiny_llama, tiny_moe};
    use super::*;
    use kiln::rng::Rng;

    /// A batch of sequences decoded in lockstep gives each sequence the logits it gets alone,
    /// bit for bit, at every activation dtype: per-row projections, per-sequence caches and
    /// routes.
    #[test]
    fn a_batched_step_is_each_sequence_decoded_alone() {
        let dev = Device::cpu();
        let seed = kiln::parity::base_seed();
        eprintln!("seed {seed} (replay with KILN_SEED={seed})");
        let shapes = [tiny_llama, tiny_moe, tiny_hybrid];
        for (act, shape) in ActDtype::ALL
            .into_iter()
            .flat_map(|a| shapes.map(|s| (a, s())))
        {
            let cfg = shape.config;
            let (batch, positions, vocab) = (3, 5, cfg.vocab);
            let model = |b: usize| {
                let w = Weights::synthetic(&cfg, &dev, 11).unwrap();
                Model::with_act_dtype(cfg.clone(), w, &dev, 16, b, act).unwrap()
            };
            let mut rng = Rng::new(seed);
            let ids: Vec<u32> = (0..batch * positions)
                .map(|_| (rng.next_u64() % vocab as u64) as u32)
                .collect();
            let mut together = model(batch);
            let mut logits = Tensor::zeros(&dev, DType::F32, &[batch, vocab]).unwrap();
            let mut alone: Vec<Model> = (0..batch).map(|_| model(1)).collect();
            let mut row = Tensor::zeros(&dev, DType::F32, &[1, vocab]).unwrap();
            for p in 0..positions {
                let at = &ids[p * batch..(p + 1) * batch];
                together.step_batch(at, p, &mut logits).unwrap();
                let got = logits.to_vec::<f32>().unwrap();
                for (b, m) in alone.iter_mut().enumerate() {
                    m.step(at[b], p, &mut row).unwrap();
                    let want = row.to_vec::<f32>().unwrap();
                    let mine = &got[b * vocab..(b + 1) * vocab];
                    let same = mine
                        .iter()
                        .zip(&want)
                        .all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "{} {act}: sequence {b} at position {p}", shape.name);
                }
            }
            // Wrong token counts and batches past one launch's rows are refused.
            assert!(matches!(
                together.step_batch(&ids[..1], positions, &mut logits),
                Err(DecodeError::Bench(_))
            ));
            let w = Weights::synthetic(&cfg, &dev, 11).unwrap();
            assert!(matches!(
                Model::batched(cfg.clone(), w, &dev, 16, MAX_M + 1),
                Err(DecodeError::Bench(_))
            ));
        }
    }
}
