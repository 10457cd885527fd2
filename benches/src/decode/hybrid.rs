//! The layers of a hybrid stack (granite-4.0-h, Nemotron-H): each an optional sequence mixer
//! (attention over the paged cache, or a Mamba2 mixer with its conv and SSM states) and an
//! optional MoE block (`ops::moe_block`: router, routed experts, shared expert), each after
//! its own RMSNorm; and the Mamba2 decode step as kiln ops.
//!
//! Mamba2 for one token per sequence: `in_proj` (one projection for the batch) gives z, the
//! conv's channels (x, B, C) and dt; the conv step (SiLU), the SSM state update and the gated
//! RMSNorm run per sequence, since a sequence's x, B, C, z and dt are contiguous only within
//! its own row of the projection; `out_proj` runs the batch. The conv and SSM updates are out
//! of place: each layer keeps two copies of its states and a step reads the copy of its
//! position's parity and writes the other, so a recording of a position always reads and
//! writes the same buffers.

use super::config::{Mamba2Config, MixerKind};
use super::projection::{Matrix, QkvProjection};
use super::{DecodeError, LlamaConfig};
use kiln::ops::{self, MoeBlock, TimeStepLimits};
use kiln::{DType, Device, PortError, Tensor};

/// A Mamba2 mixer's weights: projections quantized, the rest f32 as loaded (a model rounds
/// the conv taps and bias, `d` and `norm` into its activation dtype; `a_log` and `dt_bias` stay).
#[derive(Debug)]
pub struct Mamba2Weights {
    /// `[I + C + H, hidden]`: z, then the conv's channels (x, B, C), then dt.
    pub in_proj: Matrix,
    /// `[C, k]`.
    pub conv_weight: Tensor,
    /// `[C]`.
    pub conv_bias: Tensor,
    /// `[H]`: `A = −exp(a_log)`.
    pub a_log: Tensor,
    /// `[H]`: the skip term.
    pub d: Tensor,
    /// `[H]`.
    pub dt_bias: Tensor,
    /// The gated norm's gain `[I]`.
    pub norm: Tensor,
    /// `[hidden, I]`.
    pub out_proj: Matrix,
}

/// A hybrid layer's sequence mixer.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per layer: a few hundred bytes either way
pub enum Mixer {
    /// Attention: the q/k/v projection and the output projection.
    Attention {
        /// q/k/v.
        qkv: QkvProjection,
        /// Output projection `[hidden, Hq·D]`.
        wo: Matrix,
    },
    /// A Mamba2 mixer.
    Mamba2(Mamba2Weights),
}

/// A MoE block and what its bytes are made of.
#[derive(Debug)]
pub struct HybridMoe {
    /// The RMSNorm gain before it, `[hidden]`.
    pub norm: Tensor,
    /// Router, experts and shared expert.
    pub block: MoeBlock,
    /// Device bytes of the routed experts.
    pub expert_bytes: usize,
    /// Device bytes every token reads: router, correction bias, shared expert.
    pub fixed_bytes: usize,
}

/// One layer of a hybrid stack.
#[derive(Debug)]
pub struct HybridLayer {
    /// The RMSNorm gain before the mixer and the mixer.
    pub mixer: Option<(Tensor, Mixer)>,
    /// The MoE block after it.
    pub moe: Option<HybridMoe>,
}

impl HybridLayer {
    /// Device bytes one step reads of it, with the routed experts at `expert_share`.
    pub fn bytes(&self, expert_share: f64) -> usize {
        let mut n = 0;
        if let Some((norm, mixer)) = &self.mixer {
            n += norm.byte_len();
            n += match mixer {
                Mixer::Attention { qkv, wo } => qkv.bytes() + wo.bytes(),
                Mixer::Mamba2(m) => {
                    m.in_proj.bytes()
                        + m.out_proj.bytes()
                        + [
                            &m.conv_weight,
                            &m.conv_bias,
                            &m.a_log,
                            &m.d,
                            &m.dt_bias,
                            &m.norm,
                        ]
                        .iter()
                        .map(|t| t.byte_len())
                        .sum::<usize>()
                }
            };
        }
        if let Some(m) = &self.moe {
            n += m.norm.byte_len() + m.fixed_bytes;
            n += (m.expert_bytes as f64 * expert_share) as usize;
        }
        n
    }

    /// The kind of its mixer.
    pub fn mixer_kind(&self) -> Option<MixerKind> {
        self.mixer.as_ref().map(|(_, m)| match m {
            Mixer::Attention { .. } => MixerKind::Attention,
            Mixer::Mamba2(_) => MixerKind::Mamba2,
        })
    }
}

/// Every Mamba2 layer's conv and SSM states, two copies each (read one, write the other).
pub(super) struct MambaStates {
    /// Per Mamba2 layer: `[B, k − 1, C]` twice, in the activation dtype (`causal_conv1d_update`
    /// takes its state in the dtype of its input).
    conv: Vec<[Tensor; 2]>,
    /// Per Mamba2 layer: f32 `[B, H, Dh, Ds]` twice (`ssm_update`'s state is f32 at any
    /// activation dtype).
    ssm: Vec<[Tensor; 2]>,
}

impl MambaStates {
    /// Zeroed states for `layers` Mamba2 layers of `batch` sequences, the conv states in `dtype`.
    pub(super) fn new(
        dev: &Device,
        m: &Mamba2Config,
        layers: usize,
        batch: usize,
        dtype: DType,
    ) -> Result<MambaStates, PortError> {
        let t = |dtype, shape: &[usize]| Tensor::zeros(dev, dtype, shape);
        let (mut conv, mut ssm) = (Vec::new(), Vec::new());
        for _ in 0..layers {
            let c = [batch, m.conv - 1, m.conv_channels()];
            conv.push([t(dtype, &c)?, t(dtype, &c)?]);
            let s = [batch, m.heads, m.head_dim, m.state];
            ssm.push([t(DType::F32, &s)?, t(DType::F32, &s)?]);
        }
        Ok(MambaStates { conv, ssm })
    }

