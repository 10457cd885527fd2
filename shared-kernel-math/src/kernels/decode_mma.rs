//! The tensor-core sweep of the paged decode kernels: 16-bit pools at head dim
//! [`MMA_HEAD_DIM`] on ports whose wave multiply is hardware (`decode_attention::attend_span`
//! chooses it; [`mma_fits`] says when).
//!
//! Each wave-multiply set (`mma_classes · mma_groups` lanes: a warp, or half a 64-lane wave)
//! walks its own tiles of [`MMA_TILE`] tokens with its own online softmax, with no barrier; the
//! block's sets merge at the end (`decode_parts`). Per tile, lane `(g, q)` of a set:
//!
//! 1. **Scores** `S = Q·Kᵀ`, two multiplies per 16 dims. `A` row `g` is the 16-bit rounding of
//!    head `g mod H`'s scaled query and row `g + G` what that rounding left out, so the f32
//!    query keeps ~2⁻²² of its precision and the two rows' sum is the score. `B`'s column `g`
//!    is the tile's token `g` (then `G + g`) and the lane's slots are the dims of its own
//!    16-byte K loads: no conversion, no shuffle. The lane gets head `g mod H`'s scores of
//!    tokens `mma_col(t)` and `G + mma_col(t)`, `t < 2`.
//! 2. **Softmax.** The tile's maximum per head over the lane's class (2 shuffles), gathered
//!    for the four heads a lane's accumulator columns may name (3 shuffles). A running maximum
//!    moves only when a tile exceeds it by more than 2^8 (`LAZY_LOG2`), so weights stay within
//!    16-bit range and the accumulators are rescaled only then.
//! 3. **Values** `Oᵀ += Vᵀ·Pᵀ`, one multiply per 16 dims. `B` is the lane's own weights: column
//!    `g` is head `g mod H`, the slots the four tokens its scores came from (a bijection of the
//!    tile's tokens over the classes, since `mma_col` covers the columns). `A`'s rows are dims
//!    and its slots the same tokens, two tokens' values of one dim per pair: one byte permute
//!    per pair from the lane's 16-byte V loads.
//!
//! A tile's K and V are loaded together before its first multiply (a tile's bytes in flight
//! per set; the other sets and blocks on the multiprocessor overlap their math with them).
//! Tokens past the span read the span's last token and weigh 0.

use super::decode_parts::{acc_at, merge_parts, parts_layout, Parts};
use super::decode_span::{pick_head, HeadGroup, PoolShape, TokenSpan, LANE_DIMS, MAX_GROUP_HEADS};
use crate::wave_mma::{mma_classes, mma_groups, mma_sets};
use crate::{exp2_approx, is_16bit, max_keeping_nan, nan_unless_finite, Block, Dst, Element};
use crate::{Rw, Src};

/// The classes of a set (lanes holding different slots) the sweep is written for.
const MMA_CLASSES: usize = 4;
/// The groups of a set (columns of `B`) the sweep is written for: waves of 32 and 64 lanes.
const MMA_GROUPS: usize = 8;
/// Tokens per tile: the columns of two score multiplies, the slots of one value multiply.
pub const MMA_TILE: usize = 2 * MMA_GROUPS;
/// The head dim the sweep runs at (its registers are sized by it).
pub const MMA_HEAD_DIM: usize = 128;
// Array lengths are literals (the assert below ties them to the geometry).
/// 16-byte K chunks of one token a lane loads: `MMA_HEAD_DIM / (LANE_DIMS · MMA_CLASSES)`.
const MMA_K_CHUNKS: usize = 4;
/// Score multiplies per token column (16 dims each): `2 · MMA_K_CHUNKS`.
const MMA_K_STEPS: usize = 8;
/// A lane's K words of one tile (two tokens): `2 · MMA_K_CHUNKS` chunks.
const MMA_KEY_CHUNKS: usize = 8;
/// 16-byte V chunks of one token a lane loads: `MMA_HEAD_DIM / (LANE_DIMS · MMA_GROUPS)`.
const MMA_V_CHUNKS: usize = 2;
/// Tokens a lane scores and weighs per tile (its slots of the value multiply).
const MMA_LANE_TOKENS: usize = 4;
/// A lane's V chunks of one tile: `MMA_LANE_TOKENS · MMA_V_CHUNKS`.
const MMA_VALUE_CHUNKS: usize = 8;
/// Value multiplies per tile (`2G` dims each): `MMA_HEAD_DIM / (2 · MMA_GROUPS)`.
const MMA_VALUE_STEPS: usize = 8;
/// Log2 of the most a weight may exceed 1 before the running maximum moves.
const LAZY_LOG2: f32 = 8.0;
/// Largest binary exponent of a scaled query element kept as is (f16's range is 2^16).
const QUERY_EXP_LIMIT: u32 = 14;
/// Words of the staged query fragments, `[step][head][class][4]`:
/// `MMA_K_STEPS · MAX_GROUP_HEADS · MMA_CLASSES · 4`.
const FRAG_WORDS: usize = 512;

