//! Models at real shapes with synthetic weights in the real format, for `kiln bench --decode`:
//! a named shape gives a [`LlamaConfig`], and [`Weights::synthetic`] fills every projection
//! with MLX affine 4-bit codes (group 64, bf16 scales and biases) drawn from a seed, so a run
//! reads exactly the bytes a real checkpoint of that shape would, without downloading one.

use super::config::MoeConfig;
use super::weights::{
    quantized_bytes, GateUp, LayerWeights, Matrix, Mlp, QkNorm, QkvProjection, Weights,
};
use super::{DecodeError, LlamaConfig};
use kiln::ops::{MoeActivation, MoeExperts, QuantizedWeight};
use kiln::quant::AffineFormat;
use kiln::rng::Rng;
use kiln::{DType, Device, PortError, Tensor};

/// A named model shape the decode bench runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    /// The name the CSV rows carry and `--model` takes (a GGUF file's stem for a real model).
    pub name: String,
    /// Its sizes (RMSNorm epsilon and context as the published config says).
    pub config: LlamaConfig,
}

/// Meta's Llama-3.1-8B (`config.json` of meta-llama/Llama-3.1-8B: 32 layers, hidden 4096,
/// 32 query and 8 KV heads of 128, FFN 14336, vocab 128256, rope_theta 500000, rms_norm_eps
/// 1e-5). Its RoPE scaling (`llama3`) only changes frequencies past the original 8K context,
/// which a 640-token run never reaches, so plain RoPE reads the same bytes and launches.
pub fn llama_3_1_8b() -> ModelShape {
    ModelShape {
        name: "llama-3.1-8b".into(),
        config: LlamaConfig {
            layers: 32,
            hidden: 4096,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            ffn: 14336,
            vocab: 128256,
            rope_base: 500_000.0,
            rope_dims: 128,
            rms_eps: 1e-5,
            context: 131072,
            qk_norm: false,
            moe: None,
        },
    }
}

/// Qwen's Qwen3-30B-A3B (`config.json` of Qwen/Qwen3-30B-A3B: 48 layers, hidden 2048, 32
/// query and 4 KV heads of 128, q/k head RMSNorm, 128 experts of width 768 in every layer, 8
/// per token with `norm_topk_prob`, vocab 151936, untied LM head, rope_theta 1e6,
/// rms_norm_eps 1e-6).
pub fn qwen3_30b_a3b() -> ModelShape {
    ModelShape {
        name: "qwen3-30b-a3b".into(),
        config: LlamaConfig {
            layers: 48,
            hidden: 2048,
            heads: 32,
            kv_heads: 4,
            head_dim: 128,
            ffn: 6144,
            vocab: 151936,
            rope_base: 1_000_000.0,
            rope_dims: 128,
            rms_eps: 1e-6,
            context: 40960,
            qk_norm: true,
            moe: Some(MoeConfig {
                experts: 128,
                k: 8,
                expert_ffn: 768,
                renormalize: true,
            }),
        },
    }
}

/// A two-layer model small enough for a test on the cpu (every size a multiple of the
/// quantization group).
pub fn tiny_llama() -> ModelShape {
    ModelShape {
        name: "tiny-llama".into(),
        config: LlamaConfig {
            layers: 2,
            hidden: 64,
            heads: 4,
            kv_heads: 2,
            head_dim: 16,
            ffn: 128,
            vocab: 256,
            rope_base: 10_000.0,
            rope_dims: 16,
            rms_eps: 1e-5,
            context: 4096,
            qk_norm: false,
            moe: None,
        },
    }
}

/// [`tiny_llama`] with Qwen3-MoE's layer: q/k head norms, 8 experts, 2 per token.
pub fn tiny_moe() -> ModelShape {
    let mut config = tiny_llama().config;
    config.qk_norm = true;
    config.moe = Some(MoeConfig {
        experts: 8,
        k: 2,
        expert_ffn: 64,
        renormalize: true,
    });
    ModelShape {
        name: "tiny-moe".into(),
        config,
    }
}

/// Every shape `--model` accepts.
pub fn model_shapes() -> Vec<ModelShape> {
    vec![llama_3_1_8b(), qwen3_30b_a3b(), tiny_llama(), tiny_moe()]
}

/// The shape named `name`, or a refusal listing the names.
pub fn model_shape(name: &str) -> Result<ModelShape, DecodeError> {
    model_shapes()
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| {
            let names: Vec<_> = model_shapes().into_iter().map(|s| s.name).collect();
            DecodeError::UnknownModel(format!("`{name}` (known: {})", names.join(", ")))
        })
}

/// The format of every synthetic projection: MLX's default 4-bit quantization.
fn format() -> Result<AffineFormat, DecodeError> {
    AffineFormat::new(4, 64, DType::Bf16).map_err(|e| DecodeError::BadTensor {
        tensor: "synthetic".into(),
        why: e.to_string(),
    })
}

/// A `rows × cols` 4-bit weight with random codes; every group's scale is 2^-7 and its bias
/// −2^-4 (bf16 0x3c00 and 0xbd80), so a weight is (code − 8)·2^-7: centred, and the
/// activations of a deep random stack stay finite.
fn random_weight(
    dev: &Device,
    rows: usize,
    cols: usize,
    rng: &mut Rng,
) -> Result<QuantizedWeight, DecodeError> {
    let format = format()?;
    let per_row = cols * format.bits() as usize / 32;
    let codes: Vec<u32> = (0..rows * per_row).map(|_| rng.next_u64() as u32).collect();
    let groups = rows * cols / format.group_size() as usize;
    let scale_words = vec![0x3c00_3c00u32; groups.div_ceil(2)];
    let bias_words = vec![0xbd80_bd80u32; groups.div_ceil(2)];
    Ok(QuantizedWeight::from_parts(
        format,
        rows,
        cols,
        Tensor::from_slice(dev, &[rows, per_row], &codes)?,
        Tensor::from_slice(dev, &[scale_words.len()], &scale_words)?,
        Tensor::from_slice(dev, &[bias_words.len()], &bias_words)?,
    )?)
}

