//! The parity cases of `speculative_accept` and the shapes `kiln bench` times it at.

use super::sampler_checks;
use crate::case::{Case, Fill};
use kiln_math::DType;

/// The parity cases of `speculative_accept` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(_dtype: DType) -> Vec<Case> {
    // (batch, drafts, vocab, rule). Random q rows make most drafts fail: tokens 0..vocab are
    // drawn as draft ids, and the accept test reads q and p at them.
    sized(&[(8, 3, 50, 0), (8, 2, 300, 1), (8, 4, 20, 2), (8, 1, 1000, 0)])
}

/// Cases of the given (batch, drafts, vocab, rule).
fn sized(shapes: &[(usize, usize, usize, u32)]) -> Vec<Case> {
    shapes
        .iter()
        .map(|&(b, n, v, rule)| Case {
            label: format!("b{b} n{n} v{v} rule{rule}"),
            shapes: vec![
                vec![b, n + 1, v],
                vec![b, n, v],
                vec![b, n],
                vec![b, n + 1],
                vec![b],
            ],
            params: vec![
                ("rule", rule.to_string()),
                ("key0", "31337".into()),
                ("key1", (v * 7).to_string()),
            ],
            fill: vec![
                Fill::Uniform { lo: 0.0, hi: 1.0 },
                Fill::Uniform { lo: 0.0, hi: 1.0 },
                Fill::Uniform {
                    lo: 0.0,
                    hi: v as f64,
                },
                Fill::Output,
                Fill::Output,
            ],
            checks: sampler_checks(3, 2),
            on_sim: true,
        })
        .collect()
}

/// The parity shapes, then 4 and 8 draft tokens at the vocabularies of Llama 3 (128256) and
/// Qwen2 (152064), batch 1 and 8, rule 0.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut v = cases(dtype);
    for vocab in [128_256, 152_064] {
        for (b, n) in [(1, 4), (1, 8), (8, 4), (8, 8)] {
            v.extend(sized(&[(b, n, vocab, 0)]));
        }
    }
    v
}
