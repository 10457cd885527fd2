//! A model directory's `config.json` (as MLX writes it, or Hugging Face's own): the
//! architectures the driver runs — `llama`, `qwen3` (per-head q/k RMSNorm) and `qwen3_moe`
//! (experts in every layer) — as a [`LlamaConfig`], MLX's `quantization` block, the
//! tied-embedding flag and the ids that end a generation (`eos_token_id`, with
//! `generation_config.json`'s). What the driver cannot run as written (RoPE scaling, projection
//! biases, a sliding window, experts in only some layers) is refused with the key named.

use super::config::MoeConfig;
use super::{DecodeError, LlamaConfig};
use kiln::ops::MoeActivation;
use kiln::quant::AffineFormat;
use kiln::DType;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The architectures (`model_type`) an MLX directory may hold.
const SUPPORTED: &[&str] = &["llama", "qwen3", "qwen3_moe"];

/// One affine format of MLX's `quantization` block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantSpec {
    /// Bits per code.
    pub bits: u32,
    /// Elements per group.
    pub group_size: u32,
}

/// MLX's `quantization` block: the default format, and the modules stored otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct MlxQuantization {
    /// The format of every quantized module without an entry of its own.
    pub default: QuantSpec,
    /// Entries by module path (`model.layers.0.mlp.gate`): a format of its own, or `None`
    /// where the module is left unquantized (`false`).
    pub overrides: BTreeMap<String, Option<QuantSpec>>,
}

impl MlxQuantization {
    /// The format `module` is quantized in, `None` where the config leaves it unquantized.
    pub fn of(&self, module: &str) -> Option<QuantSpec> {
        self.overrides
            .get(module)
            .copied()
            .unwrap_or(Some(self.default))
    }
}

/// What the driver reads of a model directory's config files.
#[derive(Clone, Debug, PartialEq)]
pub struct MlxConfig {
    /// `model_type`: `llama`, `qwen3` or `qwen3_moe`.
    pub model_type: String,
    /// The model's shape; its RoPE takes adjacent pairs, the GGUF path's, into which the
    /// loader moves q/k rows stored in half-split order.
    pub model: LlamaConfig,
    /// The stored q/k rows take adjacent-pair RoPE (mlx-lm's `rope_traditional`); otherwise
    /// half-split pairs, as Hugging Face's `rotate_half` (the default).
    pub rope_traditional: bool,
    /// `tie_word_embeddings`: the LM head is the embedding table; when absent (the defaults
    /// of transformers and mlx-lm differ) the loader ties it unless `lm_head` is stored.
    pub tie_word_embeddings: Option<bool>,
    /// MLX's quantization block; `None` for an unquantized checkpoint.
    pub quantization: Option<MlxQuantization>,
    /// `bos_token_id`.
    pub bos_token_id: Option<u32>,
    /// `eos_token_id` of `config.json` then of `generation_config.json` (an int or a list
    /// each), without repeats.
    pub eos_token_ids: Vec<u32>,
}

fn bad(key: &str, why: impl Into<String>) -> DecodeError {
    DecodeError::BadMeta {
        key: key.to_string(),
        why: why.into(),
    }
}

/// `key`'s value; a JSON null counts as absent, as transformers reads it.
fn get<'a>(c: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    c.get(key).filter(|v| !v.is_null())
}

/// A positive integer below 2^31 (every product of two stays inside usize and kiln's u32
/// launch fields), or `default` when absent.
fn size_opt(c: &Map<String, Value>, key: &str) -> Result<Option<usize>, DecodeError> {
    let Some(v) = get(c, key) else {
        return Ok(None);
    };
    match v.as_u64() {
        Some(n) if n > 0 && n < (1 << 31) => Ok(Some(n as usize)),
        _ => Err(bad(key, format!("expected a positive integer, got {v}"))),
    }
}

