//! An MLX model directory's tensors as the driver's [`Weights`]. MLX stores a quantized linear
//! layer as `<module>.weight` (u32 codes `[N, K·bits/32]`), `<module>.scales` and
//! `<module>.biases` (`[N, K/group]`, f16/bf16/f32): kiln's affine layout (spec §13), so the
//! parts are taken as they are, with no re-quantization. A module without `.scales` is dense
//! (f32/f16/bf16, widened to f32), as MLX's own loader decides.
//!
//! Names are Hugging Face's (`model.embed_tokens`, `model.layers.N.self_attn.q_proj`,
//! `mlp.gate_proj`, `input_layernorm`, …, Qwen3's `q_norm`/`k_norm`, Qwen3-MoE's router
//! `mlp.gate` and stacked experts `mlp.switch_mlp.{gate,up,down}_proj` `[E, …]`). The GGUF
//! path's fusions are kept where the formats allow: q/k/v stacked, gate/up interleaved.
//! q/k rows (and Qwen3's head-norm gains) stored for one RoPE pairing are moved to the one the
//! config runs (`rope_order`): exact, so a GGUF exported here runs bit for bit as the GGUF.

use super::mlx_config::{MlxConfig, MlxQuantization};
use super::rope_order::{
    adjacent_from_half_split, half_split_from_adjacent, permute_gain, permute_rows,
};
use super::safetensors_dir::SafetensorsDir;
use super::weights::{
    quantized_bytes, widen, GateUp, HostMatrix, LayerWeights, Mlp, QkNorm, QkvProjection,
};
use super::{DecodeError, LlamaConfig, Weights};
use kiln::ops::{MoeActivation, MoeExperts, QuantizedWeight};
use kiln::quant::{AffineFormat, AffineTensor};
use kiln::{DType, Device, Tensor};
use safetensors::Dtype;

/// Reads modules from a directory's tensors under its quantization block.
struct Reader<'a> {
    tensors: &'a SafetensorsDir,
    quant: Option<&'a MlxQuantization>,
    /// Where each q/k row (and head-norm dim) of the order the config's RoPE runs is stored,
    /// per head count; `None` where the stored order is that one.
    rope_rows: Option<RopeRows>,
}

/// Row orders of the q and k projections (`heads` and `kv_heads` heads of `head_dim`).
struct RopeRows {
    q: Vec<usize>,
    k: Vec<usize>,
}

fn bad_tensor(tensor: &str, why: impl Into<String>) -> DecodeError {
    DecodeError::BadTensor {
        tensor: tensor.to_string(),
        why: why.into(),
    }
}

/// kiln's dtype of a stored float tensor (f32, f16, bf16); others are refused.
fn float_dtype(name: &str, dtype: Dtype) -> Result<DType, DecodeError> {
    match dtype {
        Dtype::F32 => Ok(DType::F32),
        Dtype::F16 => Ok(DType::F16),
        Dtype::BF16 => Ok(DType::Bf16),
        other => Err(bad_tensor(
            name,
            format!("{other:?} values are not supported (f32, f16, bf16 are)"),
        )),
    }
}

