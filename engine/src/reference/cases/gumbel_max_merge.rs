//! The parity cases of `gumbel_max_merge` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// The parity cases of `gumbel_max_merge` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(_dtype: DType) -> Vec<Case> {
    sized(&[(4, 64), (3, 5), (16, 1), (2, 100)])
}

/// Cases of `rows × splits` partials.
fn sized(shapes: &[(usize, usize)]) -> Vec<Case> {
    // Values from a few levels so that ties are common, −inf among them; row 1 all −inf.
    let levels = [f64::NEG_INFINITY, -1.0, 0.5, 2.0];
    shapes
        .iter()
        .map(|&(rows, splits)| {
            let n = rows * splits;
            let vals = (0..n)
                .map(|k| {
                    if k / splits == 1 {
                        f64::NEG_INFINITY
                    } else {
                        levels[(k * 7 + k / 3) % 4]
                    }
                })
                .collect();
            Case {
                label: format!("{rows}x{splits}"),
                shapes: vec![vec![rows, splits], vec![rows, splits], vec![rows]],
                params: vec![],
                fill: vec![
                    Fill::Values(vals),
                    Fill::Uniform { lo: 0.0, hi: 1e6 },
                    Fill::Output,
                ],
                checks: vec![Check::None, Check::None, Check::Exact],
                on_sim: true,
            }
        })
        .collect()
}

/// Benchmarked at its parity shapes and at the merges the sampler's device-aware split makes
/// at 64 rows (16 and 32 splits).
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut c = cases(dtype);
    c.extend(sized(&[(64, 16), (64, 32)]));
    c
}
