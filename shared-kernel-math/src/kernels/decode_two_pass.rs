//! The two-pass sweep of the paged decode kernels (the GPU path of `decode_attention`).
//!
//! The block walks its tokens in sub-chunks of `scorers · SCORE_TOKENS` tokens:
//!
//! 1. **Scores.** [`SCORE_LANES`] lanes score one token for every query head of the group: each
//!    loads every `SCORE_LANES`-th slice of the token's K row (a warp's load covers
//!    `SCORE_LANES · 16` contiguous bytes of each token), multiplies it with the staged
//!    queries and the lanes sum their dots with a `log2(SCORE_LANES)`-step shuffle. The
//!    sub-chunk's maximum per head meets in shared memory; each token's weight
//!    `2^(s − m)` against the running maximum `m` goes to shared memory with its pool row.
//! 2. **Values.** The block's threads form groups of `⌈D / LANE_DIMS⌉` lanes, one slice of the
//!    head dim each; a group takes every `groups`-th token of the sub-chunk, loads [`SUM_TILE`]
//!    tokens' V slices before using any and adds `w · v` to its accumulators. No reductions:
//!    the weights are already normalised to the block's running maximum.
//!
//! The sub-chunks alternate between two buffers, so a wave may start the next sub-chunk's
//! loads while others finish the values of the last (two barriers per sub-chunk). At the end
//! the groups' accumulators and the lanes' denominators are summed through shared memory.
//! Correct for any wave and any block of at least `D / LANE_DIMS` threads, for head dims that
//! are whole slices and pools that start on 16 bytes (`decode_attention::attend_span` checks).

use super::decode_span::{
    log_sum, pick_head, HeadGroup, PoolShape, TokenSpan, LANE_DIMS, MAX_GROUP_HEADS,
};
use crate::{exp2_approx, is_neg_infinity, max_keeping_nan, mul_add, nan_unless_finite};
use crate::{Block, Dst, Element, Rw, Src};

/// Lanes that score one token together (at most the wave): a power of two.
pub const SCORE_LANES: usize = 4;

/// Tokens a group of scoring lanes takes per sub-chunk.
pub const SCORE_TOKENS: usize = 2;

/// Slices of each token a scoring lane loads before using any.
const SCORE_BATCH: usize = 4;

/// Tokens a value lane loads before using any.
pub const SUM_TILE: usize = 4;

/// A scoring lane's dots: `SCORE_TOKENS · MAX_GROUP_HEADS`.
const TOKEN_DOTS: usize = 8;
/// A scoring lane's pool elements of one batch: `SCORE_TOKENS · SCORE_BATCH · LANE_DIMS`.
const BATCH_ELEMS: usize = 64;
/// A scoring lane's elements of one slice position: `SCORE_TOKENS · LANE_DIMS`.
const SLICE_ELEMS: usize = 16;
/// A value lane's accumulators: `MAX_GROUP_HEADS · LANE_DIMS`.
const LANE_ACC: usize = 32;
/// A value lane's pool elements of one tile: `SUM_TILE · LANE_DIMS`.
const TILE_ELEMS: usize = 32;
/// A value lane's weights of one tile: `SUM_TILE · MAX_GROUP_HEADS`.
const TILE_WEIGHTS: usize = 16;
const _: () = assert!(
    TOKEN_DOTS == SCORE_TOKENS * MAX_GROUP_HEADS
        && BATCH_ELEMS == SCORE_TOKENS * SCORE_BATCH * LANE_DIMS
        && SLICE_ELEMS == SCORE_TOKENS * LANE_DIMS
        && LANE_ACC == MAX_GROUP_HEADS * LANE_DIMS
        && TILE_ELEMS == SUM_TILE * LANE_DIMS
        && TILE_WEIGHTS == SUM_TILE * MAX_GROUP_HEADS
);

/// Lanes that score one token at a wave of `wave` lanes.
pub const fn score_lanes(wave: u32) -> usize {
    if (wave as usize) < SCORE_LANES {
        wave as usize
    } else {
        SCORE_LANES
    }
}

