//! The decode driver on tiny MLX model directories written here (`mlx_dir`: no download).
//!
//! - Each architecture (llama sharded with a per-module quantization override, an 8-bit
//!   embedding, an untied head and a dense projection; qwen3 with head norms, a wider head, f16
//!   scales and the head tied by default; qwen3_moe with an 8-bit router and stacked experts)
//!   gives, bit for bit, the logits of the same weights built in memory through the driver's
//!   public types, with q/k rows (and head-norm gains) moved to adjacent-pair order by the
//!   test's own permutation.
//! - RoPE: the directory's half-split rows run as loaded match the kernel's own half-split
//!   rotation on the rows as stored (HF's `rotate_half`) within f32 rounding, the wrong pairing
//!   does not, and mlx-lm's `rope_traditional: true` leaves rows as stored.
//! - The tokenizer, BOS rule, stop ids and chat template come from the directory.
//! - Bad directories (missing tensor, bad bits or shapes, malformed JSON, unknown
//!   architecture, …) are typed errors naming what is wrong.

mod mlx_dir;

use kiln::ops::{interleave_rows, MoeActivation, MoeExperts, QuantizedWeight};
use kiln::{DType, Device, Tensor};
use kiln_benches::decode::{
    generate, trace_logits, Checkpoint, DecodeError, GateUp, HostMatrix, LayerWeights, LlamaConfig,
    Matrix, Mlp, Model, ModelFile, QkNorm, QkvProjection, Sampler, SamplingParams, Weights,
};
use kiln_tests::seed;
use mlx_dir::{tiny_llama, tiny_qwen3, write_tokenizer, TempDir, Tiny};
use safetensors::Dtype;
use serde_json::json;

/// The q/k row order the in-memory weights take.
#[derive(Clone, Copy)]
enum Rows {
    /// As stored (Hugging Face's, half-split).
    AsStored,
    /// Each head's two halves interleaved, as llama.cpp's converter does.
    Adjacent,
}

/// For each row of one head of `d` in adjacent-pair order, the stored row: adjacent row
/// `2i + j` is half-split row `j·d/2 + i`.
fn adjacent_source(d: usize, r: usize) -> usize {
    (r % 2) * (d / 2) + r / 2
}

/// `m`'s rows (`heads` heads) in `rows` order.
fn reorder(m: &HostMatrix, heads: usize, rows: Rows) -> HostMatrix {
    let d = m.rows() / heads;
    let parts: Vec<HostMatrix> = (0..m.rows())
        .map(|r| {
            let src = match rows {
                Rows::AsStored => r,
                Rows::Adjacent => (r / d) * d + adjacent_source(d, r % d),
            };
            let HostMatrix::Affine(t) = m else {
                panic!("the tiny models' q and k are quantized")
            };
            let words = t.w_q().len() / t.rows();
            let span = t.scales_bytes().len() / t.rows();
            let part = kiln::quant::AffineTensor::from_parts(
                t.format(),
                1,
                t.cols(),
                t.w_q()[src * words..(src + 1) * words].to_vec(),
                t.scales_bytes()[src * span..(src + 1) * span].to_vec(),
                t.biases_bytes()[src * span..(src + 1) * span].to_vec(),
            );
            HostMatrix::Affine(part.unwrap())
        })
        .collect();
    HostMatrix::stack(&parts.iter().collect::<Vec<_>>()).unwrap()
}

