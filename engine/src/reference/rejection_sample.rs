//! The dual-pivot rejection sampler of spec §6.2, written sequentially over the row in natural
//! index order with f32 sums (so a serial block's bits match it exactly). Each row reads its own
//! filters and applies spec §6.1's activation rules.

use super::sampling::{inverse_cdf, open_uniform, philox};
use kiln_math::kernels::rejection_sample::{RejectionParams, FILTER_WORDS};
use kiln_math::Element;

/// The IEEE-bit-pattern midpoint of two non-negative floats.
pub fn bit_mid(a: f32, b: f32) -> f32 {
    let (x, y) = (a.to_bits() as u64, b.to_bits() as u64);
    f32::from_bits(((x + y) / 2) as u32)
}

/// (token, accepted, rounds) for one row with its `[top_k, top_p, min_p]`.
pub fn sample_row(
    p: &RejectionParams,
    row: u32,
    filters: [f32; 3],
    probs: &[f32],
    draw: &[f32],
) -> (u32, u32, u32) {
    let key = [p.key0, p.key1];
    let [top_k, top_p, min_p] = filters;
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
    // Active iff 1 ≤ floor(top_k) < V; 0 < top_p < 1; 0 < min_p < 1 (NaN: inactive).
    let top_k_on = top_k.floor() >= 1.0 && (top_k.floor() as f64) < probs.len() as f64;
    let top_p_on = top_p > 0.0 && top_p < 1.0;
    let mut low = 0.0f32;
    if min_p > 0.0 && min_p < 1.0 && (min_p * p_max).to_bits() > 0 {
        low = f32::from_bits((min_p * p_max).to_bits() - 1);
    }
    let mut high = p_max;
    let target_p = top_p * total;
    for round in 0..p.max_rounds {
        let weights: Vec<f32> = probs
            .iter()
            .zip(draw)
            .map(|(&q, &d)| if q > low { d } else { 0.0 })
            .collect();
        let u = open_uniform(philox([round, 0, row, 0], key)[0]);
        let candidate = inverse_cdf(&weights, u).0.map_or(arg, |i| i as usize);
        let pivot0 = probs[candidate];
        let pivot1 = bit_mid(pivot0, pivot0.max(high));
        let stats = |v: f32| {
            probs
                .iter()
                .filter(|&&x| x > v)
                .fold((0.0f32, 0.0f32), |(n, m), &x| (n + 1.0, m + x))
        };
        let fails =
            |(n, m): (f32, f32)| (top_k_on && n >= top_k.floor()) || (top_p_on && m > target_p);
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

/// The unfused chain of [`rejection_sample`](kiln_math::kernels::rejection_sample::rejection_sample): its params and
/// buffers, in list order, as host slices.
pub fn rejection_sample<T: Element>(
    p: &RejectionParams,
    probs: &[T],
    probs_draw: &[T],
    filters: &[f32],
    ids: &mut [u32],
    accepted: &mut [u32],
    rounds: &mut [u32],
) {
    each_row(p.vocab, probs, probs_draw, filters, ids, accepted, rounds, |r, f, pr, dr| {
        sample_row(p, r, f, pr, dr)
    });
}

/// Runs `sample(row, filters, probs, draw)` on every row of a rejection sampler's buffers and
/// stores its `(token, accepted, rounds)`.
#[allow(clippy::too_many_arguments)] // the sampler's buffers, plus the row function
pub fn each_row<T: Element>(
    vocab: u32,
    probs: &[T],
    probs_draw: &[T],
    filters: &[f32],
    ids: &mut [u32],
    accepted: &mut [u32],
    rounds: &mut [u32],
    sample: impl Fn(u32, [f32; 3], &[f32], &[f32]) -> (u32, u32, u32),
) {
    let vocab = vocab as usize;
    let floats = |x: &[T], r: usize| -> Vec<f32> {
        x[r * vocab..][..vocab].iter().map(|v| v.to_f32()).collect()
    };
    for r in 0..ids.len() {
        let f: [f32; 3] = filters[r * FILTER_WORDS..][..FILTER_WORDS]
            .try_into()
            .expect("three filter words");
        (ids[r], accepted[r], rounds[r]) =
            sample(r as u32, f, &floats(probs, r), &floats(probs_draw, r));
    }
}
