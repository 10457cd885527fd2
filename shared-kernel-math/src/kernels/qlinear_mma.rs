//! `qlinear` at 4 bits on the wave multiply ([`Block::wave_mma`]), for 16-bit activations: the
//! body of `qlinear_mma_4bit`. Same buffers, params and contract as `qlinear_4bit` (spec §13;
//! [`qlinear`](super::qlinear)), for group sizes 32, 64 and 128 (the bind refuses 16; the host
//! runs `qlinear_4bit` there).
//!
//! **Codes.** A pair of codes becomes a pair of 16-bit values `offset + q` with one shift and
//! one and-or (`offset` 1024 in f16, 128 in bf16; both exact), every product `(offset + q)·x`
//! is exact and the multiply sums them in f32. A second multiply of the same `x` by ones gives
//! the `Σx` of the same slots, and per group the fold `s·C + (b − offset·s)·Σx = Σ(s·q + b)·x`
//! takes the offset back out.
//!
//! **Geometry.** A step is one group of a row: `L` words per class of a set
//! (`L = group_size / 32` on waves of 4 lanes or more), two multiplies per word, so no
//! multiply crosses a group and the columns of the multiply are the rows of `x` (all eight in
//! one pass at a wave of 32). Class `q` reads words `q·L .. q·L + L` of each step of its two
//! rows. A set owns a tile of
//! `2G` rows and a split of the groups along `K`; a block's sets cover
//! [`MMA_ROWS`]` / splits` rows × `splits`, where [`splits`] grows for short `N` so that small
//! matrices still fill the device. Each lane keeps `D` steps of words and scales in flight (a
//! ring unrolled `D` times: no register moves), and reads its `x` from global memory (cached)
//! at the step it multiplies. The splits meet in shared memory, where one pass adds them and
//! writes `y`.

use super::affine_codes::{SCALE_BF16, SCALE_F32};
use super::fused_silu_mul::silu_mul_element;
use super::qlinear::{QLinearParams, ACT_SILU_MUL};
use crate::wave_mma::{mma_classes, mma_groups, mma_sets};
use crate::{is_bf16, Block, Dst, Element, Launch, LaunchBound, Rw, ShapeError, Src, F16};

/// Threads per block.
pub const MMA_BLOCK_THREADS: u32 = 256;

/// The launch bound: two blocks (16 warps of a 32-wide GPU) per multiprocessor at least.
pub const MMA_LAUNCH_BOUND: LaunchBound = LaunchBound {
    max_threads: MMA_BLOCK_THREADS,
    min_blocks: 2,
};

/// Rows of `W` a block covers at one split: its sets' tiles at any wave of 4 lanes or more
/// (`256 / 4` lanes of a class, two rows each).
pub const MMA_ROWS: u32 = 128;

/// Most splits of `K` per block.
pub const MAX_SPLITS: u32 = 8;

/// Sets (of 16 rows) a launch aims at before it stops splitting `K`: 16 per multiprocessor on
/// a device of 128.
const TARGET_SETS: u32 = 2048;

/// Fewest groups a split of `K` keeps, so each set's ring has steps to overlap.
const MIN_SPLIT_GROUPS: u32 = 8;

/// Rows of a tile at a wave of 32 (what [`splits`] counts in).
const WIDE_TILE_ROWS: u32 = 16;

/// Codes per word at 4 bits.
const WORD_CODES: u32 = 8;

/// Group sizes the kernel reads (a step must hold whole words of every class).
pub const MMA_GROUP_SIZES: [u32; 3] = [32, 64, 128];

/// The shape checks beyond `qlinear_4bit`'s: a group size of [`MMA_GROUP_SIZES`].
pub fn check_group(p: &QLinearParams) -> Result<(), ShapeError> {
    if MMA_GROUP_SIZES.contains(&p.group_size) {
        Ok(())
    } else {
        Err(ShapeError::Invalid(
            "qlinear_mma_4bit reads group sizes 32, 64 and 128 (qlinear_4bit reads 16)",
        ))
    }
}