/// The weights of `t` built in memory through the driver's public types, with the fusions the
/// driver makes (q/k/v stacked unless heads are normalised, gate/up interleaved where they
/// share a format) and q/k rows and head-norm gains in `rows` order.
fn in_memory(t: &Tiny, cfg: &LlamaConfig, dev: &Device, rows: Rows) -> Weights {
    let up = |m: &HostMatrix| m.upload(dev).unwrap();
    let module = |name: &str| &t.modules[name];
    let norm = |name: &str| {
        let v = &t.norms[name];
        Tensor::from_slice(dev, &[v.len()], v).unwrap()
    };
    let head_gain = |name: &str| {
        let v = &t.norms[name];
        let d = v.len();
        let moved: Vec<f32> = match rows {
            Rows::AsStored => v.clone(),
            Rows::Adjacent => (0..d).map(|r| v[adjacent_source(d, r)]).collect(),
        };
        Tensor::from_slice(dev, &[d], &moved).unwrap()
    };
    let layers = (0..cfg.layers)
        .map(|l| {
            let p = format!("model.layers.{l}");
            let q = reorder(module(&format!("{p}.self_attn.q_proj")), cfg.heads, rows);
            let k = reorder(module(&format!("{p}.self_attn.k_proj")), cfg.kv_heads, rows);
            let v = module(&format!("{p}.self_attn.v_proj"));
            let (qkv, qk_norm) = if cfg.qk_norm {
                let norms = QkNorm {
                    q: head_gain(&format!("{p}.self_attn.q_norm.weight")),
                    k: head_gain(&format!("{p}.self_attn.k_norm.weight")),
                };
                let parts = [up(&q), up(&k), up(v)];
                (QkvProjection::Split(Box::new(parts)), Some(norms))
            } else {
                let stacked = HostMatrix::stack(&[&q, &k, v]).unwrap();
                (QkvProjection::Fused(up(&stacked)), None)
            };
            let mlp = match cfg.moe {
                None => {
                    let gate_up = match (
                        module(&format!("{p}.mlp.gate_proj")),
                        module(&format!("{p}.mlp.up_proj")),
                    ) {
                        (HostMatrix::Affine(g), HostMatrix::Affine(u)) => {
                            let w = interleave_rows(g, u).unwrap();
                            GateUp::Interleaved(QuantizedWeight::upload(dev, &w).unwrap())
                        }
                        (g, u) => GateUp::Split {
                            gate: up(g),
                            up: up(u),
                        },
                    };
                    let down = up(module(&format!("{p}.mlp.down_proj")));
                    Mlp::Dense { gate_up, down }
                }
                Some(m) => {
                    let q = |name: &str| match module(&format!("{p}.mlp.switch_mlp.{name}")) {
                        HostMatrix::Affine(a) => QuantizedWeight::upload(dev, a).unwrap(),
                        HostMatrix::Dense { .. } => unreachable!("the experts are quantized"),
                    };
                    let (g, u, d) = (q("gate_proj"), q("up_proj"), q("down_proj"));
                    let experts =
                        MoeExperts::new(m.experts, MoeActivation::SwiGlu, g, Some(u), d).unwrap();
                    Mlp::Moe {
                        router: up(module(&format!("{p}.mlp.gate"))),
                        experts,
                        expert_bytes: 0,
                    }
                }
            };
            LayerWeights {
                attn_norm: norm(&format!("{p}.input_layernorm.weight")),
                qkv,
                qk_norm,
                wo: up(module(&format!("{p}.self_attn.o_proj"))),
                ffn_norm: norm(&format!("{p}.post_attention_layernorm.weight")),
                mlp,
            }
        })
        .collect();
    Weights {
        embed: up(module("model.embed_tokens")),
        layers,
        hybrid: vec![],
        output_norm: norm("model.norm.weight"),
        lm_head: t.modules.get("lm_head").map(up),
    }
}

/// Teacher-forced logits of `ids` through `w`.
fn logits(cfg: &LlamaConfig, w: Weights, dev: &Device, ids: &[u32]) -> Vec<Vec<f32>> {
    let mut model = Model::new(cfg.clone(), w, dev, 32).unwrap();
    let mut out = Tensor::zeros(dev, DType::F32, &[1, cfg.vocab]).unwrap();
    trace_logits(&mut model, ids, &mut out).unwrap()
}

const IDS: [u32; 5] = [104, 258, 7, 260, 33];

/// Asserts `got` equals `want` bit for bit at every position.
fn assert_bitwise(got: &[Vec<f32>], want: &[Vec<f32>], what: &str) {
    for (p, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(a.iter().all(|x| x.is_finite()), "{what}: position {p}");
        let same = a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "{what}: position {p}'s logits differ");
    }
}

