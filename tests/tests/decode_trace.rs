//! The decode driver against an implementation that is not kiln's, on the real model:
//! teacher-forced logit traces of kiln's decode step vs Hugging Face transformers' Llama on the
//! same GGUF's dequantized weights (f32), which `tests/decode/ref_logits.py` writes next to the
//! model (`.ci/run` installs transformers and runs it before the tests); and greedy text across
//! kiln's own host backends.
//!
//! The rules: at every *decided* position (the reference's top-2 gap above
//! [`DECIDED_GAP`] logits) kiln's top-1 token is the reference's, and the logit rows agree
//! within [`NRMS_BOUND`] (spec §0.2's nrms, per position). Both sides compute in f32 from the
//! same dequantized weights, so what separates them is the order of f32 sums (kiln folds each
//! group's scale into per-group sums; torch runs dense GEMMs), the exponential in attention
//! (kiln's `exp2_approx`, a few ulp) and RoPE's angles, each ~1e-7 relative per op; 30 layers
//! of residual updates carry those to the logits. Measured (176 positions of four prompts):
//! kiln's largest per-position nrms is 1.1e-5 on the cpu (mean 1.9e-6) and 5e-6 on lavapipe;
//! llama.cpp on the same file, which rounds activations to 8 bits inside its Q4_1 and Q8_0 dot
//! products, sits at 0.17 (mean 0.035) against the same reference. The bound is ~40× kiln's
//! worst position, room for another backend's order of f32 sums, and ~350× below what merely
//! rounding activations to 8 bits gives, so any real error in a layer fails it long before a
//! top-1 token moves (`docs/results/generate-cpu-2026-12-04.md`).
//!
//! With bf16 activations (`cpu_bf16_greedy_follows_f32`) the reference is kiln's own f32 run,
//! checked above: the same greedy tokens, or a first divergence where f32 is undecided.
//!
//! Without the model or the reference file each test skips by name; under
//! `KILN_REQUIRE_MODEL=1` (CI) it fails instead.

use kiln::{Backend, DType, Device, Tensor};
use kiln_benches::decode::{trace_logits, ActDtype, ModelFile, Sampler, SamplingParams};
use kiln_tests::ggml::{model_required, test_model};
use std::path::{Path, PathBuf};

/// A position is decided when the reference's best logit leads its second by more than this.
const DECIDED_GAP: f32 = 2.0;
/// Largest nrms of one position's logits against the reference.
const NRMS_BOUND: f64 = 5e-4;
/// Largest nrms of one position's logits with bf16 activations against the f32 run's. bf16
/// rounds each activation to 8 significant bits (2^-9 ≈ 2e-3 relative) in each of 30 layers:
/// measured, the test's 8 positions reach 3.1e-2 (median 1.5e-2), and 90 positions of three
/// prompts of 32 greedy tokens 0.11 (median 1.6e-2, 90th percentile 3.7e-2); 0.15 is ~5× the
/// former. kiln's f32 run sits at 1e-5 of transformers' (above), so this measures bf16 alone.
const BF16_NRMS_BOUND: f64 = 0.15;

/// One prompt of the reference file.
struct RefPrompt {
    text: String,
    chat: bool,
    rendered: String,
    prompt_ids: Vec<u32>,
    ids: Vec<u32>,
    first_row: usize,
}

/// The reference's traces.
struct Reference {
    source: String,
    vocab: usize,
    prompts: Vec<RefPrompt>,
    logits: Vec<f32>,
}

impl Reference {
    fn row(&self, r: usize) -> &[f32] {
        &self.logits[r * self.vocab..(r + 1) * self.vocab]
    }
}

/// `KILN_DECODE_TRACE=<path without extension>`, else `models/trace/<model stem>`.
fn trace_path(model: &Path) -> PathBuf {
    if let Some(p) = std::env::var_os("KILN_DECODE_TRACE") {
        return PathBuf::from(p);
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let stem = model.file_stem().unwrap_or_default();
    repo.join("models").join("trace").join(stem)
}

/// The model and its reference trace, or `None` (skipped by name) when either is absent.
fn model_and_reference(test: &str) -> Option<(PathBuf, Reference)> {
    let model = test_model(test)?;
    let base = trace_path(&model);
    // The stem has dots of its own (`….Q4_1`): append, never replace, an extension.
    let with = |ext: &str| {
        let mut p = base.clone().into_os_string();
        p.push(ext);
        PathBuf::from(p)
    };
    let (json, bin) = (with(".json"), with(".bin"));
    if !json.is_file() || !bin.is_file() {
        let why = format!(
            "no reference trace at {}.{{json,bin}} (run tests/decode/ref_logits.py)",
            base.display()
        );
        assert!(!model_required(), "{test}: KILN_REQUIRE_MODEL=1 and {why}");
        eprintln!("skipped {test}: {why}");
        return None;
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).expect("reference JSON");
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    let prompts = meta["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| RefPrompt {
            text: p["text"].as_str().unwrap().to_string(),
            chat: p["chat"].as_bool().unwrap(),
            rendered: p["rendered"].as_str().unwrap().to_string(),
            prompt_ids: ids(&p["prompt_ids"]),
            ids: ids(&p["ids"]),
            first_row: p["first_row"].as_u64().unwrap() as usize,
        })
        .collect::<Vec<_>>();
    let bytes = std::fs::read(&bin).unwrap();
    let logits: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let vocab = meta["vocab"].as_u64().unwrap() as usize;
    let rows: usize = prompts.iter().map(|p| p.ids.len()).sum();
    assert_eq!(
        logits.len(),
        rows * vocab,
        "{} holds {rows} rows",
        bin.display()
    );
    Some((
        model,
        Reference {
            source: meta["reference"].as_str().unwrap_or("?").to_string(),
            vocab,
            prompts,
            logits,
        },
    ))
}