/// Splits of `K` per block (a power of two): more for short `N`, while the launch has fewer
/// than 2048 sets (`TARGET_SETS`) and each split keeps 8 groups (`MIN_SPLIT_GROUPS`).
#[inline(always)]
pub const fn splits(p: &QLinearParams) -> u32 {
    let tiles = p.n.div_ceil(WIDE_TILE_ROWS);
    let groups = p.k >> p.group_log2;
    let mut s = 1;
    while s < MAX_SPLITS && tiles * s < TARGET_SETS && groups >= 2 * s * MIN_SPLIT_GROUPS {
        s *= 2;
    }
    s
}

/// Rows of `W` per block.
#[inline(always)]
const fn block_rows(p: &QLinearParams) -> u32 {
    MMA_ROWS / splits(p)
}

/// Bytes of shared memory after the collectives' scratch: every set's sums, `[split][row][m]`.
pub const fn shared_bytes(p: &QLinearParams, _block: u32, _wave: u32) -> usize {
    4 * (MMA_ROWS * p.m) as usize
}

/// The launch.
pub fn launch(p: &QLinearParams) -> Launch {
    Launch {
        grid: [p.n.div_ceil(block_rows(p)), 1, 1],
        block: MMA_BLOCK_THREADS,
    }
}

/// The body: `T` is f16 or bf16 (the list instantiates no other).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn qlinear_mma<T: Element, B: Block>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    bias: Src<T>,
    y: Dst<T>,
) {
    let sums = b.shared::<f32>(0, (MMA_ROWS * p.m) as usize);
    // Words per class and step (`L`) and steps in flight (`D`): 8 words a row in flight.
    // Waves of fewer than 4 lanes (host ports only; a constant of the port) have fewer classes,
    // so more words per class: their instances are not in a GPU port's code.
    let classes = mma_classes(B::WAVE);
    let lane_words = p.group_size / WORD_CODES / classes;
    if classes < 4 {
        if lane_words == 2 {
            items(
                b,
                p,
                x,
                w_q,
                scales,
                biases,
                sums,
                [[[0u32; 2]; 2]; 1],
                [[[0u32; 2]; 2]; 1],
            );
        } else if lane_words == 4 {
            items(
                b,
                p,
                x,
                w_q,
                scales,
                biases,
                sums,
                [[[0u32; 4]; 2]; 1],
                [[[0u32; 4]; 2]; 1],
            );
        } else if lane_words == 8 {
            items(
                b,
                p,
                x,
                w_q,
                scales,
                biases,
                sums,
                [[[0u32; 8]; 2]; 1],
                [[[0u32; 8]; 2]; 1],
            );
        } else {
            items(
                b,
                p,
                x,
                w_q,
                scales,
                biases,
                sums,
                [[[0u32; 16]; 2]; 1],
                [[[0u32; 16]; 2]; 1],
            );
        }
    } else if lane_words == 1 {
        items(
            b,
            p,
            x,
            w_q,
            scales,
            biases,
            sums,
            [[[0u32; 1]; 2]; 8],
            [[[0u32; 1]; 2]; 4],
        );
    } else if lane_words == 2 {
        items(
            b,
            p,
            x,
            w_q,
            scales,
            biases,
            sums,
            [[[0u32; 2]; 2]; 4],
            [[[0u32; 2]; 2]; 4],
        );
    } else {
        items(
            b,
            p,
            x,
            w_q,
            scales,
            biases,
            sums,
            [[[0u32; 4]; 2]; 2],
            [[[0u32; 4]; 2]; 2],
        );
    }
    b.barrier();
    write_outputs(b, p, bias, y, sums);
}

/// What one sweep covers: its tile's first row, its split's groups `first..end` (`end` is
/// `first` for a set without an item this round), the groups every split sweeps (the trip
/// count, the same in every set) and the pass of columns.
#[derive(Clone, Copy)]
struct Sweep {
    row0: u32,
    first: u32,
    end: u32,
    per_split: u32,
    col_pass: u32,
}

