//! The block-level single-query attention sweep shared by the paged decode kernels (spec §9).
//!
//! One block serves a group of consecutive query heads that share one KV head, so every K/V
//! element it loads is used for all of them. Each part of the block keeps a base-2 online
//! softmax `(m, l, acc)` over the tokens it visits; the parts' states are merged through shared
//! memory at the end. Two sweeps, chosen by whether a wave can cover a token's head dim with
//! one [`LANE_DIMS`]-wide slice per lane:
//!
//! - tiled (`attend_tiled`): a token's slices go to [`lanes_per_token`] lanes, so a wave holds
//!   several lane groups; each group loads [`TILE`] tokens' K and V slices (16-byte chunks for
//!   16-bit pools) before using any, sums the q·k dots over its lanes with shuffles, rescales
//!   once per tile and keeps its accumulators in registers. This is the GPU path.
//! - strided (`attend_strided`): waves stripe the tokens one at a time, lanes stride the head
//!   dim, accumulators live in shared memory. It serves narrow waves (the serial cpu block,
//!   wave 4–16 emulation, lavapipe) whose lanes cannot cover the head dim one slice each.
//!
//! Correct for any wave and block size: nothing below assumes a lane count. Arrays are indexed
//! only inside loops with constant bounds (guarded by the runtime count), so GPU builds keep
//! them in registers.

use crate::{
    exp2_approx, is_neg_infinity, max_keeping_nan, mul_add, nan_unless_finite, Block, Dst, Element,
    Rw, Src,
};

/// The most query heads one block serves (the per-lane score and accumulator registers are
/// sized by it: 4 heads keep the tiled sweep's registers near 128 per lane).
pub const MAX_GROUP_HEADS: usize = 4;

/// Head-dim elements one lane owns in the tiled sweep: one 16-byte chunk of a 16-bit pool.
pub const LANE_DIMS: usize = 8;

/// Tokens a lane group loads before using any (bytes in flight per lane: 2 · TILE · 16).
pub const TILE: usize = 4;

/// A lane's q·k dots of one tile: `MAX_GROUP_HEADS · TILE`.
const TILE_DOTS: usize = 16;
/// A lane's accumulators: `MAX_GROUP_HEADS · LANE_DIMS`.
const LANE_ACC: usize = 32;
/// A lane's pool elements of one tile, per side: `TILE · LANE_DIMS`.
const TILE_ELEMS: usize = 32;
const _: () = assert!(
    TILE_DOTS == MAX_GROUP_HEADS * TILE
        && LANE_ACC == MAX_GROUP_HEADS * LANE_DIMS
        && TILE_ELEMS == TILE * LANE_DIMS
);

/// Query heads per block for `q_per_kv` query heads per KV head: its largest divisor that is
/// at most [`MAX_GROUP_HEADS`].
pub const fn group_heads(q_per_kv: u32) -> u32 {
    let mut g = if q_per_kv < MAX_GROUP_HEADS as u32 {
        q_per_kv
    } else {
        MAX_GROUP_HEADS as u32
    };
    while g > 1 && !q_per_kv.is_multiple_of(g) {
        g -= 1;
    }
    if g == 0 {
        1
    } else {
        g
    }
}

/// Lanes that share one token in the tiled sweep: the head dim's [`LANE_DIMS`] slices rounded
/// up to a power of two, or 0 when that exceeds the wave (the strided sweep runs instead).
pub const fn lanes_per_token(head_dim: u32, wave: u32) -> u32 {
    let slices = head_dim.div_ceil(LANE_DIMS as u32);
    let mut lanes = 1;
    while lanes < slices {
        lanes *= 2;
    }
    if lanes > wave {
        0
    } else {
        lanes
    }
}