impl Reader<'_> {
    /// `name`'s dtype, checked to have `expected` as its shape.
    fn checked(&self, name: &str, expected: &[usize]) -> Result<Dtype, DecodeError> {
        let (dtype, shape) = self
            .tensors
            .info(name)
            .ok_or_else(|| DecodeError::MissingTensor(name.to_string()))?;
        if shape != expected {
            let dims = |s: &[usize]| s.iter().map(|&d| d as u64).collect();
            return Err(DecodeError::TensorShape {
                tensor: name.to_string(),
                got: dims(shape),
                expected: dims(expected),
            });
        }
        Ok(dtype)
    }

    /// The dense `[len]` vector `name` (a norm gain) as f32.
    fn host_vector(&self, name: &str, len: usize) -> Result<Vec<f32>, DecodeError> {
        let dtype = float_dtype(name, self.checked(name, &[len])?)?;
        widen(name, dtype, &self.tensors.read(name)?)
    }

    /// The dense `[len]` vector `name` (a norm gain) as f32 on `dev`.
    fn vector(&self, name: &str, len: usize, dev: &Device) -> Result<Tensor, DecodeError> {
        let values = self.host_vector(name, len)?;
        Ok(Tensor::from_slice(dev, &[len], &values)?)
    }

    /// A q or k head norm's gain `[head_dim]` on `dev`, in the order its rows were moved to.
    fn head_gain(&self, name: &str, len: usize, dev: &Device) -> Result<Tensor, DecodeError> {
        let mut values = self.host_vector(name, len)?;
        if let Some(rows) = &self.rope_rows {
            values = permute_gain(&values, &rows.k);
        }
        Ok(Tensor::from_slice(dev, &[len], &values)?)
    }

    /// The q or k projection `module` of `[rows, cols]`, its rows in the config's RoPE order.
    fn rope_matrix(
        &self,
        module: &str,
        (rows, cols): (usize, usize),
        order: impl Fn(&RopeRows) -> &[usize],
    ) -> Result<HostMatrix, DecodeError> {
        let m = self.matrix(module, rows, cols)?;
        match &self.rope_rows {
            Some(r) => permute_rows(m, order(r), &format!("{module}.weight")),
            None => Ok(m),
        }
    }

    /// The `[rows, cols]` projection `module`.
    fn matrix(&self, module: &str, rows: usize, cols: usize) -> Result<HostMatrix, DecodeError> {
        self.stacked(module, &[rows], cols)
    }

    /// The projection `module` of shape `outer ++ [cols]` (`[E, rows]` for stacked experts) as
    /// one matrix of `outer`'s product rows: quantized where `<module>.scales` is stored.
    fn stacked(
        &self,
        module: &str,
        outer: &[usize],
        cols: usize,
    ) -> Result<HostMatrix, DecodeError> {
        let rows: usize = outer.iter().product();
        let shape = |last: usize| [outer, &[last]].concat();
        let weight = format!("{module}.weight");
        let scales = format!("{module}.scales");
        let Some((scale_st, _)) = self.tensors.info(&scales) else {
            let stored = self.tensors.info(&weight).map(|(dtype, _)| dtype);
            if stored == Some(Dtype::U32) {
                // Packed codes without their scales: a quantized module cut short.
                return Err(DecodeError::MissingTensor(scales));
            }
            let stored = self.checked(&weight, &shape(cols))?;
            let values = widen(
                &weight,
                float_dtype(&weight, stored)?,
                &self.tensors.read(&weight)?,
            )?;
            return Ok(HostMatrix::Dense { rows, cols, values });
        };
        let biases = format!("{module}.biases");
        let spec = self.quant.and_then(|q| q.of(module)).ok_or_else(|| {
            bad_tensor(
                &scales,
                "stored quantized, but config.json's quantization block does not quantize it",
            )
        })?;
        let scale_dtype = match self.tensors.info(&biases) {
            None => return Err(DecodeError::MissingTensor(biases)),
            Some((b, _)) if b != scale_st => {
                return Err(bad_tensor(
                    &biases,
                    format!("{b:?}, but the scales are {scale_st:?}"),
                ))
            }
            Some(_) => float_dtype(&scales, scale_st)?,
        };
        let format = AffineFormat::new(spec.bits, spec.group_size, scale_dtype)
            .map_err(|e| bad_tensor(&scales, e.to_string()))?;
        let words = format
            .packed_words(cols)
            .map_err(|e| bad_tensor(&weight, e.to_string()))?;
        let groups = format
            .groups(cols)
            .map_err(|e| bad_tensor(&weight, e.to_string()))?;
        let code_dtype = self.checked(&weight, &shape(words))?;
        if code_dtype != Dtype::U32 {
            return Err(bad_tensor(
                &weight,
                format!("quantized codes must be U32, not {code_dtype:?}"),
            ));
        }
        self.checked(&scales, &shape(groups))?;
        self.checked(&biases, &shape(groups))?;
        let w_q = self
            .tensors
            .read(&weight)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let (s, b) = (self.tensors.read(&scales)?, self.tensors.read(&biases)?);
        AffineTensor::from_parts(format, rows, cols, w_q, s, b)
            .map(HostMatrix::Affine)
            .map_err(|e| bad_tensor(&weight, e.to_string()))
    }

    /// A stacked expert projection, which the fused MoE kernels read quantized.
    fn experts(
        &self,
        module: &str,
        outer: &[usize],
        cols: usize,
        dev: &Device,
    ) -> Result<QuantizedWeight, DecodeError> {
        match self.stacked(module, outer, cols)? {
            HostMatrix::Affine(t) => Ok(QuantizedWeight::upload(dev, &t)?),
            HostMatrix::Dense { .. } => Err(bad_tensor(
                &format!("{module}.weight"),
                "experts must be quantized (the fused MoE kernels read affine codes)",
            )),
        }
    }

    /// Layer `l`'s MLP: dense SwiGLU (gate and up interleaved where they share a format) or
    /// Qwen3-MoE's router and stacked experts.
    fn mlp(&self, l: usize, cfg: &LlamaConfig, dev: &Device) -> Result<Mlp, DecodeError> {
        let p = format!("model.layers.{l}.mlp");
        let h = cfg.hidden;
        let Some(m) = cfg.moe else {
            let gate = self.matrix(&format!("{p}.gate_proj"), cfg.ffn, h)?;
            let up = self.matrix(&format!("{p}.up_proj"), cfg.ffn, h)?;
            let gate_up = GateUp::upload(dev, &gate, &up)?;
            let down = self.matrix(&format!("{p}.down_proj"), h, cfg.ffn)?;
            return Ok(Mlp::Dense {
                gate_up,
                down: down.upload(dev)?,
            });
        };
        let (e, f) = (m.experts, m.expert_ffn);
        let gate = self.experts(&format!("{p}.switch_mlp.gate_proj"), &[e, f], h, dev)?;
        let up = self.experts(&format!("{p}.switch_mlp.up_proj"), &[e, f], h, dev)?;
        let down = self.experts(&format!("{p}.switch_mlp.down_proj"), &[e, h], f, dev)?;
        let expert_bytes = quantized_bytes(&gate) + quantized_bytes(&up) + quantized_bytes(&down);
        Ok(Mlp::Moe {
            router: self.matrix(&format!("{p}.gate"), e, h)?.upload(dev)?,
            experts: MoeExperts::new(e, MoeActivation::SwiGlu, gate, Some(up), down)?,
            expert_bytes,
        })
    }

    /// Layer `l`'s weights.
    fn layer(
        &self,
        l: usize,
        cfg: &LlamaConfig,
        dev: &Device,
    ) -> Result<LayerWeights, DecodeError> {
        let p = format!("model.layers.{l}");
        let (h, d) = (cfg.hidden, cfg.head_dim);
        let (qw, kvw) = (cfg.heads * d, cfg.kv_heads * d);
        let q = self.rope_matrix(&format!("{p}.self_attn.q_proj"), (qw, h), |r| &r.q)?;
        let k = self.rope_matrix(&format!("{p}.self_attn.k_proj"), (kvw, h), |r| &r.k)?;
        let v = self.matrix(&format!("{p}.self_attn.v_proj"), kvw, h)?;
        let qk_norm = if cfg.qk_norm {
            Some(QkNorm {
                q: self.head_gain(&format!("{p}.self_attn.q_norm.weight"), d, dev)?,
                k: self.head_gain(&format!("{p}.self_attn.k_norm.weight"), d, dev)?,
            })
        } else {
            None
        };
        // The head norms run between the projections and RoPE, so q/k/v stay apart there.
        let stacked = match qk_norm {
            None => HostMatrix::stack(&[&q, &k, &v]),
            Some(_) => None,
        };
        let qkv = match stacked {
            Some(m) => QkvProjection::Fused(m.upload(dev)?),
            None => {
                QkvProjection::Split(Box::new([q.upload(dev)?, k.upload(dev)?, v.upload(dev)?]))
            }
        };
        drop((q, k, v));
        Ok(LayerWeights {
            attn_norm: self.vector(&format!("{p}.input_layernorm.weight"), h, dev)?,
            qkv,
            qk_norm,
            wo: self
                .matrix(&format!("{p}.self_attn.o_proj"), h, qw)?
                .upload(dev)?,
            ffn_norm: self.vector(&format!("{p}.post_attention_layernorm.weight"), h, dev)?,
            mlp: self.mlp(l, cfg, dev)?,
        })
    }
}

