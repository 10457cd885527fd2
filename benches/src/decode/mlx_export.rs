//! A Llama GGUF written as an MLX model directory: `config.json` with MLX's `quantization`
//! block, `model.safetensors` in MLX's layout and names, `tokenizer.json` and
//! `tokenizer_config.json`. Quantized tensors are repacked exactly (`kiln::quant::repack`: Q4_1
//! is MLX affine 4-bit g32 with f16 scales, Q8_0 8-bit g32), so the directory holds the GGUF's
//! very weights; q and k rows go back to Hugging Face's order (GGUF's converter permuted them
//! for ggml's adjacent-pair RoPE). A format MLX has no group size for (Q6_K's 16) is refused.
//! The model is held in memory while it is written: a tool for tests and small models.

use super::rope_order::{half_split_from_adjacent, permute_rows};
use super::weights::{read_matrix, HostMatrix};
use super::{DecodeError, LlamaConfig, QuantSpec, Tokenizer};
use kiln::quant::{GgufFile, Repacked};
use kiln::DType;
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Group sizes MLX quantizes with.
const MLX_GROUP_SIZES: [u32; 3] = [32, 64, 128];

/// One tensor to write: its dtype, shape and little-endian bytes.
struct Stored {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

/// The tensors of the directory, and the format of each quantized module.
#[derive(Default)]
struct Out {
    tensors: BTreeMap<String, Stored>,
    quantized: BTreeMap<String, QuantSpec>,
    dense: Vec<String>,
}

fn file_err(path: &Path, why: impl std::fmt::Display) -> DecodeError {
    DecodeError::File {
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

/// The safetensors dtype of kiln's `dtype` (every one the repacker yields has one).
fn st_dtype(dtype: DType) -> Dtype {
    match dtype {
        DType::F32 => Dtype::F32,
        DType::F16 => Dtype::F16,
        DType::Bf16 => Dtype::BF16,
        DType::U32 => Dtype::U32,
        DType::I32 => Dtype::I32,
        DType::U8 => Dtype::U8,
    }
}

impl Out {
    fn put(&mut self, name: String, dtype: Dtype, shape: Vec<usize>, bytes: Vec<u8>) {
        self.tensors.insert(
            name,
            Stored {
                dtype,
                shape,
                bytes,
            },
        );
    }

    /// GGUF's `[rows, cols]` matrix `name` as the MLX module `module` (q/k rows put back in HF
    /// order for `unpermute = Some(heads, head_dim)`).
    fn matrix(
        &mut self,
        f: &mut GgufFile,
        name: &str,
        module: &str,
        (rows, cols): (usize, usize),
        unpermute: Option<(usize, usize)>,
    ) -> Result<(), DecodeError> {
        let mut m = read_matrix(f, name, rows, cols)?;
        if let Some((heads, head_dim)) = unpermute {
            m = permute_rows(m, &half_split_from_adjacent(heads, head_dim), name)?;
        }
        match m {
            HostMatrix::Dense { values, .. } => {
                let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                self.put(
                    format!("{module}.weight"),
                    Dtype::F32,
                    vec![rows, cols],
                    bytes,
                );
                self.dense.push(module.to_string());
            }
            HostMatrix::Affine(t) => {
                let format = t.format();
                if !MLX_GROUP_SIZES.contains(&format.group_size()) {
                    return Err(DecodeError::BadTensor {
                        tensor: name.to_string(),
                        why: format!("group size {} has no MLX format", format.group_size()),
                    });
                }
                let (words, groups) = (t.w_q().len() / rows, t.groups_per_row());
                let scale = st_dtype(format.scale_dtype());
                let (_, _, _, w_q, scales, biases) = t.into_parts();
                let codes = w_q.iter().flat_map(|w| w.to_le_bytes()).collect();
                self.put(
                    format!("{module}.weight"),
                    Dtype::U32,
                    vec![rows, words],
                    codes,
                );
                self.put(
                    format!("{module}.scales"),
                    scale,
                    vec![rows, groups],
                    scales,
                );
                self.put(
                    format!("{module}.biases"),
                    scale,
                    vec![rows, groups],
                    biases,
                );
                let spec = QuantSpec {
                    bits: format.bits(),
                    group_size: format.group_size(),
                };
                self.quantized.insert(module.to_string(), spec);
            }
        }
        Ok(())
    }

    /// GGUF's dense `[len]` vector `name` as `tensor`, in its own dtype.
    fn vector(
        &mut self,
        f: &mut GgufFile,
        name: &str,
        tensor: &str,
        len: usize,
    ) -> Result<(), DecodeError> {
        let info = f
            .tensor(name)
            .ok_or_else(|| DecodeError::MissingTensor(name.to_string()))?;
        let (ggml_type, dims) = (info.ggml_type, info.dims.clone());
        if dims != [len as u64] {
            return Err(DecodeError::TensorShape {
                tensor: name.to_string(),
                got: dims,
                expected: vec![len as u64],
            });
        }
        let bytes = f.tensor_data(name)?;
        match kiln::quant::repack(name, ggml_type, &dims, &bytes)? {
            Repacked::Dense { dtype, bytes } => {
                self.put(tensor.to_string(), st_dtype(dtype), vec![len], bytes)
            }
            Repacked::Affine(_) => {
                return Err(DecodeError::BadTensor {
                    tensor: name.to_string(),
                    why: "a norm gain must be dense".into(),
                })
            }
        }
        Ok(())
    }

    /// MLX's quantization block: the commonest format as the default, an entry for every
    /// module stored otherwise (`false` for a dense one); `None` when nothing is quantized.
    fn quantization(&self) -> Option<Value> {
        let mut counts: BTreeMap<(u32, u32), usize> = BTreeMap::new();
        for s in self.quantized.values() {
            *counts.entry((s.bits, s.group_size)).or_default() += 1;
        }
        let (&(bits, group_size), _) = counts.iter().max_by_key(|(_, &n)| n)?;
        let mut block = Map::new();
        block.insert("group_size".into(), json!(group_size));
        block.insert("bits".into(), json!(bits));
        for (module, s) in &self.quantized {
            if (s.bits, s.group_size) != (bits, group_size) {
                let entry = json!({"group_size": s.group_size, "bits": s.bits});
                block.insert(module.clone(), entry);
            }
        }
        for module in &self.dense {
            block.insert(module.clone(), json!(false));
        }
        Some(Value::Object(block))
    }
}

/// The `config.json` of `cfg` (a llama model).
fn config_json(
    cfg: &LlamaConfig,
    tied: bool,
    tokenizer: &Tokenizer,
    quant: Option<Value>,
) -> Value {
    let stop = tokenizer.stop_ids();
    let mut c = json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": cfg.hidden,
        "num_hidden_layers": cfg.layers,
        "intermediate_size": cfg.ffn,
        "num_attention_heads": cfg.heads,
        "num_key_value_heads": cfg.kv_heads,
        "head_dim": cfg.head_dim,
        "vocab_size": cfg.vocab,
        "rope_theta": cfg.rope_base,
        "rms_norm_eps": cfg.rms_eps,
        "max_position_embeddings": cfg.context,
        "tie_word_embeddings": tied,
        "hidden_act": "silu",
        "attention_bias": false,
        "mlp_bias": false,
        "rope_scaling": null,
        "bos_token_id": tokenizer.bos().0,
        "eos_token_id": if stop.len() == 1 { json!(stop[0]) } else { json!(stop) },
    });
    if let Some(q) = quant {
        c["quantization"] = q;
    }
    c
}

/// The `tokenizer_config.json` of `tokenizer`.
fn tokenizer_config(tokenizer: &Tokenizer) -> Value {
    let (bos, add_bos) = tokenizer.bos();
    let text = |id: Option<u32>| id.and_then(|i| tokenizer.token(i)).map(str::to_string);
    json!({
        "add_bos_token": add_bos,
        "bos_token": text(bos),
        "eos_token": text(tokenizer.stop_ids().first().copied()),
        "chat_template": tokenizer.chat_template(),
    })
}

/// Writes the Llama GGUF `f` as an MLX model directory at `out` (created if absent; its
/// files of these names are replaced).
pub fn export_mlx(f: &mut GgufFile, out: &Path) -> Result<(), DecodeError> {
    let cfg = LlamaConfig::from_gguf(f)?;
    let tokenizer = Tokenizer::from_gguf(f)?;
    if cfg.rope_dims != cfg.head_dim {
        return Err(DecodeError::BadMeta {
            key: "llama.rope.dimension_count".into(),
            why: "a partly rotated head has no llama config.json".into(),
        });
    }
    let (h, d) = (cfg.hidden, cfg.head_dim);
    let (qw, kvw) = (cfg.heads * d, cfg.kv_heads * d);
    let mut o = Out::default();
    o.matrix(
        f,
        "token_embd.weight",
        "model.embed_tokens",
        (cfg.vocab, h),
        None,
    )?;
    let tied = f.tensor("output.weight").is_none();
    if !tied {
        o.matrix(f, "output.weight", "lm_head", (cfg.vocab, h), None)?;
    }
    for l in 0..cfg.layers {
        let g = |t: &str| format!("blk.{l}.{t}.weight");
        let m = |t: &str| format!("model.layers.{l}.{t}");
        o.vector(f, &g("attn_norm"), &m("input_layernorm.weight"), h)?;
        let (q, k) = (Some((cfg.heads, d)), Some((cfg.kv_heads, d)));
        o.matrix(f, &g("attn_q"), &m("self_attn.q_proj"), (qw, h), q)?;
        o.matrix(f, &g("attn_k"), &m("self_attn.k_proj"), (kvw, h), k)?;
        o.matrix(f, &g("attn_v"), &m("self_attn.v_proj"), (kvw, h), None)?;
        o.matrix(f, &g("attn_output"), &m("self_attn.o_proj"), (h, qw), None)?;
        o.vector(f, &g("ffn_norm"), &m("post_attention_layernorm.weight"), h)?;
        o.matrix(f, &g("ffn_gate"), &m("mlp.gate_proj"), (cfg.ffn, h), None)?;
        o.matrix(f, &g("ffn_up"), &m("mlp.up_proj"), (cfg.ffn, h), None)?;
        o.matrix(f, &g("ffn_down"), &m("mlp.down_proj"), (h, cfg.ffn), None)?;
    }
    o.vector(f, "output_norm.weight", "model.norm.weight", h)?;

    std::fs::create_dir_all(out).map_err(|e| file_err(out, e))?;
    let write_json = |name: &str, v: &Value| {
        let path = out.join(name);
        let text = serde_json::to_string_pretty(v).map_err(|e| file_err(&path, e))?;
        std::fs::write(&path, text).map_err(|e| file_err(&path, e))
    };
    write_json(
        "config.json",
        &config_json(&cfg, tied, &tokenizer, o.quantization()),
    )?;
    write_json("tokenizer_config.json", &tokenizer_config(&tokenizer))?;
    let path = out.join("tokenizer.json");
    let text = tokenizer
        .hf()
        .to_string(false)
        .map_err(|e| file_err(&path, e))?;
    std::fs::write(&path, text).map_err(|e| file_err(&path, e))?;
    let path = out.join("model.safetensors");
    let views = o
        .tensors
        .iter()
        .map(|(name, t)| {
            TensorView::new(t.dtype, t.shape.clone(), &t.bytes)
                .map(|v| (name.clone(), v))
                .map_err(|e| file_err(&path, format!("{name}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let meta = Some(std::collections::HashMap::from([(
        "format".to_string(),
        "mlx".to_string(),
    )]));
    safetensors::serialize_to_file(views, &meta, &path).map_err(|e| file_err(&path, e))
}
