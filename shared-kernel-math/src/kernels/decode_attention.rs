//! The block-level single-query attention sweep shared by the paged decode kernels (spec §9).
//!
//! One block serves a group of consecutive query heads that share one KV head, so every K/V
//! element it loads is used for all of them; the softmax is a base-2 online one, merged
//! through shared memory at the end. Two sweeps:
//!
//! - two-pass ([`attend_two_pass`]): a few lanes score each token, then groups of lanes (one
//!   per slice) add the weighted values; see its module. This is the GPU path; it needs whole
//!   slices (a head dim that is a multiple of [`LANE_DIMS`], pools that start on 16 bytes).
//! - strided (`attend_strided`): waves stripe the tokens one at a time, lanes stride the head
//!   dim, accumulators live in shared memory. It serves everything else: blocks narrower than
//!   the head dim's slices (the serial cpu block), other head dims, unaligned pools.
//!
//! Correct for any wave and block size: nothing below assumes a lane count. Arrays are indexed
//! only inside loops with constant bounds (guarded by the runtime count), so GPU builds keep
//! them in registers.

use super::decode_span::log_sum;
pub use super::decode_span::{
    group_heads, HeadGroup, PoolShape, TokenSpan, LANE_DIMS, MAX_GROUP_HEADS,
};
use super::decode_two_pass::{attend_two_pass, slices, two_pass_layout};
use crate::{
    exp2_approx, is_neg_infinity, max_keeping_nan, nan_unless_finite, Block, Dst, Element, Rw, Src,
};

/// f32 words of shared memory the sweeps need for a block of `block` threads at `wave` lanes:
/// whichever runs (the two-pass one needs whole slices, a lane per slice and aligned pools,
/// which only the launch knows).
pub const fn shared_words(group: u32, head_dim: u32, block: u32, wave: u32) -> usize {
    let (g, d) = (group as usize, head_dim as usize);
    // The strided sweep: the queries, then per wave its accumulators and statistics.
    let waves = block.div_ceil(wave) as usize;
    let strided = g * d + waves * (g * d + 3 * g);
    if !two_pass_fits(d, block as usize) {
        return strided;
    }
    let two_pass = two_pass_layout(g, d, block as usize, wave as usize).words;
    if two_pass > strided {
        two_pass
    } else {
        strided
    }
}

/// Whether the two-pass sweep may run at this head dim and block size (the pools' alignment
/// aside): whole [`LANE_DIMS`] slices and a lane for each.
const fn two_pass_fits(head_dim: usize, block: usize) -> bool {
    head_dim.is_multiple_of(LANE_DIMS) && slices(head_dim) <= block
}

/// Attends the group's queries over the span's tokens and writes `out` (normalised) and, when
/// `lse` is given, the base-2 log-sum-exp of the scaled scores (`-inf` for an empty span). A
/// non-finite score makes the head's output row and log-sum-exp NaN; a non-finite output
/// element is NaN.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn attend_span<T: Element, B: Block>(
    b: &B,
    pool: PoolShape,
    group: HeadGroup,
    span: TokenSpan,
    scale_log2: f32,
    q: &Src<f32>,
    k_pool: &Src<T>,
    v_pool: &Src<T>,
    table: &Src<i32>,
    out: &Dst<f32>,
    lse: Option<&Dst<f32>>,
) {
    // Uniform over the block: every pool row starts on a chunk, and so does shared memory.
    let two_pass = two_pass_fits(pool.head_dim, b.size() as usize)
        && k_pool.chunk_aligned::<LANE_DIMS>(0)
        && v_pool.chunk_aligned::<LANE_DIMS>(0)
        && b.shared::<f32>(0, 0).chunk_aligned::<LANE_DIMS>(0);
    if two_pass {
        attend_two_pass(
            b, pool, group, span, scale_log2, q, k_pool, v_pool, table, out, lse,
        );
    } else {
        attend_strided(
            b, pool, group, span, scale_log2, q, k_pool, v_pool, table, out, lse,
        );
    }
}

