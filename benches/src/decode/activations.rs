//! The decode step's activations, made once with the model, `[B, …]` each.

use super::hybrid::MambaActivations;
use super::LlamaConfig;
use kiln::{DType, Device, PortError, Tensor};

/// The activations of one step, and views of them under the shapes the next op reads.
pub(super) struct Activations {
    pub(super) zeros: Tensor,
    pub(super) residual: Tensor,
    pub(super) h: Tensor,
    pub(super) qkv: Tensor,
    pub(super) qkv_rows: Tensor,
    /// Zeros `[Hq, D]`: the "sublayer output" the q/k head norms add.
    pub(super) head_zeros: Tensor,
    /// Separate q, k and v projections' outputs before their head norms or their gather into
    /// `qkv`, part after part (`[B, Hq·D]`, then `[B, Hkv·D]` twice); made for q/k head norms
    /// and for batches above 1.
    pub(super) raw: Option<Tensor>,
    /// u32 `[B]` holding `0..B`: a sequence's row index for the row-gathering copy.
    pub(super) seq_ids: Option<Tensor>,
    pub(super) q: Tensor,
    pub(super) q_heads: Tensor,
    pub(super) attn: Tensor,
    pub(super) attn_flat: Tensor,
    pub(super) o: Tensor,
    pub(super) mlp: MlpActivations,
    pub(super) down: Tensor,
    /// A hybrid stack's Mamba2 temporaries.
    pub(super) mamba: Option<MambaActivations>,
}

/// The MLP's temporaries.
pub(super) enum MlpActivations {
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
    pub(super) fn new(
        dev: &Device,
        cfg: &LlamaConfig,
        split_mlp: bool,
        batch: usize,
    ) -> Result<Activations, PortError> {
        let t = |shape: &[usize]| Tensor::zeros(dev, DType::F32, shape);
        let (b, h, nq, d) = (batch, cfg.hidden, cfg.heads, cfg.head_dim);
        let width = cfg.qkv_width();
        let qkv = t(&[b, width])?;
        let q = t(&[b, nq, 1, d])?;
        let attn = t(&[b, nq, d])?;
        let mlp = match cfg.moe {
            Some(m) => MlpActivations::Moe {
                logits: t(&[b, m.experts])?,
                ids: Tensor::zeros(dev, DType::U32, &[b, m.k])?,
                scores: t(&[b, m.k])?,
            },
            None => MlpActivations::Dense {
                gate: if split_mlp {
                    Some((t(&[b, cfg.ffn])?, t(&[b, cfg.ffn])?))
                } else {
                    None
                },
                act: t(&[b, cfg.ffn])?,
            },
        };
        let seq_ids: Vec<u32> = (0..b as u32).collect();
        Ok(Activations {
            zeros: t(&[b, h])?,
            residual: t(&[b, h])?,
            h: t(&[b, h])?,
            qkv_rows: qkv.reshape(&[b, 1, width])?,
            qkv,
            head_zeros: t(&[nq, d])?,
            raw: if cfg.qk_norm || b > 1 {
                Some(t(&[b * width])?)
            } else {
                None
            },
            seq_ids: if b > 1 {
                Some(Tensor::from_slice(dev, &[b], &seq_ids)?)
            } else {
                None
            },
            q_heads: q.reshape(&[b, nq, d])?,
            q,
            attn_flat: attn.reshape(&[b, nq * d])?,
            attn,
            o: t(&[b, h])?,
            mlp,
            down: t(&[b, h])?,
            mamba: match &cfg.hybrid {
                Some(hy) => Some(MambaActivations::new(dev, &hy.mamba, b)?),
                None => None,
            },
        })
    }
}
