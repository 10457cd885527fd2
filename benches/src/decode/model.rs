//! The Llama decode step as kiln ops, one token at a time, over buffers made once: embedding
//! (affine or dense) → per layer [add+RMSNorm → q/k/v projection → RoPE+append into the paged
//! cache → paged decode attention → output projection → add+RMSNorm → SwiGLU MLP] → final
//! add+RMSNorm → LM head. Activations are f32.
//!
//! The residual stream is carried by `fused_add_rms_norm`: the embedding is written into the
//! residual and the first norm adds a row of zeros, so every later norm adds the sublayer's
//! output in the same pass that normalises it.

use super::weights::{GateUp, Mlp, QkvProjection, Weights};
use super::{DecodeError, KvCache, LlamaConfig, Matrix};
use kiln::math::kernels::embedding::EmbeddingParams;
use kiln::math::kernels::embedding_affine::EmbeddingAffineParams;
use kiln::math::kernels::fused_silu_mul::SiluMulParams;
use kiln::math::kernels::qlinear::scale_code;
use kiln::ops::{self, embedding_scratch_bytes, moe_scratch_bytes, KvLayout, MoeRouter, Rope};
use kiln::paged::paged_attention_decode_resident;
use kiln::quant::GgufFile;
use kiln::{DType, Device, PortError, Tensor};

/// The activations of one step, `[1, …]` each, and views of them under the shapes the next
/// op reads.
struct Activations {
    zeros: Tensor,
    residual: Tensor,
    h: Tensor,
    qkv: Tensor,
    qkv_rows: Tensor,
    /// Zeros `[Hq, D]`: the "sublayer output" the q/k head norms add.
    head_zeros: Tensor,
    /// The q and k projections before their head norms, `[1, (Hq + Hkv)·D]`.
    qk_raw: Option<Tensor>,
    q: Tensor,
    q_heads: Tensor,
    attn: Tensor,
    attn_flat: Tensor,
    o: Tensor,
    mlp: MlpActivations,
    down: Tensor,
}

/// The MLP's temporaries.
enum MlpActivations {
    Dense {
        /// Gate and up outputs when they are apart.
        gate: Option<(Tensor, Tensor)>,
        act: Tensor,
    },
    Moe {
        /// The router's logits `[1, E]`, the picked experts `[1, K]` and their scores.
        logits: Tensor,
        ids: Tensor,
        scores: Tensor,
    },
}

impl Activations {
    fn new(dev: &Device, cfg: &LlamaConfig, split_mlp: bool) -> Result<Activations, PortError> {
        let t = |shape: &[usize]| Tensor::zeros(dev, DType::F32, shape);
        let (h, nq, nkv, d) = (cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim);
        let qkv = t(&[1, cfg.qkv_width()])?;
        let q = t(&[1, nq, 1, d])?;
        let attn = t(&[1, nq, d])?;
        let mlp = match cfg.moe {
            Some(m) => MlpActivations::Moe {
                logits: t(&[1, m.experts])?,
                ids: Tensor::zeros(dev, DType::U32, &[1, m.k])?,
                scores: t(&[1, m.k])?,
            },
            None => MlpActivations::Dense {
                gate: if split_mlp {
                    Some((t(&[1, cfg.ffn])?, t(&[1, cfg.ffn])?))
                } else {
                    None
                },
                act: t(&[1, cfg.ffn])?,
            },
        };
        Ok(Activations {
            zeros: t(&[1, h])?,
            residual: t(&[1, h])?,
            h: t(&[1, h])?,
            qkv_rows: qkv.reshape(&[1, 1, cfg.qkv_width()])?,
            qkv,
            head_zeros: t(&[nq, d])?,
            qk_raw: if cfg.qk_norm {
                Some(t(&[1, (nq + nkv) * d])?)
            } else {
                None
            },
            q_heads: q.reshape(&[1, nq, d])?,
            q,
            attn_flat: attn.reshape(&[1, nq * d])?,
            attn,
            o: t(&[1, h])?,
            mlp,
            down: t(&[1, h])?,
        })
    }
}

/// Where a step's token id comes from.
#[derive(Clone, Copy)]
enum Token<'t> {
    /// The host (checked against the vocabulary, uploaded through the scratch region).
    Host(u32),
    /// A u32 `[1]` on the device.
    Device(&'t Tensor),
}

