//! The block-level single-query attention sweep shared by the paged decode kernels (spec §9).
//!
//! One block serves a group of consecutive query heads that share one KV head, so every K/V
//! element it loads is used for all of them; the softmax is a base-2 online one, merged
//! through shared memory at the end. Three sweeps:
//!
//! - tensor-core ([`attend_mma`]): each wave-multiply set scores and weighs tiles of tokens
//!   with the wave multiply and its own online softmax; see its module. 16-bit pools at head
//!   dim 128 where the port's multiply is hardware (`Block::MMA_NATIVE`), unless the launch
//!   turns it off.
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

use super::decode_mma::{attend_mma, mma_fits, mma_layout, MMA_HEAD_DIM};
use super::decode_parts::{acc_at, merge_parts, parts_layout, publish_stats};
pub use super::decode_span::{
    group_heads, HeadGroup, PoolShape, TokenSpan, LANE_DIMS, MAX_GROUP_HEADS,
};
use super::decode_two_pass::{attend_two_pass, slices, two_pass_layout};
use crate::{exp2_approx, max_keeping_nan, nan_unless_finite, Block, Dst, Element, Rw, Src};

/// f32 words of shared memory the sweeps need for a block of `block` threads at `wave` lanes:
/// whichever runs (the two-pass one needs whole slices, a lane per slice and aligned pools,
/// which only the launch knows).
pub const fn shared_words(group: u32, head_dim: u32, block: u32, wave: u32) -> usize {
    let (g, d) = (group as usize, head_dim as usize);
    // The strided sweep: the queries, then per wave its accumulators and statistics.
    let waves = block.div_ceil(wave) as usize;
    let mut words = g * d + waves * (g * d + 3 * g);
    if two_pass_fits(d, block as usize) {
        let two_pass = two_pass_layout(g, d, block as usize, wave as usize).words;
        if two_pass > words {
            words = two_pass;
        }
    }
    // The tensor-core sweep, where the dtype and the port let it run.
    if d == MMA_HEAD_DIM && block.is_multiple_of(wave) {
        let mma = mma_layout(g, block as usize, wave as usize).words;
        if mma > words {
            words = mma;
        }
    }
    words
}

/// Whether the two-pass sweep may run at this head dim and block size (the pools' alignment
/// aside): whole [`LANE_DIMS`] slices and a lane for each.
const fn two_pass_fits(head_dim: usize, block: usize) -> bool {
    head_dim.is_multiple_of(LANE_DIMS) && slices(head_dim) <= block
}

/// Attends the group's queries over the span's tokens and writes `out` (normalised) and, when
/// `lse` is given, the base-2 log-sum-exp of the scaled scores (`-inf` for an empty span). A
/// non-finite score makes the head's output row and log-sum-exp NaN; a non-finite output
/// element is NaN. `allow_mma` lets the tensor-core sweep run where it fits.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn attend_span<T: Element, B: Block>(
    b: &B,
    pool: PoolShape,
    group: HeadGroup,
    span: TokenSpan,
    scale_log2: f32,
    allow_mma: bool,
    q: &Src<f32>,
    k_pool: &Src<T>,
    v_pool: &Src<T>,
    table: &Src<i32>,
    out: &Dst<f32>,
    lse: Option<&Dst<f32>>,
) {
    // Uniform over the block: every pool row starts on a chunk, and so does shared memory.
    let aligned = k_pool.chunk_aligned::<LANE_DIMS>(0)
        && v_pool.chunk_aligned::<LANE_DIMS>(0)
        && b.shared::<f32>(0, 0).chunk_aligned::<LANE_DIMS>(0);
    // `B::MMA_NATIVE` first: ports without the multiply (WGSL) never translate its sweep.
    if B::MMA_NATIVE && allow_mma && aligned && mma_fits::<T, B>(pool, group.heads) {
        attend_mma(
            b, pool, group, span, scale_log2, q, k_pool, v_pool, table, out, lse,
        );
    } else if aligned && two_pass_fits(pool.head_dim, b.size() as usize) {
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

    let layout = parts_layout(g_len * d_len, waves, g_len, d_len);
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

/// Copies the group's `heads · head_dim` queries to the start of shared memory.
#[inline(always)]
fn stage_queries<B: Block>(b: &B, shm: &Rw<f32>, q: &Src<f32>, group: HeadGroup, d_len: usize) {
    let mut i = b.thread() as usize;
    while i < group.heads * d_len {
        shm.set(i, q.get(group.q_base + i));
        i += b.size() as usize;
    }
}
