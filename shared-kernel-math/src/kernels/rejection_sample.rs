//! Sorting-free top-k / top-p / min-p sampling by dual-pivot rejection (spec §6.1–6.2).
//!
//! Each row carries its own filters (`filters [B, 3]`: top_k, top_p, min_p). The kept support
//! is `{i : p_i ≥ τ}` for one threshold τ that top-k (k-th largest, ties kept), top-p
//! (descending prefix whose exclusive mass is ≤ `top_p · total`) and min-p
//! (`p_i ≥ min_p · p_max`) set jointly on the untempered `probs`; the token is distributed as
//! `probs_draw` truncated to that support. Each round proposes a token from `probs_draw` over
//! `{p > low}` by inverse CDF, accepts it when it passes every filter, else raises `low` to a
//! pivot that is known to fail (the accept test is monotone in p) and halves the bit-space
//! bracket `[low, high]`.
//!
//! The CDF runs in natural index order (thread `t` owns a contiguous slice), so the token for
//! a key does not depend on the block size beyond the rounding of the sums. Round `r` draws its
//! uniform from word 0 of `philox((r, 0, row, 0), key)`.

use crate::random::{philox4x32_10_on, uniform_open};
use crate::sampling::{inverse_cdf, rows_and_vocab, thread_slice, MAX_VOCAB};
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Words per row of the `filters` buffer: top_k, top_p, min_p.
pub const FILTER_WORDS: usize = 3;

crate::params! {
    /// Params of `rejection_sample`; the filters come per row in the `filters` buffer.
    pub struct RejectionParams {
        /// Rows (B, the first axis of `probs`).
        pub rows: u32,
        /// Probabilities per row (V).
        pub vocab: u32,
        /// Philox key, low word (draw a fresh key per call).
        pub key0: u32 = 0,
        /// Philox key, high word.
        pub key1: u32 = 0,
        /// Rounds before giving up with the row's argmax (`accepted = 0`); 32 always suffice.
        pub max_rounds: u32 = 32,
    }
}

/// Descriptor of `rejection_sample`.
pub struct RejectionSample;

impl KernelDef for RejectionSample {
    type Params = RejectionParams;
    const NAME: &'static str = "rejection_sample";

    /// Buffers: `probs [B, V]` (softmax of the untempered logits: the filters read it),
    /// `probs_draw [B, V]` (softmax of logits / T: the draw is weighted by it), `filters [B, 3]`
    /// f32 (per row top_k, top_p, min_p), then u32 outputs `ids [B]`, `accepted [B]`,
    /// `rounds [B]`. The filter values are the op's to check (they live in a buffer); the body
    /// applies spec §6.1's activation rules to whatever a row holds.
    fn bind(p: &mut RejectionParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [probs, probs_draw, filters, ids, accepted, rounds] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 6,
            });
        };
        let &[rows, vocab] = *probs else {
            return Err(ShapeError::Invalid("probs must be [rows, vocab]"));
        };
        (p.rows, p.vocab) = rows_and_vocab("rows", rows, vocab, MAX_VOCAB, rows * vocab)?;
        if probs_draw != probs {
            return Err(ShapeError::Invalid(
                "probs_draw must have the shape of probs",
            ));
        }
        check_rows(rows, filters, [ids, accepted, rounds], p.max_rounds)
    }

    fn launch(p: &RejectionParams) -> Launch {
        Launch {
            grid: [p.rows, 1, 1],
            block: 256,
        }
    }
}

/// Checks what both rejection samplers take per row: `filters [rows, 3]`, the outputs `ids`,
/// `accepted`, `rounds` `[rows]`, and `max_rounds` in 1 ..= 64.
pub fn check_rows(
    rows: usize,
    filters: &[usize],
    outputs: [&[usize]; 3],
    max_rounds: u32,
) -> Result<(), ShapeError> {
    if *filters != [rows, FILTER_WORDS] {
        return Err(ShapeError::Invalid(
            "filters must be [rows, 3]: top_k, top_p, min_p per row",
        ));
    }
    for s in outputs {
        if *s != [rows] {
            return Err(ShapeError::Invalid(
                "ids, accepted and rounds must be [rows]",
            ));
        }
    }
    if !(1..=64).contains(&max_rounds) {
        return Err(ShapeError::Range {
            what: "max_rounds",
            got: max_rounds as f64,
            lo: 1.0,
            hi: 64.0,
        });
    }
    Ok(())
}

/// The IEEE-bit-pattern midpoint of two non-negative floats (halves the bracket in bit space).
#[inline(always)]
pub fn bit_midpoint(a: f32, b: f32) -> f32 {
    let (x, y) = (a.to_bits(), b.to_bits());
    f32::from_bits((x >> 1) + (y >> 1) + (x & y & 1))
}

/// A row's filters as spec §6.1 activates them (a NaN activates nothing), with top-p's mass
/// goal; shared by both rejection samplers.
#[derive(Clone, Copy)]
pub struct RowFilters {
    /// Whether top-k is active (1 ≤ top_k < V).
    pub top_k_on: bool,
    /// floor(top_k): a pivot with this many entries above it fails.
    pub keep_k: f32,
    /// Whether top-p is active (0 < top_p < 1).
    pub top_p_on: bool,
    /// top_p · total: a pivot with more filter mass above it fails.
    pub target_p: f32,
}