/// A Llama model on a device with its KV cache: feed it one token per position.
pub struct Model {
    cfg: LlamaConfig,
    dev: Device,
    weights: Weights,
    kv: KvCache,
    acts: Activations,
}

impl Model {
    /// Loads `f`'s weights onto `dev` with a KV cache of `capacity` tokens (at most the
    /// model's trained context).
    pub fn load(f: &mut GgufFile, dev: &Device, capacity: usize) -> Result<Model, DecodeError> {
        let cfg = LlamaConfig::from_gguf(f)?;
        let weights = Weights::load(f, &cfg, dev)?;
        Model::new(cfg, weights, dev, capacity)
    }

    /// A model over weights already on `dev`.
    pub fn new(
        cfg: LlamaConfig,
        weights: Weights,
        dev: &Device,
        capacity: usize,
    ) -> Result<Model, DecodeError> {
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
        let mut scratch = embedding_scratch_bytes(1);
        if let (Some(m), Some(Mlp::Moe { experts, .. })) =
            (cfg.moe, weights.layers.first().map(|l| &l.mlp))
        {
            scratch = scratch.max(moe_scratch_bytes(experts, 1, m.k));
        }
        dev.reserve_scratch(scratch)?;
        Ok(Model {
            kv: KvCache::new(dev, &cfg, capacity.min(cfg.context))?,
            acts: Activations::new(dev, &cfg, split_mlp)?,
            cfg,
            dev: dev.clone(),
            weights,
        })
    }

    /// The model's config.
    pub fn config(&self) -> &LlamaConfig {
        &self.cfg
    }

    /// The device it runs on.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Tokens the KV cache holds.
    pub fn capacity(&self) -> usize {
        self.kv.capacity()
    }

    /// Device bytes of weights one decode token reads (of MoE experts, the routed share).
    pub fn weight_bytes_read_per_token(&self) -> usize {
        self.weights.bytes_read_per_token(&self.cfg)
    }

    /// Device bytes of the weights and of the KV cache.
    pub fn bytes(&self) -> (usize, usize) {
        (self.weights.bytes(), self.kv.bytes())
    }

    /// Runs `token` at `position` (its K and V join the cache; earlier positions must have run
    /// in this sequence) and writes the next-token logits into `logits [1, vocab]` (f32).
    /// Everything is enqueued; read `logits` to wait.
    pub fn step(
        &mut self,
        token: u32,
        position: usize,
        logits: &mut Tensor,
    ) -> Result<(), DecodeError> {
        self.check_token(token)?;
        self.kv.see_through(position)?;
        self.run(Token::Host(token), position, Some(logits))
    }

    /// [`Model::step`] for a prompt token whose logits nobody reads: its K and V join the
    /// cache, and the final norm and the LM head (a vocabulary-wide projection) are skipped.
    pub fn prefill_step(&mut self, token: u32, position: usize) -> Result<(), DecodeError> {
        self.check_token(token)?;
        self.kv.see_through(position)?;
        self.run(Token::Host(token), position, None)
    }

    /// Makes the cache visible through `position` for [`Model::enqueue_step`] (the block
    /// table's length, an enqueued host-to-device write).
    pub fn set_position(&mut self, position: usize) -> Result<(), DecodeError> {
        self.kv.see_through(position)
    }

    /// The launches of [`Model::step`] alone, the token id read on the device from `token`
    /// (u32 `[1]`, say the sampler's output; an id past the vocabulary embeds as zeros), after
    /// [`Model::set_position`]: no host data goes to the device, so what this enqueues can be
    /// recorded once per position and replayed (a CUDA graph).
    pub fn enqueue_step(
        &mut self,
        token: &Tensor,
        position: usize,
        logits: &mut Tensor,
    ) -> Result<(), DecodeError> {
        if token.dtype() != DType::U32 || token.numel() != 1 {
            return Err(DecodeError::Bench(format!(
                "the device token must be one u32, got {} {:?}",
                token.dtype().name(),
                token.shape()
            )));
        }
        self.run(Token::Device(token), position, Some(logits))
    }

    fn check_token(&self, token: u32) -> Result<(), DecodeError> {
        if token as usize >= self.cfg.vocab {
            return Err(DecodeError::TokenOutOfVocab {
                id: token,
                vocab: self.cfg.vocab,
            });
        }
        Ok(())
    }

