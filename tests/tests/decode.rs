//! The decode driver on a tiny synthetic Llama GGUF built here (no download): every sampler,
//! no device allocation in a warm step, the split q/k/v and gate/up paths against the fused
//! ones, the sim against the cpu, the tokenizer's byte-level BPE and streaming, and typed
//! errors for bad files and bad inputs. The real model's checks are in `decode_trace.rs`.

use kiln::quant::{GgmlType, GgufFile, GgufWriter, MetaValue, Repacked, ValueType};
use kiln::{Backend, DType, Device, Tensor};
use kiln_benches::decode::{
    generate, trace_logits, DecodeError, GateUp, Mlp, ModelFile, QkvProjection, Sampler,
    SamplerKind, SamplingParams, TextStream,
};

const LAYERS: usize = 2;
const HIDDEN: usize = 64;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const HEAD_DIM: usize = HIDDEN / HEADS;
const FFN: usize = 96;
/// 256 byte tokens, two merged pairs, two specials.
const VOCAB: usize = 260;
const IM_START: u32 = 258;
const IM_END: u32 = 259;

/// GPT-2's byte-to-symbol map: printable bytes stand for themselves, the rest move past 255.
fn byte_symbols() -> Vec<char> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
    let mut next = 256;
    (0..256u32)
        .map(|b| {
            if printable(b) {
                char::from_u32(b).unwrap()
            } else {
                next += 1;
                char::from_u32(next - 1).unwrap()
            }
        })
        .collect()
}

/// A deterministic stream of words.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    fn unit(&mut self) -> f32 {
        self.next() as f32 / (1u64 << 31) as f32
    }
}

fn f16_bytes(v: f32) -> [u8; 2] {
    use kiln::math::Element;
    kiln::math::F16::from_f32(v).0.to_le_bytes()
}

/// `rows × cols` of Q4_1 blocks: scale `d`, minimum `−8d` (centred), random codes.
fn q4_1(rng: &mut Lcg, rows: usize, cols: usize, d: f32) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rows * cols / 32 {
        let d = d * (0.5 + rng.unit());
        out.extend(f16_bytes(d));
        out.extend(f16_bytes(-8.0 * d));
        out.extend((0..16).map(|_| rng.next() as u8));
    }
    out
}

/// `rows × cols` of Q8_0 blocks.
fn q8_0(rng: &mut Lcg, rows: usize, cols: usize, d: f32) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rows * cols / 32 {
        out.extend(f16_bytes(d * (0.5 + rng.unit())));
        out.extend((0..32).map(|_| rng.next() as u8));
    }
    out
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn strings(items: &[String]) -> MetaValue {
    MetaValue::Array {
        item_type: ValueType::String,
        items: items.iter().map(|s| MetaValue::String(s.clone())).collect(),
    }
}

/// What to change in the tiny model.
#[derive(Default)]
struct Edits {
    arch: Option<&'static str>,
    tokenizer_model: Option<&'static str>,
    skip_tensor: Option<&'static str>,
    /// q/k/v of a wrong width.
    bad_q_dims: bool,
    /// attn_v and ffn_up stored as F32 holding the Q4_1 tensors' exact values.
    dense_v_and_up: bool,
    /// A norm gain stored quantized.
    quantized_norm: bool,
}