/// `t` written, opened as a checkpoint, its logits equal to the in-memory path's (rows in
/// adjacent-pair order) bit for bit; returns the loaded weights.
fn loads_as_written(t: &Tiny, name: &str, shards: usize) -> Weights {
    let dir = TempDir::new(name);
    t.write(&dir.0, shards);
    let dev = Device::cpu();
    let mut ckpt = Checkpoint::open(&dir.0).unwrap();
    let cfg = ckpt.config().unwrap();
    assert!(
        cfg.rope_traditional,
        "the loader moves rows to adjacent pairs"
    );
    let loaded = logits(&cfg, ckpt.load_weights(&cfg, &dev).unwrap(), &dev, &IDS);
    let want = logits(&cfg, in_memory(t, &cfg, &dev, Rows::Adjacent), &dev, &IDS);
    assert_bitwise(&loaded, &want, name);
    ckpt.load_weights(&cfg, &dev).unwrap()
}

#[test]
fn an_mlx_llama_directory_loads_as_written() {
    let s = seed("an_mlx_llama_directory_loads_as_written");
    let w = loads_as_written(&tiny_llama(s), "mlx-llama", 2);
    let Matrix::Quantized(embed) = &w.embed else {
        panic!("the embedding is quantized")
    };
    assert_eq!(
        (embed.format().bits(), embed.format().group_size()),
        (8, 32)
    );
    assert!(w.lm_head.is_some(), "the head is untied");
    assert!(matches!(w.layers[0].qkv, QkvProjection::Fused(_)));
    assert!(matches!(
        &w.layers[1].mlp,
        Mlp::Dense {
            gate_up: GateUp::Interleaved(_),
            down: Matrix::Dense(_)
        }
    ));
}

#[test]
fn qwen3_and_qwen3_moe_directories_load_as_written() {
    let s = seed("qwen3_and_qwen3_moe_directories_load_as_written");
    let w = loads_as_written(&tiny_qwen3(false, s), "mlx-qwen3", 1);
    assert!(w.lm_head.is_none(), "no lm_head stored: tied");
    assert!(w.layers[0].qk_norm.is_some());
    assert!(matches!(w.layers[0].qkv, QkvProjection::Split(_)));
    let w = loads_as_written(&tiny_qwen3(true, s), "mlx-qwen3-moe", 1);
    assert!(w.lm_head.is_some(), "tie_word_embeddings: false");
    let Mlp::Moe { router, .. } = &w.layers[1].mlp else {
        panic!("qwen3_moe's layers are MoE")
    };
    let Matrix::Quantized(router) = router else {
        panic!("the router is quantized")
    };
    assert_eq!(router.format().bits(), 8);
}

fn nrms(got: &[f32], want: &[f32]) -> f64 {
    let (mut e, mut r) = (0f64, 0f64);
    for (&g, &w) in got.iter().zip(want) {
        e += (g as f64 - w as f64).powi(2);
        r += (w as f64).powi(2);
    }
    (e / r.max(1e-30)).sqrt()
}

fn argmax(row: &[f32]) -> usize {
    (0..row.len()).fold(0, |best, i| if row[i] > row[best] { i } else { best })
}