/// Every item of this set — a tile, a split of `K`, every pass of columns — swept, its sums
/// left in `sums`. `zero` fixes `L` and `D`, `narrow` the ring's depth without wide scales.
///
/// Uniform control flow around every multiply: the rounds, passes and steps depend only on
/// the launch, so every lane of a wave reaches each `wave_mma` (a set without an item
/// multiplies what it holds and folds nothing).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn items<T: Element, B: Block, const L: usize, const D: usize, const DN: usize>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    sums: Rw<f32>,
    zero: [[[u32; L]; 2]; D],
    narrow: [[[u32; L]; 2]; DN],
) {
    let groups = mma_groups(B::WAVE);
    let sets = b.size() / B::WAVE * mma_sets(B::WAVE);
    let set = b.wave_id() * mma_sets(B::WAVE) + b.mma_set();
    let n_splits = splits(p);
    let rows = block_rows(p);
    let tiles = rows / (2 * groups);
    let n_items = tiles * n_splits;
    let rounds = n_items.div_ceil(sets);
    let passes = p.m.div_ceil(groups);
    let k_groups = p.k >> p.group_log2;
    // 16-bit scales whose rows start on 16 bytes (K/group_size a multiple of 8, both buffers
    // aligned) come a block of 8 groups per load; the splits then start on blocks.
    let wide_scales = p.scale_dtype != SCALE_F32
        && k_groups.is_multiple_of(SCALE_BLOCK)
        && scales.chunk_aligned::<4>(0)
        && biases.chunk_aligned::<4>(0);
    let per_split = if wide_scales {
        k_groups.div_ceil(n_splits).div_ceil(SCALE_BLOCK) * SCALE_BLOCK
    } else {
        k_groups.div_ceil(n_splits)
    };
    let g = b.mma_group();
    let mut round = 0;
    while round < rounds {
        let item = round * sets + set;
        let live = item < n_items;
        let tile = if live { item / n_splits } else { 0 };
        let split = item % n_splits;
        let first = split * per_split;
        let end = if !live || first >= k_groups {
            first
        } else if first + per_split < k_groups {
            first + per_split
        } else {
            k_groups
        };
        let row0 = b.block_x() * rows + tile * 2 * groups;
        let mut pass = 0;
        while pass < passes {
            let at = Sweep {
                row0,
                first,
                end,
                per_split,
                col_pass: pass,
            };
            let acc = sweep(b, p, x, w_q, scales, biases, at, wide_scales, zero, narrow);
            let mut t = 0;
            while t < 2 {
                let mc = b.mma_col(t);
                let m = pass * groups + mc;
                if live && mc < groups && m < p.m {
                    let mut r = 0;
                    while r < 2 {
                        let row = tile * 2 * groups + g + r * groups;
                        let e = (split * rows + row) * p.m + m;
                        sums.set(e as usize, acc[r as usize][t as usize]);
                        r += 1;
                    }
                }
                t += 1;
            }
            pass += 1;
        }
        round += 1;
    }
}

/// One set's sums `Σ(s·q + b)·x` over its split: `[r][t]` is this lane's row `g + G·r` of the
/// tile against column `pass·G + mma_col(t)`. With `wide_scales` (16-bit scales, 16-byte
/// aligned, rows of whole blocks) the scales come eight steps per 16-byte load; else one word
/// per step, in the ring with the codes (`narrow`, a shallower ring, fixes its depth).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn sweep<T: Element, B: Block, const L: usize, const D: usize, const DN: usize>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    at: Sweep,
    wide_scales: bool,
    zero: [[[u32; L]; 2]; D],
    narrow: [[[u32; L]; 2]; DN],
) -> [[f32; 2]; 2] {
    let classes = mma_classes(B::WAVE);
    let groups = mma_groups(B::WAVE);
    let q = b.mma_class();
    let g = b.mma_group();
    let k_groups = p.k >> p.group_log2;
    let words_per_row = p.k / WORD_CODES;
    let n_last = p.n - 1;
    // Rows past N re-read the last row (computed, not written).
    let r0 = at.row0 + g;
    let rows = [
        if r0 < n_last { r0 } else { n_last },
        if r0 + groups < n_last {
            r0 + groups
        } else {
            n_last
        },
    ];
    // A column past M re-reads the last row of x (its sums are not written).
    let col = at.col_pass * groups + g;
    let x_row = if col < p.m { col } else { p.m - 1 };
    let bf16 = is_bf16::<T>();
    let one = if bf16 { 0x3f80_3f80u32 } else { 0x3c00_3c00 };
    let lane = Lane {
        w_at0: rows[0] * words_per_row + q * L as u32,
        w_at1: rows[1] * words_per_row + q * L as u32,
        e_at0: rows[0] * k_groups,
        e_at1: rows[1] * k_groups,
        step_words: classes * L as u32,
        f32_scales: p.scale_dtype == SCALE_F32,
        x_at: x_row * p.k + q * L as u32 * WORD_CODES,
        wide_x: x.chunk_aligned::<8>(0),
        // The exponent bits the codes are or-ed into, times `min(N, 1)` (1: the bind refuses
        // an empty N): a value only the launch knows stays in a register, where the GPU
        // compilers fuse each code's mask and or into one three-input op.
        code_bits: if bf16 { 0x4300_4300u32 } else { 0x6400_6400 } * p.n.min(1),
        one,
        offset: if bf16 { 128.0f32 } else { 1024.0 },
    };
    if wide_scales {
        sweep_wide(b, p, x, w_q, scales, biases, at, lane, zero)
    } else {
        sweep_narrow(b, p, x, w_q, scales, biases, at, lane, narrow)
    }
}

