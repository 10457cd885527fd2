//! Tiny MLX model directories written here (no download): `config.json`, `model*.safetensors`
//! in MLX's layout (written with the `safetensors` crate), `tokenizer.json` and
//! `tokenizer_config.json`, with each module also kept as the in-memory path takes it.

use kiln::quant::{quantize, AffineFormat};
use kiln::rng::Rng;
use kiln::DType;
use kiln_benches::decode::HostMatrix;
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const HIDDEN: usize = 64;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
pub const FFN: usize = 128;
/// The embedding's rows: the tokenizer's 261 ids, padded as checkpoints often are.
pub const VOCAB: usize = 264;
pub const LAYERS: usize = 2;

/// A directory under the system's temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("kiln-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One stored tensor.
pub struct Stored {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

/// A tiny model: its `config.json`, its tensors as stored, and each module as the in-memory
/// path takes it.
pub struct Tiny {
    pub config: Value,
    pub tensors: BTreeMap<String, Stored>,
    pub modules: BTreeMap<String, HostMatrix>,
    pub norms: BTreeMap<String, Vec<f32>>,
    /// The dtype of the quantized modules' scales and biases.
    scale_dtype: DType,
    rng: Rng,
}

fn bf16_bits(v: f32) -> u16 {
    use kiln::math::Element;
    kiln::math::Bf16::from_f32(v).0
}

impl Tiny {
    fn new(config: Value, seed: u64) -> Tiny {
        Tiny {
            config,
            tensors: BTreeMap::new(),
            modules: BTreeMap::new(),
            norms: BTreeMap::new(),
            scale_dtype: DType::Bf16,
            rng: Rng::new(seed),
        }
    }

    fn put(&mut self, name: &str, dtype: Dtype, shape: &[usize], bytes: Vec<u8>) {
        let shape = shape.to_vec();
        let stored = Stored {
            dtype,
            shape,
            bytes,
        };
        self.tensors.insert(name.to_string(), stored);
    }

    /// `module` of shape `outer ++ [cols]`, drawn from a normal distribution and quantized by
    /// kiln's MLX quantizer, stored as MLX stores it.
    fn quantized(&mut self, module: &str, outer: &[usize], cols: usize, bits: u32, gs: u32) {
        let rows: usize = outer.iter().product();
        let w: Vec<f32> = (0..rows * cols)
            .map(|_| 0.08 * self.rng.normal() as f32)
            .collect();
        let t = quantize(
            &w,
            rows,
            cols,
            AffineFormat::new(bits, gs, self.scale_dtype).unwrap(),
        )
        .unwrap();
        let shape = |last: usize| [outer, &[last]].concat();
        let words = t.w_q().iter().flat_map(|w| w.to_le_bytes()).collect();
        let groups = cols / gs as usize;
        let scale_dtype = match self.scale_dtype {
            DType::F16 => Dtype::F16,
            DType::Bf16 => Dtype::BF16,
            _ => Dtype::F32,
        };
        self.put(
            &format!("{module}.weight"),
            Dtype::U32,
            &shape(cols * bits as usize / 32),
            words,
        );
        self.put(
            &format!("{module}.scales"),
            scale_dtype,
            &shape(groups),
            t.scales_bytes().to_vec(),
        );
        self.put(
            &format!("{module}.biases"),
            scale_dtype,
            &shape(groups),
            t.biases_bytes().to_vec(),
        );
        self.modules.insert(module.into(), HostMatrix::Affine(t));
    }

    /// An unquantized `[rows, cols]` module in bf16.
    fn dense(&mut self, module: &str, rows: usize, cols: usize) {
        let bits: Vec<u16> = (0..rows * cols)
            .map(|_| bf16_bits(0.08 * self.rng.normal() as f32))
            .collect();
        let values = bits
            .iter()
            .map(|&b| f32::from_bits((b as u32) << 16))
            .collect();
        let bytes = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
        self.put(
            &format!("{module}.weight"),
            Dtype::BF16,
            &[rows, cols],
            bytes,
        );
        let m = HostMatrix::Dense { rows, cols, values };
        self.modules.insert(module.into(), m);
    }

    /// A norm gain `[len]` in f32.
    fn norm(&mut self, name: &str, len: usize) {
        let values: Vec<f32> = (0..len)
            .map(|_| 1.0 + 0.1 * self.rng.normal() as f32)
            .collect();
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.put(name, Dtype::F32, &[len], bytes);
        self.norms.insert(name.into(), values);
    }