/// (best index, best − second best).
fn top2(row: &[f32]) -> (usize, f32) {
    let (mut best, mut second) = ((0, f32::NEG_INFINITY), f32::NEG_INFINITY);
    for (i, &v) in row.iter().enumerate() {
        if v > best.1 {
            second = best.1;
            best = (i, v);
        } else if v > second {
            second = v;
        }
    }
    (best.0, best.1 - second)
}

/// spec §0.2's nrms of `got` against `want`, in f64.
fn nrms(got: &[f32], want: &[f32]) -> f64 {
    let (mut d2, mut w2) = (0.0f64, 0.0f64);
    for (&g, &w) in got.iter().zip(want) {
        d2 += (g as f64 - w as f64).powi(2);
        w2 += (w as f64).powi(2);
    }
    let n = want.len().max(1) as f64;
    (d2 / n).sqrt() / (w2 / n).sqrt().max(1e-20)
}

/// What one backend's trace gave against the reference.
#[derive(Debug, Default)]
struct TraceStats {
    positions: usize,
    decided: usize,
    mismatches: Vec<String>,
    max_nrms: f64,
    sum_nrms: f64,
}

/// Runs every reference sequence through kiln on `dev` and
/// compares each position's logits with the reference's.
fn trace(model_path: &Path, reference: &Reference, dev: &Device) -> TraceStats {
    let mut file = ModelFile::open(model_path).unwrap();
    let longest = reference.prompts.iter().map(|p| p.ids.len()).max().unwrap();
    let mut model = file.load(dev, longest).unwrap();
    let mut logits = Tensor::zeros(dev, DType::F32, &[1, reference.vocab]).unwrap();
    let mut stats = TraceStats::default();
    for (pi, p) in reference.prompts.iter().enumerate() {
        let rows = trace_logits(&mut model, &p.ids, &mut logits).unwrap();
        for (i, got) in rows.iter().enumerate() {
            let want = reference.row(p.first_row + i);
            let (ref_top, gap) = top2(want);
            let (kiln_top, _) = top2(got);
            let e = nrms(got, want);
            stats.positions += 1;
            stats.max_nrms = stats.max_nrms.max(e);
            stats.sum_nrms += e;
            if gap > DECIDED_GAP {
                stats.decided += 1;
                if kiln_top != ref_top {
                    stats.mismatches.push(format!(
                        "prompt {pi} position {i}: kiln's top-1 is {kiln_top}, the reference's \
                         {ref_top} (gap {gap:.2})"
                    ));
                }
            }
        }
    }
    eprintln!(
        "{} vs {}: {} positions, {} decided, {} top-1 mismatches on decided positions, nrms max \
         {:.3e} mean {:.3e}",
        dev.name(),
        reference.source,
        stats.positions,
        stats.decided,
        stats.mismatches.len(),
        stats.max_nrms,
        stats.sum_nrms / stats.positions.max(1) as f64
    );
    stats
}

fn check(stats: &TraceStats) {
    assert!(stats.positions > 0 && stats.decided > 0, "{stats:?}");
    assert!(
        stats.mismatches.is_empty(),
        "top-1 mismatches on decided positions:\n{}",
        stats.mismatches.join("\n")
    );
    assert!(
        stats.max_nrms < NRMS_BOUND,
        "largest per-position nrms {:.3e} ≥ {NRMS_BOUND:e}",
        stats.max_nrms
    );
}