/// [`sweep`] with one word of scales and biases per step, in the ring with the codes.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn sweep_narrow<T: Element, B: Block, const L: usize, const D: usize>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    at: Sweep,
    lane: Lane,
    zero: [[[u32; L]; 2]; D],
) -> [[f32; 2]; 2] {
    let first = at.first;
    let end = at.end;
    // The ring is read and written element by element (never copied whole), so the compilers
    // keep each word in a 32-bit register; a slot is refilled after its step is multiplied.
    let mut ring = zero;
    let mut scale_ring = [[0u32; 4]; D];
    let mut i = 0;
    while i < D {
        let s = first + i as u32;
        if s < end {
            ring = refill(w_q, lane, s, ring, i);
            scale_ring[i] = step_scales(scales, biases, lane, s);
        }
        i += 1;
    }
    let x_zero = [[0u32; 4]; L];
    let mut acc = [[0.0f32; 2]; 2];
    let mut base = 0;
    while base < at.per_split {
        let mut i = 0;
        while i < D {
            let s = first + base + i as u32;
            let xs = step_x(x, lane, s, end, x_zero);
            let cc = multiply_step(T::from_bits32(0), b, lane, ring, i, xs);
            if s < end {
                let mut vals = [0.0f32; 4];
                let mut k = 0;
                while k < 4 {
                    vals[k] = scale_of(scale_ring[i][k], e_at(lane, k / 2) + s, p.scale_dtype);
                    k += 1;
                }
                acc = fold(lane, vals, cc[0], cc[1], acc);
            }
            let ahead = s + D as u32;
            if ahead < end {
                ring = refill(w_q, lane, ahead, ring, i);
                scale_ring[i] = step_scales(scales, biases, lane, ahead);
            }
            i += 1;
        }
        base += D as u32;
    }
    acc
}

/// Steps per block of wide scales: 8 16-bit values in one 16-byte load per row.
const SCALE_BLOCK: u32 = 8;

/// [`sweep`] with the scales and biases of eight steps per 16-byte load of each row, one
/// block in use while the next is in flight. The split starts on a block (`per_split` is a
/// multiple of [`SCALE_BLOCK`]).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn sweep_wide<T: Element, B: Block, const L: usize, const D: usize>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    at: Sweep,
    lane: Lane,
    zero: [[[u32; L]; 2]; D],
) -> [[f32; 2]; 2] {
    let first = at.first;
    let end = at.end;
    let mut ring = zero;
    let mut i = 0;
    while i < D {
        let s = first + i as u32;
        if s < end {
            ring = refill(w_q, lane, s, ring, i);
        }
        i += 1;
    }
    let x_zero = [[0u32; 4]; L];
    let mut block = [[0u32; 4]; 4];
    if first < end {
        block = scale_block(scales, biases, lane, first);
    }
    let bf16_scales = p.scale_dtype == SCALE_BF16;
    let mut acc = [[0.0f32; 2]; 2];
    let mut base = 0;
    while base < at.per_split {
        let at_block = first + base;
        let mut next = [[0u32; 4]; 4];
        if at_block + SCALE_BLOCK < end {
            next = scale_block(scales, biases, lane, at_block + SCALE_BLOCK);
        }
        let mut i = 0;
        while i < SCALE_BLOCK as usize {
            let s = at_block + i as u32;
            let slot = i % D;
            let xs = step_x(x, lane, s, end, x_zero);
            let cc = multiply_step(T::from_bits32(0), b, lane, ring, slot, xs);
            if s < end {
                let mut vals = [0.0f32; 4];
                let mut k = 0;
                while k < 4 {
                    let half = (block[k][i / 2] >> ((i % 2) * 16)) & 0xffff;
                    vals[k] = if bf16_scales {
                        f32::from_bits(half << 16)
                    } else {
                        F16(half as u16).widen()
                    };
                    k += 1;
                }
                acc = fold(lane, vals, cc[0], cc[1], acc);
            }
            let ahead = s + D as u32;
            if ahead < end {
                ring = refill(w_q, lane, ahead, ring, slot);
            }
            i += 1;
        }
        block = next;
        base += SCALE_BLOCK;
    }
    acc
}

