//! Models at real shapes with synthetic weights in the real format, for `kiln bench --decode`:
//! a named shape gives a [`LlamaConfig`], and [`Weights::synthetic`] fills every projection
//! with MLX affine 4-bit codes (group 64, bf16 scales and biases) drawn from a seed, so a run
//! reads exactly the bytes a real checkpoint of that shape would, without downloading one.

use super::config::{HybridConfig, LayerKind, Mamba2Config, MixerKind, MoeConfig};
use super::hybrid::{HybridLayer, HybridMoe, Mamba2Weights, Mixer};
use super::weights::{
    quantized_bytes, GateUp, LayerWeights, Matrix, Mlp, QkNorm, QkvProjection, Weights,
};
use super::{DecodeError, LlamaConfig};
use kiln::ops::{
    MoeActivation, MoeBlock, MoeExperts, MoeGate, MoeRouter, QuantizedWeight, SharedExpert,
};
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
            rope_traditional: true,
            rms_eps: 1e-5,
            context: 131072,
            qk_norm: false,
            moe: None,
            hybrid: None,
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
            rope_traditional: true,
            rms_eps: 1e-6,
            context: 40960,
            qk_norm: true,
            moe: Some(MoeConfig {
                experts: 128,
                k: 8,
                expert_ffn: 768,
                renormalize: true,
                activation: MoeActivation::SwiGlu,
                sigmoid_scale: None,
                shared_ffn: None,
            }),
            hybrid: None,
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
            rope_traditional: true,
            rms_eps: 1e-5,
            context: 4096,
            qk_norm: false,
            moe: None,
            hybrid: None,
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
        activation: MoeActivation::SwiGlu,
        sigmoid_scale: None,
        shared_ffn: None,
    });
    ModelShape {
        name: "tiny-moe".into(),
        config,
    }
}

/// IBM's granite-4.0-h-tiny (`config.json` of ibm-granite/granite-4.0-h-tiny,
/// `granitemoehybrid`: 40 layers, 36 Mamba2 and attention at layers 5, 15, 25 and 35, every
/// layer followed by a MoE block of 64 SwiGLU experts of width 512, 6 per token, and a shared
/// expert of width 1024; hidden 1536, 12 query and 4 KV heads of 128, no positional encoding;
/// Mamba2 48 heads of 64, 1 group, state 128, conv 4; vocab 100352, tied embeddings,
/// rms_norm_eps 1e-5). Its embedding/residual/attention/logit multipliers are scalars a real
/// loader folds into weights: they move no bytes and launch nothing.
pub fn granite_4_0_h_tiny() -> ModelShape {
    let mamba = |moe| LayerKind {
        mixer: Some(MixerKind::Mamba2),
        moe,
    };
    let attention = LayerKind {
        mixer: Some(MixerKind::Attention),
        moe: true,
    };
    let layers = (0..40)
        .map(|l| if l % 10 == 5 { attention } else { mamba(true) })
        .collect();
    ModelShape {
        name: "granite-4.0-h-tiny".into(),
        config: LlamaConfig {
            layers: 40,
            hidden: 1536,
            heads: 12,
            kv_heads: 4,
            head_dim: 128,
            ffn: 512,
            vocab: 100352,
            rope_base: 10_000.0,
            rope_dims: 128,
            rope_traditional: true,
            rms_eps: 1e-5,
            context: 131072,
            qk_norm: false,
            moe: Some(MoeConfig {
                experts: 64,
                k: 6,
                expert_ffn: 512,
                renormalize: true,
                activation: MoeActivation::SwiGlu,
                sigmoid_scale: None,
                shared_ffn: Some(1024),
            }),
            hybrid: Some(HybridConfig {
                layers,
                mamba: Mamba2Config {
                    heads: 48,
                    head_dim: 64,
                    groups: 1,
                    state: 128,
                    conv: 4,
                    dt_min: 0.001,
                    dt_max: 100.0,
                },
                tied_embeddings: true,
            }),
        },
    }
}