fn size(c: &Map<String, Value>, key: &str) -> Result<usize, DecodeError> {
    size_opt(c, key)?.ok_or_else(|| DecodeError::MissingMeta(key.to_string()))
}

fn positive_or(c: &Map<String, Value>, key: &str, default: f32) -> Result<f32, DecodeError> {
    let Some(v) = get(c, key) else {
        return Ok(default);
    };
    match v.as_f64() {
        Some(x) if x.is_finite() && x > 0.0 => Ok(x as f32),
        _ => Err(bad(key, format!("expected a positive number, got {v}"))),
    }
}

fn flag_or(c: &Map<String, Value>, key: &str, default: bool) -> Result<bool, DecodeError> {
    match get(c, key) {
        None => Ok(default),
        Some(v) => v
            .as_bool()
            .ok_or_else(|| bad(key, format!("expected true or false, got {v}"))),
    }
}

/// A token id (`bos_token_id`), or `None` when absent.
fn token_id(c: &Map<String, Value>, key: &str) -> Result<Option<u32>, DecodeError> {
    match get(c, key) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(id) if id <= u32::MAX as u64 => Ok(Some(id as u32)),
            _ => Err(bad(key, format!("expected a token id, got {v}"))),
        },
    }
}

/// `eos_token_id`: an id or a list of ids (none when absent).
fn token_ids(c: &Map<String, Value>, key: &str) -> Result<Vec<u32>, DecodeError> {
    let one = |v: &Value| match v.as_u64() {
        Some(id) if id <= u32::MAX as u64 => Ok(id as u32),
        _ => Err(bad(
            key,
            format!("expected a token id or a list of them, got {v}"),
        )),
    };
    match get(c, key) {
        None => Ok(vec![]),
        Some(Value::Array(items)) => items.iter().map(one).collect(),
        Some(v) => Ok(vec![one(v)?]),
    }
}