/// Head-dim slices of [`LANE_DIMS`] elements (rounded up).
pub const fn slices(head_dim: usize) -> usize {
    head_dim.div_ceil(LANE_DIMS)
}

/// Where the sweep keeps things in shared memory (f32 words from the start of the kernel's
/// shared memory): the staged queries, two sub-chunk buffers (weights `[S, 4]`, pool rows
/// `[S]`, slots `[S]`), the value groups' accumulators `[groups, heads, D]`, and per-wave
/// maxima and denominators `[waves, 4]` each.
#[derive(Clone, Copy)]
pub struct TwoPassLayout {
    /// Tokens per sub-chunk.
    pub sub: usize,
    /// Value groups (of `slices(D)` lanes).
    pub groups: usize,
    /// Start of buffer 0.
    pub buffers: usize,
    /// Words per buffer.
    pub buffer_words: usize,
    /// The accumulators.
    pub accs: usize,
    /// Per-wave maxima.
    pub maxima: usize,
    /// Per-wave denominators.
    pub sums: usize,
    /// Words in all.
    pub words: usize,
}

/// The layout for `heads` query heads of `head_dim` at `block` threads of `wave` lanes.
pub const fn two_pass_layout(
    heads: usize,
    head_dim: usize,
    block: usize,
    wave: usize,
) -> TwoPassLayout {
    let lanes = score_lanes(wave as u32);
    let sub = (block / lanes) * SCORE_TOKENS;
    let groups = block / slices(head_dim);
    // Regions start on whole chunks (of weights, of accumulators), so a wide sweep may use
    // chunk accesses there.
    let buffers = (heads * head_dim).div_ceil(MAX_GROUP_HEADS) * MAX_GROUP_HEADS;
    let buffer_words = sub * (MAX_GROUP_HEADS + 2);
    let accs = (buffers + 2 * buffer_words).div_ceil(LANE_DIMS) * LANE_DIMS;
    let maxima = accs + groups * heads * head_dim;
    let waves = block.div_ceil(wave);
    let sums = maxima + waves * MAX_GROUP_HEADS;
    TwoPassLayout {
        sub,
        groups,
        buffers,
        buffer_words,
        accs,
        maxima,
        sums,
        words: sums + waves * MAX_GROUP_HEADS,
    }
}