    fn run(
        &mut self,
        token: Token,
        position: usize,
        logits: Option<&mut Tensor>,
    ) -> Result<(), DecodeError> {
        let cfg = &self.cfg;
        let position_i32 = i32::try_from(position).map_err(|_| DecodeError::ContextFull {
            position,
            capacity: self.kv.capacity(),
        })?;
        let (dev, a, eps) = (&self.dev, &mut self.acts, cfg.rms_eps);
        match (&self.weights.embed, token) {
            (Matrix::Quantized(t), Token::Host(id)) => {
                ops::embedding_affine(dev, t, &[id], &mut a.residual)?
            }
            (Matrix::Dense(t), Token::Host(id)) => ops::embedding(dev, t, &[id], &mut a.residual)?,
            (Matrix::Quantized(t), Token::Device(ids)) => {
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
            (Matrix::Dense(t), Token::Device(ids)) => {
                let p = EmbeddingParams::default();
                ops::kernel::embedding(dev, &p, ids, t, &mut a.residual)?
            }
        };
        let rope = Rope {
            dims: cfg.rope_dims as u32,
            base: cfg.rope_base,
            scale: 1.0,
            // GGUF's llama q/k rows are permuted for ggml's adjacent-pair rotation.
            traditional: true,
        };
        let mut x = &a.zeros;
        for (l, w) in self.weights.layers.iter().enumerate() {
            ops::fused_add_rms_norm(dev, x, &mut a.residual, &w.attn_norm, eps, &mut a.h)?;
            match (&w.qkv, &w.qk_norm, &mut a.qk_raw) {
                (QkvProjection::Fused(m), None, _) => {
                    m.apply(dev, &a.h, &mut a.qkv)?;
                }
                (QkvProjection::Split(ms), None, _) => {
                    let mut col = 0;
                    for m in ms.iter() {
                        let mut part = a.qkv.view(col, &[1, m.rows()])?;
                        m.apply(dev, &a.h, &mut part)?;
                        col += m.rows();
                    }
                }
                (QkvProjection::Split(ms), Some(norm), Some(raw)) => {
                    // q and k land in `raw`, v in its place in qkv; each q and k head is then
                    // normalised into qkv (adding zeros leaves `raw` as it was).
                    let (nq, nkv, d) = (cfg.heads, cfg.kv_heads, cfg.head_dim);
                    let [wq, wk, wv] = &**ms;
                    wq.apply(dev, &a.h, &mut raw.view(0, &[1, nq * d])?)?;
                    wk.apply(dev, &a.h, &mut raw.view(nq * d, &[1, nkv * d])?)?;
                    wv.apply(dev, &a.h, &mut a.qkv.view((nq + nkv) * d, &[1, nkv * d])?)?;
                    for (at, heads, gain) in [(0, nq, &norm.q), (nq * d, nkv, &norm.k)] {
                        let zeros = a.head_zeros.view(0, &[heads, d])?;
                        let mut rows = raw.view(at, &[heads, d])?;
                        let mut out = a.qkv.view(at, &[heads, d])?;
                        ops::fused_add_rms_norm(dev, &zeros, &mut rows, gain, eps, &mut out)?;
                    }
                }
                _ => {
                    return Err(DecodeError::BadTensor {
                        tensor: format!("blk.{l}.attn_q_norm"),
                        why: "q/k head norms need q, k and v as three projections".into(),
                    })
                }
            }
            let (mut k_row, mut v_row) = self.kv.slot(l, position)?;
            ops::fused_rope_qk_append(
                dev,
                &a.qkv_rows,
                rope,
                position_i32,
                KvLayout::PagedRows,
                &mut a.q,
                &mut k_row,
                &mut v_row,
            )?;
            let (k_pool, v_pool, table) = self.kv.layer(l);
            paged_attention_decode_resident(
                dev,
                &a.q_heads,
                k_pool,
                v_pool,
                table,
                0.0,
                &mut a.attn,
            )?;
            w.wo.apply(dev, &a.attn_flat, &mut a.o)?;
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
        let norm = &self.weights.output_norm;
        ops::fused_add_rms_norm(dev, x, &mut a.residual, norm, eps, &mut a.h)?;
        let head = self.weights.lm_head.as_ref().unwrap_or(&self.weights.embed);
        head.apply(dev, &a.h, logits)?;
        Ok(())
    }
}