/// Appends the ids of `more` that `ids` does not hold yet, in order.
fn add_new(ids: &mut Vec<u32>, more: Vec<u32>) {
    for id in more {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
}

/// Refuses `key` unless it is absent or `ok` holds for its value.
fn refuse_unless(
    c: &Map<String, Value>,
    key: &str,
    ok: impl Fn(&Value) -> bool,
    why: &str,
) -> Result<(), DecodeError> {
    match get(c, key) {
        Some(v) if !ok(v) => Err(bad(key, format!("{v}: {why}"))),
        _ => Ok(()),
    }
}

/// A format entry of the quantization block: `bits` and `group_size` (each falling back to
/// `inherit`'s), checked against what kiln's affine layout holds.
fn quant_spec(
    q: &Map<String, Value>,
    key: &str,
    inherit: Option<QuantSpec>,
) -> Result<QuantSpec, DecodeError> {
    let field = |name: &str, fallback: Option<u32>| -> Result<u32, DecodeError> {
        let full = format!("{key}.{name}");
        match (q.get(name), fallback) {
            (Some(v), _) => v
                .as_u64()
                .filter(|&n| n <= 1024)
                .map(|n| n as u32)
                .ok_or_else(|| bad(&full, format!("expected an integer, got {v}"))),
            (None, Some(f)) => Ok(f),
            (None, None) => Err(DecodeError::MissingMeta(full)),
        }
    };
    let bits = field("bits", inherit.map(|s| s.bits))?;
    let group_size = field("group_size", inherit.map(|s| s.group_size))?;
    AffineFormat::new(bits, group_size, DType::F32).map_err(|e| bad(key, e.to_string()))?;
    Ok(QuantSpec { bits, group_size })
}

/// MLX's `quantization` block (`quantization_config` where only that is written): the default
/// `bits`/`group_size` and per-module entries (an object of their own, or `false`).
fn quantization(c: &Map<String, Value>) -> Result<Option<MlxQuantization>, DecodeError> {
    let (key, block) = match (get(c, "quantization"), get(c, "quantization_config")) {
        (Some(b), _) => ("quantization", b),
        (None, Some(b)) => ("quantization_config", b),
        (None, None) => return Ok(None),
    };
    let q = block
        .as_object()
        .ok_or_else(|| bad(key, format!("expected an object, got {block}")))?;
    if let Some(method) = q.get("quant_method") {
        return Err(bad(
            &format!("{key}.quant_method"),
            format!("{method}: only MLX's affine quantization is supported"),
        ));
    }
    if let Some(mode) = q.get("mode").filter(|m| m.as_str() != Some("affine")) {
        return Err(bad(
            &format!("{key}.mode"),
            format!("{mode}: only MLX's affine mode is supported"),
        ));
    }
    let default = quant_spec(q, key, None)?;
    let mut overrides = BTreeMap::new();
    for (module, v) in q {
        let entry = match v {
            Value::Object(o) => Some(quant_spec(o, &format!("{key}.{module}"), Some(default))?),
            Value::Bool(false) => None,
            Value::Bool(true) => Some(default),
            // `bits`, `group_size`, `mode`: the block's own fields.
            _ => continue,
        };
        overrides.insert(module.clone(), entry);
    }
    Ok(Some(MlxQuantization { default, overrides }))
}

/// The experts of a `qwen3_moe` config, which must sit in every layer.
fn moe(c: &Map<String, Value>) -> Result<MoeConfig, DecodeError> {
    let experts = size(c, "num_experts")?;
    let k = size(c, "num_experts_per_tok")?;
    if k > experts {
        return Err(bad(
            "num_experts_per_tok",
            format!("{k} experts per token of {experts}"),
        ));
    }
    refuse_unless(
        c,
        "decoder_sparse_step",
        |v| v.as_u64() == Some(1),
        "the driver runs experts in every layer",
    )?;
    refuse_unless(
        c,
        "mlp_only_layers",
        |v| v.as_array().is_some_and(Vec::is_empty),
        "the driver runs experts in every layer",
    )?;
    Ok(MoeConfig {
        experts,
        k,
        expert_ffn: size(c, "moe_intermediate_size")?,
        renormalize: flag_or(c, "norm_topk_prob", false)?,
        activation: MoeActivation::SwiGlu,
        sigmoid_scale: None,
        shared_ffn: None,
    })
}

impl MlxConfig {
    /// Reads `config.json` and, where present, `generation_config.json` of `dir`.
    pub fn read(dir: &Path) -> Result<MlxConfig, DecodeError> {
        let mut cfg = MlxConfig::from_json(&read_json(&dir.join("config.json"))?)?;
        let generation = dir.join("generation_config.json");
        if generation.is_file() {
            let g = read_json(&generation)?;
            let g = g.as_object().ok_or_else(|| DecodeError::File {
                path: generation.display().to_string(),
                why: "expected a JSON object".into(),
            })?;
            add_new(&mut cfg.eos_token_ids, token_ids(g, "eos_token_id")?);
        }
        Ok(cfg)
    }

    /// Reads and checks a parsed `config.json`.
    pub fn from_json(json: &Value) -> Result<MlxConfig, DecodeError> {
        let c = json
            .as_object()
            .ok_or_else(|| bad("config.json", "expected a JSON object"))?;
        let model_type = get(c, "model_type")
            .ok_or_else(|| DecodeError::MissingMeta("model_type".into()))?
            .as_str()
            .ok_or_else(|| bad("model_type", "expected a string"))?;
        if !SUPPORTED.contains(&model_type) {
            return Err(DecodeError::UnsupportedArch(model_type.to_string()));
        }
        let is_default_rope = |v: &Value| {
            let kind = v.get("rope_type").or_else(|| v.get("type"));
            kind.and_then(Value::as_str) == Some("default")
        };
        refuse_unless(
            c,
            "rope_scaling",
            is_default_rope,
            "RoPE scaling is not supported",
        )?;
        refuse_unless(
            c,
            "partial_rotary_factor",
            |v| v.as_f64() == Some(1.0),
            "the driver rotates whole heads",
        )?;
        let off = |v: &Value| v.as_bool() == Some(false);
        refuse_unless(
            c,
            "attention_bias",
            off,
            "projection biases are not supported",
        )?;
        refuse_unless(c, "mlp_bias", off, "projection biases are not supported")?;
        refuse_unless(
            c,
            "use_sliding_window",
            off,
            "sliding windows are not supported",
        )?;
        refuse_unless(
            c,
            "hidden_act",
            |v| v.as_str() == Some("silu"),
            "the MLP is SwiGLU (silu)",
        )?;

        let hidden = size(c, "hidden_size")?;
        let heads = size(c, "num_attention_heads")?;
        let kv_heads = size_opt(c, "num_key_value_heads")?.unwrap_or(heads);
        if !heads.is_multiple_of(kv_heads) {
            return Err(bad(
                "num_key_value_heads",
                format!("{kv_heads} KV heads do not divide {heads} query heads"),
            ));
        }
        let head_dim = match size_opt(c, "head_dim")? {
            Some(d) => d,
            None if hidden.is_multiple_of(heads) => hidden / heads,
            None => {
                return Err(bad(
                    "num_attention_heads",
                    format!("{heads} heads do not divide the hidden size {hidden}"),
                ))
            }
        };
        if !head_dim.is_multiple_of(2) {
            return Err(bad("head_dim", format!("{head_dim} must be even for RoPE")));
        }
        let qwen3 = model_type != "llama";
        let model = LlamaConfig {
            layers: size(c, "num_hidden_layers")?,
            hidden,
            heads,
            kv_heads,
            head_dim,
            ffn: size(c, "intermediate_size")?,
            vocab: size(c, "vocab_size")?,
            rope_base: positive_or(c, "rope_theta", 10_000.0)?,
            rope_dims: head_dim,
            rope_traditional: true,
            rms_eps: positive_or(c, "rms_norm_eps", 1e-6)?,
            context: size_opt(c, "max_position_embeddings")?.unwrap_or(2048),
            qk_norm: qwen3,
            moe: if model_type == "qwen3_moe" {
                Some(moe(c)?)
            } else {
                None
            },
            hybrid: None,
        };
        Ok(MlxConfig {
            model_type: model_type.to_string(),
            model,
            rope_traditional: flag_or(c, "rope_traditional", false)?,
            tie_word_embeddings: match get(c, "tie_word_embeddings") {
                None => None,
                Some(_) => Some(flag_or(c, "tie_word_embeddings", false)?),
            },
            quantization: quantization(c)?,
            bos_token_id: token_id(c, "bos_token_id")?,
            eos_token_ids: {
                let mut ids = vec![];
                add_new(&mut ids, token_ids(c, "eos_token_id")?);
                ids
            },
        })
    }
}

/// The JSON of `path`, its errors naming the file.
pub(super) fn read_json(path: &Path) -> Result<Value, DecodeError> {
    let file_err = |why: String| DecodeError::File {
        path: path.display().to_string(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| file_err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn llama() -> Value {
        json!({
            "model_type": "llama",
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "intermediate_size": 128,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 100,
            "rope_theta": 100000.0,
            "rms_norm_eps": 1e-5,
            "rope_scaling": null,
            "tie_word_embeddings": false,
            "eos_token_id": [2, 7, 2],
            "quantization": {
                "group_size": 64,
                "bits": 4,
                "model.embed_tokens": {"group_size": 32, "bits": 8},
                "lm_head": false
            }
        })
    }

    fn with(edit: impl FnOnce(&mut Map<String, Value>)) -> Result<MlxConfig, DecodeError> {
        let mut v = llama();
        edit(v.as_object_mut().unwrap());
        MlxConfig::from_json(&v)
    }

    #[test]
    fn reads_a_llama_config_and_its_quantization() {
        let c = with(|_| {}).unwrap();
        let m = &c.model;
        assert_eq!(
            (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn),
            (2, 64, 4, 2, 16, 128)
        );
        assert_eq!((m.vocab, m.rope_dims, m.context), (100, 16, 2048));
        assert_eq!((m.rope_base, m.rms_eps), (100_000.0, 1e-5));
        assert!(m.rope_traditional && !c.rope_traditional);
        assert!(!m.qk_norm && m.moe.is_none() && m.hybrid.is_none());
        assert_eq!(c.tie_word_embeddings, Some(false));
        assert_eq!(c.eos_token_ids, [2, 7]);
        let q = c.quantization.unwrap();
        let spec = |bits, group_size| Some(QuantSpec { bits, group_size });
        assert_eq!(q.of("model.layers.0.mlp.up_proj"), spec(4, 64));
        assert_eq!(q.of("model.embed_tokens"), spec(8, 32));
        assert_eq!(q.of("lm_head"), None);
    }

    #[test]
    fn reads_qwen3_moe() {
        let c = with(|c| {
            c.insert("model_type".into(), json!("qwen3_moe"));
            c.insert("head_dim".into(), json!(32));
            c.insert("num_experts".into(), json!(8));
            c.insert("num_experts_per_tok".into(), json!(2));
            c.insert("moe_intermediate_size".into(), json!(64));
            c.insert("norm_topk_prob".into(), json!(true));
            c.insert("decoder_sparse_step".into(), json!(1));
            c.insert("mlp_only_layers".into(), json!([]));
        })
        .unwrap();
        assert!(c.model.qk_norm);
        assert_eq!(c.model.head_dim, 32);
        let m = c.model.moe.unwrap();
        assert_eq!(
            (m.experts, m.k, m.expert_ffn, m.renormalize),
            (8, 2, 64, true)
        );
    }

    #[test]
    fn refusals_name_the_key() {
        let key_of = |r: Result<MlxConfig, DecodeError>| match r {
            Err(DecodeError::BadMeta { key, .. }) | Err(DecodeError::MissingMeta(key)) => key,
            other => panic!("expected a refusal naming a key, got {other:?}"),
        };
        assert!(matches!(
            with(|c| { c.insert("model_type".into(), json!("gpt2")); }),
            Err(DecodeError::UnsupportedArch(a)) if a == "gpt2"
        ));
        let scaling = json!({"rope_type": "llama3", "factor": 8.0});
        assert_eq!(
            key_of(with(|c| {
                c.insert("rope_scaling".into(), scaling);
            })),
            "rope_scaling"
        );
        assert_eq!(
            key_of(with(|c| {
                c.remove("hidden_size");
            })),
            "hidden_size"
        );
        assert_eq!(
            key_of(with(|c| {
                c.insert("attention_bias".into(), json!(true));
            })),
            "attention_bias"
        );
        assert_eq!(
            key_of(with(|c| {
                c["quantization"]["bits"] = json!(7);
            })),
            "quantization"
        );
        assert_eq!(
            key_of(with(|c| {
                c["quantization"]["model.embed_tokens"]["group_size"] = json!(48);
            })),
            "quantization.model.embed_tokens"
        );
        assert_eq!(
            key_of(with(|c| {
                c["quantization"]["mode"] = json!("mxfp4");
            })),
            "quantization.mode"
        );
        assert_eq!(
            key_of(with(|c| {
                c.insert("num_key_value_heads".into(), json!(3));
            })),
            "num_key_value_heads"
        );
        let some_layers = |c: &mut Map<String, Value>| {
            c.insert("model_type".into(), json!("qwen3_moe"));
            c.insert("num_experts".into(), json!(8));
            c.insert("num_experts_per_tok".into(), json!(2));
            c.insert("moe_intermediate_size".into(), json!(64));
            c.insert("mlp_only_layers".into(), json!([0]));
        };
        assert_eq!(key_of(with(some_layers)), "mlp_only_layers");
    }
}