/// The RoPE order of `t`'s directory: as loaded (rows moved, adjacent pairs) against the rows
/// as stored through the kernel's half-split rotation.
fn rope_orders_agree(t: &Tiny, name: &str) {
    let dir = TempDir::new(name);
    t.write(&dir.0, 1);
    let dev = Device::cpu();
    let mut ckpt = Checkpoint::open(&dir.0).unwrap();
    let cfg = ckpt.config().unwrap();
    let loaded = logits(&cfg, ckpt.load_weights(&cfg, &dev).unwrap(), &dev, &IDS);
    let mut half = cfg.clone();
    half.rope_traditional = false;
    let rotate_half = logits(&half, in_memory(t, &half, &dev, Rows::AsStored), &dev, &IDS);
    // Asked for half-split RoPE, the loader leaves the rows as stored.
    let as_stored = logits(&half, ckpt.load_weights(&half, &dev).unwrap(), &dev, &IDS);
    assert_bitwise(&as_stored, &rotate_half, name);
    let wrong = logits(&cfg, in_memory(t, &cfg, &dev, Rows::AsStored), &dev, &IDS);
    for p in 1..IDS.len() {
        // Same rotations of the same values; only attention's sums over head dims reorder.
        let e = nrms(&loaded[p], &rotate_half[p]);
        assert!(e < 1e-5, "{name}: position {p}: nrms {e:.2e}");
        assert_eq!(argmax(&loaded[p]), argmax(&rotate_half[p]), "{name}: {p}");
        let e = nrms(&wrong[p], &rotate_half[p]);
        assert!(
            e > 1e-3,
            "{name}: position {p}: the order must matter ({e:.2e})"
        );
    }
}

#[test]
fn half_split_rows_run_as_hugging_faces_rotate_half() {
    let s = seed("half_split_rows_run_as_hugging_faces_rotate_half");
    rope_orders_agree(&tiny_llama(s), "mlx-rope-llama");
    rope_orders_agree(&tiny_qwen3(false, s), "mlx-rope-qwen3");
    // mlx-lm's `rope_traditional: true`: the rows are stored for adjacent pairs already.
    let mut t = tiny_llama(s);
    t.config["rope_traditional"] = json!(true);
    let dir = TempDir::new("mlx-rope-traditional");
    t.write(&dir.0, 1);
    let dev = Device::cpu();
    let mut ckpt = Checkpoint::open(&dir.0).unwrap();
    let cfg = ckpt.config().unwrap();
    let loaded = logits(&cfg, ckpt.load_weights(&cfg, &dev).unwrap(), &dev, &IDS);
    let want = logits(&cfg, in_memory(&t, &cfg, &dev, Rows::AsStored), &dev, &IDS);
    assert_bitwise(&loaded, &want, "rope_traditional");
}

