//! The Llama decode step as kiln ops, one token at a time, over buffers made once: embedding
//! (affine or dense) → per layer [add+RMSNorm → q/k/v projection → RoPE+append into the paged
//! cache → paged decode attention → output projection → add+RMSNorm → SwiGLU MLP] → final
//! add+RMSNorm → LM head. Activations are f32.
//!
//! The residual stream is carried by `fused_add_rms_norm`: the embedding is written into the
//! residual and the first norm adds a row of zeros, so every later norm adds the sublayer's
//! output in the same pass that normalises it.

use super::weights::{GateUp, QkvProjection, Weights};
use super::{DecodeError, KvCache, LlamaConfig, Matrix};
use kiln::math::kernels::fused_silu_mul::SiluMulParams;
use kiln::ops::{self, KvLayout, Rope};
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
    q: Tensor,
    q_heads: Tensor,
    attn: Tensor,
    attn_flat: Tensor,
    o: Tensor,
    gate: Option<(Tensor, Tensor)>,
    act: Tensor,
    down: Tensor,
}

impl Activations {
    fn new(dev: &Device, cfg: &LlamaConfig, split_mlp: bool) -> Result<Activations, PortError> {
        let t = |shape: &[usize]| Tensor::zeros(dev, DType::F32, shape);
        let (h, nq, d) = (cfg.hidden, cfg.heads, cfg.head_dim);
        let qkv = t(&[1, cfg.qkv_width()])?;
        let q = t(&[1, nq, 1, d])?;
        let attn = t(&[1, nq, d])?;
        Ok(Activations {
            zeros: t(&[1, h])?,
            residual: t(&[1, h])?,
            h: t(&[1, h])?,
            qkv_rows: qkv.reshape(&[1, 1, cfg.qkv_width()])?,
            qkv,
            q_heads: q.reshape(&[1, nq, d])?,
            q,
            attn_flat: attn.reshape(&[1, nq * d])?,
            attn,
            o: t(&[1, h])?,
            gate: if split_mlp {
                Some((t(&[1, cfg.ffn])?, t(&[1, cfg.ffn])?))
            } else {
                None
            },
            act: t(&[1, cfg.ffn])?,
            down: t(&[1, h])?,
        })
    }
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
        let split_mlp = weights
            .layers
            .iter()
            .any(|l| matches!(l.gate_up, GateUp::Split { .. }));
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
        self.run(token, position, Some(logits))
    }

    /// [`Model::step`] for a prompt token whose logits nobody reads: its K and V join the
    /// cache, and the final norm and the LM head (a vocabulary-wide projection) are skipped.
    pub fn prefill_step(&mut self, token: u32, position: usize) -> Result<(), DecodeError> {
        self.run(token, position, None)
    }

    fn run(
        &mut self,
        token: u32,
        position: usize,
        logits: Option<&mut Tensor>,
    ) -> Result<(), DecodeError> {
        let cfg = &self.cfg;
        if token as usize >= cfg.vocab {
            return Err(DecodeError::TokenOutOfVocab {
                id: token,
                vocab: cfg.vocab,
            });
        }
        let position_i32 = i32::try_from(position).map_err(|_| DecodeError::ContextFull {
            position,
            capacity: self.kv.capacity(),
        })?;
        let (dev, a, eps) = (&self.dev, &mut self.acts, cfg.rms_eps);
        self.kv.see_through(position)?;
        match &self.weights.embed {
            Matrix::Quantized(t) => ops::embedding_affine(dev, t, &[token], &mut a.residual)?,
            Matrix::Dense(t) => ops::embedding(dev, t, &[token], &mut a.residual)?,
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
            match &w.qkv {
                QkvProjection::Fused(m) => {
                    m.apply(dev, &a.h, &mut a.qkv)?;
                }
                QkvProjection::Split(ms) => {
                    let mut col = 0;
                    for m in ms.iter() {
                        let mut part = a.qkv.view(col, &[1, m.rows()])?;
                        m.apply(dev, &a.h, &mut part)?;
                        col += m.rows();
                    }
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
            match (&w.gate_up, &mut a.gate) {
                (GateUp::Interleaved(gu), _) => {
                    ops::qlinear_silu_mul(dev, &a.h, gu, None, &mut a.act)?;
                }
                (GateUp::Split { gate, up }, Some((g, u))) => {
                    gate.apply(dev, &a.h, g)?;
                    up.apply(dev, &a.h, u)?;
                    let p = SiluMulParams::default();
                    ops::kernel::fused_silu_mul(dev, &p, g, u, &mut a.act)?;
                }
                (GateUp::Split { .. }, None) => {
                    unreachable!("split MLP buffers are made for split weights")
                }
            }
            w.down.apply(dev, &a.act, &mut a.down)?;
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
