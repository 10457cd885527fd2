//! How the waves (or wave sets) of a paged decode block merge their softmax states (spec §9):
//! each part publishes its running maxima, denominators and accumulators to shared memory, and
//! the block combines them into normalised rows and the base-2 log-sum-exp. The strided sweep
//! (parts are waves) and the tensor-core sweep (parts are wave-multiply sets) share it.

use super::decode_span::{log_sum, HeadGroup, MAX_GROUP_HEADS};
use crate::{exp2_approx, is_neg_infinity, max_keeping_nan, nan_unless_finite, Block, Dst, Rw};

/// Where the parts of a block keep their states in shared memory, from a word offset the
/// sweep chooses (after what it stages first): accumulators `[parts, heads, head_dim]`, then
/// maxima, denominators and merge weights, `[parts, heads]` each (start offsets in f32 words).
#[derive(Clone, Copy)]
pub struct Parts {
    /// Parts that publish a state.
    pub parts: usize,
    /// Query heads of the group.
    pub heads: usize,
    /// Elements per head.
    pub head_dim: usize,
    /// Start of the accumulators.
    pub acc: usize,
    /// Start of the maxima.
    pub max: usize,
    /// Start of the denominators.
    pub sum: usize,
    /// Start of the merge weights.
    pub weight: usize,
    /// Words in all, from word 0.
    pub words: usize,
}

/// The layout of `parts` states of `heads` rows of `head_dim`, starting at word `base`.
#[inline(always)]
pub const fn parts_layout(base: usize, parts: usize, heads: usize, head_dim: usize) -> Parts {
    let acc = base;
    let max = acc + parts * heads * head_dim;
    let sum = max + parts * heads;
    let weight = sum + parts * heads;
    Parts {
        parts,
        heads,
        head_dim,
        acc,
        max,
        sum,
        weight,
        words: weight + parts * heads,
    }
}

/// Offset of part `part`'s accumulators for head `head`.
#[inline(always)]
pub fn acc_at(layout: Parts, part: usize, head: usize) -> usize {
    layout.acc + (part * layout.heads + head) * layout.head_dim
}

/// Writes one part's running maxima and denominators.
#[inline(always)]
pub fn publish_stats(
    shm: &Rw<f32>,
    layout: Parts,
    part: usize,
    m: [f32; MAX_GROUP_HEADS],
    l: [f32; MAX_GROUP_HEADS],
) {
    let mut g = 0;
    while g < MAX_GROUP_HEADS {
        if g < layout.heads {
            shm.set(layout.max + part * layout.heads + g, m[g]);
            shm.set(layout.sum + part * layout.heads + g, l[g]);
        }
        g += 1;
    }
}

/// Merges the parts' published states (after a barrier): each part's weight in the output,
/// `2^(m_part − m_all) / l_all` (0 for an empty part or span), once per (part, head); then the
/// normalised output rows and, when asked, the base-2 log-sum-exp (`-inf` for an empty span).
#[inline(always)]
pub fn merge_parts<B: Block>(
    b: &B,
    shm: &Rw<f32>,
    layout: Parts,
    group: HeadGroup,
    out: &Dst<f32>,
    lse: Option<&Dst<f32>>,
) {
    let (g_len, d_len) = (layout.heads, layout.head_dim);
    b.barrier();
    let mut i = b.thread() as usize;
    while i < layout.parts * g_len {
        let g = i % g_len;
        let (m_all, l_all) =
            merged_max_sum(shm, layout.max + g, layout.sum + g, g_len, layout.parts);
        let m_part = shm.get(layout.max + i);
        // A part that saw tokens has `l_all ≥ 1`; a NaN maximum or sum gives a NaN weight.
        let w = if !is_neg_infinity(m_part) {
            exp2_approx(m_part - m_all) / l_all
        } else {
            0.0
        };
        shm.set(layout.weight + i, w);
        if let Some(lse) = lse {
            if i < g_len {
                lse.set(group.lse_base + g, log_sum(m_all, l_all));
            }
        }
        i += b.size() as usize;
    }
    b.barrier();
    let mut i = b.thread() as usize;
    while i < g_len * d_len {
        let g = i / d_len;
        let d = i % d_len;
        let mut o = 0.0f32;
        let mut p = 0;
        while p < layout.parts {
            o += shm.get(acc_at(layout, p, g) + d) * shm.get(layout.weight + p * g_len + g);
            p += 1;
        }
        out.set(group.out_base + i, nan_unless_finite(o));
        i += b.size() as usize;
    }
}

/// The largest of the parts' maxima and the denominators rescaled to it (`(-inf, 0)` when no
/// part saw a token, NaN when a part's maximum is NaN). Reads part `w`'s values at
/// `m_at + w·stride`, `l_at + w·stride` (also the merge kernel's thread groups' states).
#[inline(always)]
pub fn merged_max_sum(
    shm: &Rw<f32>,
    m_at: usize,
    l_at: usize,
    stride: usize,
    parts: usize,
) -> (f32, f32) {
    let mut m_all = f32::NEG_INFINITY;
    let mut w = 0;
    while w < parts {
        m_all = max_keeping_nan(shm.get(m_at + w * stride), m_all);
        w += 1;
    }
    let mut l_all = 0.0f32;
    if !is_neg_infinity(m_all) {
        let mut w = 0;
        while w < parts {
            let m_w = shm.get(m_at + w * stride);
            if !is_neg_infinity(m_w) {
                l_all += shm.get(l_at + w * stride) * exp2_approx(m_w - m_all);
            }
            w += 1;
        }
    }
    (m_all, l_all)
}