/// Row `row`'s filters from the `filters [B, 3]` buffer, with the row's max and total filter
/// mass; also the proposal floor min-p sets (one float below `min_p · p_max`, so `p > low`
/// keeps exactly `p ≥ min_p · p_max`; 0 when min-p is off).
#[inline(always)]
pub fn row_filters(
    filters: Src<f32>,
    row: u32,
    vocab: u32,
    p_max: f32,
    total: f32,
) -> (RowFilters, f32) {
    let at = row as usize * FILTER_WORDS;
    let (top_k, top_p, min_p) = (filters.get(at), filters.get(at + 1), filters.get(at + 2));
    let mut low = 0.0f32;
    if min_p > 0.0 && min_p < 1.0 {
        let floor = min_p * p_max;
        if floor.to_bits() > 0 {
            low = f32::from_bits(floor.to_bits() - 1);
        }
    }
    let filter = RowFilters {
        top_k_on: top_k >= 1.0 && top_k < vocab as f32,
        keep_k: libm::floorf(top_k),
        top_p_on: top_p > 0.0 && top_p < 1.0,
        target_p: top_p * total,
    };
    (filter, low)
}

/// Whether top-k or top-p can refuse a proposal (min-p alone accepts the first one).
#[inline(always)]
pub fn truncates(f: RowFilters) -> bool {
    f.top_k_on || f.top_p_on
}

/// Whether a pivot with `above` entries of `mass` filter mass strictly above it fails;
/// everything at or below a failing pivot fails too.
#[inline(always)]
pub fn fails(f: RowFilters, above: f32, mass: f32) -> bool {
    (f.top_k_on && above >= f.keep_k) || (f.top_p_on && mass > f.target_p)
}

/// The body: one block per row.
#[allow(clippy::too_many_arguments)] // one view per buffer of the list
pub fn rejection_sample<T: Element, B: Block>(
    b: &B,
    p: &RejectionParams,
    probs: Src<T>,
    probs_draw: Src<T>,
    filters: Src<f32>,
    ids: Dst<u32>,
    accepted: Dst<u32>,
    rounds: Dst<u32>,
) {
    let row = b.block_x();
    let base = row as usize * p.vocab as usize;
    let (first, end) = thread_slice(b, p.vocab as usize);
    let prob = |i: usize| probs.get(base + i).to_f32();
    let draw = |i: usize| probs_draw.get(base + i).to_f32();

    // Sweep 1: the row's max (lowest index on ties) and total filter mass.
    let (mut best, mut best_i, mut mass) = (f32::NEG_INFINITY, 0u32, 0.0f32);
    let mut i = first;
    while i < end {
        let v = prob(i);
        mass += v;
        if v > best {
            best = v;
            best_i = i as u32;
        }
        i += 1;
    }
    let (p_max, arg_max) = b.argmax(best, best_i);
    let total = b.sum(mass);
    let write = |id: u32, ok: u32, used: u32| {
        if b.thread() == 0 {
            ids.set(row as usize, id);
            accepted.set(row as usize, ok);
            rounds.set(row as usize, used);
        }
    };
    // A row without positive mass (all zero, −inf logits or NaN) yields its argmax.
    if p_max.is_nan() || p_max <= 0.0 {
        write(arg_max, 1, 0);
        return;
    }

    let (filter, mut low) = row_filters(filters, row, p.vocab, p_max, total);
    let mut high = p_max;

    let mut round = 0u32;
    while round < p.max_rounds {
        // Proposal: inverse CDF of probs_draw over {p > low}, natural index order.
        let u = uniform_open(philox4x32_10_on(b, [round, 0, row, 0], [p.key0, p.key1])[0]);
        let eligible = |i: usize| if prob(i) > low { draw(i) } else { 0.0 };
        let (claimed, pick, _) = inverse_cdf(b, first, end, u, eligible);
        let candidate = if claimed { pick } else { arg_max };

        let pivot0 = prob(candidate as usize);
        let pivot1 = bit_midpoint(pivot0, if high > pivot0 { high } else { pivot0 });
        let (mut above0, mut mass0, mut above1, mut mass1) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
        if truncates(filter) {
            let mut i = first;
            while i < end {
                let v = prob(i);
                if v > pivot0 {
                    above0 += 1.0;
                    mass0 += v;
                }
                if v > pivot1 {
                    above1 += 1.0;
                    mass1 += v;
                }
                i += 1;
            }
            above0 = b.sum(above0);
            mass0 = b.sum(mass0);
            above1 = b.sum(above1);
            mass1 = b.sum(mass1);
        }
        if !fails(filter, above0, mass0) {
            write(candidate, 1, round + 1);
            return;
        }
        // Everything at or below a failing pivot fails too: raise the floor.
        if fails(filter, above1, mass1) {
            low = pivot1;
        } else {
            low = pivot0;
            high = pivot1;
        }
        round += 1;
    }
    write(arg_max, 0, p.max_rounds);
}