impl Weights {
    /// Reads and uploads every tensor `cfg` needs (its first `cfg.layers` layers) from an MLX
    /// directory's `tensors`, under `mlx`'s quantization block and tied-embedding flag, one
    /// module at a time; q/k rows stored for the other RoPE order than `cfg`'s are moved.
    pub fn load_mlx(
        tensors: &SafetensorsDir,
        mlx: &MlxConfig,
        cfg: &LlamaConfig,
        dev: &Device,
    ) -> Result<Weights, DecodeError> {
        if cfg.hybrid.is_some() {
            return Err(DecodeError::BadMeta {
                key: "model_type".into(),
                why: "the MLX loader reads transformer stacks, not hybrid ones".into(),
            });
        }
        let d = cfg.head_dim;
        let order: fn(usize, usize) -> Vec<usize> = if cfg.rope_traditional {
            adjacent_from_half_split
        } else {
            half_split_from_adjacent
        };
        let rope_rows = (mlx.rope_traditional != cfg.rope_traditional).then(|| RopeRows {
            q: order(cfg.heads, d),
            k: order(cfg.kv_heads, d),
        });
        let r = Reader {
            tensors,
            quant: mlx.quantization.as_ref(),
            rope_rows,
        };
        let h = cfg.hidden;
        let embed = r.matrix("model.embed_tokens", cfg.vocab, h)?.upload(dev)?;
        let tied = mlx
            .tie_word_embeddings
            .unwrap_or(!tensors.contains("lm_head.weight"));
        let lm_head = if tied {
            None
        } else {
            Some(r.matrix("lm_head", cfg.vocab, h)?.upload(dev)?)
        };
        let layers = (0..cfg.layers)
            .map(|l| r.layer(l, cfg, dev))
            .collect::<Result<_, _>>()?;
        Ok(Weights {
            embed,
            layers,
            hybrid: vec![],
            output_norm: r.vector("model.norm.weight", h, dev)?,
            lm_head,
        })
    }
}
