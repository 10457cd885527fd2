//! The parity cases of `rejection_sample` and the shapes `kiln bench` times it at.

use super::sampler_checks;
use crate::case::{Case, Fill};
use kiln_math::kernels::rejection_sample::FILTER_WORDS;
use kiln_math::DType;

/// Per-row filters `[top_k, top_p, min_p]` for a batch of `rows`: every combination, cycled.
pub fn mixed_filters(rows: usize, vocab: usize) -> Vec<f64> {
    let k = (vocab / 20).max(2) as f64;
    let table = [
        [0.0, 1.0, 0.0],          // no filter
        [k, 1.0, 0.0],            // top-k
        [0.0, 0.9, 0.0],          // top-p
        [0.0, 1.0, 0.2],          // min-p
        [k, 0.95, 0.0],           // top-k + top-p
        [0.0, 0.5, 0.01],         // top-p + min-p
        [k, 0.8, 0.05],           // all three
        [vocab as f64, 1.0, 0.0], // k = V: off
    ];
    (0..rows).flat_map(|r| table[r % table.len()]).collect()
}

/// The parity cases of `rejection_sample` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(_dtype: DType) -> Vec<Case> {
    // (rows, vocab, key). The sim runs every round's collectives lane by lane: keep rows and
    // cases few.
    let shapes = [
        (8, 200, (1, 2)),
        (8, 400, (77, 5)),
        (8, 64, (3, 9)),
        (8, 1200, (0xfeed, 1)),
    ];
    sized(&shapes, "mixed filters", mixed_filters)
}

/// Cases of `(rows, vocab, key)` with the filters `filters(rows, vocab)` (named `what`).
fn sized(
    shapes: &[(usize, usize, (u32, u32))],
    what: &str,
    filters: fn(usize, usize) -> Vec<f64>,
) -> Vec<Case> {
    shapes
        .iter()
        .map(|&(rows, vocab, (k0, k1))| Case {
            label: format!("{rows}x{vocab} {what}"),
            shapes: vec![
                vec![rows, vocab],
                vec![rows, vocab],
                vec![rows, FILTER_WORDS],
                vec![rows],
                vec![rows],
                vec![rows],
            ],
            params: vec![("key0", k0.to_string()), ("key1", k1.to_string())],
            // Unnormalised positive rows: the sampler only reads ratios and sums.
            fill: vec![
                Fill::Uniform { lo: 0.0, hi: 1.0 },
                Fill::Uniform { lo: 0.0, hi: 1.0 },
                Fill::Values(filters(rows, vocab)),
                Fill::Output,
                Fill::Output,
                Fill::Output,
            ],
            checks: sampler_checks(3, 3),
            on_sim: true,
        })
        .collect()
}

/// The parity shapes, then the vocabularies of Llama 3 (128256) and Qwen2 (152064) at batch 1,
/// 8 and 64, every row filtered by top-p 0.9 (what torch's sort-based peer computes) and, at
/// 128256, by the mixed filters.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut v = cases(dtype);
    let model = |vocab| [1, 8, 64].map(|rows| (rows, vocab, (1, 2)));
    v.extend(sized(&model(128_256), "top-p 0.9", top_p_filters));
    v.extend(sized(&model(152_064), "top-p 0.9", top_p_filters));
    v.extend(sized(&model(128_256), "mixed filters", mixed_filters));
    v
}

/// Top-p 0.9 on every row.
pub fn top_p_filters(rows: usize, _vocab: usize) -> Vec<f64> {
    (0..rows).flat_map(|_| [0.0, 0.9, 0.0]).collect()
}