/// f32 words of shared memory the sweep needs for a block of `block` threads at `wave` lanes:
/// the group's queries, then per part (lane group or wave) its accumulators, maxima,
/// denominators and merge weights.
pub const fn shared_words(group: u32, head_dim: u32, block: u32, wave: u32) -> usize {
    let (g, d) = (group as usize, head_dim as usize);
    let waves = block.div_ceil(wave) as usize;
    let lanes = lanes_per_token(head_dim, wave);
    // Lane groups per wave; the strided sweep (no lanes per token) has one part per wave.
    let parts = waves
        * match wave.checked_div(lanes) {
            Some(groups) => groups as usize,
            None => 1,
        };
    g * d + parts * (g * d + 3 * g)
}

/// The pool's geometry (layout A: `[num_blocks, block_size, heads_kv, head_dim]`).
#[derive(Clone, Copy)]
pub struct PoolShape {
    /// Tokens per page.
    pub block_size: usize,
    /// KV heads per token.
    pub heads_kv: usize,
    /// Elements per head.
    pub head_dim: usize,
}

/// Which of a sequence's tokens one block attends to, and where they live.
#[derive(Clone, Copy)]
pub struct TokenSpan {
    /// Index in the page table of the sequence's first page.
    pub table_base: usize,
    /// Position of visible token 0 inside the sequence's first page (a sliding window's start).
    pub start: usize,
    /// Visible tokens `[begin, end)` this block covers.
    pub begin: usize,
    /// One past the last visible token this block covers.
    pub end: usize,
}

/// The query-head group a block serves: `heads` consecutive query heads of KV head `kv_head`.
#[derive(Clone, Copy)]
pub struct HeadGroup {
    /// The KV head the group's queries attend with.
    pub kv_head: usize,
    /// Query heads in the group (the GQA ratio, or fewer).
    pub heads: usize,
    /// Element offset of the group's first query (its `heads · head_dim` queries are contiguous).
    pub q_base: usize,
    /// Element offset of the group's first output row (also contiguous).
    pub out_base: usize,
    /// Index of the group's first log-sum-exp output, when the caller wants them.
    pub lse_base: usize,
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
    let lanes = lanes_per_token(pool.head_dim as u32, B::WAVE) as usize;
    if lanes > 0 {
        attend_tiled(
            b, pool, group, span, scale_log2, q, k_pool, v_pool, table, out, lse, lanes,
        );
    } else {
        attend_strided(
            b, pool, group, span, scale_log2, q, k_pool, v_pool, table, out, lse,
        );
    }
}