    /// Device bytes of every copy.
    pub(super) fn bytes(&self) -> usize {
        self.conv
            .iter()
            .chain(&self.ssm)
            .flatten()
            .map(Tensor::byte_len)
            .sum()
    }

    /// Every state's bytes (waits for the device).
    pub(super) fn snapshot(&self) -> Result<Vec<Vec<u8>>, PortError> {
        self.conv
            .iter()
            .chain(&self.ssm)
            .flatten()
            .map(Tensor::to_bytes)
            .collect()
    }

    /// Puts back what [`MambaStates::snapshot`] read.
    pub(super) fn restore(&mut self, saved: &[Vec<u8>]) -> Result<(), DecodeError> {
        let mut all: Vec<&mut Tensor> = self
            .conv
            .iter_mut()
            .chain(self.ssm.iter_mut())
            .flatten()
            .collect();
        if all.len() != saved.len() {
            return Err(DecodeError::Bench(format!(
                "{} saved states for {} buffers",
                saved.len(),
                all.len()
            )));
        }
        for (t, bytes) in all.iter_mut().zip(saved) {
            t.write_bytes(bytes)?;
        }
        Ok(())
    }
}

/// A Mamba2 step's temporaries, `[B, …]` in the activation dtype.
pub(super) struct MambaActivations {
    zxbcdt: Tensor,
    conv_out: Tensor,
    y: Tensor,
    y_norm: Tensor,
}

impl MambaActivations {
    pub(super) fn new(
        dev: &Device,
        m: &Mamba2Config,
        batch: usize,
        dtype: DType,
    ) -> Result<MambaActivations, PortError> {
        let t = |cols: usize| Tensor::zeros(dev, dtype, &[batch, cols]);
        Ok(MambaActivations {
            zxbcdt: t(m.in_proj_rows())?,
            conv_out: t(m.conv_channels())?,
            y: t(m.inner())?,
            y_norm: t(m.inner())?,
        })
    }
}

/// Runs Mamba2 layer `layer` (its ordinal among the Mamba2 layers) for `h [B, hidden]` at a
/// position of parity `parity`, the output into `out [B, hidden]`.
#[allow(clippy::too_many_arguments)] // the layer, its states and temporaries, in and out
pub(super) fn mamba2_step(
    dev: &Device,
    cfg: &LlamaConfig,
    w: &Mamba2Weights,
    states: &mut MambaStates,
    layer: usize,
    parity: usize,
    a: &mut MambaActivations,
    h: &Tensor,
    out: &mut Tensor,
) -> Result<(), DecodeError> {
    let m = cfg
        .hybrid
        .as_ref()
        .map(|hy| hy.mamba)
        .ok_or_else(|| DecodeError::Bench("a Mamba2 layer in a stack without one".into()))?;
    let batch = h.shape()[0];
    let (inner, channels, rows) = (m.inner(), m.conv_channels(), m.in_proj_rows());
    let bc = m.groups * m.state;
    let limits = TimeStepLimits {
        min: m.dt_min,
        max: m.dt_max,
    };
    w.in_proj.apply(dev, h, &mut a.zxbcdt)?;
    let [conv_in, conv_next] = &mut states.conv[layer];
    let (conv_in, conv_out_state) = if parity == 0 {
        (&*conv_in, conv_next)
    } else {
        (&*conv_next, conv_in)
    };
    let [ssm_a, ssm_b] = &mut states.ssm[layer];
    let (ssm_in, ssm_out) = if parity == 0 {
        (&*ssm_a, ssm_b)
    } else {
        (&*ssm_b, ssm_a)
    };
    let conv_state = (m.conv - 1) * channels;
    let ssm_state = m.heads * m.head_dim * m.state;
    for b in 0..batch {
        let row = b * rows;
        let mut conv_out = a.conv_out.view(b * channels, &[1, channels])?;
        ops::causal_conv1d_update(
            dev,
            &a.zxbcdt.view(row + inner, &[1, channels])?,
            &w.conv_weight,
            Some(&w.conv_bias),
            &conv_in.view(b * conv_state, &[1, m.conv - 1, channels])?,
            &mut conv_out,
            &mut conv_out_state.view(b * conv_state, &[1, m.conv - 1, channels])?,
        )?;
        let at = b * channels;
        ops::ssm_update(
            dev,
            limits,
            &a.conv_out.view(at, &[1, 1, m.heads, m.head_dim])?,
            &w.a_log,
            &a.conv_out.view(at + inner, &[1, 1, m.groups, m.state])?,
            &a.conv_out
                .view(at + inner + bc, &[1, 1, m.groups, m.state])?,
            &w.d,
            &a.zxbcdt.view(row + inner + channels, &[1, 1, m.heads])?,
            &w.dt_bias,
            &ssm_in.view(b * ssm_state, &[1, m.heads, m.head_dim, m.state])?,
            &mut a.y.view(b * inner, &[1, 1, m.heads, m.head_dim])?,
            &mut ssm_out.view(b * ssm_state, &[1, m.heads, m.head_dim, m.state])?,
        )?;
        ops::gated_rms_norm(
            dev,
            &a.y.view(b * inner, &[1, inner])?,
            Some(&a.zxbcdt.view(row, &[1, inner])?),
            &w.norm,
            m.groups,
            cfg.rms_eps,
            &mut a.y_norm.view(b * inner, &[1, inner])?,
        )?;
    }
    w.out_proj.apply(dev, &a.y_norm, out)?;
    Ok(())
}