/// An RMSNorm gain of ones, f32 `[len]`.
fn ones(dev: &Device, len: usize) -> Result<Tensor, PortError> {
    Tensor::from_slice(dev, &[len], &vec![1.0f32; len])
}

/// A projection of `rows × cols` as a [`Matrix`].
fn random_matrix(
    dev: &Device,
    rows: usize,
    cols: usize,
    rng: &mut Rng,
) -> Result<Matrix, DecodeError> {
    Ok(Matrix::Quantized(random_weight(dev, rows, cols, rng)?))
}

/// A layer's MLP: dense SwiGLU (gate and up interleaved) or the stacked experts and router.
fn random_mlp(dev: &Device, cfg: &LlamaConfig, rng: &mut Rng) -> Result<Mlp, DecodeError> {
    let h = cfg.hidden;
    Ok(match cfg.moe {
        None => Mlp::Dense {
            gate_up: GateUp::Interleaved(random_weight(dev, 2 * cfg.ffn, h, rng)?),
            down: random_matrix(dev, h, cfg.ffn, rng)?,
        },
        Some(m) => {
            let gate = random_weight(dev, m.experts * m.expert_ffn, h, rng)?;
            let up = random_weight(dev, m.experts * m.expert_ffn, h, rng)?;
            let down = random_weight(dev, m.experts * h, m.expert_ffn, rng)?;
            let expert_bytes =
                quantized_bytes(&gate) + quantized_bytes(&up) + quantized_bytes(&down);
            Mlp::Moe {
                router: random_matrix(dev, m.experts, h, rng)?,
                experts: MoeExperts::new(m.experts, MoeActivation::SwiGlu, gate, Some(up), down)?,
                expert_bytes,
            }
        }
    })
}

impl Weights {
    /// Weights of `cfg`'s shape on `dev`, the same for the same `seed`, every projection
    /// 4-bit g64 with bf16 scales and norm gains of ones: q/k/v stacked (three projections
    /// where heads are normalised), gate and up interleaved or the experts stacked, the
    /// embedding tied as the LM head except where the model has its own head (an MoE model).
    pub fn synthetic(cfg: &LlamaConfig, dev: &Device, seed: u64) -> Result<Weights, DecodeError> {
        let grouped = |n: usize| n.is_multiple_of(64);
        let expert_ffn = cfg.moe.map_or(64, |m| m.expert_ffn);
        if !grouped(cfg.hidden)
            || !grouped(cfg.ffn)
            || !grouped(cfg.heads * cfg.head_dim)
            || !grouped(expert_ffn)
        {
            return Err(DecodeError::BadTensor {
                tensor: "synthetic".into(),
                why: "hidden, FFN, expert FFN and heads × head dim must be multiples of the \
                      group (64)"
                    .into(),
            });
        }
        let mut rng = Rng::new(seed);
        let (h, d) = (cfg.hidden, cfg.head_dim);
        let (qw, kvw) = (cfg.heads * d, cfg.kv_heads * d);
        let embed = random_matrix(dev, cfg.vocab, h, &mut rng)?;
        let mut layers = Vec::with_capacity(cfg.layers);
        for _ in 0..cfg.layers {
            let (qkv, qk_norm) = if cfg.qk_norm {
                let parts = [
                    random_matrix(dev, qw, h, &mut rng)?,
                    random_matrix(dev, kvw, h, &mut rng)?,
                    random_matrix(dev, kvw, h, &mut rng)?,
                ];
                let norm = QkNorm {
                    q: ones(dev, d)?,
                    k: ones(dev, d)?,
                };
                (QkvProjection::Split(Box::new(parts)), Some(norm))
            } else {
                let stacked = random_matrix(dev, cfg.qkv_width(), h, &mut rng)?;
                (QkvProjection::Fused(stacked), None)
            };
            layers.push(LayerWeights {
                attn_norm: ones(dev, h)?,
                qkv,
                qk_norm,
                wo: random_matrix(dev, h, qw, &mut rng)?,
                ffn_norm: ones(dev, h)?,
                mlp: random_mlp(dev, cfg, &mut rng)?,
            });
        }
        let lm_head = match cfg.moe {
            Some(_) => Some(random_matrix(dev, cfg.vocab, h, &mut rng)?),
            None => None,
        };
        Ok(Weights {
            embed,
            layers,
            output_norm: ones(dev, h)?,
            lm_head,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_found_by_name_and_unknown_names_refused() {
        assert_eq!(model_shape("llama-3.1-8b").unwrap().config.layers, 32);
        assert!(matches!(
            model_shape("llama-9"),
            Err(DecodeError::UnknownModel(m)) if m.contains("tiny-llama")
        ));
    }

    #[test]
    fn synthetic_weights_repeat_for_a_seed() {
        let dev = Device::cpu();
        let cfg = tiny_llama().config;
        let words = |seed| {
            let w = Weights::synthetic(&cfg, &dev, seed).unwrap();
            let Matrix::Quantized(q) = &w.embed else {
                panic!("the synthetic embedding is quantized")
            };
            q.buffers().0.to_vec::<u32>().unwrap()
        };
        assert_eq!(words(7), words(7));
        assert_ne!(words(7), words(8));
    }
}