// The lane's K chunks feed two steps each; the heads gather over group bits.
const _: () = assert!(
    MMA_K_CHUNKS * LANE_DIMS * MMA_CLASSES == MMA_HEAD_DIM
        && MMA_K_STEPS == 2 * MMA_K_CHUNKS
        && MMA_KEY_CHUNKS == 2 * MMA_K_CHUNKS
        && MMA_VALUE_CHUNKS == MMA_LANE_TOKENS * MMA_V_CHUNKS
        && MMA_VALUE_STEPS * 2 * MMA_GROUPS == MMA_HEAD_DIM
        && FRAG_WORDS == MMA_K_STEPS * MAX_GROUP_HEADS * MMA_CLASSES * 4
        && MMA_V_CHUNKS * LANE_DIMS * MMA_GROUPS == MMA_HEAD_DIM
        && MMA_TILE == 4 * MMA_CLASSES
        && 2 * MAX_GROUP_HEADS <= MMA_GROUPS
        && MAX_GROUP_HEADS == 4
);

/// Whether the sweep runs for a `T` pool of this shape with `heads` query heads per block on
/// block type `B` (pool alignment aside).
#[inline(always)]
pub fn mma_fits<T: Element, B: Block>(pool: PoolShape, heads: usize) -> bool {
    B::MMA_NATIVE
        && is_16bit::<T>()
        && mma_classes(B::WAVE) as usize == MMA_CLASSES
        && mma_groups(B::WAVE) as usize == MMA_GROUPS
        && pool.head_dim == MMA_HEAD_DIM
        && pool.block_size >= MMA_TILE
        && heads <= MAX_GROUP_HEADS
}

/// The shared-memory layout: query fragments, then the sets' states.
pub const fn mma_layout(heads: usize, block: usize, wave: usize) -> Parts {
    let sets = block / wave * mma_sets(wave as u32) as usize;
    parts_layout(FRAG_WORDS, sets, heads, MMA_HEAD_DIM)
}

/// Two 16-bit values as one word, `lo` in the low half.
#[inline(always)]
fn pair_word<T: Element>(lo: T, hi: T) -> u32 {
    lo.to_bits32() | (hi.to_bits32() << 16)
}

/// The first of the four dims class `class` holds at score step `step`: its K chunk
/// `step / 2`, low or high half.
#[inline(always)]
fn slot_dim(class: usize, step: usize) -> usize {
    LANE_DIMS * (class + MMA_CLASSES * (step / 2)) + 4 * (step % 2)
}

/// One 16-byte chunk as four words.
#[inline(always)]
fn chunk_words<T: Element>(v: [T; LANE_DIMS]) -> [u32; 4] {
    [
        pair_word(v[0], v[1]),
        pair_word(v[2], v[3]),
        pair_word(v[4], v[5]),
        pair_word(v[6], v[7]),
    ]
}