    /// Writes the directory: the tensors in `shards` files (with an index past one).
    pub fn write(&self, dir: &Path, shards: usize) {
        std::fs::write(dir.join("config.json"), self.config.to_string()).unwrap();
        let names: Vec<&String> = self.tensors.keys().collect();
        let per = names.len().div_ceil(shards);
        let mut weight_map = serde_json::Map::new();
        for (i, chunk) in names.chunks(per).enumerate() {
            let file = if shards == 1 {
                "model.safetensors".to_string()
            } else {
                format!("model-{:05}-of-{shards:05}.safetensors", i + 1)
            };
            let views = chunk.iter().map(|&name| {
                let t = &self.tensors[name];
                let view = TensorView::new(t.dtype, t.shape.clone(), &t.bytes).unwrap();
                weight_map.insert(name.clone(), json!(file));
                (name.clone(), view)
            });
            let views: Vec<_> = views.collect();
            safetensors::serialize_to_file(views, &None, &dir.join(&file)).unwrap();
        }
        if shards > 1 {
            let index = json!({"metadata": {}, "weight_map": weight_map});
            std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
        }
        write_tokenizer(dir, false);
    }
}

fn base_config(model_type: &str) -> Value {
    json!({
        "model_type": model_type,
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "intermediate_size": FFN,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "vocab_size": VOCAB,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 512,
        "eos_token_id": 260,
        "quantization": {"group_size": 64, "bits": 4},
    })
}

/// Llama: sharded in two files, the embedding at 8 bits g32 (a per-module override), an
/// untied head, layer 1's down projection left dense (`false`).
pub fn tiny_llama(seed: u64) -> Tiny {
    let mut c = base_config("llama");
    c["tie_word_embeddings"] = json!(false);
    c["quantization"]["model.embed_tokens"] = json!({"group_size": 32, "bits": 8});
    c["quantization"]["model.layers.1.mlp.down_proj"] = json!(false);
    let mut t = Tiny::new(c, seed);
    t.quantized("model.embed_tokens", &[VOCAB], HIDDEN, 8, 32);
    t.quantized("lm_head", &[VOCAB], HIDDEN, 4, 64);
    let d = HIDDEN / HEADS;
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}");
        attention(&mut t, &p, d, false);
        t.quantized(&format!("{p}.mlp.gate_proj"), &[FFN], HIDDEN, 4, 64);
        t.quantized(&format!("{p}.mlp.up_proj"), &[FFN], HIDDEN, 4, 64);
        if l == 1 {
            t.dense(&format!("{p}.mlp.down_proj"), HIDDEN, FFN);
        } else {
            t.quantized(&format!("{p}.mlp.down_proj"), &[HIDDEN], FFN, 4, 64);
        }
    }
    t.norm("model.norm.weight", HIDDEN);
    t
}

/// A layer's attention and its norms under `p`.
fn attention(t: &mut Tiny, p: &str, d: usize, qk_norm: bool) {
    t.norm(&format!("{p}.input_layernorm.weight"), HIDDEN);
    t.norm(&format!("{p}.post_attention_layernorm.weight"), HIDDEN);
    t.quantized(
        &format!("{p}.self_attn.q_proj"),
        &[HEADS * d],
        HIDDEN,
        4,
        64,
    );
    t.quantized(
        &format!("{p}.self_attn.k_proj"),
        &[KV_HEADS * d],
        HIDDEN,
        4,
        64,
    );
    t.quantized(
        &format!("{p}.self_attn.v_proj"),
        &[KV_HEADS * d],
        HIDDEN,
        4,
        64,
    );
    t.quantized(
        &format!("{p}.self_attn.o_proj"),
        &[HIDDEN],
        HEADS * d,
        4,
        64,
    );
    if qk_norm {
        t.norm(&format!("{p}.self_attn.q_norm.weight"), d);
        t.norm(&format!("{p}.self_attn.k_norm.weight"), d);
    }
}