/// The tiny model's GGUF bytes.
fn tiny_gguf(e: &Edits) -> Vec<u8> {
    let mut w = GgufWriter::new();
    let s = |v: &str| MetaValue::String(v.into());
    let u = |v: usize| MetaValue::U32(v as u32);
    w.add_metadata("general.architecture", s(e.arch.unwrap_or("llama")));
    w.add_metadata("llama.block_count", u(LAYERS));
    w.add_metadata("llama.context_length", u(64));
    w.add_metadata("llama.embedding_length", u(HIDDEN));
    w.add_metadata("llama.feed_forward_length", u(FFN));
    w.add_metadata("llama.attention.head_count", u(HEADS));
    w.add_metadata("llama.attention.head_count_kv", u(KV_HEADS));
    w.add_metadata("llama.rope.freq_base", MetaValue::F32(10_000.0));
    w.add_metadata(
        "llama.attention.layer_norm_rms_epsilon",
        MetaValue::F32(1e-5),
    );
    w.add_metadata(
        "tokenizer.ggml.model",
        s(e.tokenizer_model.unwrap_or("gpt2")),
    );
    w.add_metadata("tokenizer.ggml.pre", s("smollm"));
    let mut tokens: Vec<String> = byte_symbols().iter().map(|c| c.to_string()).collect();
    tokens.extend(["he", "ll", "<|im_start|>", "<|im_end|>"].map(String::from));
    assert_eq!(tokens.len(), VOCAB);
    let types = (0..VOCAB)
        .map(|i| MetaValue::I32(if i >= IM_START as usize { 3 } else { 1 }))
        .collect();
    w.add_metadata("tokenizer.ggml.tokens", strings(&tokens));
    w.add_metadata(
        "tokenizer.ggml.token_type",
        MetaValue::Array {
            item_type: ValueType::I32,
            items: types,
        },
    );
    w.add_metadata(
        "tokenizer.ggml.merges",
        strings(&["h e".to_string(), "l l".to_string()]),
    );
    w.add_metadata("tokenizer.ggml.eos_token_id", u(IM_END as usize));
    w.add_metadata(
        "tokenizer.chat_template",
        s("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
    );
    let mut rng = Lcg(7);
    let mut add = |name: String, cols: usize, rows: usize, t: GgmlType, bytes: Vec<u8>| {
        if e.skip_tensor != Some(name.as_str()) {
            let dims = if rows == 1 {
                vec![cols as u64]
            } else {
                vec![cols as u64, rows as u64]
            };
            w.add_tensor(&name, &dims, t, bytes).unwrap();
        }
    };
    add(
        "token_embd.weight".into(),
        HIDDEN,
        VOCAB,
        GgmlType::Q8_0,
        q8_0(&mut rng, VOCAB, HIDDEN, 0.02),
    );
    let norm = |rng: &mut Lcg| {
        f32_bytes(
            &(0..HIDDEN)
                .map(|_| 0.8 + 0.4 * rng.unit())
                .collect::<Vec<_>>(),
        )
    };
    let (qw, kvw) = (HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
    for l in 0..LAYERS {
        let n = |t: &str| format!("blk.{l}.{t}.weight");
        // A Q4_1 matrix, or (for the dense edit) F32 bytes of its exact values.
        let matrix =
            |rng: &mut Lcg, rows: usize, cols: usize, dense: bool| -> (GgmlType, Vec<u8>) {
                let bytes = q4_1(rng, rows, cols, 0.3 / (cols as f32).sqrt());
                if !dense {
                    return (GgmlType::Q4_1, bytes);
                }
                let dims = [cols as u64, rows as u64];
                let Repacked::Affine(t) =
                    kiln::quant::repack("m", GgmlType::Q4_1, &dims, &bytes).unwrap()
                else {
                    unreachable!()
                };
                (GgmlType::F32, f32_bytes(&kiln::quant::dequantize(&t)))
            };
        if e.quantized_norm && l == 1 {
            add(
                n("attn_norm"),
                HIDDEN,
                1,
                GgmlType::Q4_1,
                q4_1(&mut rng, 1, HIDDEN, 0.1),
            );
        } else {
            add(n("attn_norm"), HIDDEN, 1, GgmlType::F32, norm(&mut rng));
        }
        let q_rows = if e.bad_q_dims { qw + 32 } else { qw };
        let (t, b) = matrix(&mut rng, q_rows, HIDDEN, false);
        add(n("attn_q"), HIDDEN, q_rows, t, b);
        let (t, b) = matrix(&mut rng, kvw, HIDDEN, false);
        add(n("attn_k"), HIDDEN, kvw, t, b);
        let (t, b) = matrix(&mut rng, kvw, HIDDEN, e.dense_v_and_up);
        add(n("attn_v"), HIDDEN, kvw, t, b);
        let (t, b) = matrix(&mut rng, HIDDEN, qw, false);
        add(n("attn_output"), qw, HIDDEN, t, b);
        add(n("ffn_norm"), HIDDEN, 1, GgmlType::F32, norm(&mut rng));
        let (t, b) = matrix(&mut rng, FFN, HIDDEN, false);
        add(n("ffn_gate"), HIDDEN, FFN, t, b);
        let (t, b) = matrix(&mut rng, FFN, HIDDEN, e.dense_v_and_up);
        add(n("ffn_up"), HIDDEN, FFN, t, b);
        let (t, b) = matrix(&mut rng, HIDDEN, FFN, false);
        add(n("ffn_down"), FFN, HIDDEN, t, b);
    }
    add(
        "output_norm.weight".into(),
        HIDDEN,
        1,
        GgmlType::F32,
        norm(&mut rng),
    );
    w.to_bytes().unwrap()
}

fn tiny(e: &Edits) -> Result<ModelFile, DecodeError> {
    ModelFile::from_gguf(GgufFile::from_bytes(tiny_gguf(e))?)
}

/// Teacher-forced logits of `ids` on `dev`.
fn logits_of(e: &Edits, dev: &Device, ids: &[u32]) -> Vec<Vec<f32>> {
    let mut f = tiny(e).unwrap();
    let mut model = f.load(dev, ids.len()).unwrap();
    let mut out = Tensor::zeros(dev, DType::F32, &[1, VOCAB]).unwrap();
    trace_logits(&mut model, ids, &mut out).unwrap()
}

fn nrms(got: &[f32], want: &[f32]) -> f64 {
    let d: f64 = got
        .iter()
        .zip(want)
        .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
        .sum();
    let w: f64 = want.iter().map(|b| (*b as f64).powi(2)).sum();
    (d / w.max(1e-40)).sqrt()
}

const IDS: [u32; 6] = [104, 256, 257, 111, 32, 33];

#[test]
fn every_sampler_generates_and_a_warm_step_allocates_nothing() {
    let dev = Device::cpu();
    let mut f = tiny(&Edits::default()).unwrap();
    assert_eq!(f.config.qkv_width(), (HEADS + 2 * KV_HEADS) * HEAD_DIM);
    let mut model = f.load(&dev, 40).unwrap();
    assert_eq!(
        model.capacity(),
        48,
        "40 tokens round up to three pages of 16"
    );
    let hot = SamplingParams {
        temperature: 0.8,
        seed: 3,
        ..Default::default()
    };
    for (params, kind) in [
        (SamplingParams::default(), SamplerKind::Greedy),
        (hot, SamplerKind::Gumbel),
        (
            SamplingParams {
                top_k: 20,
                top_p: 0.9,
                min_p: 0.02,
                ..hot
            },
            SamplerKind::Rejection,
        ),
    ] {
        let mut sampler = Sampler::new(&dev, VOCAB, params).unwrap();
        assert_eq!(sampler.kind(), kind);
        // The first run sizes kiln's scratch; a second identical run must allocate nothing.
        let run = |model: &mut _, sampler: &mut Sampler| {
            generate(model, &f.tokenizer, &IDS, 12, sampler, |_| {}).unwrap()
        };
        let first = run(&mut model, &mut sampler);
        let before = dev.allocations();
        let mut again = Sampler::new(&dev, VOCAB, params).unwrap();
        let after_new = dev.allocations();
        let second = run(&mut model, &mut again);
        assert_eq!(
            dev.allocations(),
            after_new,
            "{kind:?}: a warm generation allocated"
        );
        assert!(after_new >= before);
        // The same seed gives the same tokens.
        assert_eq!(first.generated, second.generated, "{kind:?}");
        assert!(!first.generated.is_empty() && first.generated.len() <= 12);
        assert!(first.generated.iter().all(|&id| (id as usize) < VOCAB));
    }
}

#[test]
fn split_projections_give_the_fused_ones_logits() {
    let dev = Device::cpu();
    let dense = Edits {
        dense_v_and_up: true,
        ..Default::default()
    };
    let mut f = tiny(&dense).unwrap();
    let w = f.checkpoint.load_weights(&f.config, &dev).unwrap();
    assert!(matches!(w.layers[0].qkv, QkvProjection::Split(_)));
    assert!(matches!(
        w.layers[0].mlp,
        Mlp::Dense {
            gate_up: GateUp::Split { .. },
            ..
        }
    ));
    let mut f = tiny(&Edits::default()).unwrap();
    let w = f.checkpoint.load_weights(&f.config, &dev).unwrap();
    assert!(matches!(w.layers[0].qkv, QkvProjection::Fused(_)));
    assert!(matches!(
        w.layers[0].mlp,
        Mlp::Dense {
            gate_up: GateUp::Interleaved(_),
            ..
        }
    ));
    // The same values in other layouts: only the order of f32 sums differs.
    let fused = logits_of(&Edits::default(), &dev, &IDS);
    let split = logits_of(&dense, &dev, &IDS);
    for (i, (a, b)) in split.iter().zip(&fused).enumerate() {
        let e = nrms(a, b);
        assert!(e < 1e-5, "position {i}: nrms {e:e}");
    }
    // And the logits are not degenerate: positions differ from one another.
    assert!(nrms(&fused[0], &fused[5]) > 1e-2);
}

#[test]
fn the_sim_gives_the_cpus_logits() {
    let sim = match Device::open(Backend::Sim) {
        Ok(d) => d,
        Err(e) => panic!("the sim is always present: {e}"),
    };
    let ids = &IDS[..2];
    let cpu = logits_of(&Edits::default(), &Device::cpu(), ids);
    let got = logits_of(&Edits::default(), &sim, ids);
    for (i, (a, b)) in got.iter().zip(&cpu).enumerate() {
        let e = nrms(a, b);
        assert!(e < 1e-5, "position {i}: nrms {e:e}");
    }
}

#[test]
fn byte_level_bpe_merges_specials_and_streams_whole_characters() {
    let f = tiny(&Edits::default()).unwrap();
    let t = &f.tokenizer;
    // "hello": h+e and l+l merge; digits split one by one.
    assert_eq!(t.encode("hello").unwrap(), vec![256, 257, 111]);
    assert_eq!(t.encode("42").unwrap(), vec![52, 50]);
    assert_eq!(t.encode("<|im_end|>a").unwrap(), vec![IM_END, 97]);
    assert_eq!(t.decode(&[256, 257, 111, IM_END]).unwrap(), "hello");
    assert_eq!(t.stop_ids(), &[IM_END]);
    let chat = t.chat_prompt("hi").unwrap();
    assert_eq!(
        chat,
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(t.encode(&chat).unwrap()[0], IM_START);
    // "é" is two bytes, two tokens: nothing comes out until the second.
    let e = t.encode("é").unwrap();
    assert_eq!(e, vec![0xC3, 0xA9]);
    let mut s = TextStream::new(t);
    assert_eq!(s.push(e[0]).unwrap(), "");
    assert_eq!(s.push(e[1]).unwrap(), "é");
    assert_eq!(s.push(33).unwrap(), "!");
    assert_eq!(s.finish().unwrap(), ("é!".to_string(), String::new()));
}

#[test]
fn bad_files_and_inputs_are_typed_errors() {
    assert!(matches!(
        tiny(&Edits { arch: Some("mamba"), ..Default::default() }),
        Err(DecodeError::UnsupportedArch(a)) if a == "mamba"
    ));
    assert!(matches!(
        tiny(&Edits {
            tokenizer_model: Some("llama"),
            ..Default::default()
        }),
        Err(DecodeError::Tokenizer(_))
    ));
    let path = std::env::temp_dir().join(format!("kiln-decode-{}.gguf", std::process::id()));
    std::fs::write(&path, b"GGML is not a GGUF").unwrap();
    let opened = ModelFile::open(&path);
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(opened, Err(DecodeError::Gguf(_))));
    let mut cut = tiny_gguf(&Edits::default());
    cut.truncate(cut.len() / 2);
    let truncated =
        || -> Result<ModelFile, DecodeError> { ModelFile::from_gguf(GgufFile::from_bytes(cut)?) };
    assert!(matches!(truncated(), Err(DecodeError::Gguf(_))));
    let dev = Device::cpu();
    let load = |e: Edits| tiny(&e).unwrap().load(&dev, 8).err();
    assert!(matches!(
        load(Edits { skip_tensor: Some("blk.1.ffn_down.weight"), ..Default::default() }),
        Some(DecodeError::MissingTensor(t)) if t == "blk.1.ffn_down.weight"
    ));
    assert!(matches!(
        load(Edits { bad_q_dims: true, ..Default::default() }),
        Some(DecodeError::TensorShape { tensor, .. }) if tensor == "blk.0.attn_q.weight"
    ));
    assert!(matches!(
        load(Edits { quantized_norm: true, ..Default::default() }),
        Some(DecodeError::BadTensor { tensor, .. }) if tensor == "blk.1.attn_norm.weight"
    ));
    let mut f = tiny(&Edits::default()).unwrap();
    let mut model = f.load(&dev, 8).unwrap();
    let mut logits = Tensor::zeros(&dev, DType::F32, &[1, VOCAB]).unwrap();
    assert!(matches!(
        model.step(VOCAB as u32, 0, &mut logits),
        Err(DecodeError::TokenOutOfVocab { id, vocab: VOCAB }) if id == VOCAB as u32
    ));
    assert!(matches!(
        model.step(1, 16, &mut logits),
        Err(DecodeError::ContextFull {
            position: 16,
            capacity: 16
        })
    ));
    assert!(matches!(
        f.tokenizer.decode(&[3, 999]),
        Err(DecodeError::TokenOutOfVocab { id: 999, .. })
    ));
    assert!(matches!(
        Sampler::new(
            &dev,
            VOCAB,
            SamplingParams {
                temperature: 1.0,
                top_p: 1.5,
                ..Default::default()
            }
        ),
        Err(DecodeError::Sampling(_))
    ));
    let mut sampler = Sampler::new(&dev, VOCAB, SamplingParams::default()).unwrap();
    assert!(matches!(
        generate(&mut model, &f.tokenizer, &[], 4, &mut sampler, |_| {}),
        Err(DecodeError::Tokenizer(_))
    ));
}