#[test]
fn the_tokenizer_stop_ids_and_chat_template_come_from_the_directory() {
    let s = seed("the_tokenizer_stop_ids_and_chat_template_come_from_the_directory");
    let t = tiny_qwen3(false, s);
    let dir = TempDir::new("mlx-tokenizer");
    t.write(&dir.0, 1);
    std::fs::write(
        dir.0.join("generation_config.json"),
        json!({"eos_token_id": [2, 258]}).to_string(),
    )
    .unwrap();
    let mut f = ModelFile::open(&dir.0).unwrap();
    let tk = &f.tokenizer;
    assert_eq!(tk.vocab(), 261);
    assert_eq!(
        tk.stop_ids(),
        [260, 2, 258],
        "config's ids, then generation_config's"
    );
    let ids = tk.encode("hello<|im_end|>").unwrap();
    assert_eq!(
        ids,
        [256, 257, b'o' as u32, 260],
        "merges and a special, no BOS"
    );
    assert_eq!(tk.decode(&ids).unwrap(), "hello");
    let chat = tk.chat_prompt("hi").unwrap();
    assert_eq!(
        chat,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );

    // The whole path `kiln generate` takes: greedy tokens from the directory.
    let dev = Device::cpu();
    let prompt = f.tokenizer.encode(&chat).unwrap();
    let mut model = f.load(&dev, 32).unwrap();
    let mut sampler = Sampler::new(&dev, f.config.vocab, SamplingParams::default()).unwrap();
    let r = generate(&mut model, &f.tokenizer, &prompt, 4, &mut sampler, |_| {});
    assert!(!r.unwrap().generated.is_empty());

    // A post-processor that puts `<s>` first makes BOS part of `encode`.
    write_tokenizer(&dir.0, true);
    let f = ModelFile::open(&dir.0).unwrap();
    assert_eq!(f.tokenizer.encode("he").unwrap(), [259, 256]);

    // A gap in the added tokens' ids: the `tokenizers` crate would renumber them.
    let path = dir.0.join("tokenizer.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    json["added_tokens"][2]["id"] = json!(261);
    std::fs::write(&path, json.to_string()).unwrap();
    let e = ModelFile::open(&dir.0).err().unwrap();
    let refused = matches!(&e, DecodeError::File { path, why } if path.ends_with("tokenizer.json") && why.contains("<|im_end|>"));
    assert!(refused, "{e}");
}

/// The error of opening and loading `t` written after `edit`.
fn open_edited(name: &str, seed: u64, edit: impl FnOnce(&mut Tiny)) -> DecodeError {
    let mut t = tiny_llama(seed);
    edit(&mut t);
    let dir = TempDir::new(name);
    t.write(&dir.0, 1);
    let opened = ModelFile::open(&dir.0).and_then(|mut f| f.load(&Device::cpu(), 16).map(drop));
    opened.expect_err("the directory must be refused")
}

#[test]
fn bad_directories_are_typed_errors() {
    let s = seed("bad_directories_are_typed_errors");
    let o = "model.layers.1.self_attn.o_proj";
    let e = open_edited("mlx-missing", s, |t| {
        t.tensors.remove(&format!("{o}.weight"));
    });
    assert!(
        matches!(&e, DecodeError::MissingTensor(n) if *n == format!("{o}.weight")),
        "{e}"
    );
    let e = open_edited("mlx-scales", s, |t| {
        t.tensors.remove(&format!("{o}.scales"));
    });
    assert!(
        matches!(&e, DecodeError::MissingTensor(n) if *n == format!("{o}.scales")),
        "{e}"
    );
    let e = open_edited("mlx-biases", s, |t| {
        t.tensors.remove(&format!("{o}.biases"));
    });
    assert!(
        matches!(&e, DecodeError::MissingTensor(n) if *n == format!("{o}.biases")),
        "{e}"
    );
    // 8 bits where 4 are stored: the codes are half as wide as the config implies.
    let e = open_edited("mlx-bits", s, |t| {
        t.config["quantization"][o] = json!({"group_size": 64, "bits": 8});
    });
    assert!(
        matches!(&e, DecodeError::TensorShape { tensor, .. } if *tensor == format!("{o}.weight")),
        "{e}"
    );
    let e = open_edited("mlx-bits7", s, |t| {
        t.config["quantization"]["bits"] = json!(7);
    });
    assert!(
        matches!(&e, DecodeError::BadMeta { key, .. } if key == "quantization"),
        "{e}"
    );
    let e = open_edited("mlx-unquantized", s, |t| {
        t.config["quantization"][o] = json!(false);
    });
    assert!(
        matches!(&e, DecodeError::BadTensor { tensor, .. } if *tensor == format!("{o}.scales")),
        "{e}"
    );
    let e = open_edited("mlx-dtype", s, |t| {
        t.tensors.get_mut(&format!("{o}.scales")).unwrap().dtype = Dtype::I16;
    });
    assert!(matches!(&e, DecodeError::BadTensor { .. }), "{e}");
    let e = open_edited("mlx-arch", s, |t| {
        t.config["model_type"] = json!("gpt_neox");
    });
    assert!(
        matches!(&e, DecodeError::UnsupportedArch(a) if a == "gpt_neox"),
        "{e}"
    );
    let e = open_edited("mlx-scaling", s, |t| {
        t.config["rope_scaling"] = json!({"type": "linear", "factor": 2.0});
    });
    assert!(
        matches!(&e, DecodeError::BadMeta { key, .. } if key == "rope_scaling"),
        "{e}"
    );
    let e = open_edited("mlx-vocab", s, |t| {
        t.config["vocab_size"] = json!(200);
    });
    assert!(
        matches!(&e, DecodeError::BadMeta { key, .. } if key == "vocab_size"),
        "{e}"
    );
    let dir = TempDir::new("mlx-no-config");
    tiny_llama(s).write(&dir.0, 1);
    std::fs::remove_file(dir.0.join("config.json")).unwrap();
    let e = ModelFile::open(&dir.0).err().unwrap();
    assert!(
        matches!(&e, DecodeError::File { path, .. } if path.ends_with("config.json")),
        "{e}"
    );
    // A shard cut short: its header promises bytes the file does not hold.
    let shard = dir.0.join("model.safetensors");
    std::fs::write(dir.0.join("config.json"), tiny_llama(s).config.to_string()).unwrap();
    let bytes = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &bytes[..bytes.len() - 100]).unwrap();
    let e = ModelFile::open(&dir.0).err().unwrap();
    assert!(
        matches!(&e, DecodeError::File { path, .. } if path.ends_with("model.safetensors")),
        "{e}"
    );
}