/// The tiled sweep: lane group `part` (of `parts` in the block) takes tiles of [`TILE`]
/// consecutive tokens `begin + (k · parts + part) · TILE + [0, TILE)`; lane `i` of a group owns
/// dims `i · LANE_DIMS ..` of each token (spare lanes of a padded group own none).
// `lane % lanes == 0` below stays as written: the H200 figures in docs/results were measured
// on exactly this body (`is_multiple_of` reorders the epilogue's code).
#[allow(clippy::too_many_arguments, clippy::manual_is_multiple_of)]
#[inline(always)]
fn attend_tiled<T: Element, B: Block>(
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
    lanes: usize,
) {
    let d_len = pool.head_dim;
    let g_len = group.heads;
    let bs = pool.block_size;
    let lane = b.lane() as usize;
    let per_wave = B::WAVE as usize / lanes;
    let parts = b.waves() as usize * per_wave;
    let part = b.wave_id() as usize * per_wave + lane / lanes;
    let d0 = (lane % lanes) * LANE_DIMS;
    let dims = if d0 < d_len {
        (d_len - d0).min(LANE_DIMS)
    } else {
        0
    };

    let layout = parts_layout(parts, g_len, d_len);
    let shm = b.shared::<f32>(0, layout.words);
    stage_queries(b, &shm, q, group, d_len);
    b.barrier();

    // Uniform over the block: every row and query slice starts on a chunk boundary.
    let wide = d_len.is_multiple_of(LANE_DIMS)
        && k_pool.chunk_aligned::<LANE_DIMS>(0)
        && v_pool.chunk_aligned::<LANE_DIMS>(0);
    let q_wide = d_len.is_multiple_of(LANE_DIMS) && shm.chunk_aligned::<LANE_DIMS>(0);

    let mut m = [f32::NEG_INFINITY; MAX_GROUP_HEADS];
    let mut l = [0.0f32; MAX_GROUP_HEADS];
    let mut acc = [0.0f32; LANE_ACC];
    let step = parts * TILE;
    // The wave loops while its first group has tokens (the shuffles need the whole wave); a
    // group past the end loads nothing. Page and slot of this group's tile follow its start.
    let mut lead = span.begin + (part - lane / lanes) * TILE;
    let mut first = span.begin + part * TILE;
    let mut page = (span.start + first) / bs;
    let mut slot = (span.start + first) % bs;
    let (step_pages, step_slots) = (step / bs, step % bs);
    while lead < span.end {
        let valid = if first < span.end {
            (span.end - first).min(TILE)
        } else {
            0
        };
        let mut kr = [T::from_bits32(0); TILE_ELEMS];
        let mut vr = [T::from_bits32(0); TILE_ELEMS];
        let (mut p, mut s) = (page, slot);
        let mut t = 0;
        while t < TILE {
            if t < valid {
                let row = table.get(span.table_base + p) as u32 as usize;
                // Pool offsets are usize: a pool may exceed 2^32 elements.
                let at = ((row * bs + s) * pool.heads_kv + group.kv_head) * d_len + d0;
                let kc = load_slice(k_pool, at, dims, wide);
                let vc = load_slice(v_pool, at, dims, wide);
                let mut j = 0;
                while j < LANE_DIMS {
                    kr[t * LANE_DIMS + j] = kc[j];
                    vr[t * LANE_DIMS + j] = vc[j];
                    j += 1;
                }
            }
            s += 1;
            if s == bs {
                s = 0;
                p += 1;
            }
            t += 1;
        }

        let mut kf = [0.0f32; TILE_ELEMS];
        let mut e = 0;
        while e < TILE_ELEMS {
            kf[e] = kr[e].widen();
            e += 1;
        }
        let mut dots = [0.0f32; TILE_DOTS];
        let mut g = 0;
        while g < MAX_GROUP_HEADS {
            if g < g_len {
                let qs = shared_slice(&shm, g * d_len + d0, dims, q_wide);
                let mut t = 0;
                while t < TILE {
                    let mut dot = 0.0f32;
                    let mut j = 0;
                    while j < LANE_DIMS {
                        dot = mul_add(qs[j], kf[t * LANE_DIMS + j], dot);
                        j += 1;
                    }
                    dots[g * TILE + t] = dot;
                    t += 1;
                }
            }
            g += 1;
        }
        // Sum each dot over the token's lanes: xor partners stay inside an aligned group.
        let mut mask = lanes / 2;
        while mask > 0 {
            let mut i = 0;
            while i < TILE_DOTS {
                if i / TILE < g_len {
                    dots[i] += f32::from_bits(b.shuffle_xor(dots[i].to_bits(), mask as u32));
                }
                i += 1;
            }
            mask /= 2;
        }
        // Scaled scores; a non-finite one is NaN, and the running maximum keeps it, so the
        // head's output is NaN (docs/non-finite.md).
        let mut i = 0;
        while i < TILE_DOTS {
            dots[i] = nan_unless_finite(dots[i] * scale_log2);
            i += 1;
        }

        // The tile's softmax step per head: one rescale of the old state, one weight per token.
        let mut corr = [1.0f32; MAX_GROUP_HEADS];
        let mut w = [0.0f32; TILE_DOTS];
        let mut g = 0;
        while g < MAX_GROUP_HEADS {
            if g < g_len && valid > 0 {
                let mut top = f32::NEG_INFINITY;
                let mut t = 0;
                while t < TILE {
                    if t < valid {
                        top = max_keeping_nan(dots[g * TILE + t], top);
                    }
                    t += 1;
                }
                let m_new = max_keeping_nan(top, m[g]);
                // A first tile rescales nothing (m = -inf gives 0); a NaN score stays NaN.
                corr[g] = exp2_approx(m[g] - m_new);
                let mut sum = 0.0f32;
                let mut t = 0;
                while t < TILE {
                    if t < valid {
                        let e = exp2_approx(dots[g * TILE + t] - m_new);
                        w[g * TILE + t] = e;
                        sum += e;
                    }
                    t += 1;
                }
                l[g] = mul_add(l[g], corr[g], sum);
                m[g] = m_new;
            }
            g += 1;
        }
        let mut vf = [0.0f32; TILE_ELEMS];
        let mut e = 0;
        while e < TILE_ELEMS {
            vf[e] = vr[e].widen();
            e += 1;
        }
        let mut g = 0;
        while g < MAX_GROUP_HEADS {
            if g < g_len && valid > 0 {
                let mut j = 0;
                while j < LANE_DIMS {
                    let mut a = acc[g * LANE_DIMS + j] * corr[g];
                    let mut t = 0;
                    while t < TILE {
                        a = mul_add(w[g * TILE + t], vf[t * LANE_DIMS + j], a);
                        t += 1;
                    }
                    acc[g * LANE_DIMS + j] = a;
                    j += 1;
                }
            }
            g += 1;
        }

        lead += step;
        first += step;
        page += step_pages;
        slot += step_slots;
        if slot >= bs {
            slot -= bs;
            page += 1;
        }
    }

    // Publish this group's state; its lanes own disjoint dims, lane 0 the maxima and sums.
    let mut g = 0;
    while g < MAX_GROUP_HEADS {
        if g < g_len {
            let at = acc_at(layout, part, g) + d0;
            let mut j = 0;
            while j < LANE_DIMS {
                if j < dims {
                    shm.set(at + j, acc[g * LANE_DIMS + j]);
                }
                j += 1;
            }
        }
        g += 1;
    }
    if lane % lanes == 0 {
        publish_stats(&shm, layout, part, m, l);
    }
    merge_parts(b, &shm, layout, group, out, lse);
}

