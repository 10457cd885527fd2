//! The dual-pivot rejection sampler of spec §6.2, written sequentially over the row in natural
//! index order with f32 sums (so a serial block's bits match it exactly).

use super::gumbel_max_sample::philox;
use crate::parity::{Case, Check, Fill};
use crate::Backend;
use kiln_math::kernels::rejection_sample::RejectionParams;
use kiln_math::{DType, Element};

/// The IEEE-bit-pattern midpoint of two non-negative floats.
fn bit_mid(a: f32, b: f32) -> f32 {
    let (x, y) = (a.to_bits() as u64, b.to_bits() as u64);
    f32::from_bits(((x + y) / 2) as u32)
}

/// (token, accepted, rounds) for one row.
pub fn sample_row(p: &RejectionParams, row: u32, probs: &[f32], draw: &[f32]) -> (u32, u32, u32) {
    let key = [p.key0, p.key1];
    // First maximum; NaN never wins, and index 0 stands when nothing beats −inf.
    let (mut p_max, mut arg) = (f32::NEG_INFINITY, 0usize);
    for (i, &v) in probs.iter().enumerate() {
        if v > p_max {
            (p_max, arg) = (v, i);
        }
    }
    if p_max.is_nan() || p_max <= 0.0 {
        return (arg as u32, 1, 0);
    }
    let total: f32 = probs.iter().fold(0.0, |s, &v| s + v);
    let vocab = probs.len() as u32;
    let top_k_on = p.top_k >= 1 && p.top_k < vocab;
    let top_p_on = p.top_p > 0.0 && p.top_p < 1.0;
    let mut low = 0.0f32;
    if p.min_p > 0.0 && p.min_p < 1.0 && (p.min_p * p_max).to_bits() > 0 {
        low = f32::from_bits((p.min_p * p_max).to_bits() - 1);
    }
    let mut high = p_max;
    let target_p = p.top_p * total;
    for round in 0..p.max_rounds {
        let eligible = |i: &usize| probs[*i] > low;
        let mass = (0..probs.len())
            .filter(eligible)
            .fold(0.0f32, |s, i| s + draw[i]);
        let w = philox([round, 0, row, 0], key)[0];
        let target = ((w >> 9) as f32 + 0.5) / 8_388_608.0 * mass;
        let mut running = 0.0f32;
        let mut candidate = arg;
        for i in (0..probs.len()).filter(eligible) {
            running += draw[i];
            if running > target {
                candidate = i;
                break;
            }
        }
        let pivot0 = probs[candidate];
        let pivot1 = bit_mid(pivot0, pivot0.max(high));
        let stats = |v: f32| {
            probs
                .iter()
                .filter(|&&x| x > v)
                .fold((0.0f32, 0.0f32), |(n, m), &x| (n + 1.0, m + x))
        };
        let fails =
            |(n, m): (f32, f32)| (top_k_on && n >= p.top_k as f32) || (top_p_on && m > target_p);
        if !(top_k_on || top_p_on) || !fails(stats(pivot0)) {
            return (candidate as u32, 1, round + 1);
        }
        if fails(stats(pivot1)) {
            low = pivot1;
        } else {
            low = pivot0;
            high = pivot1;
        }
    }
    (arg as u32, 0, p.max_rounds)
}

pub fn rejection_sample<T: Element>(
    p: &RejectionParams,
    probs: &[T],
    probs_draw: &[T],
    ids: &mut [u32],
    accepted: &mut [u32],
    rounds: &mut [u32],
) {
    let vocab = p.vocab as usize;
    for r in 0..p.rows as usize {
        let f: Vec<f32> = probs[r * vocab..][..vocab]
            .iter()
            .map(|v| v.to_f32())
            .collect();
        let d: Vec<f32> = probs_draw[r * vocab..][..vocab]
            .iter()
            .map(|v| v.to_f32())
            .collect();
        (ids[r], accepted[r], rounds[r]) = sample_row(p, r as u32, &f, &d);
    }
}

/// Exact on the cpu (serial sums in index order, as here). Elsewhere the sums round in another
/// order, which moves a draw only when it lands within rounding of a CDF or top-p boundary:
/// most rows must still agree (the distribution tests in `samplers.rs` cover the law).
fn check() -> Check {
    Check::Agree {
        exact_on: &[Backend::Cpu],
        min_frac: 0.75,
    }
}

pub fn cases(_dtype: DType) -> Vec<Case> {
    // (rows, vocab, top_k, top_p, min_p, key)
    // The sim runs every round's collectives lane by lane: keep rows and cases few.
    let shapes = [
        (8, 200, 0, "0.9", "0", (1, 2)),
        (8, 400, 40, "0.95", "0", (77, 5)),
        (8, 64, 0, "1", "0.2", (3, 9)),
        (8, 1200, 60, "0.5", "0.01", (0xfeed, 1)),
    ];
    shapes
        .iter()
        .map(|&(rows, vocab, k, top_p, min_p, (k0, k1))| Case {
            label: format!("{rows}x{vocab} k{k} p{top_p} min{min_p}"),
            shapes: vec![
                vec![rows, vocab],
                vec![rows, vocab],
                vec![rows],
                vec![rows],
                vec![rows],
            ],
            params: vec![
                ("top_k", k.to_string()),
                ("top_p", top_p.into()),
                ("min_p", min_p.into()),
                ("key0", k0.to_string()),
                ("key1", k1.to_string()),
            ],
            // Unnormalised positive rows: the sampler only reads ratios and sums.
            fill: vec![
                Fill::Uniform { lo: 0.0, hi: 1.0 },
                Fill::Uniform { lo: 0.0, hi: 1.0 },
                Fill::Output,
                Fill::Output,
                Fill::Output,
            ],
            checks: vec![Check::None, Check::None, check(), check(), check()],
        })
        .collect()
}

/// Benchmarked at its parity shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    cases(dtype)
}