/// The running maximum after a tile whose maximum is `tile`: it moves (to the larger) only when
/// the tile exceeds it by more than 2^LAZY_LOG2; NaN sticks.
#[inline(always)]
fn lazy_max(m: f32, tile: f32) -> f32 {
    if tile <= m + LAZY_LOG2 {
        m
    } else {
        max_keeping_nan(tile, m)
    }
}

/// Where a set's tiles are: the pool row and slot of its current tile's first token, and the
/// span's last token (what tokens past the span read).
#[derive(Clone, Copy)]
struct TileCursor {
    /// Visible index of the current tile's first token.
    first: usize,
    /// Its page (from the sequence's first) and slot.
    page: usize,
    slot: usize,
    /// The span's last page, and the element offset of its last token.
    last_page: usize,
    last_at: usize,
}

/// The element offsets of a tile's tokens `offsets[i]` (tile offsets) for this block's KV head.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn token_offsets<const N: usize>(
    c: TileCursor,
    span: TokenSpan,
    pool: PoolShape,
    kv_head: usize,
    table: &Src<i32>,
    offsets: [usize; N],
) -> [usize; N] {
    let bs = pool.block_size;
    let p0 = if c.page < c.last_page {
        c.page
    } else {
        c.last_page
    };
    let p1 = if c.page + 1 < c.last_page {
        c.page + 1
    } else {
        c.last_page
    };
    let row0 = table.get(span.table_base + p0) as u32 as usize;
    let row1 = table.get(span.table_base + p1) as u32 as usize;
    let mut at = [0usize; N];
    let mut i = 0;
    while i < N {
        let o = offsets[i];
        at[i] = if c.first + o < span.end {
            // A tile spans at most two pages (it is no longer than one).
            let s = c.slot + o;
            let (row, slot) = if s < bs { (row0, s) } else { (row1, s - bs) };
            // Pool offsets are usize: a pool may exceed 2^32 elements.
            ((row * bs + slot) * pool.heads_kv + kv_head) * pool.head_dim
        } else {
            c.last_at
        };
        i += 1;
    }
    at
}

/// The K chunks this lane multiplies for tokens at `at` (its column tokens `g`, `G + g`).
#[inline(always)]
fn load_keys<T: Element>(
    k_pool: &Src<T>,
    at: [usize; 2],
    class: usize,
) -> [[u32; 4]; MMA_KEY_CHUNKS] {
    let mut w = [[0u32; 4]; MMA_KEY_CHUNKS];
    let mut u = 0;
    while u < 2 {
        let mut c = 0;
        while c < MMA_K_CHUNKS {
            // SAFETY: the row is inside the pool (the host checks every table entry against
            // it), the chunk inside the row, and rows start on a chunk.
            let v = unsafe {
                k_pool
                    .get_chunk_unchecked::<LANE_DIMS>(at[u] + LANE_DIMS * (class + MMA_CLASSES * c))
            };
            w[u * MMA_K_CHUNKS + c] = chunk_words(v);
            c += 1;
        }
        u += 1;
    }
    w
}

/// The V chunks this lane multiplies for its tokens at `at` (dims of group `g`).
#[inline(always)]
fn load_values<T: Element>(
    v_pool: &Src<T>,
    at: [usize; MMA_LANE_TOKENS],
    g: usize,
) -> [[u32; 4]; MMA_VALUE_CHUNKS] {
    let mut w = [[0u32; 4]; MMA_VALUE_CHUNKS];
    let mut s = 0;
    while s < MMA_LANE_TOKENS {
        let mut j = 0;
        while j < MMA_V_CHUNKS {
            // SAFETY: as for the keys.
            let v = unsafe {
                v_pool.get_chunk_unchecked::<LANE_DIMS>(at[s] + LANE_DIMS * (g + MMA_GROUPS * j))
            };
            w[s * MMA_V_CHUNKS + j] = chunk_words(v);
            j += 1;
        }
        s += 1;
    }
    w
}

