//! A Llama GGUF's tensors on a device: quantized matrices repacked exactly into kiln's affine
//! layout (`kiln::quant::repack`) and uploaded as [`QuantizedWeight`]s, dense ones as f32.
//!
//! Two fusions cut launches per layer where the formats allow: q, k and v rows stacked into one
//! projection (one `qlinear` instead of three), and gate and up rows interleaved for
//! `ops::qlinear_silu_mul` (the MLP's activation in the same pass). A model whose q/k/v or
//! gate/up differ in format keeps them apart. A tied LM head reuses the embedding table.

use super::hybrid::HybridLayer;
pub(crate) use super::projection::quantized_bytes;
pub use super::projection::{HostMatrix, Matrix, QkvProjection};
use super::{DecodeError, LlamaConfig};
use kiln::ops::{self, MoeExperts, QuantizedWeight};
use kiln::quant::{GgufFile, Repacked};
use kiln::{DType, Device, Tensor};

/// The MLP's gate and up projections.
#[derive(Debug)]
pub enum GateUp {
    /// Gate and up rows interleaved, run by `ops::qlinear_silu_mul` (SwiGLU in the same pass).
    Interleaved(QuantizedWeight),
    /// Apart: two projections, then `fused_silu_mul`.
    Split {
        /// The gate projection.
        gate: Matrix,
        /// The up projection.
        up: Matrix,
    },
}

impl GateUp {
    /// `gate` and `up` on `dev`: interleaved where both are affine of one format, else apart.
    pub fn upload(dev: &Device, gate: &HostMatrix, up: &HostMatrix) -> Result<GateUp, DecodeError> {
        Ok(match (gate, up) {
            (HostMatrix::Affine(g), HostMatrix::Affine(u)) if g.format() == u.format() => {
                GateUp::Interleaved(QuantizedWeight::upload(dev, &ops::interleave_rows(g, u)?)?)
            }
            _ => GateUp::Split {
                gate: gate.upload(dev)?,
                up: up.upload(dev)?,
            },
        })
    }
}

/// A layer's MLP.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per layer: a few hundred bytes either way
pub enum Mlp {
    /// SwiGLU: gate and up, then down.
    Dense {
        /// Gate and up projections.
        gate_up: GateUp,
        /// Down projection.
        down: Matrix,
    },
    /// Mixture of experts: the router's logits, the top k experts (`ops::moe_route`), their
    /// SwiGLU MLPs summed by score (`ops::moe_experts_routed`).
    Moe {
        /// The router `[experts, hidden]`.
        router: Matrix,
        /// The stacked experts.
        experts: MoeExperts,
        /// Device bytes of the experts' codes, scales and biases.
        expert_bytes: usize,
    },
}

/// Per-head RMSNorm gains of the queries and keys, `[head_dim]` each (Qwen3).
#[derive(Debug)]
pub struct QkNorm {
    /// The query heads' gain.
    pub q: Tensor,
    /// The key heads' gain.
    pub k: Tensor,
}

/// One transformer block's weights.
#[derive(Debug)]
pub struct LayerWeights {
    /// RMSNorm gain before attention, `[hidden]`.
    pub attn_norm: Tensor,
    /// q/k/v projection.
    pub qkv: QkvProjection,
    /// Query and key head norms, where the model has them.
    pub qk_norm: Option<QkNorm>,
    /// Attention output projection.
    pub wo: Matrix,
    /// RMSNorm gain before the MLP, `[hidden]`.
    pub ffn_norm: Tensor,
    /// The MLP.
    pub mlp: Mlp,
}