/// `LANE_DIMS` pool elements from `at` as stored: one chunk when the pool allows it and the lane
/// owns a whole slice, else element by element with zeros past `dims`.
#[inline(always)]
fn load_slice<T: Element>(pool: &Src<T>, at: usize, dims: usize, wide: bool) -> [T; LANE_DIMS] {
    if wide && dims == LANE_DIMS {
        return pool.get_chunk::<LANE_DIMS>(at);
    }
    let mut v = [T::from_bits32(0); LANE_DIMS];
    let mut j = 0;
    while j < LANE_DIMS {
        if j < dims {
            v[j] = pool.get(at + j);
        }
        j += 1;
    }
    v
}

/// As [`load_slice`], for the queries staged in shared memory.
#[inline(always)]
fn shared_slice(shm: &Rw<f32>, at: usize, dims: usize, wide: bool) -> [f32; LANE_DIMS] {
    if wide && dims == LANE_DIMS {
        return shm.get_chunk::<LANE_DIMS>(at);
    }
    let mut v = [0.0f32; LANE_DIMS];
    let mut j = 0;
    while j < LANE_DIMS {
        if j < dims {
            v[j] = shm.get(at + j);
        }
        j += 1;
    }
    v
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

/// The base-2 log-sum-exp of merged state `(m, l)`: `m + log2(l)`, `-inf` when empty, NaN
/// when a score was not finite.
#[inline(always)]
fn log_sum(m_all: f32, l_all: f32) -> f32 {
    if is_neg_infinity(m_all) {
        f32::NEG_INFINITY
    } else {
        m_all + libm::log2f(l_all)
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