#[test]
fn tokenizer_and_chat_template_match_the_reference() {
    let Some((path, reference)) =
        model_and_reference("tokenizer_and_chat_template_match_the_reference")
    else {
        return;
    };
    let file = ModelFile::open(&path).unwrap();
    for p in &reference.prompts {
        if p.chat {
            assert_eq!(file.tokenizer.chat_prompt(&p.text).unwrap(), p.rendered);
        } else {
            assert_eq!(p.rendered, p.text);
        }
        assert_eq!(
            file.tokenizer.encode(&p.rendered).unwrap(),
            p.prompt_ids,
            "{:?}",
            p.rendered
        );
        // The reference's continuation decodes and re-encodes to itself (plain text, no
        // special tokens in it).
        let cont = &p.ids[p.prompt_ids.len()..];
        let text = file.tokenizer.decode(cont).unwrap();
        assert!(!text.is_empty());
    }
}

#[test]
fn cpu_logits_match_the_reference() {
    let Some((path, reference)) = model_and_reference("cpu_logits_match_the_reference") else {
        return;
    };
    check(&trace(&path, &reference, &Device::cpu()));
}

/// `backend`'s device, or `None` (skipped by name; a failure when `KILN_REQUIRE_BACKENDS`
/// names it).
fn backend(b: Backend, test: &str) -> Option<Device> {
    match Device::open(b) {
        Ok(d) => Some(d),
        Err(e) => {
            assert!(
                !kiln_tests::required_backends().contains(&b),
                "{test}: required backend {b} is absent: {e}"
            );
            eprintln!("skipped {test} on {b}: {e}");
            None
        }
    }
}