/// NVIDIA's Nemotron-3-Nano-30B-A3B (`config.json` of
/// nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16, `nemotron_h`: 52 layers by
/// `hybrid_override_pattern` `MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME` — 23
/// Mamba2, 23 MoE and 6 attention layers; hidden 2688; 32 query and 2 KV heads of 128, no
/// RoPE; MoE of 128 relu² experts of width 1856, 6 per token, sigmoid router with correction
/// bias, `norm_topk_prob`, `routed_scaling_factor` 2.5, a relu² shared expert of width 3712;
/// Mamba2 64 heads of 64, 8 groups, state 128, conv 4, `time_step_limit` (0, ∞); vocab 131072,
/// untied LM head, norm_eps 1e-5).
pub fn nemotron_3_nano_30b_a3b() -> ModelShape {
    let pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";
    let layers = HybridConfig::nemotron_pattern(pattern).expect("the published pattern parses");
    ModelShape {
        name: "nemotron-3-nano-30b-a3b".into(),
        config: LlamaConfig {
            layers: layers.len(),
            hidden: 2688,
            heads: 32,
            kv_heads: 2,
            head_dim: 128,
            ffn: 1856,
            vocab: 131072,
            rope_base: 10_000.0,
            rope_dims: 128,
            rope_traditional: true,
            rms_eps: 1e-5,
            context: 262144,
            qk_norm: false,
            moe: Some(MoeConfig {
                experts: 128,
                k: 6,
                expert_ffn: 1856,
                renormalize: true,
                activation: MoeActivation::Relu2,
                sigmoid_scale: Some(2.5),
                shared_ffn: Some(3712),
            }),
            hybrid: Some(HybridConfig {
                layers,
                mamba: Mamba2Config {
                    heads: 64,
                    head_dim: 64,
                    groups: 8,
                    state: 128,
                    conv: 4,
                    dt_min: 0.0,
                    dt_max: f32::INFINITY,
                },
                tied_embeddings: false,
            }),
        },
    }
}

/// A four-layer hybrid for tests on the cpu: Mamba2 + MoE, attention + MoE, Mamba2 alone,
/// MoE alone; the sigmoid router, relu² experts and a shared expert.
pub fn tiny_hybrid() -> ModelShape {
    let mut config = tiny_llama().config;
    let kind = |mixer, moe| LayerKind { mixer, moe };
    let layers = vec![
        kind(Some(MixerKind::Mamba2), true),
        kind(Some(MixerKind::Attention), true),
        kind(Some(MixerKind::Mamba2), false),
        kind(None, true),
    ];
    config.layers = layers.len();
    config.moe = Some(MoeConfig {
        experts: 8,
        k: 2,
        expert_ffn: 64,
        renormalize: true,
        activation: MoeActivation::Relu2,
        sigmoid_scale: Some(2.5),
        shared_ffn: Some(128),
    });
    config.hybrid = Some(HybridConfig {
        layers,
        mamba: Mamba2Config {
            heads: 4,
            head_dim: 32,
            groups: 2,
            state: 32,
            conv: 4,
            dt_min: 0.0,
            dt_max: f32::INFINITY,
        },
        tied_embeddings: true,
    });
    ModelShape {
        name: "tiny-hybrid".into(),
        config,
    }
}

/// Every shape `--model` accepts.
pub fn model_shapes() -> Vec<ModelShape> {
    vec![
        llama_3_1_8b(),
        qwen3_30b_a3b(),
        granite_4_0_h_tiny(),
        nemotron_3_nano_30b_a3b(),
        tiny_llama(),
        tiny_moe(),
        tiny_hybrid(),
    ]
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
        if cfg.hybrid.is_some() {
            return synthetic_hybrid(cfg, dev, seed);
        }
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
            hybrid: Vec::new(),
            output_norm: ones(dev, h)?,
            lm_head,
        })
    }
}

/// f32 values drawn uniformly from `[-scale, scale)`.
fn uniform(dev: &Device, len: usize, scale: f32, rng: &mut Rng) -> Result<Tensor, PortError> {
    let v: Vec<f32> = (0..len)
        .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale)
        .collect();
    Tensor::from_slice(dev, &[len], &v)
}

/// A Mamba2 mixer: 4-bit projections; conv taps drawn small, A = −1 (`a_log` 0), D 1, dt
/// bias 0, so the states decay and a long prompt keeps them finite.
fn random_mamba(
    dev: &Device,
    cfg: &LlamaConfig,
    m: &Mamba2Config,
    rng: &mut Rng,
) -> Result<Mamba2Weights, DecodeError> {
    let (h, c) = (cfg.hidden, m.conv_channels());
    let conv_weight = uniform(dev, c * m.conv, 0.5, rng)?.reshape(&[c, m.conv])?;
    Ok(Mamba2Weights {
        in_proj: random_matrix(dev, m.in_proj_rows(), h, rng)?,
        conv_weight,
        conv_bias: uniform(dev, c, 0.1, rng)?,
        a_log: Tensor::zeros(dev, DType::F32, &[m.heads])?,
        d: ones(dev, m.heads)?,
        dt_bias: Tensor::zeros(dev, DType::F32, &[m.heads])?,
        norm: ones(dev, m.inner())?,
        out_proj: random_matrix(dev, h, m.inner(), rng)?,
    })
}