/// The sweep (see the module docs). `lse`, when given, gets the base-2 log-sum-exp of the
/// scaled scores (`-inf` for an empty span).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn attend_two_pass<T: Element, B: Block>(
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
    let threads = b.size() as usize;
    let thread = b.thread() as usize;
    let layout = two_pass_layout(g_len, d_len, threads, B::WAVE as usize);
    let shm = &b.shared::<f32>(0, layout.words);
    // The pool rows and slots of a sub-chunk, in the same words.
    let idx = &b.shared::<u32>(0, layout.words);
    let mut i = thread;
    while i < g_len * d_len {
        shm.set(i, q.get(group.q_base + i));
        i += threads;
    }

    b.barrier();
    let bs = pool.block_size;
    // Scoring: lane `lane_in` of scorer `scorer` takes slices lane_in, lane_in + lanes, …
    let lanes = score_lanes(B::WAVE);
    let scorers = threads / lanes;
    let scorer = thread / lanes;
    let lane_in = thread % lanes;
    let n_slices = slices(d_len);
    // Values: lane `slice` of group `vgroup` owns dims slice · LANE_DIMS ..
    let vgroup = thread / n_slices;
    let d0 = (thread % n_slices) * LANE_DIMS;
    let sums_values = vgroup < layout.groups;

    let mut m_run = [f32::NEG_INFINITY; MAX_GROUP_HEADS];
    let mut l_part = [0.0f32; MAX_GROUP_HEADS];
    // This lane's accumulators, one row of D per head, live in shared memory between value
    // passes (in registers they would stay live through the scoring pass).
    let acc_at = layout.accs + vgroup * g_len * d_len + d0;
    if sums_values {
        let mut g = 0;
        while g < g_len {
            shm.set_chunk::<LANE_DIMS>(acc_at + g * d_len, [0.0; LANE_DIMS]);
            g += 1;
        }
    }
    let mut base = span.begin;
    let mut buffer = 0;
    // Page and slot of this scorer's first token, advanced by additions (no divisions).
    let first = span.start + span.begin + scorer;
    let (mut page, mut slot) = (first / bs, first % bs);
    let (sub_pages, sub_slots) = (layout.sub / bs, layout.sub % bs);
    let (k_pages, k_slots) = (scorers / bs, scorers % bs);
    // Uniform trip count: every thread meets every barrier.
    while base < span.end {
        let weights = layout.buffers + buffer * layout.buffer_words;
        let rows = weights + layout.sub * MAX_GROUP_HEADS;
        let slots = rows + layout.sub;

        // Pass 1: this scorer's tokens `scorer + k · scorers` of the sub-chunk.
        let mut at = [0usize; SCORE_TOKENS];
        let mut live = [false; SCORE_TOKENS];
        let (mut p, mut sl) = (page, slot);
        let mut k = 0;
        while k < SCORE_TOKENS {
            let t = scorer + k * scorers;
            if scorer < scorers && base + t < span.end {
                let row = table.get(span.table_base + p) as u32 as usize;
                // Pool offsets are usize: a pool may exceed 2^32 elements.
                at[k] = ((row * bs + sl) * pool.heads_kv + group.kv_head) * d_len;
                live[k] = true;
                if lane_in == 0 {
                    idx.set(rows + t, row as u32);
                    idx.set(slots + t, sl as u32);
                }
            }
            p += k_pages;
            sl += k_slots;
            if sl >= bs {
                sl -= bs;
                p += 1;
            }
            k += 1;
        }
        page += sub_pages;
        slot += sub_slots;
        if slot >= bs {
            slot -= bs;
            page += 1;
        }
        let dots = score_tokens(b, shm, k_pool, at, g_len, d_len, lane_in, lanes);

        // The sub-chunk's maximum per head, through each wave's lane 0.
        let mut s = [f32::NEG_INFINITY; TOKEN_DOTS];
        let mut top = [f32::NEG_INFINITY; MAX_GROUP_HEADS];
        let mut k = 0;
        while k < SCORE_TOKENS {
            let mut g = 0;
            while g < MAX_GROUP_HEADS {
                if live[k] && g < g_len {
                    // A non-finite score is NaN, and the maxima keep it (docs/non-finite.md).
                    let v = nan_unless_finite(dots[k * MAX_GROUP_HEADS + g] * scale_log2);
                    s[k * MAX_GROUP_HEADS + g] = v;
                    top[g] = max_keeping_nan(v, top[g]);
                }
                g += 1;
            }
            k += 1;
        }
        let mut g = 0;
        while g < MAX_GROUP_HEADS {
            let mut mask = B::WAVE / 2;
            while mask > 0 {
                let other = f32::from_bits(b.shuffle_xor(top[g].to_bits(), mask));
                top[g] = max_keeping_nan(other, top[g]);
                mask /= 2;
            }
            g += 1;
        }
        if b.lane() == 0 {
            let mut g = 0;
            while g < MAX_GROUP_HEADS {
                shm.set(
                    layout.maxima + b.wave_id() as usize * MAX_GROUP_HEADS + g,
                    top[g],
                );
                g += 1;
            }
        }
        b.barrier();

        // New running maxima; each scorer turns its scores into weights against them.
        let mut corr = [0.0f32; MAX_GROUP_HEADS];
        let mut g = 0;
        while g < MAX_GROUP_HEADS {
            if g < g_len {
                let mut m_new = m_run[g];
                let mut w = 0;
                while w < b.waves() as usize {
                    m_new =
                        max_keeping_nan(shm.get(layout.maxima + w * MAX_GROUP_HEADS + g), m_new);
                    w += 1;
                }
                // The first sub-chunk rescales nothing (m = -inf gives 0); NaN stays NaN.
                corr[g] = exp2_approx(m_run[g] - m_new);
                l_part[g] *= corr[g];
                m_run[g] = m_new;
            }
            g += 1;
        }
        let mut k = 0;
        while k < SCORE_TOKENS {
            let mut w = [0.0f32; MAX_GROUP_HEADS];
            let mut g = 0;
            while g < MAX_GROUP_HEADS {
                if live[k] && g < g_len {
                    w[g] = exp2_approx(s[k * MAX_GROUP_HEADS + g] - m_run[g]);
                }
                g += 1;
            }
            if live[k] && lane_in == 0 {
                let at = weights + (scorer + k * scorers) * MAX_GROUP_HEADS;
                shm.set_chunk::<MAX_GROUP_HEADS>(at, w);
                let mut g = 0;
                while g < MAX_GROUP_HEADS {
                    l_part[g] += w[g];
                    g += 1;
                }
            }
            k += 1;
        }
        b.barrier();

        // Pass 2: this group's tokens `vgroup + n · groups` of the sub-chunk.
        if sums_values {
            let count = (span.end - base).min(layout.sub);
            let tokens = SubChunk {
                count,
                groups: layout.groups,
                weights,
                rows,
                slots,
            };
            sum_values(
                shm,
                idx,
                v_pool,
                pool,
                group.kv_head,
                tokens,
                vgroup,
                d0,
                corr,
                g_len,
                acc_at,
            );
        }
        base += layout.sub;
        buffer = 1 - buffer;
    }
    let own_sums = if lane_in == 0 {
        l_part
    } else {
        [0.0; MAX_GROUP_HEADS]
    };
    finish(b, shm, layout, group, d_len, m_run, own_sums, out, lse);
}