/// The 16-byte blocks of scales and biases of both rows from group `s` (a multiple of
/// [`SCALE_BLOCK`]): `[s₀, b₀, s₁, b₁]`, eight 16-bit values each.
#[inline(always)]
fn scale_block(scales: Src<u32>, biases: Src<u32>, lane: Lane, s: u32) -> [[u32; 4]; 4] {
    let mut block = [[0u32; 4]; 4];
    let mut r = 0;
    while r < 2 {
        let at = ((e_at(lane, r) + s) / 2) as usize;
        // SAFETY: rows start on blocks (K/group_size is a multiple of 8) and the split on one,
        // so the block's 8 values are groups of the row inside N·K/group_size values (bind
        // checked the words), and the caller checked both buffers start on 16 bytes.
        block[2 * r] = unsafe { scales.get_chunk_unchecked::<4>(at) };
        block[2 * r + 1] = unsafe { biases.get_chunk_unchecked::<4>(at) };
        r += 1;
    }
    block
}

/// The words holding the scale and bias of both rows' group `s` (a step):
/// `[s₀, b₀, s₁, b₁]` (16-bit values two per word: [`scale_of`] picks the half).
#[inline(always)]
fn step_scales(scales: Src<u32>, biases: Src<u32>, lane: Lane, s: u32) -> [u32; 4] {
    [
        scale_word(scales, lane, s, 0),
        scale_word(biases, lane, s, 0),
        scale_word(scales, lane, s, 1),
        scale_word(biases, lane, s, 1),
    ]
}

/// Slot `slot` of the ring refilled with this lane's words of both rows at step `s`.
#[inline(always)]
fn refill<const L: usize, const D: usize>(
    w_q: Src<u32>,
    lane: Lane,
    s: u32,
    ring: [[[u32; L]; 2]; D],
    slot: usize,
) -> [[[u32; L]; 2]; D] {
    let mut ring = ring;
    let mut r = 0;
    while r < 2 {
        let mut j = 0;
        while j < L {
            ring[slot][r][j] = code_word(w_q, lane, s, r, j);
            j += 1;
        }
        r += 1;
    }
    ring
}

/// This lane's pairs of `x` at step `s` (step 0's at or past `end`), one `[u32; 4]` per word.
#[inline(always)]
fn step_x<T: Element, const L: usize>(
    x: Src<T>,
    lane: Lane,
    s: u32,
    end: u32,
    zero: [[u32; 4]; L],
) -> [[u32; 4]; L] {
    // A step at or past `end` is multiplied but never folded, so it reads step 0's x (inside
    // K) instead of zeros: one select of the index, none per value.
    let at_step = if s < end { s } else { 0 };
    let mut xp = zero;
    let mut j = 0;
    while j < L {
        let at = lane.x_at + (at_step * lane.step_words + j as u32) * WORD_CODES;
        xp[j] = x_pairs(x, at as usize, lane.wide_x);
        j += 1;
    }
    xp
}