/// A MoE block: router, routed experts of `m`'s activation, the shared expert.
fn random_moe_block(
    dev: &Device,
    cfg: &LlamaConfig,
    m: &MoeConfig,
    rng: &mut Rng,
) -> Result<HybridMoe, DecodeError> {
    let h = cfg.hidden;
    let gated = m.activation != MoeActivation::Relu2;
    let rows = m.experts * m.expert_ffn;
    let first = random_weight(dev, rows, h, rng)?;
    let up = if gated {
        Some(random_weight(dev, rows, h, rng)?)
    } else {
        None
    };
    let down = random_weight(dev, m.experts * h, m.expert_ffn, rng)?;
    let expert_bytes =
        quantized_bytes(&first) + up.as_ref().map_or(0, quantized_bytes) + quantized_bytes(&down);
    let router = random_weight(dev, m.experts, h, rng)?;
    let mut fixed_bytes = quantized_bytes(&router);
    let (rule, correction_bias) = match m.sigmoid_scale {
        Some(scaling_factor) => {
            let bias = uniform(dev, m.experts, 0.01, rng)?;
            fixed_bytes += bias.byte_len();
            let rule = MoeRouter::SigmoidBias {
                renormalize: m.renormalize,
                scaling_factor,
            };
            (rule, Some(bias))
        }
        None => {
            let rule = MoeRouter::Softmax {
                renormalize: m.renormalize,
            };
            (rule, None)
        }
    };
    let shared = match m.shared_ffn {
        Some(w) => {
            let first = random_weight(dev, w, h, rng)?;
            let up = if gated {
                Some(random_weight(dev, w, h, rng)?)
            } else {
                None
            };
            let down = random_weight(dev, h, w, rng)?;
            fixed_bytes += quantized_bytes(&first)
                + up.as_ref().map_or(0, quantized_bytes)
                + quantized_bytes(&down);
            Some(SharedExpert::new(m.activation, first, up, down)?)
        }
        None => None,
    };
    let gate = MoeGate {
        weight: router,
        rule,
        correction_bias,
    };
    let experts = MoeExperts::new(m.experts, m.activation, first, up, down)?;
    Ok(HybridMoe {
        norm: ones(dev, h)?,
        block: MoeBlock::new(gate, m.k, experts, shared)?,
        expert_bytes,
        fixed_bytes,
    })
}

/// [`Weights::synthetic`] for a hybrid stack.
fn synthetic_hybrid(cfg: &LlamaConfig, dev: &Device, seed: u64) -> Result<Weights, DecodeError> {
    let bad = |why: &str| DecodeError::BadTensor {
        tensor: "synthetic".into(),
        why: why.into(),
    };
    let hy = cfg
        .hybrid
        .as_ref()
        .ok_or_else(|| bad("not a hybrid stack"))?;
    let grouped = |n: usize| n.is_multiple_of(64);
    if !grouped(cfg.hidden) || !grouped(cfg.heads * cfg.head_dim) || !grouped(hy.mamba.inner()) {
        return Err(bad(
            "hidden, heads × head dim and the Mamba2 inner width must be multiples of the \
             group (64)",
        ));
    }
    let mut rng = Rng::new(seed);
    let h = cfg.hidden;
    let embed = random_matrix(dev, cfg.vocab, h, &mut rng)?;
    let mut layers = Vec::with_capacity(hy.layers.len());
    for kind in hy.layers.iter().take(cfg.layers) {
        let mixer = match kind.mixer {
            None => None,
            Some(MixerKind::Attention) => {
                let qkv = QkvProjection::Fused(random_matrix(dev, cfg.qkv_width(), h, &mut rng)?);
                let wo = random_matrix(dev, h, cfg.heads * cfg.head_dim, &mut rng)?;
                Some((ones(dev, h)?, Mixer::Attention { qkv, wo }))
            }
            Some(MixerKind::Mamba2) => {
                let m = random_mamba(dev, cfg, &hy.mamba, &mut rng)?;
                Some((ones(dev, h)?, Mixer::Mamba2(m)))
            }
        };
        let moe = match (kind.moe, &cfg.moe) {
            (false, _) => None,
            (true, Some(m)) => Some(random_moe_block(dev, cfg, m, &mut rng)?),
            (true, None) => return Err(bad("a MoE layer in a stack without a MoE config")),
        };
        layers.push(HybridLayer { mixer, moe });
    }
    let lm_head = if hy.tied_embeddings {
        None
    } else {
        Some(random_matrix(dev, cfg.vocab, h, &mut rng)?)
    };
    Ok(Weights {
        embed,
        layers: Vec::new(),
        hybrid: layers,
        output_norm: ones(dev, h)?,
        lm_head,
    })
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
