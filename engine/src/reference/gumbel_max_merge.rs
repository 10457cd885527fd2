//! The last step of a split Gumbel-max draw (spec §5): per row the first maximum over the
//! splits' (value, index) pairs — larger value, then lower index; an all −inf row yields 0.

use crate::case::{Case, Check, Fill};
use kiln_math::kernels::gumbel_max_merge::GumbelMergeParams;
use kiln_math::{DType, Element};

pub fn gumbel_max_merge<T: Element>(
    p: &GumbelMergeParams,
    vals: &[T],
    idxs: &[u32],
    index: &mut [u32],
) {
    let splits = p.splits as usize;
    for (r, out) in index.iter_mut().enumerate() {
        let mut best = (f32::NEG_INFINITY, 0u32);
        for s in r * splits..(r + 1) * splits {
            let (v, i) = (vals[s].to_f32(), idxs[s]);
            if v > best.0 || (v == best.0 && i < best.1) {
                best = (v, i);
            }
        }
        *out = best.1;
    }
}

pub fn cases(_dtype: DType) -> Vec<Case> {
    // Values from a few levels so that ties are common, −inf among them; row 1 all −inf.
    let levels = [f64::NEG_INFINITY, -1.0, 0.5, 2.0];
    [(4usize, 64usize), (3, 5), (16, 1), (2, 100)]
        .into_iter()
        .map(|(rows, splits)| {
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
            }
        })
        .collect()
}

/// Benchmarked at its parity shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    cases(dtype)
}