/// Every weight of a Llama model on one device. Loaders upload dense tensors (norm gains, dense
/// matrices) as f32; a [`super::Model`] rounds them into its activation dtype when it is built
/// ([`Weights::convert_dense`]).
#[derive(Debug)]
pub struct Weights {
    /// The token embedding table `[vocab, hidden]` (the LM head too when tied).
    pub embed: Matrix,
    /// The blocks of a transformer stack (empty for a hybrid one).
    pub layers: Vec<LayerWeights>,
    /// The layers of a hybrid stack (empty for a transformer one).
    pub hybrid: Vec<HybridLayer>,
    /// The final RMSNorm gain, `[hidden]`.
    pub output_norm: Tensor,
    /// A separate LM head `[vocab, hidden]`; `None` when the embedding is tied.
    pub lm_head: Option<Matrix>,
}

impl Weights {
    /// Reads, repacks and uploads every tensor `cfg` needs from `f`.
    pub fn load(f: &mut GgufFile, cfg: &LlamaConfig, dev: &Device) -> Result<Weights, DecodeError> {
        let (h, kvw) = (cfg.hidden, cfg.kv_heads * cfg.head_dim);
        let qw = cfg.heads * cfg.head_dim;
        let embed = read_matrix(f, "token_embd.weight", cfg.vocab, h)?;
        let lm_head = match f.tensor("output.weight") {
            Some(_) => Some(read_matrix(f, "output.weight", cfg.vocab, h)?.upload(dev)?),
            None => None,
        };
        let mut layers = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            let name = |t: &str| format!("blk.{l}.{t}.weight");
            let q = read_matrix(f, &name("attn_q"), qw, h)?;
            let k = read_matrix(f, &name("attn_k"), kvw, h)?;
            let v = read_matrix(f, &name("attn_v"), kvw, h)?;
            let qkv = match HostMatrix::stack(&[&q, &k, &v]) {
                Some(m) => QkvProjection::Fused(m.upload(dev)?),
                None => {
                    QkvProjection::Split(Box::new([q.upload(dev)?, k.upload(dev)?, v.upload(dev)?]))
                }
            };
            let gate = read_matrix(f, &name("ffn_gate"), cfg.ffn, h)?;
            let up = read_matrix(f, &name("ffn_up"), cfg.ffn, h)?;
            let gate_up = GateUp::upload(dev, &gate, &up)?;
            layers.push(LayerWeights {
                attn_norm: read_vector(f, &name("attn_norm"), h, dev)?,
                qkv,
                qk_norm: None,
                wo: read_matrix(f, &name("attn_output"), h, qw)?.upload(dev)?,
                ffn_norm: read_vector(f, &name("ffn_norm"), h, dev)?,
                mlp: Mlp::Dense {
                    gate_up,
                    down: read_matrix(f, &name("ffn_down"), h, cfg.ffn)?.upload(dev)?,
                },
            });
        }
        Ok(Weights {
            embed: embed.upload(dev)?,
            layers,
            hybrid: Vec::new(),
            output_norm: read_vector(f, "output_norm.weight", h, dev)?,
            lm_head,
        })
    }

    /// Device bytes of every weight.
    pub fn bytes(&self) -> usize {
        self.bytes_with_experts(1.0)
    }

    /// Device bytes one decode step of `batch` tokens reads: every weight once (a tied LM
    /// head reads the whole table), but of each MoE layer's experts only the share the tokens
    /// route to: `k / experts` for one token; for several, the expected share of experts at
    /// least one of them picks when routes are uniform and independent,
    /// `1 − (1 − k / experts)^batch` (synthetic weights and random prompts route that way).
    pub fn bytes_read_per_step(&self, cfg: &LlamaConfig, batch: usize) -> usize {
        let share = cfg.moe.map_or(1.0, |m| {
            1.0 - (1.0 - m.k as f64 / m.experts as f64).powi(batch.max(1) as i32)
        });
        self.bytes_with_experts(share)
    }

    fn bytes_with_experts(&self, expert_share: f64) -> usize {
        let mut n = self.embed.bytes() + self.output_norm.byte_len();
        n += self.lm_head.as_ref().map_or(0, Matrix::bytes);
        for l in &self.layers {
            n += l.attn_norm.byte_len() + l.ffn_norm.byte_len() + l.wo.bytes();
            n += l
                .qk_norm
                .as_ref()
                .map_or(0, |q| q.q.byte_len() + q.k.byte_len());
            n += l.qkv.bytes();
            n += match &l.mlp {
                Mlp::Dense { gate_up, down } => {
                    down.bytes()
                        + match gate_up {
                            GateUp::Interleaved(w) => quantized_bytes(w),
                            GateUp::Split { gate, up } => gate.bytes() + up.bytes(),
                        }
                }
                Mlp::Moe {
                    router,
                    expert_bytes,
                    ..
                } => router.bytes() + (*expert_bytes as f64 * expert_share) as usize,
            };
        }
        n + self
            .hybrid
            .iter()
            .map(|l| l.bytes(expert_share))
            .sum::<usize>()
    }
}