/// Tokens the GPU tests generate: `KILN_DECODE_GPU_TOKENS`, default 0 (not run). Lavapipe
/// (CI's wgpu) runs a step of this model in about 30 s on two cores, nearly all of it in the
/// qlinear kernels, so the first prompt and one token take ~4 minutes of CI's 45; every op the
/// step issues is checked on lavapipe by the parity test, and this end-to-end check runs by hand
/// and on the H200: `KILN_DECODE_GPU_TOKENS=1` (or 32 for the 32-token comparison; results in
/// `docs/results/generate-cpu-2026-12-04.md`).
fn gpu_tokens() -> usize {
    std::env::var("KILN_DECODE_GPU_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Greedy generation of `tokens` tokens after `prompt` on `dev`: the ids, and the logits of
/// the last prompt position and of each generated token but the last (the prompt's other
/// positions run without the LM head: on lavapipe it is half a step).
fn greedy(
    path: &Path,
    dev: &Device,
    prompt: &[u32],
    tokens: usize,
    act: ActDtype,
) -> (Vec<u32>, Vec<Vec<f32>>) {
    let mut file = ModelFile::open(path).unwrap();
    let mut model = file.load_with(dev, prompt.len() + tokens, act).unwrap();
    let mut sampler = Sampler::new(dev, file.config.vocab, SamplingParams::default()).unwrap();
    let (mut ids, mut rows) = (prompt.to_vec(), Vec::new());
    for (pos, &id) in prompt[..prompt.len() - 1].iter().enumerate() {
        model.prefill_step(id, pos).unwrap();
    }
    for pos in prompt.len() - 1..prompt.len() + tokens - 1 {
        model.step(ids[pos], pos, sampler.logits_mut()).unwrap();
        rows.push(sampler.logits().to_vec::<f32>().unwrap());
        ids.push(sampler.sample().unwrap());
    }
    (ids.split_off(prompt.len()), rows)
}

/// On a GPU backend: the first reference prompt, then greedy tokens. The logits each token is
/// chosen from are compared with the reference's while the GPU's sequence is the reference's
/// (decided top-1 and nrms, as on the cpu), and the greedy tokens with the cpu's: identical, or
/// the first divergence is at a position the cpu's logits leave undecided.
fn gpu_agrees_with_the_reference_and_the_cpu(b: Backend, test: &str) {
    let Some((path, reference)) = model_and_reference(test) else {
        return;
    };
    let tokens = gpu_tokens();
    if tokens == 0 {
        eprintln!("skipped {test}: set KILN_DECODE_GPU_TOKENS (1, or 32) to run it");
        return;
    }
    let Some(gpu) = backend(b, test) else {
        return;
    };
    let p = &reference.prompts[0];
    let t = std::time::Instant::now();
    let (gpu_ids, gpu_rows) = greedy(&path, &gpu, &p.prompt_ids, tokens, ActDtype::F32);
    eprintln!(
        "{test}: {} prompt tokens and {tokens} generated on {b} in {:.1} s",
        p.prompt_ids.len(),
        t.elapsed().as_secs_f64()
    );
    let (cpu_ids, cpu_rows) = greedy(&path, &Device::cpu(), &p.prompt_ids, tokens, ActDtype::F32);
    let mut stats = TraceStats::default();
    let sequence: Vec<u32> = p.prompt_ids.iter().chain(&gpu_ids).copied().collect();
    for (r, got) in gpu_rows.iter().enumerate() {
        let i = p.prompt_ids.len() - 1 + r;
        if i >= p.ids.len() || sequence[..=i] != p.ids[..=i] {
            break; // past the reference's sequence
        }
        let want = reference.row(p.first_row + i);
        let (ref_top, gap) = top2(want);
        let e = nrms(got, want);
        stats.positions += 1;
        stats.max_nrms = stats.max_nrms.max(e);
        stats.sum_nrms += e;
        if gap > DECIDED_GAP {
            stats.decided += 1;
            if top2(got).0 != ref_top {
                stats
                    .mismatches
                    .push(format!("position {i}: {} vs {ref_top}", top2(got).0));
            }
        }
    }
    eprintln!(
        "{} vs {}: {} positions, {} decided, {} top-1 mismatches, nrms max {:.3e}",
        gpu.name(),
        reference.source,
        stats.positions,
        stats.decided,
        stats.mismatches.len(),
        stats.max_nrms
    );
    check(&stats);
    let file = ModelFile::open(&path).unwrap();
    eprintln!(
        "greedy, {tokens} tokens:\n  cpu: {:?}\n  {b}: {:?}",
        file.tokenizer.decode(&cpu_ids).unwrap(),
        file.tokenizer.decode(&gpu_ids).unwrap()
    );
    if let Some(i) = cpu_ids.iter().zip(&gpu_ids).position(|(a, b)| a != b) {
        let (_, gap) = top2(&cpu_rows[i]);
        assert!(
            gap <= DECIDED_GAP,
            "cpu and {b} diverge at generated token {i}, where the cpu's top-2 gap is {gap:.2} \
             > {DECIDED_GAP}: {} vs {}",
            cpu_ids[i],
            gpu_ids[i]
        );
        eprintln!("first divergence at generated token {i}, undecided (gap {gap:.3})");
    }
}

#[test]
fn wgpu_agrees_with_the_reference_and_the_cpu() {
    gpu_agrees_with_the_reference_and_the_cpu(
        Backend::Wgpu,
        "wgpu_agrees_with_the_reference_and_the_cpu",
    );
}

#[test]
fn cuda_agrees_with_the_reference_and_the_cpu() {
    gpu_agrees_with_the_reference_and_the_cpu(
        Backend::Cuda,
        "cuda_agrees_with_the_reference_and_the_cpu",
    );
}

#[test]
fn rocm_agrees_with_the_reference_and_the_cpu() {
    gpu_agrees_with_the_reference_and_the_cpu(
        Backend::Rocm,
        "rocm_agrees_with_the_reference_and_the_cpu",
    );
}

/// bf16 activations on the real model (its activations, residual and KV cache in bf16, as MLX
/// runs a bf16 checkpoint's 4-bit decode), against the f32 run that the tests above check
/// against transformers: greedy tokens after a prompt are the f32 run's, or the first
/// divergence is at a position the f32 logits leave undecided; while the sequences agree, the
/// logits each token is chosen from stay within [`BF16_NRMS_BOUND`] of the f32 ones. Needs the
/// model only (no reference trace).
#[test]
fn cpu_bf16_greedy_follows_f32() {
    let test = "cpu_bf16_greedy_follows_f32";
    let Some(path) = test_model(test) else {
        return;
    };
    let tokens = 8;
    let prompt = ModelFile::open(&path)
        .unwrap()
        .tokenizer
        .encode("The capital of France is")
        .unwrap();
    let dev = Device::cpu();
    let t = std::time::Instant::now();
    let (want_ids, want_rows) = greedy(&path, &dev, &prompt, tokens, ActDtype::F32);
    let (got_ids, got_rows) = greedy(&path, &dev, &prompt, tokens, ActDtype::Bf16);
    eprintln!(
        "{test}: {} prompt tokens and {tokens} generated, f32 and bf16, in {:.1} s",
        prompt.len(),
        t.elapsed().as_secs_f64()
    );
    let diverged = want_ids.iter().zip(&got_ids).position(|(a, b)| a != b);
    for (i, (got, want)) in got_rows.iter().zip(&want_rows).enumerate() {
        // Row i chose generated token i; past a divergence the sequences differ.
        if diverged.is_some_and(|d| i > d) {
            break;
        }
        let e = nrms(got, want);
        let (_, gap) = top2(want);
        eprintln!("generated token {i}: nrms {e:.3e}, f32 top-2 gap {gap:.3}");
        assert!(e < BF16_NRMS_BOUND, "generated token {i}: nrms {e:.3e}");
    }
    if let Some(i) = diverged {
        let (_, gap) = top2(&want_rows[i]);
        assert!(
            gap <= DECIDED_GAP,
            "f32 and bf16 diverge at generated token {i}, where f32's top-2 gap is {gap:.2} > \
             {DECIDED_GAP}: {} vs {}",
            want_ids[i],
            got_ids[i]
        );
        eprintln!("first divergence at generated token {i}, undecided (gap {gap:.3})");
    }
}