/// Scores this lane's share of [`SCORE_TOKENS`] tokens (pool offsets `at`; a token that is not
/// live has offset 0 and its dots are ignored) for every head of the group: the dots summed
/// over the token's `lanes` lanes, at `k · MAX_GROUP_HEADS + g`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn score_tokens<T: Element, B: Block>(
    b: &B,
    shm: &Rw<f32>,
    k_pool: &Src<T>,
    at: [usize; SCORE_TOKENS],
    g_len: usize,
    d_len: usize,
    lane_in: usize,
    lanes: usize,
) -> [f32; TOKEN_DOTS] {
    let n_slices = slices(d_len);
    let mut dots = [0.0f32; TOKEN_DOTS];
    let mut first = lane_in;
    while first < n_slices {
        // Every load is made (a slice past the row reads the row's last one, a token that is
        // not live reads the pool's first row) and only the valid products are added: no
        // zeroing of registers around loads that may not happen.
        let mut kr = [T::from_bits32(0); BATCH_ELEMS];
        let mut k = 0;
        while k < SCORE_TOKENS {
            let mut c = 0;
            while c < SCORE_BATCH {
                let sl = (first + c * lanes).min(n_slices - 1);
                // SAFETY: the row is inside the pool (the host checks every table entry
                // against it; a token that is not live reads row 0), the slice inside the row,
                // and the row starts on a chunk.
                let v = unsafe { k_pool.get_chunk_unchecked::<LANE_DIMS>(at[k] + sl * LANE_DIMS) };
                let mut j = 0;
                while j < LANE_DIMS {
                    kr[(k * SCORE_BATCH + c) * LANE_DIMS + j] = v[j];
                    j += 1;
                }
                c += 1;
            }
            k += 1;
        }
        let mut c = 0;
        while c < SCORE_BATCH {
            let sl = first + c * lanes;
            if sl < n_slices {
                // Widened once, used by every head.
                let mut kf = [0.0f32; SLICE_ELEMS];
                let mut e = 0;
                while e < SLICE_ELEMS {
                    let k = e / LANE_DIMS;
                    kf[e] = kr[(k * SCORE_BATCH + c) * LANE_DIMS + e % LANE_DIMS].widen();
                    e += 1;
                }
                let mut g = 0;
                while g < MAX_GROUP_HEADS {
                    if g < g_len {
                        // SAFETY: inside the staged queries (g < heads, slice < D / LANE_DIMS).
                        let qs = unsafe {
                            shm.get_chunk_unchecked::<LANE_DIMS>(g * d_len + sl * LANE_DIMS)
                        };
                        let mut k = 0;
                        while k < SCORE_TOKENS {
                            let mut dot = dots[k * MAX_GROUP_HEADS + g];
                            let mut j = 0;
                            while j < LANE_DIMS {
                                dot = mul_add(qs[j], kf[k * LANE_DIMS + j], dot);
                                j += 1;
                            }
                            dots[k * MAX_GROUP_HEADS + g] = dot;
                            k += 1;
                        }
                    }
                    g += 1;
                }
            }
            c += 1;
        }
        first += lanes * SCORE_BATCH;
    }
    // Sum over the token's lanes: xor partners stay inside an aligned group of `lanes`.
    let mut mask = lanes / 2;
    while mask > 0 {
        let mut i = 0;
        while i < TOKEN_DOTS {
            if i % MAX_GROUP_HEADS < g_len {
                dots[i] += f32::from_bits(b.shuffle_xor(dots[i].to_bits(), mask as u32));
            }
            i += 1;
        }
        mask /= 2;
    }
    dots
}