/// Checks that `name` exists with ggml dims `expected` (row length first).
fn check_dims(f: &GgufFile, name: &str, expected: &[u64]) -> Result<(), DecodeError> {
    let info = f
        .tensor(name)
        .ok_or_else(|| DecodeError::MissingTensor(name.to_string()))?;
    if info.dims != expected {
        return Err(DecodeError::TensorShape {
            tensor: name.to_string(),
            got: info.dims.clone(),
            expected: expected.to_vec(),
        });
    }
    Ok(())
}

/// The `[rows, cols]` matrix `name`, repacked.
pub fn read_matrix(
    f: &mut GgufFile,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<HostMatrix, DecodeError> {
    check_dims(f, name, &[cols as u64, rows as u64])?;
    let ggml_type = f.tensor(name).map(|t| t.ggml_type);
    let bytes = f.tensor_data(name)?;
    let ggml_type = ggml_type.ok_or_else(|| DecodeError::MissingTensor(name.to_string()))?;
    Ok(
        match kiln::quant::repack(name, ggml_type, &[cols as u64, rows as u64], &bytes)? {
            Repacked::Affine(t) => HostMatrix::Affine(t),
            Repacked::Dense { dtype, bytes } => HostMatrix::Dense {
                rows,
                cols,
                values: widen(name, dtype, &bytes)?,
            },
        },
    )
}

/// The dense `[len]` vector `name` as an f32 tensor on `dev`.
fn read_vector(
    f: &mut GgufFile,
    name: &str,
    len: usize,
    dev: &Device,
) -> Result<Tensor, DecodeError> {
    check_dims(f, name, &[len as u64])?;
    let ggml_type = f.tensor(name).map(|t| t.ggml_type);
    let bytes = f.tensor_data(name)?;
    let ggml_type = ggml_type.ok_or_else(|| DecodeError::MissingTensor(name.to_string()))?;
    match kiln::quant::repack(name, ggml_type, &[len as u64], &bytes)? {
        Repacked::Dense { dtype, bytes } => Ok(Tensor::from_slice(
            dev,
            &[len],
            &widen(name, dtype, &bytes)?,
        )?),
        Repacked::Affine(_) => Err(DecodeError::BadTensor {
            tensor: name.to_string(),
            why: format!("a norm gain must be dense, not {ggml_type}"),
        }),
    }
}

/// Little-endian f32, f16 or bf16 bytes as f32 values.
pub(super) fn widen(name: &str, dtype: DType, bytes: &[u8]) -> Result<Vec<f32>, DecodeError> {
    use kiln::math::{Bf16, Element, F16};
    let pairs = || {
        bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
    };
    Ok(match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        DType::F16 => pairs().map(|b| F16(b).to_f32()).collect(),
        DType::Bf16 => pairs().map(|b| Bf16(b).to_f32()).collect(),
        other => {
            return Err(DecodeError::BadTensor {
                tensor: name.to_string(),
                why: format!("dense {} values are not supported", other.name()),
            })
        }
    })
}
