//! The parity cases of `rejection_sample_segmented` and the shapes `kiln bench` times it at.
//! Its segment buffers must be what `rejection_segments` writes for its rows, so every input
//! is given as values: rows drawn from a generator seeded by the case, segments from the
//! reference of `rejection_segments`.

use super::rejection_sample::{mixed_filters, top_p_filters};
use super::sampler_checks;
use crate::case::{Case, Fill};
use crate::reference::rejection_segments::rejection_segments;
use kiln_math::kernels::rejection_sample::FILTER_WORDS;
use kiln_math::kernels::rejection_segments::{RejectionSegmentsParams, STAT_WORDS};
use kiln_math::random::philox4x32_10;
use kiln_math::DType;

/// The parity cases of `rejection_sample_segmented` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(_dtype: DType) -> Vec<Case> {
    // (rows, vocab, seg_len, key). The sim runs every round's collectives lane by lane: keep
    // rows and cases few.
    let shapes = [
        (8, 200, 16, (1, 2)),
        (8, 1200, 64, (0xfeed, 1)),
        (8, 90, 128, (3, 9)),
        (4, 2500, 1024, (77, 5)),
    ];
    shapes
        .iter()
        .map(|&(rows, vocab, len, key)| case(rows, vocab, len, key, "mixed filters", mixed_filters, true))
        .collect()
}

/// `n` standard normal deviates by Box–Muller over Philox words (counter `(k, seed)`).
fn normals(n: usize, seed: u32) -> Vec<f64> {
    let unit = |w: u32| (w as f64 + 0.5) / 4_294_967_296.0;
    (0..n.div_ceil(2) as u32)
        .flat_map(|k| {
            let w = philox4x32_10([k, seed, 0, 0], [0x5e9_3e47, 0x2545_f491]);
            let r = (-2.0 * unit(w[0]).ln()).sqrt();
            let a = std::f64::consts::TAU * unit(w[1]);
            [r * a.cos(), r * a.sin()]
        })
        .take(n)
        .collect()
}

/// One case: `rows × vocab` softmax-like rows (exponentials of normals drawn from the key's first word, unnormalised; a third of
/// the draw rows tempered differently), cut into segments of `len`, with `filters(rows, vocab)`.
fn case(
    rows: usize,
    vocab: usize,
    len: usize,
    (k0, k1): (u32, u32),
    what: &str,
    filters: fn(usize, usize) -> Vec<f64>,
    on_sim: bool,
) -> Case {
    let label = format!("{rows}x{vocab} seg {len} {what}");
    let logits: Vec<f64> = normals(rows * vocab, k0).iter().map(|z| z * 2.0).collect();
    let probs: Vec<f32> = logits.iter().map(|&l| l.exp() as f32).collect();
    let draw: Vec<f32> = logits
        .iter()
        .enumerate()
        .map(|(k, &l)| if (k / vocab) % 3 == 1 { (l / 1.5).exp() as f32 } else { l.exp() as f32 })
        .collect();
    let segments = vocab.div_ceil(len);
    let p = RejectionSegmentsParams {
        rows: rows as u32,
        vocab: vocab as u32,
        seg_len: len as u32,
        segments: segments as u32,
    };
    let mut seg = vec![0.0f32; rows * segments * 3 * len];
    let mut stats = vec![0.0f32; rows * segments * STAT_WORDS];
    let mut index = vec![0u32; rows * segments * STAT_WORDS];
    rejection_segments(&p, &probs, &draw, &mut seg, &mut stats, &mut index);
    let values = |x: &[f32]| Fill::Values(x.iter().map(|&v| v as f64).collect());
    Case {
        label,
        shapes: vec![
            vec![rows, vocab],
            vec![rows, vocab],
            vec![rows, FILTER_WORDS],
            vec![rows, segments, 3, len],
            vec![rows, segments, STAT_WORDS],
            vec![rows, segments, STAT_WORDS],
            vec![rows],
            vec![rows],
            vec![rows],
        ],
        params: vec![
            ("seg_len", len.to_string()),
            ("key0", k0.to_string()),
            ("key1", k1.to_string()),
        ],
        fill: vec![
            values(&probs),
            values(&draw),
            Fill::Values(filters(rows, vocab)),
            values(&seg),
            values(&stats),
            Fill::Values(index.iter().map(|&i| i as f64).collect()),
            Fill::Output,
            Fill::Output,
            Fill::Output,
        ],
        checks: sampler_checks(6, 3),
        on_sim,
    }
}

/// The parity shapes, then Llama 3's vocabulary (128256) at batch 1 and 8, top-p 0.9 and the
/// mixed filters, in the segments `ops::rejection_sample` cuts it into.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut v = cases(dtype);
    let vocab = 128_256;
    let len = kiln_math::kernels::rejection_segments::seg_len_for(vocab);
    for rows in [1, 8] {
        v.push(case(rows, vocab, len, (1, 2), "top-p 0.9", top_p_filters, false));
        v.push(case(rows, vocab, len, (1, 2), "mixed filters", mixed_filters, false));
    }
    v
}