/// The tokens of one sub-chunk as the value pass sees them: `count` of them, taken by
/// `groups` groups, with weights, pool rows and slots at those word offsets.
#[derive(Clone, Copy)]
struct SubChunk {
    count: usize,
    groups: usize,
    weights: usize,
    rows: usize,
    slots: usize,
}

/// The value pass of one group lane: rescales its accumulators (at `acc_at`, one row of D per
/// head) by `corr`, then adds `w · v` over the group's tokens `vgroup + n · groups` of the
/// sub-chunk, [`SUM_TILE`] at a time.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn sum_values<T: Element>(
    shm: &Rw<f32>,
    idx: &Rw<u32>,
    v_pool: &Src<T>,
    pool: PoolShape,
    kv_head: usize,
    tokens: SubChunk,
    vgroup: usize,
    d0: usize,
    corr: [f32; MAX_GROUP_HEADS],
    g_len: usize,
    acc_at: usize,
) {
    let mut acc = [0.0f32; LANE_ACC];
    let mut g = 0;
    while g < MAX_GROUP_HEADS {
        if g < g_len {
            // SAFETY: this lane's accumulators (`acc_at` is inside the layout's `accs`).
            let a = unsafe { shm.get_chunk_unchecked::<LANE_DIMS>(acc_at + g * pool.head_dim) };
            let mut j = 0;
            while j < LANE_DIMS {
                acc[g * LANE_DIMS + j] = a[j] * corr[g];
                j += 1;
            }
        }
        g += 1;
    }
    let mut first = vgroup;
    while first < tokens.count {
        let mut vr = [T::from_bits32(0); TILE_ELEMS];
        let mut wt = [0.0f32; TILE_WEIGHTS];
        let mut u = 0;
        while u < SUM_TILE {
            let t = first + u * tokens.groups;
            if t < tokens.count {
                // SAFETY: t < count ≤ the sub-chunk, whose rows, slots and weights the buffer holds.
                let row = unsafe { idx.get_unchecked(tokens.rows + t) } as usize;
                let slot = unsafe { idx.get_unchecked(tokens.slots + t) } as usize;
                let at = ((row * pool.block_size + slot) * pool.heads_kv + kv_head) * pool.head_dim;
                // SAFETY: as the scoring pass's K loads (the same rows and slots).
                let v = unsafe { v_pool.get_chunk_unchecked::<LANE_DIMS>(at + d0) };
                // SAFETY: as the row and slot above.
                let w = unsafe {
                    shm.get_chunk_unchecked::<MAX_GROUP_HEADS>(tokens.weights + t * MAX_GROUP_HEADS)
                };
                let mut j = 0;
                while j < LANE_DIMS {
                    vr[u * LANE_DIMS + j] = v[j];
                    j += 1;
                }
                let mut g = 0;
                while g < MAX_GROUP_HEADS {
                    wt[u * MAX_GROUP_HEADS + g] = w[g];
                    g += 1;
                }
            }
            u += 1;
        }
        // Widened once, used by every head.
        let mut vf = [0.0f32; TILE_ELEMS];
        let mut e = 0;
        while e < TILE_ELEMS {
            vf[e] = vr[e].widen();
            e += 1;
        }
        let mut g = 0;
        while g < MAX_GROUP_HEADS {
            if g < g_len {
                let mut j = 0;
                while j < LANE_DIMS {
                    let mut a = acc[g * LANE_DIMS + j];
                    let mut u = 0;
                    while u < SUM_TILE {
                        let v = vf[u * LANE_DIMS + j];
                        a = mul_add(wt[u * MAX_GROUP_HEADS + g], v, a);
                        u += 1;
                    }
                    acc[g * LANE_DIMS + j] = a;
                    j += 1;
                }
            }
            g += 1;
        }
        first += tokens.groups * SUM_TILE;
    }
    let mut g = 0;
    while g < MAX_GROUP_HEADS {
        if g < g_len {
            let mut a = [0.0f32; LANE_DIMS];
            let mut j = 0;
            while j < LANE_DIMS {
                a[j] = acc[g * LANE_DIMS + j];
                j += 1;
            }
            shm.set_chunk::<LANE_DIMS>(acc_at + g * pool.head_dim, a);
        }
        g += 1;
    }
}

