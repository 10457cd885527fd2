//! Merge of attention states, unfused (spec §9.4): the closed form over each row's finite
//! partials in f64.

use crate::case::{Case, Check, Fill};
use kiln_math::kernels::paged_attention_merge_states::MergeStatesParams;
use kiln_math::{DType, Element};

pub fn paged_attention_merge_states<T: Element>(
    p: &MergeStatesParams,
    v_in: &[T],
    lse_in: &[T],
    o_indptr: &[i32],
    v_out: &mut [T],
    lse_out: &mut [T],
) {
    let (h_len, d_len) = (p.heads as usize, p.head_dim as usize);
    for o in 0..p.rows as usize {
        let range = usize::try_from(o_indptr[o])
            .ok()
            .zip(usize::try_from(o_indptr[o + 1]).ok())
            .filter(|&(a, b)| a <= b && b <= p.partials as usize);
        for h in 0..h_len {
            let at = (o * h_len + h) * d_len;
            let Some((first, last)) = range else {
                v_out[at..at + d_len].fill(T::from_f32(f32::NAN));
                lse_out[o * h_len + h] = T::from_f32(f32::NAN);
                continue;
            };
            let finite: Vec<(usize, f64)> = (first..last)
                .map(|i| (i, lse_in[i * h_len + h].to_f32() as f64))
                .filter(|(_, l)| l.is_finite())
                .collect();
            let Some(m) = finite.iter().map(|&(_, l)| l).reduce(f64::max) else {
                v_out[at..at + d_len].fill(T::from_f32(0.0));
                lse_out[o * h_len + h] = T::from_f32(f32::NEG_INFINITY);
                continue;
            };
            let total: f64 = finite.iter().map(|&(_, l)| (l - m).exp2()).sum();
            for d in 0..d_len {
                let sum: f64 = finite
                    .iter()
                    .map(|&(i, l)| {
                        (l - m).exp2() * v_in[(i * h_len + h) * d_len + d].to_f32() as f64
                    })
                    .sum();
                v_out[at + d] = T::from_f32((sum / total) as f32);
            }
            lse_out[o * h_len + h] = T::from_f32((m + total.log2()) as f32);
        }
    }
}

/// Rows of several partials, an empty row, a row whose partials are all `-inf`/NaN, LSEs far
/// apart (one partial dominates) and close together.
pub fn cases(_dtype: DType) -> Vec<Case> {
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
    let rows = o_indptr.len() - 1;
    vec![Case {
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
    }]
}

/// Benchmarked at its parity shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    cases(dtype)
}