/// The multiplies of a step from slot `slot` of the ring and its pairs of `x`: `[C, Σx]`,
/// `C = Σ(offset + q)·x` and `Σx` of its slots per row and column (`_like` names `T`).
#[inline(always)]
fn multiply_step<T: Element, B: Block, const L: usize, const D: usize>(
    _like: T,
    b: &B,
    lane: Lane,
    ring: [[[u32; L]; 2]; D],
    slot: usize,
    xp: [[u32; 4]; L],
) -> [[[f32; 2]; 2]; 2] {
    let mut c = [[0.0f32; 2]; 2];
    let mut cx = [[0.0f32; 2]; 2];
    let mut j = 0;
    while j < L {
        let mut half = 0;
        while half < 2 {
            // Codes `i` and `i + 4` (pair 0), `i + 1` and `i + 5` (pair 1) of the word.
            let c0 = 2 * half;
            let a = [
                [
                    code_pair(ring[slot][0][j], c0, lane.code_bits),
                    code_pair(ring[slot][0][j], c0 + 1, lane.code_bits),
                ],
                [
                    code_pair(ring[slot][1][j], c0, lane.code_bits),
                    code_pair(ring[slot][1][j], c0 + 1, lane.code_bits),
                ],
            ];
            let xb = [xp[j][c0], xp[j][c0 + 1]];
            c = b.wave_mma::<T>(a, xb, c);
            let ones = [[lane.one, lane.one], [lane.one, lane.one]];
            cx = b.wave_mma::<T>(ones, xb, cx);
            half += 1;
        }
        j += 1;
    }
    [c, cx]
}

/// A lane's fixed values: its rows' first words (at its class) and first scales, the words
/// of a step (one group of a row), whether scales are f32, where its `x` starts and whether
/// `x` takes 16-byte loads, the codes' exponent bits, a pair of ones and the codes' offset.
#[derive(Clone, Copy)]
struct Lane {
    w_at0: u32,
    w_at1: u32,
    e_at0: u32,
    e_at1: u32,
    step_words: u32,
    f32_scales: bool,
    x_at: u32,
    wide_x: bool,
    code_bits: u32,
    one: u32,
    offset: f32,
}

/// Row `r`'s first scale index.
#[inline(always)]
fn e_at(lane: Lane, r: usize) -> u32 {
    if r == 0 {
        lane.e_at0
    } else {
        lane.e_at1
    }
}

/// The index of word `j` of this lane's words of row `r` at step `s`.
#[inline(always)]
fn code_at(lane: Lane, s: u32, r: usize, j: usize) -> u32 {
    let w_at = if r == 0 { lane.w_at0 } else { lane.w_at1 };
    w_at + s * lane.step_words + j as u32
}

/// Word `j` of this lane's words of row `r` at step `s`.
#[inline(always)]
fn code_word(w_q: Src<u32>, lane: Lane, s: u32, r: usize, j: usize) -> u32 {
    let at = code_at(lane, s, r, j);
    // SAFETY: the row is below N and the step below K / group_size (the caller's `s < end`),
    // so the word is inside w_q ([N, K·4/32], checked by the bind).
    unsafe { w_q.get_unchecked(at as usize) }
}

/// The word of `words` (scales or biases) holding row `r`'s value at step (group) `s`
/// (16-bit values two per word: [`scale_of`] picks the half).
#[inline(always)]
fn scale_word(words: Src<u32>, lane: Lane, s: u32, r: usize) -> u32 {
    let e = e_at(lane, r) + s;
    let at = if lane.f32_scales { e } else { e >> 1 };
    // SAFETY: `e` is a group of a row below N, so below N·K/group_size, and the bind checked
    // that the words hold that many values of the scale dtype.
    unsafe { words.get_unchecked(at as usize) }
}

/// Value `e` of the scale dtype `code` from its word `raw`, widened exactly to f32.
#[inline(always)]
fn scale_of(raw: u32, e: u32, code: u32) -> f32 {
    let half = (raw >> ((e & 1) * 16)) & 0xffff;
    if code == SCALE_F32 {
        f32::from_bits(raw)
    } else if code == SCALE_BF16 {
        f32::from_bits(half << 16)
    } else {
        F16(half as u16).widen()
    }
}