/// Sums the groups' accumulators and the scorers' denominators (`own_sums`: this lane's
/// share) through shared memory and writes the normalised rows (zeros for an empty span) and,
/// when asked, the log-sum-exp.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn finish<B: Block>(
    b: &B,
    shm: &Rw<f32>,
    layout: TwoPassLayout,
    group: HeadGroup,
    d_len: usize,
    m_run: [f32; MAX_GROUP_HEADS],
    own_sums: [f32; MAX_GROUP_HEADS],
    out: &Dst<f32>,
    lse: Option<&Dst<f32>>,
) {
    let g_len = group.heads;
    let mut g = 0;
    while g < MAX_GROUP_HEADS {
        let total = b.wave_sum(own_sums[g]);
        if b.lane() == 0 {
            shm.set(
                layout.sums + b.wave_id() as usize * MAX_GROUP_HEADS + g,
                total,
            );
        }
        g += 1;
    }
    // After the last value pass's accumulator stores.
    b.barrier();
    let mut l = [0.0f32; MAX_GROUP_HEADS];
    let mut w = 0;
    while w < b.waves() as usize {
        let mut g = 0;
        while g < MAX_GROUP_HEADS {
            l[g] += shm.get(layout.sums + w * MAX_GROUP_HEADS + g);
            g += 1;
        }
        w += 1;
    }
    let threads = b.size() as usize;
    let mut i = b.thread() as usize;
    while i < g_len * d_len {
        let g = i / d_len;
        let mut o = 0.0f32;
        let mut p = 0;
        while p < layout.groups {
            o += shm.get(layout.accs + p * g_len * d_len + i);
            p += 1;
        }
        let m = pick_head(m_run, g);
        let v = if is_neg_infinity(m) {
            0.0
        } else {
            o / pick_head(l, g)
        };
        out.set(group.out_base + i, nan_unless_finite(v));
        i += threads;
    }
    if let Some(lse) = lse {
        let mut g = b.thread() as usize;
        while g < g_len {
            lse.set(
                group.lse_base + g,
                log_sum(pick_head(m_run, g), pick_head(l, g)),
            );
            g += threads;
        }
    }
}
