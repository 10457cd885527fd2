//! The dual-pivot rejection sampler of spec §6.2, written sequentially over the row in natural
//! index order with f32 sums (so a serial block's bits match it exactly). Each row reads its own
//! filters and applies spec §6.1's activation rules.

use super::sampling::{inverse_cdf, open_uniform, philox};
use kiln_math::kernels::rejection_sample::{RejectionParams, FILTER_WORDS};
use kiln_math::Element;

/// The IEEE-bit-pattern midpoint of two non-negative floats.
fn bit_mid(a: f32, b: f32) -> f32 {
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
    // First maximum; NaN never wins, and index 0 stands when nothing beats −inf.
    let (mut p_max, mut arg) = (f32::NEG_INFINITY, 0u32);
    for (i, &v) in probs.iter().enumerate() {
        if v > p_max {
            (p_max, arg) = (v, i as u32);
        }
    }
    let total: f32 = probs.iter().fold(0.0, |s, &v| s + v);
    let row_at = RowAt {
        key: [p.key0, p.key1],
        row,
        max_rounds: p.max_rounds,
        filters,
        vocab: probs.len(),
        p_max,
        arg,
        total,
    };
    let propose = |low: f32, u: f32| {
        let weights: Vec<f32> = probs
            .iter()
            .zip(draw)
            .map(|(&q, &d)| if q > low { d } else { 0.0 })
            .collect();
        inverse_cdf(&weights, u).0
    };
    let above = |v: f32| {
        probs
            .iter()
            .filter(|&&x| x > v)
            .fold((0.0f32, 0.0f32), |(n, m), &x| (n + 1.0, m + x))
    };
    dual_pivot_rounds(&row_at, probs, propose, above)
}

/// What spec §6.2's rounds need of a row besides its entries: the key and round cap, the row's
/// filters and length, its first maximum (value and index) and its total mass.
pub struct RowAt {
    /// Philox key.
    pub key: [u32; 2],
    /// Row index (the Philox counter's third word).
    pub row: u32,
    /// Rounds before the argmax is returned unaccepted.
    pub max_rounds: u32,
    /// `[top_k, top_p, min_p]`.
    pub filters: [f32; 3],
    /// Entries in the row.
    pub vocab: usize,
    /// The row's first maximum (NaN never wins).
    pub p_max: f32,
    /// Its index (0 when nothing beats −inf).
    pub arg: u32,
    /// The row's filter mass.
    pub total: f32,
}

/// Spec §6.2 from step 2 on, with §6.1's activation rules: `propose(low, u)` is a round's
/// proposal over `{p > low}` for the uniform `u` (`None`: the argmax stands in), `above(v)` the
/// count and filter mass of the entries above `v`. Returns (token, accepted, rounds).
pub fn dual_pivot_rounds(
    r: &RowAt,
    probs: &[f32],
    propose: impl Fn(f32, f32) -> Option<u32>,
    above: impl Fn(f32) -> (f32, f32),
) -> (u32, u32, u32) {
    let (p_max, arg) = (r.p_max, r.arg);
    if p_max.is_nan() || p_max <= 0.0 {
        return (arg, 1, 0);
    }
    let [top_k, top_p, min_p] = r.filters;
    // Active iff 1 ≤ floor(top_k) < V; 0 < top_p < 1; 0 < min_p < 1 (NaN: inactive).
    let top_k_on = top_k.floor() >= 1.0 && (top_k.floor() as f64) < r.vocab as f64;
    let top_p_on = top_p > 0.0 && top_p < 1.0;
    let mut low = 0.0f32;
    if min_p > 0.0 && min_p < 1.0 && (min_p * p_max).to_bits() > 0 {
        low = f32::from_bits((min_p * p_max).to_bits() - 1);
    }
    let mut high = p_max;
    let target_p = top_p * r.total;
    let fails = |(n, m): (f32, f32)| (top_k_on && n >= top_k.floor()) || (top_p_on && m > target_p);
    for round in 0..r.max_rounds {
        let u = open_uniform(philox([round, 0, r.row, 0], r.key)[0]);
        let candidate = propose(low, u).unwrap_or(arg);
        let pivot0 = probs[candidate as usize];
        let pivot1 = bit_mid(pivot0, pivot0.max(high));
        if !(top_k_on || top_p_on) || !fails(above(pivot0)) {
            return (candidate, 1, round + 1);
        }
        if fails(above(pivot1)) {
            low = pivot1;
        } else {
            low = pivot0;
            high = pivot1;
        }
    }
    (arg, 0, r.max_rounds)
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