/// Qwen3 (tied by default, as no `lm_head` is stored; heads of 32 wider than hidden / heads;
/// f16 scales) or Qwen3-MoE (an untied head, 4 experts of width 64, 2 per token, an 8-bit
/// router; bf16 scales).
pub fn tiny_qwen3(moe: bool, seed: u64) -> Tiny {
    let d = 32;
    let mut c = base_config(if moe { "qwen3_moe" } else { "qwen3" });
    c["head_dim"] = json!(d);
    if moe {
        c["tie_word_embeddings"] = json!(false);
    }
    c["eos_token_id"] = json!([260, 2]);
    if moe {
        c["num_experts"] = json!(4);
        c["num_experts_per_tok"] = json!(2);
        c["moe_intermediate_size"] = json!(64);
        c["norm_topk_prob"] = json!(true);
        for l in 0..LAYERS {
            c["quantization"][format!("model.layers.{l}.mlp.gate")] =
                json!({"group_size": 64, "bits": 8});
        }
    }
    let mut t = Tiny::new(c, seed);
    if !moe {
        t.scale_dtype = DType::F16;
    }
    t.quantized("model.embed_tokens", &[VOCAB], HIDDEN, 4, 64);
    if moe {
        t.quantized("lm_head", &[VOCAB], HIDDEN, 4, 64);
    }
    for l in 0..LAYERS {
        let p = format!("model.layers.{l}");
        attention(&mut t, &p, d, true);
        if moe {
            t.quantized(&format!("{p}.mlp.gate"), &[4], HIDDEN, 8, 64);
            t.quantized(
                &format!("{p}.mlp.switch_mlp.gate_proj"),
                &[4, 64],
                HIDDEN,
                4,
                64,
            );
            t.quantized(
                &format!("{p}.mlp.switch_mlp.up_proj"),
                &[4, 64],
                HIDDEN,
                4,
                64,
            );
            t.quantized(
                &format!("{p}.mlp.switch_mlp.down_proj"),
                &[4, HIDDEN],
                64,
                4,
                64,
            );
        } else {
            t.quantized(&format!("{p}.mlp.gate_proj"), &[FFN], HIDDEN, 4, 64);
            t.quantized(&format!("{p}.mlp.up_proj"), &[FFN], HIDDEN, 4, 64);
            t.quantized(&format!("{p}.mlp.down_proj"), &[HIDDEN], FFN, 4, 64);
        }
    }
    t.norm("model.norm.weight", HIDDEN);
    t
}

/// GPT-2's byte-to-symbol map: printable bytes stand for themselves, the rest move past 255.
fn byte_symbols() -> Vec<char> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
    let mut next = 256;
    (0..256u32)
        .map(|b| match printable(b) {
            true => char::from_u32(b).unwrap(),
            false => {
                next += 1;
                char::from_u32(next - 1).unwrap()
            }
        })
        .collect()
}

/// A byte-level BPE `tokenizer.json` (256 byte tokens, merges `h e` → 256 and `l l` → 257,
/// specials `<|im_start|>` 258, `<s>` 259 and `<|im_end|>` 260) and its
/// `tokenizer_config.json`; `bos_first` adds a post-processor that puts `<s>` first.
pub fn write_tokenizer(dir: &Path, bos_first: bool) {
    let mut vocab = serde_json::Map::new();
    for (i, c) in byte_symbols().into_iter().enumerate() {
        vocab.insert(c.to_string(), json!(i));
    }
    vocab.insert("he".into(), json!(256));
    vocab.insert("ll".into(), json!(257));
    let special = |id: u32, content: &str| {
        json!({"id": id, "content": content, "single_word": false, "lstrip": false,
               "rstrip": false, "normalized": false, "special": true})
    };
    let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false,
                            "trim_offsets": true, "use_regex": true});
    let post = if bos_first {
        json!({"type": "TemplateProcessing",
               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                          {"Sequence": {"id": "A", "type_id": 0}}],
               "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                        {"Sequence": {"id": "B", "type_id": 1}}],
               "special_tokens": {"<s>": {"id": "<s>", "ids": [259], "tokens": ["<s>"]}}})
    } else {
        Value::Null
    };
    let tokenizer = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(258, "<|im_start|>"), special(259, "<s>"),
                         special(260, "<|im_end|>")],
        "normalizer": null, "pre_tokenizer": byte_level, "post_processor": post,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
                  "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": ["h e", "l l"]},
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    let template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n\
                    {% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    let config = json!({"chat_template": template, "eos_token": "<|im_end|>"});
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
}