/// Folds one group's multiplies into `acc`: `s·C + (b − offset·s)·Σx` per row and column,
/// `vals` the rows' scales and biases `[s₀, b₀, s₁, b₁]`.
#[inline(always)]
fn fold(
    lane: Lane,
    vals: [f32; 4],
    c: [[f32; 2]; 2],
    cx: [[f32; 2]; 2],
    acc: [[f32; 2]; 2],
) -> [[f32; 2]; 2] {
    let mut acc = acc;
    let mut r = 0;
    while r < 2 {
        let s = vals[2 * r];
        let shift = crate::mul_add(-lane.offset, s, vals[2 * r + 1]);
        let mut t = 0;
        while t < 2 {
            let with_shift = crate::mul_add(shift, cx[r][t], acc[r][t]);
            acc[r][t] = crate::mul_add(s, c[r][t], with_shift);
            t += 1;
        }
        r += 1;
    }
    acc
}

/// The multiply's 4 pairs of the 8 elements of `x` from `at` (element `j` beside `j + 4`, low
/// half first): one 16-byte load when `wide`.
#[inline(always)]
fn x_pairs<T: Element>(x: Src<T>, at: usize, wide: bool) -> [u32; 4] {
    let mut v = [0u32; 8];
    if wide {
        // SAFETY: the caller's step is inside K and its row below M (bind checked x's shape);
        // x starts on 16 bytes (`wide`) and every word of codes is 8 elements from it.
        let e = unsafe { x.get_chunk_unchecked::<8>(at) };
        let mut j = 0;
        while j < 8 {
            v[j] = e[j].to_bits32();
            j += 1;
        }
    } else {
        let mut j = 0;
        while j < 8 {
            // SAFETY: as above; element loads need no alignment.
            v[j] = unsafe { x.get_unchecked(at + j) }.to_bits32();
            j += 1;
        }
    }
    let mut pairs = [0u32; 4];
    let mut j = 0;
    while j < 4 {
        pairs[j] = (v[j] & 0xffff) | (v[j + 4] << 16);
        j += 1;
    }
    pairs
}

/// Codes `i` and `i + 4` of `word` as a pair of 16-bit values `offset + q` (the low half the
/// lower code): one shift and one and-or.
#[inline(always)]
fn code_pair(word: u32, i: usize, code_bits: u32) -> u32 {
    ((word >> (i as u32 * 4)) & 0x000f_000f) | code_bits
}

/// Adds the splits' sums of every output of the block and writes `y` (with the bias, and
/// SwiGLU over gate and up pairs with [`ACT_SILU_MUL`]).
#[inline(always)]
fn write_outputs<T: Element, B: Block>(
    b: &B,
    p: &QLinearParams,
    bias: Src<T>,
    y: Dst<T>,
    sums: Rw<f32>,
) {
    let m_rows = p.m;
    let n_out = p.n;
    let rows = block_rows(p);
    let n_splits = splits(p);
    let first = b.block_x() * rows;
    let pairs = p.act == ACT_SILU_MUL;
    // One output per row, or per gate and up pair.
    let per_row = if pairs { 2 } else { 1 };
    let outs = rows / per_row;
    let mut o = b.thread();
    while o < outs * m_rows {
        let m = o / outs;
        let row = o % outs * per_row;
        let n = first + row;
        if n < n_out {
            let v = output_sum(p, bias, sums, rows, n_splits, m, n, row);
            if pairs {
                let up = output_sum(p, bias, sums, rows, n_splits, m, n + 1, row + 1);
                let out = silu_mul_element(T::from_f32(v), T::from_f32(up));
                y.set((m * (n_out / 2) + n / 2) as usize, out);
            } else {
                y.set((m * n_out + n) as usize, T::from_f32(v));
            }
        }
        o += b.size();
    }
}

/// Output `n` (the block's row `row`) for row `m` of `x`: its sums over the splits, plus its
/// bias.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn output_sum<T: Element>(
    p: &QLinearParams,
    bias: Src<T>,
    sums: Rw<f32>,
    rows: u32,
    n_splits: u32,
    m: u32,
    n: u32,
    row: u32,
) -> f32 {
    let mut t = 0.0f32;
    let mut split = 0;
    while split < n_splits {
        t += sums.get(((split * rows + row) * p.m + m) as usize);
        split += 1;
    }
    if p.has_bias != 0 {
        t += bias.get(n as usize).widen();
    }
    t
}
