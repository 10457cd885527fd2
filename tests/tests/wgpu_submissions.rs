//! wgpu holds launches and staged copies and submits them together (issue #21: a decode step as
//! one submission; by default in batches of 8, `KILN_WGPU_HELD`): with the limit above a step's
//! launches, a warm decode step of the tiny models goes to the queue as one submission, and
//! what it computes is the cpu's (so the held work ran in queue order: the
//! block table written before each step's launches, and the next step reading this step's
//! tokens). Skipped by name without a wgpu adapter; a failure when `KILN_REQUIRE_BACKENDS`
//! names wgpu.

use kiln::{Backend, Device};
use kiln_benches::decode::{tiny_llama, tiny_moe, BatchGreedy, Model, ModelShape, Weights};

/// Decode steps each run takes after its prompt.
const STEPS: usize = 4;

/// Per step: the submissions a warm step made up to a flush, its logits and its tokens.
struct Run {
    submissions: Vec<Option<u64>>,
    logits: Vec<Vec<f32>>,
    tokens: Vec<Vec<u32>>,
}

/// A three-token prompt for each of `batch` sequences, then [`STEPS`] steps that read their
/// tokens on the device, as `kiln bench --decode` runs them.
fn decode(dev: &Device, shape: &ModelShape, batch: usize, seed: u64) -> Run {
    let cfg = shape.config.clone();
    let weights = Weights::synthetic(&cfg, dev, seed).unwrap();
    let mut model = Model::batched(cfg.clone(), weights, dev, 16, batch).unwrap();
    let mut greedy = BatchGreedy::new(dev, cfg.vocab, batch).unwrap();
    let mut logits = greedy.logits().unwrap();
    let tokens = greedy.device_tokens().unwrap();
    let prompt: Vec<u32> = (0..3 * batch as u32).map(|i| (i * 37 + 5) % 200).collect();
    for (position, at) in prompt.chunks(batch).take(2).enumerate() {
        model.prefill_batch(at, position).unwrap();
    }
    model
        .step_batch(&prompt[2 * batch..], 2, &mut logits)
        .unwrap();
    greedy.enqueue().unwrap();
    greedy.read().unwrap();
    let mut run = Run {
        submissions: Vec::new(),
        logits: Vec::new(),
        tokens: Vec::new(),
    };
    for position in 3..3 + STEPS {
        let before = dev.queue_submissions();
        model.set_position(position).unwrap();
        model.enqueue_step(&tokens, position, &mut logits).unwrap();
        greedy.enqueue().unwrap();
        dev.flush().unwrap();
        let after = dev.queue_submissions();
        run.submissions.push(after.zip(before).map(|(a, b)| a - b));
        run.logits.push(logits.to_vec::<f32>().unwrap());
        run.tokens.push(greedy.read().unwrap());
    }
    run
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

/// The f32 order of sums differs between the ports; a step that read a stale block table or
/// token misses a whole position and lands orders of magnitude above this.
const NRMS_BOUND: f64 = 1e-4;

#[test]
fn a_warm_decode_step_is_one_submission_in_queue_order() {
    let test = "a_warm_decode_step_is_one_submission_in_queue_order";
    // The whole step held, whatever the default limit (this binary runs this test alone).
    std::env::set_var("KILN_WGPU_HELD", "4096");
    let wgpu = match Device::open(Backend::Wgpu) {
        Ok(d) => d,
        Err(e) => {
            assert!(
                !kiln_tests::required_backends().contains(&Backend::Wgpu),
                "{test}: required backend wgpu is absent: {e}"
            );
            eprintln!("skipped {test} on wgpu: {e}");
            return;
        }
    };
    let cpu = Device::cpu();
    assert_eq!(cpu.queue_submissions(), None, "the cpu submits nothing");
    for (shape, batch) in [(tiny_llama(), 1), (tiny_moe(), 2)] {
        let seed = 11;
        eprintln!("{test}: {} batch {batch}, seed {seed}", shape.name);
        let got = decode(&wgpu, &shape, batch, seed);
        let want = decode(&cpu, &shape, batch, seed);
        for (step, subs) in got.submissions.iter().enumerate() {
            assert_eq!(
                *subs,
                Some(1),
                "{}: step {step} went to the queue in {subs:?} submissions",
                shape.name
            );
        }
        for (step, (g, w)) in got.logits.iter().zip(&want.logits).enumerate() {
            let e = nrms(g, w);
            assert!(
                e < NRMS_BOUND,
                "{}: step {step}: logits nrms {e:.3e} against the cpu's",
                shape.name
            );
        }
        // The tokens follow from the logits; a tie broken differently would show above first.
        assert_eq!(got.tokens, want.tokens, "{}", shape.name);
    }
}