/// The error of opening `t` written in two shards, then with `file` replaced by `text`.
fn open_with_file(name: &str, t: &Tiny, file: &str, text: &str) -> DecodeError {
    let dir = TempDir::new(name);
    t.write(&dir.0, 2);
    std::fs::write(dir.0.join(file), text).unwrap();
    ModelFile::open(&dir.0)
        .err()
        .expect("the directory must be refused")
}

#[test]
fn malformed_files_and_shapes_are_typed_errors() {
    let s = seed("malformed_files_and_shapes_are_typed_errors");
    let t = tiny_llama(s);
    let names_file = |e: &DecodeError, file: &str| matches!(e, DecodeError::File { path, .. } if path.ends_with(file));
    for file in [
        "config.json",
        "model.safetensors.index.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        let e = open_with_file("mlx-malformed", &t, file, "{\"model_type\": ");
        assert!(names_file(&e, file), "{file}: {e}");
    }
    let e = open_with_file("mlx-config-array", &t, "config.json", "[1, 2]");
    assert!(
        matches!(&e, DecodeError::BadMeta { key, .. } if key == "config.json"),
        "{e}"
    );
    // The index names a shard that is not there.
    let index = json!({"weight_map": {"model.norm.weight": "model-00009-of-00009.safetensors"}});
    let e = open_with_file(
        "mlx-index",
        &t,
        "model.safetensors.index.json",
        &index.to_string(),
    );
    assert!(names_file(&e, "model-00009-of-00009.safetensors"), "{e}");
    let index = json!({"weight_map": {"model.norm.weight": "../elsewhere.safetensors"}});
    let e = open_with_file(
        "mlx-index-path",
        &t,
        "model.safetensors.index.json",
        &index.to_string(),
    );
    assert!(names_file(&e, "model.safetensors.index.json"), "{e}");

    // Scales of the wrong width: one group too few per row.
    let o = "model.layers.0.self_attn.o_proj";
    let e = open_edited("mlx-scales-shape", s, |t| {
        let scales = t.tensors.get_mut(&format!("{o}.scales")).unwrap();
        let rows = scales.shape[0];
        scales.shape = vec![rows / 2, 2];
    });
    assert!(
        matches!(&e, DecodeError::TensorShape { tensor, .. } if *tensor == format!("{o}.scales")),
        "{e}"
    );
    // Codes stored as i32 rather than MLX's u32.
    let e = open_edited("mlx-codes-dtype", s, |t| {
        t.tensors.get_mut(&format!("{o}.weight")).unwrap().dtype = Dtype::I32;
    });
    assert!(
        matches!(&e, DecodeError::BadTensor { tensor, .. } if *tensor == format!("{o}.weight")),
        "{e}"
    );
    // A norm gain of the wrong length.
    let norm = "model.layers.1.input_layernorm.weight";
    let e = open_edited("mlx-norm-shape", s, |t| {
        let n = t.tensors.get_mut(norm).unwrap();
        n.shape = vec![n.shape[0] / 2, 2];
    });
    assert!(
        matches!(&e, DecodeError::TensorShape { tensor, .. } if tensor == norm),
        "{e}"
    );
}
