//! The activation dtype a [`super::Model`] runs in: its activations, its residual stream and its
//! KV pools, chosen when the model is built. f32 is the default (and what the logit traces
//! against transformers check); bf16 runs a 4-bit model's decode the way MLX and production
//! engines run a bf16 checkpoint's, and `qlinear` is faster with 16-bit `x`.
//!
//! Every op of the step takes one activation dtype for its tensors, so the dense tensors an op
//! reads beside the activations (norm gains, dense matrices, Mamba2's conv taps, `D` and gated
//! norm gain) are rounded once into it when the model is built
//! ([`Weights::convert_dense`]). What stays f32 is what the ops require or accept in f32: the
//! Mamba2 SSM state (`ssm_update` keeps its state in f32), `A_log` and `dt_bias` (read in
//! their stored dtype), a MoE router's scores and correction bias, attention's query and output
//! (`paged_decode_planned` reads and writes f32 whatever the pools' dtype), and the logits the
//! samplers read (see [`super::widen`]).

use super::hybrid::Mixer;
use super::weights::{GateUp, Mlp, QkvProjection};
use super::{DecodeError, Matrix, Weights};
use kiln::{DType, PortError, Tensor};

/// The dtype of a model's activations, residual stream and KV pools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ActDtype {
    /// f32 throughout.
    #[default]
    F32,
    /// bf16: activations, residual and KV pools; f32 where an op requires it.
    Bf16,
}

impl ActDtype {
    /// Every activation dtype the driver runs.
    pub const ALL: [ActDtype; 2] = [ActDtype::F32, ActDtype::Bf16];

    /// kiln's dtype of the activation tensors.
    pub fn dtype(self) -> DType {
        match self {
            ActDtype::F32 => DType::F32,
            ActDtype::Bf16 => DType::Bf16,
        }
    }

    /// `f32` or `bf16`, as `--act-dtype` takes it.
    pub fn name(self) -> &'static str {
        self.dtype().name()
    }

    /// Parses `f32` or `bf16`; anything else is a typed refusal naming the accepted values.
    pub fn parse(s: &str) -> Result<ActDtype, DecodeError> {
        let refuse = |why: &str| DecodeError::ActDtype {
            got: s.to_string(),
            why: why.to_string(),
        };
        match s.trim() {
            "f32" => Ok(ActDtype::F32),
            "bf16" => Ok(ActDtype::Bf16),
            // Attention's query and the LM head's input (for the samplers' f32 logits) are f32;
            // kiln has no cast op, and a bf16 value widens exactly by a gather of 16-bit halves,
            // an f16 one does not.
            "f16" => Err(refuse(
                "expected f32 or bf16 (f16 is not built: the step widens its attention query and \
                 LM head input to f32 by a gather of bf16 halves, which f16 values have no \
                 equivalent of)",
            )),
            _ => Err(refuse("expected f32 or bf16")),
        }
    }
}

impl std::fmt::Display for ActDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ActDtype {
    type Err = DecodeError;

    fn from_str(s: &str) -> Result<ActDtype, DecodeError> {
        ActDtype::parse(s)
    }
}

/// A dense matrix's values (a quantized one keeps its own scale dtype).
fn dense(m: &mut Matrix) -> Option<&mut Tensor> {
    match m {
        Matrix::Dense(t) => Some(t),
        Matrix::Quantized(_) => None,
    }
}

/// The dense matrices of a q/k/v projection.
fn dense_qkv(p: &mut QkvProjection) -> Vec<&mut Tensor> {
    match p {
        QkvProjection::Fused(m) => dense(m).into_iter().collect(),
        QkvProjection::Split(ms) => ms.iter_mut().filter_map(dense).collect(),
    }
}

/// `t` rounded to nearest even into `dtype` (through f32, which holds every f32, f16 and bf16
/// value exactly: one rounding); unchanged when it already is `dtype`.
fn round_into(t: &mut Tensor, dtype: DType) -> Result<(), PortError> {
    if t.dtype() == dtype {
        return Ok(());
    }
    let values = t.to_f32_vec()?;
    let dev = t.device().clone();
    *t = Tensor::from_f32(&dev, dtype, t.shape(), &values)?;
    Ok(())
}

impl Weights {
    /// Rounds every dense tensor that an op reads in the activations' dtype into `dtype`, once:
    /// RMSNorm gains (the layers', q/k heads', final), dense matrices (run by `linear`, or
    /// gathered by `embedding`), Mamba2's conv taps and bias, `D` and gated-norm gain. Left as
    /// stored: quantized weights, Mamba2's `A_log` and `dt_bias` (`ssm_update` reads each in its
    /// own dtype) and a MoE router's correction bias (f32 by `MoeBlock`'s contract). Loaders
    /// upload dense values as f32, so at f32 this changes nothing.
    pub fn convert_dense(&mut self, dtype: DType) -> Result<(), PortError> {
        for t in self.dense_tensors() {
            round_into(t, dtype)?;
        }
        Ok(())
    }

    /// The tensors [`Weights::convert_dense`] rounds.
    fn dense_tensors(&mut self) -> Vec<&mut Tensor> {
        let mut v: Vec<&mut Tensor> = Vec::new();
        v.extend(dense(&mut self.embed));
        v.extend(self.lm_head.as_mut().and_then(dense));
        v.push(&mut self.output_norm);
        for l in &mut self.layers {
            v.push(&mut l.attn_norm);
            v.push(&mut l.ffn_norm);
            v.extend(dense_qkv(&mut l.qkv));
            if let Some(n) = &mut l.qk_norm {
                v.extend([&mut n.q, &mut n.k]);
            }
            v.extend(dense(&mut l.wo));
            match &mut l.mlp {
                Mlp::Dense { gate_up, down } => {
                    if let GateUp::Split { gate, up } = gate_up {
                        v.extend(dense(gate));
                        v.extend(dense(up));
                    }
                    v.extend(dense(down));
                }
                Mlp::Moe { router, .. } => v.extend(dense(router)),
            }
        }
        for l in &mut self.hybrid {
            if let Some((norm, mixer)) = &mut l.mixer {
                v.push(norm);
                match mixer {
                    Mixer::Attention { qkv, wo } => {
                        v.extend(dense_qkv(qkv));
                        v.extend(dense(wo));
                    }
                    Mixer::Mamba2(m) => {
                        v.extend(dense(&mut m.in_proj));
                        v.extend(dense(&mut m.out_proj));
                        v.extend([&mut m.conv_weight, &mut m.conv_bias, &mut m.d, &mut m.norm]);
                    }
                }
            }
            if let Some(moe) = &mut l.moe {
                v.push(&mut moe.norm);
            }
        }
        v
    }
}
