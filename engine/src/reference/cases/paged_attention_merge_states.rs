//! The parity cases of `paged_attention_merge_states` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// Rows of several partials, an empty row, a row whose partials are all `-inf`/NaN, LSEs far
/// apart (one partial dominates) and close together; then rows as long as split-KV decode makes
/// at batch 1 (the block splits them among groups of threads).
pub fn cases(dtype: DType) -> Vec<Case> {
    vec![short_rows(dtype), long_rows(dtype)]
}

fn short_rows(_dtype: DType) -> Case {
    let (n, h, d) = (9usize, 3usize, 64usize);
    let o_indptr = vec![0.0, 2.0, 2.0, 5.0, 7.0, 9.0];
    let ninf = f64::NEG_INFINITY;
    #[rustfmt::skip]
    let lse = vec![
        1.5, -0.25, 3.0,
        0.75, 40.0, ninf,
        2.0, 2.0, 2.0,
        -3.0, ninf, 0.5,
        f64::NAN, 1.0, 7.5,
        ninf, ninf, f64::NAN,
        f64::NAN, ninf, ninf,
        12.0, -12.0, 0.0,
        11.0, -11.0, 0.125,
    ];
    case(n, h, d, lse, o_indptr)
}

/// A row of 3 partials and one of 77, every 11th empty, a NaN in head 1 of partial 50.
fn long_rows(_dtype: DType) -> Case {
    let (n, h, d) = (80usize, 2usize, 128usize);
    let lse: Vec<f64> = (0..n * h)
        .map(|i| match i {
            101 => f64::NAN,
            _ if i % 11 == 4 => f64::NEG_INFINITY,
            _ => ((i * 37) % 23) as f64 * 0.5 - 5.0,
        })
        .collect();
    case(n, h, d, lse, vec![0.0, 3.0, n as f64])
}

/// The merge of `n` partials of `h` heads of `d` by `o_indptr`, with these LSEs.
fn case(n: usize, h: usize, d: usize, lse: Vec<f64>, o_indptr: Vec<f64>) -> Case {
    let rows = o_indptr.len() - 1;
    Case {
        label: format!("{n} partials into {rows} rows, H{h} D{d}"),
        shapes: vec![
            vec![n, h, d],
            vec![n, h],
            vec![rows + 1],
            vec![rows, h, d],
            vec![rows, h],
        ],
        params: vec![],
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::Values(lse),
            Fill::Values(o_indptr),
            Fill::Output,
            Fill::Output,
        ],
        checks: vec![
            Check::None,
            Check::None,
            Check::None,
            Check::MaxRel { bound: 1e-5 },
            Check::MaxRel { bound: 1e-5 },
        ],
        on_sim: true,
    }
}

/// Benchmarked at its parity shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    cases(dtype)
}
