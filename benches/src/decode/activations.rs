//! The decode step's activations, made once with the model, `[B, …]` each, in the model's
//! activation dtype except where an op requires f32: attention's query and output
//! (`paged_decode_planned`), a MoE router's scores (`moe_route`). At bf16 the query is staged in
//! bf16 (RoPE+append writes q beside the bf16 K/V rows) and widened into the f32 `q`, the
//! attention output is rounded into the output projection's bf16 input, and for f32 logits the
//! final norm's output is widened into the LM head's f32 input ([`super::widen`]).

use super::hybrid::MambaActivations;
use super::widen::{round_f32, Bf16Widen};
use super::{ActDtype, DecodeError, LlamaConfig, Matrix};
use kiln::ops;
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
    /// f32 `[B, Hq, 1, D]`: the query attention reads.
    q: Tensor,
    pub(super) q_heads: Tensor,
    /// Below f32: the query as RoPE+append writes it (`B·Hq·D` values), widened into `q`.
    q_staged: Option<Bf16Widen>,
    /// f32 `[B, Hq, D]`: attention's output.
    pub(super) attn: Tensor,
    attn_flat: Tensor,
    /// Below f32: `[B, Hq·D]`, attention's output rounded for the output projection.
    attn_rounded: Option<Tensor>,
    pub(super) o: Tensor,
    pub(super) mlp: MlpActivations,
    pub(super) down: Tensor,
    /// A hybrid stack's Mamba2 temporaries.
    pub(super) mamba: Option<MambaActivations>,
    /// Below f32: the final norm's output (`B·hidden` values) and its f32 widening `[B, hidden]`,
    /// the LM head's input where the logits are f32.
    head_in: Option<(Bf16Widen, Tensor)>,
}

/// The MLP's temporaries.
pub(super) enum MlpActivations {
    Dense {
        /// Gate and up outputs when they are apart.
        gate: Option<(Tensor, Tensor)>,
        act: Tensor,
    },
    Moe {
        /// The router's logits `[B, E]`, the picked experts `[B, K]` (u32) and their scores
        /// (f32, as `moe_route` writes them).
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
        act: ActDtype,
    ) -> Result<Activations, PortError> {
        let dtype = act.dtype();
        let t = |shape: &[usize]| Tensor::zeros(dev, dtype, shape);
        let f32s = |shape: &[usize]| Tensor::zeros(dev, DType::F32, shape);
        let (b, h, nq, d) = (batch, cfg.hidden, cfg.heads, cfg.head_dim);
        let width = cfg.qkv_width();
        let qkv = t(&[b, width])?;
        let q = f32s(&[b, nq, 1, d])?;
        let attn = f32s(&[b, nq, d])?;
        let below_f32 = act != ActDtype::F32;
        let mlp = match cfg.moe {
            Some(m) => MlpActivations::Moe {
                logits: t(&[b, m.experts])?,
                ids: Tensor::zeros(dev, DType::U32, &[b, m.k])?,
                scores: f32s(&[b, m.k])?,
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
            q_staged: if below_f32 {
                Some(Bf16Widen::new(dev, b * nq * d)?)
            } else {
                None
            },
            attn_flat: attn.reshape(&[b, nq * d])?,
            attn,
            attn_rounded: if below_f32 {
                Some(t(&[b, nq * d])?)
            } else {
                None
            },
            o: t(&[b, h])?,
            mlp,
            down: t(&[b, h])?,
            mamba: match &cfg.hybrid {
                Some(hy) => Some(MambaActivations::new(dev, &hy.mamba, b, dtype)?),
                None => None,
            },
            head_in: if below_f32 {
                Some((Bf16Widen::new(dev, b * h)?, f32s(&[b, h])?))
            } else {
                None
            },
        })
    }

    /// Where RoPE+append writes sequence `seq`'s query `[1, Hq, 1, D]`: the f32 query itself,
    /// or its bf16 staging.
    pub(super) fn rope_q(&self, seq: usize) -> Result<Tensor, DecodeError> {
        let [_, nq, _, d] = *self.q.shape() else {
            unreachable!("q is made [B, Hq, 1, D]")
        };
        let shape = [1, nq, 1, d];
        match &self.q_staged {
            Some(s) => s.staged(seq * nq * d, &shape),
            None => Ok(self.q.view(seq * nq * d, &shape)?),
        }
    }

    /// After RoPE+append: the staged query widened into `q` (nothing at f32).
    pub(super) fn widen_q(&mut self, dev: &Device) -> Result<(), DecodeError> {
        if let Some(s) = &self.q_staged {
            s.widen_into(dev, &mut self.q)?;
        }
        Ok(())
    }

    /// After attention: its output (rounded into the activation dtype below f32) through the
    /// output projection `wo` into `o`.
    pub(super) fn project_attn(&mut self, dev: &Device, wo: &Matrix) -> Result<(), DecodeError> {
        let x = match &mut self.attn_rounded {
            Some(rounded) => {
                round_f32(dev, &self.attn_flat, rounded)?;
                &*rounded
            }
            None => &self.attn_flat,
        };
        wo.apply(dev, x, &mut self.o)?;
        Ok(())
    }

    /// The last sublayer's output (in `last`) added into the residual and normalised, then the
    /// LM head `head` into `logits [B, vocab]`. Logits in the activation dtype take the head at
    /// that dtype; f32 ones (the samplers') below f32 take it on the normalised row widened
    /// exactly to f32, so they are written in f32 and never rounded to 16 bits.
    pub(super) fn norm_and_head(
        &mut self,
        dev: &Device,
        gain: &Tensor,
        eps: f32,
        last: LastOut,
        head: &Matrix,
        logits: &mut Tensor,
    ) -> Result<(), DecodeError> {
        let x = match last {
            LastOut::Zeros => &self.zeros,
            LastOut::O => &self.o,
            LastOut::Down => &self.down,
        };
        match &mut self.head_in {
            Some((staged, wide)) if logits.dtype() != self.h.dtype() => {
                let mut normed = staged.staged(0, self.h.shape())?;
                ops::fused_add_rms_norm(dev, x, &mut self.residual, gain, eps, &mut normed)?;
                staged.widen_into(dev, wide)?;
                head.apply(dev, wide, logits)?;
            }
            _ => {
                ops::fused_add_rms_norm(dev, x, &mut self.residual, gain, eps, &mut self.h)?;
                head.apply(dev, &self.h, logits)?;
            }
        }
        Ok(())
    }
}

/// Which buffer holds the last sublayer's output, the one the final norm adds.
#[derive(Clone, Copy)]
pub(super) enum LastOut {
    /// No sublayer ran: the step's zeros.
    Zeros,
    /// `o`: an attention or Mamba2 mixer's output.
    O,
    /// `down`: an MLP's or MoE block's output.
    Down,
}