/// Stages the group's queries as score-multiply `A` fragments of `T` (the pool's type; see the
/// module docs), scaled by `scale`, at `[step][head][class][4]`.
#[inline(always)]
fn stage_fragments<T: Element, B: Block>(
    b: &B,
    frags: &Rw<u32>,
    q: &Src<f32>,
    group: HeadGroup,
    scale: f32,
) {
    let h_len = group.heads;
    let mut i = b.thread() as usize;
    while i < MMA_K_STEPS * h_len * MMA_CLASSES {
        let step = i / (h_len * MMA_CLASSES);
        let head = (i / MMA_CLASSES) % h_len;
        let class = i % MMA_CLASSES;
        let d0 = group.q_base + head * MMA_HEAD_DIM + slot_dim(class, step);
        let mut hi = [T::from_bits32(0); 4];
        let mut lo = [T::from_bits32(0); 4];
        let mut j = 0;
        while j < 4 {
            let x = q.get(d0 + j) * scale;
            hi[j] = T::from_f32(x);
            lo[j] = T::from_f32(x - hi[j].widen());
            j += 1;
        }
        let at = ((step * MAX_GROUP_HEADS + head) * MMA_CLASSES + class) * 4;
        frags.set_chunk::<4>(
            at,
            [
                pair_word(hi[0], hi[1]),
                pair_word(hi[2], hi[3]),
                pair_word(lo[0], lo[1]),
                pair_word(lo[2], lo[3]),
            ],
        );
        i += b.size() as usize;
    }
}

/// The power-of-two exponent `e` that brings the largest scaled query element `big` under
/// 2^(QUERY_EXP_LIMIT + 1), so its 16-bit rounding cannot overflow (0 when it is already there
/// or not finite).
#[inline(always)]
fn query_shift(big: f32) -> u32 {
    let exp = (big.to_bits() >> 23) & 0xff;
    if exp == 0xff || exp <= 127 + QUERY_EXP_LIMIT {
        0
    } else {
        exp - 127 - QUERY_EXP_LIMIT
    }
}