/// The strided sweep: waves stripe the tokens one at a time; within a wave the lanes split the
/// head dimension (lane `l` owns dims `l, l + WAVE, …`) and the q·k dot is a wave sum; each
/// wave's accumulators live in shared memory.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn attend_strided<T: Element, B: Block>(
    b: &B,
    pool: PoolShape,
    group: HeadGroup,
    span: TokenSpan,
    scale_log2: f32,
    q: &Src<f32>,
    k_pool: &Src<T>,
    v_pool: &Src<T>,
    table: &Src<i32>,
    out: &Dst<f32>,
    lse: Option<&Dst<f32>>,
) {
    let d_len = pool.head_dim;
    let g_len = group.heads;
    let waves = b.waves() as usize;
    let wave = b.wave_id() as usize;
    let lane = b.lane() as usize;

    let layout = parts_layout(waves, g_len, d_len);
    let shm = b.shared::<f32>(0, layout.words);
    stage_queries(b, &shm, q, group, d_len);
    // Each lane clears only the accumulators it will own, so no one else touches them.
    let mut d = lane;
    while d < d_len {
        let mut g = 0;
        while g < g_len {
            shm.set(acc_at(layout, wave, g) + d, 0.0);
            g += 1;
        }
        d += B::WAVE as usize;
    }
    b.barrier();

    let mut m = [f32::NEG_INFINITY; MAX_GROUP_HEADS];
    let mut l = [0.0f32; MAX_GROUP_HEADS];
    let mut t = span.begin + wave;
    while t < span.end {
        let pos = span.start + t;
        let row = table.get(span.table_base + pos / pool.block_size) as u32 as usize;
        let slot = pos % pool.block_size;
        // Pool offsets are usize: a pool may exceed 2^32 elements.
        let base = ((row * pool.block_size + slot) * pool.heads_kv + group.kv_head) * d_len;

        let mut dot = [0.0f32; MAX_GROUP_HEADS];
        let mut d = lane;
        while d < d_len {
            let k = k_pool.get(base + d).widen();
            let mut g = 0;
            while g < MAX_GROUP_HEADS {
                if g < g_len {
                    dot[g] += shm.get(g * d_len + d) * k;
                }
                g += 1;
            }
            d += B::WAVE as usize;
        }
        let mut corr = [0.0f32; MAX_GROUP_HEADS];
        let mut weight = [0.0f32; MAX_GROUP_HEADS];
        let mut g = 0;
        while g < MAX_GROUP_HEADS {
            if g < g_len {
                let s = nan_unless_finite(b.wave_sum(dot[g]) * scale_log2);
                let m_new = max_keeping_nan(s, m[g]);
                corr[g] = exp2_approx(m[g] - m_new);
                weight[g] = exp2_approx(s - m_new);
                l[g] = l[g] * corr[g] + weight[g];
                m[g] = m_new;
            }
            g += 1;
        }
        let mut d = lane;
        while d < d_len {
            let v = v_pool.get(base + d).widen();
            let mut g = 0;
            while g < MAX_GROUP_HEADS {
                if g < g_len {
                    let at = acc_at(layout, wave, g) + d;
                    shm.set(at, shm.get(at) * corr[g] + weight[g] * v);
                }
                g += 1;
            }
            d += B::WAVE as usize;
        }
        t += waves;
    }
    if lane == 0 {
        publish_stats(&shm, layout, wave, m, l);
    }
    merge_parts(b, &shm, layout, group, out, lse);
}

/// Where the parts of a block keep their states in shared memory, after the group's staged
/// queries: accumulators `[parts, heads, head_dim]`, then maxima, denominators and merge
/// weights, `[parts, heads]` each (start offsets in f32 words).
#[derive(Clone, Copy)]
struct Parts {
    parts: usize,
    heads: usize,
    head_dim: usize,
    acc: usize,
    max: usize,
    sum: usize,
    weight: usize,
    words: usize,
}

#[inline(always)]
fn parts_layout(parts: usize, heads: usize, head_dim: usize) -> Parts {
    let acc = heads * head_dim;
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
fn acc_at(layout: Parts, part: usize, head: usize) -> usize {
    layout.acc + (part * layout.heads + head) * layout.head_dim
}

/// Copies the group's `heads · head_dim` queries to the start of shared memory.
#[inline(always)]
fn stage_queries<B: Block>(b: &B, shm: &Rw<f32>, q: &Src<f32>, group: HeadGroup, d_len: usize) {
    let mut i = b.thread() as usize;
    while i < group.heads * d_len {
        shm.set(i, q.get(group.q_base + i));
        i += b.size() as usize;
    }
}

/// Writes one part's running maxima and denominators.
#[inline(always)]
fn publish_stats(
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
fn merge_parts<B: Block>(
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
/// part saw a token, NaN when a part's maximum is NaN). Reads part `w`'s values at `m_at + w·stride`, `l_at + w·stride`.
#[inline(always)]
fn merged_max_sum(
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