/// The sweep (see the module docs). `lse`, when given, gets the base-2 log-sum-exp of the
/// scaled scores (`-inf` for an empty span). [`mma_fits`] must hold, the pools start on 16
/// bytes and shared memory on a 4-word chunk.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn attend_mma<T: Element, B: Block>(
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
    let h_len = group.heads;
    let threads = b.size() as usize;
    let layout = mma_layout(h_len, threads, B::WAVE as usize);
    let shm = &b.shared::<f32>(0, layout.words);
    let frags = &b.shared::<u32>(0, FRAG_WORDS);

    // A scale by a power of two keeps the queries' 16-bit roundings finite (exact both ways).
    let mut big = 0.0f32;
    let mut i = b.thread() as usize;
    while i < h_len * MMA_HEAD_DIM {
        let a = q.get(group.q_base + i) * scale_log2;
        let a = if a < 0.0 { -a } else { a };
        if a > big {
            big = a;
        }
        i += threads;
    }
    let shift = query_shift(b.max(big));
    let down = f32::from_bits((127 - shift) << 23);
    let up = f32::from_bits((127 + shift) << 23);
    stage_fragments::<T, B>(b, frags, q, group, scale_log2 * down);
    b.barrier();

    let g = b.mma_group() as usize;
    let class = b.mma_class() as usize;
    let sets_per_wave = mma_sets(B::WAVE) as usize;
    let part = b.wave_id() as usize * sets_per_wave + b.mma_set() as usize;
    let parts = layout.parts;
    let head = g % h_len;
    let cols = [b.mma_col(0) as usize, b.mma_col(1) as usize];
    // The tile tokens this lane weighs (its value slots) and whose K it loads.
    let lane_tokens = [cols[0], cols[1], MMA_GROUPS + cols[0], MMA_GROUPS + cols[1]];
    let key_tokens = [g, MMA_GROUPS + g];
    // Which gathered maximum (from group `g ^ j`) is the head of each accumulator column.
    let mut from = [0usize; 2];
    let mut t = 0;
    while t < 2 {
        let mut j = MAX_GROUP_HEADS;
        while j > 0 {
            j -= 1;
            if (g ^ j) % h_len == cols[t] % h_len {
                from[t] = j;
            }
        }
        t += 1;
    }

    let mut m_own = f32::NEG_INFINITY;
    let mut l_own = 0.0f32;
    let mut m_cols = [f32::NEG_INFINITY; 2];
    let mut acc = [[[0.0f32; 2]; 2]; MMA_VALUE_STEPS];
    let n_tiles = (span.end - span.begin).div_ceil(MMA_TILE);
    // Wave-uniform trip count (the multiply needs every lane): while the wave's first set has
    // a tile; its other sets' tiles past the span are all dead tokens.
    let wave_first = b.wave_id() as usize * sets_per_wave;
    let iters = if n_tiles > wave_first {
        (n_tiles - wave_first).div_ceil(parts)
    } else {
        0
    };
    let bs = pool.block_size;
    let stride = MMA_TILE * parts;
    let (adv_pages, adv_slots) = (stride / bs, stride % bs);
    let first = span.begin + MMA_TILE * part;
    // The span's last token (only read when it has one).
    let last = (span.start + span.end).max(1) - 1;
    let mut cur = TileCursor {
        first,
        page: (span.start + first) / bs,
        slot: (span.start + first) % bs,
        last_page: last / bs,
        last_at: 0,
    };
    if iters > 0 {
        let row = table.get(span.table_base + cur.last_page) as u32 as usize;
        cur.last_at = ((row * bs + last % bs) * pool.heads_kv + group.kv_head) * pool.head_dim;
    }
    let mut n = 0;
    while n < iters {
        // This tile's K and V at once: a tile's bytes in flight per set.
        let at = token_offsets(cur, span, pool, group.kv_head, table, key_tokens);
        let keys = load_keys(k_pool, at, class);
        let at = token_offsets(cur, span, pool, group.kv_head, table, lane_tokens);
        let values = load_values(v_pool, at, g);
        let tile_first = cur.first;
        cur.first += stride;
        cur.page += adv_pages;
        cur.slot += adv_slots;
        if cur.slot >= bs {
            cur.slot -= bs;
            cur.page += 1;
        }

        // Scores of this tile.
        let mut sc = [[[0.0f32; 2]; 2]; 2];
        let mut step = 0;
        while step < MMA_K_STEPS {
            let at = ((step * MAX_GROUP_HEADS + head) * MMA_CLASSES + class) * 4;
            // SAFETY: inside the staged fragments (step < MMA_K_STEPS, head < H ≤ 4).
            let a = unsafe { frags.get_chunk_unchecked::<4>(at) };
            let a = [[a[0], a[1]], [a[2], a[3]]];
            let mut u = 0;
            while u < 2 {
                let w = keys[u * MMA_K_CHUNKS + step / 2];
                let kb = [w[2 * (step % 2)], w[2 * (step % 2) + 1]];
                sc[u] = b.wave_mma::<T>(a, kb, sc[u]);
                u += 1;
            }
            step += 1;
        }

        // Softmax: this lane's four scores of head `g mod H`.
        let mut s = [0.0f32; MMA_LANE_TOKENS];
        let mut live = [false; MMA_LANE_TOKENS];
        let mut top = f32::NEG_INFINITY;
        let mut i = 0;
        while i < MMA_LANE_TOKENS {
            let (u, t) = (i / 2, i % 2);
            s[i] = nan_unless_finite((sc[u][0][t] + sc[u][1][t]) * up);
            live[i] = tile_first + lane_tokens[i] < span.end;
            if live[i] {
                top = max_keeping_nan(s[i], top);
            }
            i += 1;
        }
        let mut mask = 1;
        while mask < MMA_CLASSES as u32 {
            top = max_keeping_nan(f32::from_bits(b.shuffle_xor(top.to_bits(), mask)), top);
            mask *= 2;
        }
        // The tile maxima of groups g ^ j, j < 4: every head's, for the accumulator columns.
        let mut tops = [top; MAX_GROUP_HEADS];
        tops[1] = f32::from_bits(b.shuffle_xor(top.to_bits(), MMA_CLASSES as u32));
        tops[2] = f32::from_bits(b.shuffle_xor(tops[0].to_bits(), 2 * MMA_CLASSES as u32));
        tops[3] = f32::from_bits(b.shuffle_xor(tops[1].to_bits(), 2 * MMA_CLASSES as u32));

        let m_new = lazy_max(m_own, top);
        if m_new.to_bits() != m_own.to_bits() {
            // The first tile rescales nothing (m = -inf gives 0); NaN stays NaN.
            l_own *= exp2_approx(m_own - m_new);
            m_own = m_new;
        }
        let mut t = 0;
        while t < 2 {
            let m_col = lazy_max(m_cols[t], pick_head(tops, from[t]));
            if m_col.to_bits() != m_cols[t].to_bits() {
                let corr = exp2_approx(m_cols[t] - m_col);
                let mut v = 0;
                while v < MMA_VALUE_STEPS {
                    acc[v][0][t] *= corr;
                    acc[v][1][t] *= corr;
                    v += 1;
                }
                m_cols[t] = m_col;
            }
            t += 1;
        }
        let mut p = [0.0f32; MMA_LANE_TOKENS];
        let mut i = 0;
        while i < MMA_LANE_TOKENS {
            if live[i] {
                p[i] = exp2_approx(s[i] - m_own);
                l_own += p[i];
            }
            i += 1;
        }
        let p01 = T::from_f32_pair(p[0], p[1]);
        let p23 = T::from_f32_pair(p[2], p[3]);
        let weights = [pair_word(p01[0], p01[1]), pair_word(p23[0], p23[1])];

        // Values: step v multiplies dims LANE_DIMS·(g + G·(v / 4)) + 2·(v % 4) + r.
        let mut v = 0;
        while v < MMA_VALUE_STEPS {
            let (j, u) = (v / 4, v % 4);
            let mut a = [[0u32; 2]; 2];
            let mut pp = 0;
            while pp < 2 {
                let x = values[2 * pp * MMA_V_CHUNKS + j][u];
                let y = values[(2 * pp + 1) * MMA_V_CHUNKS + j][u];
                a[0][pp] = (x & 0xffff) | (y << 16);
                a[1][pp] = (x >> 16) | (y & 0xffff_0000);
                pp += 1;
            }
            acc[v] = b.wave_mma::<T>(a, weights, acc[v]);
            v += 1;
        }
        n += 1;
    }

    // The set's state: denominators over the classes, then maxima, sums and rows published.
    let mut l = l_own;
    let mut mask = 1;
    while mask < MMA_CLASSES as u32 {
        l += f32::from_bits(b.shuffle_xor(l.to_bits(), mask));
        mask *= 2;
    }
    if class == 0 && g < h_len {
        shm.set(layout.max + part * h_len + g, m_own);
        shm.set(layout.sum + part * h_len + g, l);
    }
    let mut t = 0;
    while t < 2 {
        if cols[t] < h_len {
            let row = acc_at(layout, part, cols[t]);
            let mut v = 0;
            while v < MMA_VALUE_STEPS {
                let d = LANE_DIMS * (g + MMA_GROUPS * (v / 4)) + 2 * (v % 4);
                shm.set(row + d, acc[v][0][t]);
                shm.set(row + d + 1, acc[v][1][t]);
                v += 1;
            }
        }
        t += 1;
    }
    merge_parts(b, shm, layout, group, out, lse);
}
