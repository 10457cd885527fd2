//! `qlinear` at 4 bits on the wave multiply ([`Block::wave_mma`]), for 16-bit activations: the
//! body of `qlinear_mma_4bit`. Same buffers, params and contract as `qlinear_4bit` (spec §13;
//! [`qlinear`](super::qlinear)); a separate kernel so that neither path's registers weigh on
//! the other, and the host picks it where the multiply is hardware.
//!
//! **Codes.** A pair of codes becomes a pair of 16-bit values `offset + q` with one shift and
//! one and-or (`offset` 1024 in f16, 128 in bf16; both exact), every product `(offset + q)·x`
//! is exact and the multiply sums them in f32. Per group the fold
//! `s·C + (b − offset·s)·Σx = Σ(s·q + b)·x` takes the offset back out.
//!
//! **Geometry.** A block owns [`MMA_BLOCK_ROWS`] rows of `W`. A set of a wave
//! ([`crate::wave_mma`]) takes a tile of `2G` of them; along `K` its lanes of class `q` load
//! chunk `q` of each step ([`LANE_WORDS`] words, one 16-byte load per row), so a step is
//! `Q` chunks. The block's sets split the tiles, then the steps (`split`), so even a narrow
//! matrix fills the device. A multiply sums over the classes, and the chunks of one step may
//! lie in several groups: the columns of the multiply keep them apart. Column `c` is row
//! `c / H` of `x` against group `c % H` of the step (`H` groups per step), and a lane puts its
//! `x` in its column only where its chunk is in that group, zeros elsewhere. The columns are
//! taken `G` at a time (passes); a set keeps one or two passes in registers per sweep of its
//! steps (more passes sweep again). The sets' sums meet in shared memory, where one pass over
//! the block's outputs adds the splits and groups and writes `y`.
//!
//! **x in shared memory.** `K` is taken in panels; the block stages each panel of every row
//! of `x` once, already paired as the multiply reads it, with each group's `Σx`, so a step
//! reads its `x` in one shared load per word and its `Σx` in one per column.

use super::affine_codes::{SCALE_BF16, SCALE_F32};
use super::fused_silu_mul::silu_mul_element;
use super::qlinear::{QLinearParams, ACT_SILU_MUL};
use crate::wave_mma::{mma_classes, mma_groups, mma_sets};
use crate::{is_bf16, scratch_words, Bf16, Block, Dst, Element, Launch, LaunchBound, Rw, Src, F16};

/// Rows of `W` one block owns, whatever its size or wave.
pub const MMA_BLOCK_ROWS: u32 = 16;

/// Threads per block.
pub const MMA_BLOCK_THREADS: u32 = 128;

/// The launch bound: five blocks (20 warps of a 32-wide GPU) per multiprocessor at least, so
/// enough loads are in flight at batch 1.
pub const MMA_LAUNCH_BOUND: LaunchBound = LaunchBound {
    max_threads: MMA_BLOCK_THREADS,
    min_blocks: 5,
};

/// Bits per code.
const CODE_BITS: u32 = 4;

/// Words of one row a lane loads per step: one 16-byte load.
pub const LANE_WORDS: usize = 4;

/// Codes per word (`32 / CODE_BITS`; a literal, as chunk lengths are in the WGSL subset).
const WORD_CODES: usize = 8;

/// Multiplies per word (two pairs of codes each: `WORD_CODES / 4`).
const WORD_HALVES: usize = 2;

/// Codes of one lane's chunk (`LANE_WORDS · WORD_CODES`).
pub const LANE_CODES: u32 = 32;

/// Most bytes of shared memory a panel of `x` takes (its pairs; its group sums beside them).
const X_PANEL_BYTES: u32 = 24 * 1024;

/// Panels start on multiples of this many columns: whole steps (at most 128 codes at any
/// wave) and whole groups (at most 128).
const PANEL_ALIGN: u32 = 128;

/// Codes per step: one chunk per class.
#[inline(always)]
pub const fn step_codes(wave: u32) -> u32 {
    mma_classes(wave) * LANE_CODES
}

/// Groups per step (`H`): a step of `step_codes` starts on a group, so it holds whole groups,
/// or lies inside one.
#[inline(always)]
pub const fn step_groups(group_size: u32, wave: u32) -> u32 {
    let s = step_codes(wave);
    if group_size < s {
        s / group_size
    } else {
        1
    }
}

/// Tiles of `2G` rows per block.
#[inline(always)]
const fn tiles(wave: u32) -> u32 {
    MMA_BLOCK_ROWS / (2 * mma_groups(wave))
}

/// A block's geometry: from the rows of `x`, `K`, the group size, the block and the wave.
#[derive(Clone, Copy)]
pub struct Geometry {
    /// Columns of the multiply: rows of `x` × groups per step.
    pub columns: u32,
    /// Passes of `G` columns.
    pub passes: u32,
    /// Sets of the block (`sets` per wave × waves).
    pub sets: u32,
    /// Splits of the steps over the block's sets (a sweep keeps two passes, or the one).
    pub splits: u32,
    /// Columns of `K` per panel of `x` (the last may be shorter).
    pub panel: u32,
    /// Words of shared memory before the panel: the collectives' scratch, the sums, padding
    /// to 16 bytes.
    pub xs_at: u32,
}

/// The block's geometry.
#[inline(always)]
pub const fn geometry(p: &QLinearParams, block: u32, wave: u32) -> Geometry {
    let columns = p.m * step_groups(p.group_size, wave);
    let passes = columns.div_ceil(mma_groups(wave));
    let sets = block / wave * mma_sets(wave);
    let per_split = tiles(wave) * passes.div_ceil(2);
    let splits = if sets > per_split {
        sets / per_split
    } else {
        1
    };
    let budget = X_PANEL_BYTES / (2 * p.m) / PANEL_ALIGN * PANEL_ALIGN;
    let whole = p.k.div_ceil(PANEL_ALIGN) * PANEL_ALIGN;
    let panel = if budget < whole { budget } else { whole };
    let scratch = scratch_words(block, wave);
    let sums_end = scratch + splits * MMA_BLOCK_ROWS * columns;
    Geometry {
        columns,
        passes,
        sets,
        splits,
        panel,
        xs_at: sums_end.div_ceil(4) * 4 - scratch,
    }
}

/// Words of the panel's pairs (4 per word of codes of every row of `x`).
#[inline(always)]
const fn xs_words(p: &QLinearParams, at: &Geometry) -> u32 {
    p.m * at.panel / 2
}

/// `log2` of a span: the columns of a group inside one step (the group, or the step where a
/// group is longer), over which `Σx` is summed.
#[inline(always)]
pub const fn span_log2(p: &QLinearParams, wave: u32) -> u32 {
    let step_log2 = step_codes(wave).trailing_zeros();
    if p.group_log2 < step_log2 {
        p.group_log2
    } else {
        step_log2
    }
}

/// Span sums of the panel: every row of `x`.
#[inline(always)]
const fn xsum_len(p: &QLinearParams, at: &Geometry, wave: u32) -> u32 {
    p.m * (at.panel >> span_log2(p, wave))
}

/// Bytes of shared memory after the collectives' scratch: the sums
/// (`[split][row][column]`), the panel's pairs and its group sums.
pub const fn shared_bytes(p: &QLinearParams, block: u32, wave: u32) -> usize {
    let at = geometry(p, block, wave);
    4 * (at.xs_at + xs_words(p, &at) + xsum_len(p, &at, wave)) as usize
}

/// The launch.
pub fn launch(p: &QLinearParams) -> Launch {
    Launch {
        grid: [p.n.div_ceil(MMA_BLOCK_ROWS), 1, 1],
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
    let geo = geometry(p, b.size(), B::WAVE);
    let sums_len = geo.splits * MMA_BLOCK_ROWS * geo.columns;
    let xs_len = xs_words(p, &geo);
    let sums = b.shared::<f32>(0, sums_len as usize);
    let xs = b.shared::<u32>(4 * geo.xs_at as usize, xs_len as usize);
    let xsum = b.shared::<f32>(
        4 * (geo.xs_at + xs_len) as usize,
        xsum_len(p, &geo, B::WAVE) as usize,
    );
    // 16-byte loads of `W` when it starts on 16 bytes, and of the panel's pairs when they do
    // (uniform over the launch; every chunk of a row then does too). One pass in registers is
    // the decode case (up to four rows of `x` at group size 64); each choice is its own copy
    // of the sweep, taken once.
    let wide = w_q.chunk_aligned::<LANE_WORDS>(0) && xs.chunk_aligned::<4>(0);
    let one_pass = [[[0.0f32; 2]; 2]; 1];
    let two_passes = [[[0.0f32; 2]; 2]; 2];
    if wide && geo.passes == 1 {
        items(
            b, p, x, w_q, scales, biases, sums, xs, xsum, geo, true, one_pass,
        );
    } else if wide {
        items(
            b, p, x, w_q, scales, biases, sums, xs, xsum, geo, true, two_passes,
        );
    } else {
        items(
            b, p, x, w_q, scales, biases, sums, xs, xsum, geo, false, two_passes,
        );
    }
    b.barrier();
    write_outputs(b, p, bias, y, sums, geo);
}

/// Every item of this set — a tile, `P` passes and a split of the steps — swept panel by
/// panel, its sums left in `sums[split][row][column]`. `P` (the length of `zero`) passes in
/// registers.
///
/// Uniform control flow around every barrier: the rounds of items and the panels depend only
/// on the launch.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn items<T: Element, B: Block, const P: usize>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    sums: Rw<f32>,
    xs: Rw<u32>,
    xsum: Rw<f32>,
    geo: Geometry,
    wide: bool,
    zero: [[[f32; 2]; 2]; P],
) {
    let groups = mma_groups(B::WAVE);
    let set = b.wave_id() * mma_sets(B::WAVE) + b.mma_set();
    // One pass per sweep only where there is one pass: the sweeps, and so the splits, are the
    // geometry's.
    let sweeps = geo.passes.div_ceil(P as u32);
    let splits = geo.splits;
    let items = tiles(B::WAVE) * sweeps * splits;
    let panels = p.k.div_ceil(geo.panel);
    // The sets of a block run the same rounds (one may have no item in the last).
    let mut base = 0;
    while base < items {
        let item = base + set;
        let at = Sweep {
            tile: item / (splits * sweeps),
            split: item % splits,
            splits,
            first_pass: item / splits % sweeps * P as u32,
            columns: geo.columns,
            live: item < items,
        };
        let mut acc = zero;
        let mut panel = 0;
        while panel < panels {
            let k0 = panel * geo.panel;
            b.barrier();
            stage_panel(b, p, x, xs, xsum, geo, k0);
            b.barrier();
            acc = sweep(
                T::from_bits32(0),
                b,
                p,
                w_q,
                scales,
                biases,
                xs,
                xsum,
                geo,
                at,
                k0,
                wide,
                P == 1,
                acc,
            );
            panel += 1;
        }
        let row0 = at.tile * 2 * groups + b.mma_group();
        let mut pass = 0usize;
        while pass < P {
            let mut t = 0usize;
            while t < 2 {
                let mc = b.mma_col(t as u32);
                let col = (at.first_pass + pass as u32) * groups + mc;
                if at.live && mc < groups && col < geo.columns {
                    let mut r = 0usize;
                    while r < 2 {
                        let row = row0 + r as u32 * groups;
                        let e = (at.split * MMA_BLOCK_ROWS + row) * geo.columns + col;
                        sums.set(e as usize, acc[pass][r][t]);
                        r += 1;
                    }
                }
                t += 1;
            }
            pass += 1;
        }
        base += geo.sets;
    }
}

/// Stages the panel of `x` from column `k0`: for every row of `x` and word of codes (8
/// columns), the multiply's 4 pairs (element `j` beside `j + 4`), and each span's `Σx` in
/// f32 ([`span_log2`]). One thread per row and span.
#[inline(always)]
fn stage_panel<T: Element, B: Block>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    xs: Rw<u32>,
    xsum: Rw<f32>,
    geo: Geometry,
    k0: u32,
) {
    let k = p.k;
    let end = if k0 + geo.panel < k {
        k0 + geo.panel
    } else {
        k
    };
    let span_log2 = span_log2(p, B::WAVE);
    let panel_spans = geo.panel >> span_log2;
    let live_spans = (end - k0) >> span_log2;
    let wide = x.chunk_aligned::<WORD_CODES>(0);
    let mut item = b.thread();
    while item < p.m * live_spans {
        let m = item / live_spans;
        let span = item % live_spans;
        let mut sum = 0.0f32;
        let mut word = 0;
        while word < (1u32 << span_log2) / WORD_CODES as u32 {
            let col = k0 + (span << span_log2) + word * WORD_CODES as u32;
            let at = (m * k + col) as usize;
            let mut v = [0u32; WORD_CODES];
            if wide {
                // SAFETY: the row is below M and the word's columns inside K (bind checked
                // x's shape); x starts on 16 bytes (checked above) and rows of a multiple of
                // 32 columns keep every word there.
                let c = unsafe { x.get_chunk_unchecked::<WORD_CODES>(at) };
                let mut j = 0;
                while j < WORD_CODES {
                    v[j] = c[j].to_bits32();
                    sum += c[j].widen();
                    j += 1;
                }
            } else {
                let mut j = 0;
                while j < WORD_CODES {
                    let e = x.get(at + j);
                    v[j] = e.to_bits32();
                    sum += e.widen();
                    j += 1;
                }
            }
            let pairs_at = ((m * geo.panel + col - k0) / 2) as usize;
            let mut j = 0;
            while j < WORD_CODES / 2 {
                let pair = (v[j] as u16 as u32) | ((v[j + WORD_CODES / 2] as u16 as u32) << 16);
                xs.set(pairs_at + j, pair);
                j += 1;
            }
            word += 1;
        }
        xsum.set((m * panel_spans + span) as usize, sum);
        item += b.size();
    }
}

/// What one sweep covers: a tile of rows, the steps of a split, the passes from
/// `first_pass`; `live` false for a set without an item this round (it multiplies zeros).
#[derive(Clone, Copy)]
struct Sweep {
    tile: u32,
    split: u32,
    splits: u32,
    first_pass: u32,
    columns: u32,
    live: bool,
}

/// The group of the step (`0..H`) that word `word` of class `q`'s chunk lies in.
#[inline(always)]
fn word_group(p: &QLinearParams, step: u32, q: u32, word: u32) -> u32 {
    if p.group_size < step {
        (q * LANE_CODES + word * WORD_CODES as u32) >> p.group_log2
    } else {
        0
    }
}

/// One set's sums `Σ(s·q + b)·x` over the panel from column `k0`, added to `acc`:
/// `[pass][r][t]` is this lane's row `g + G·r` of the tile against column
/// `(first_pass + pass)·G + mma_col(t)`.
///
/// Uniform control flow around every `wave_mma`: the rounds depend only on the launch and
/// every pass is multiplied (one past the columns multiplies zeros), so every lane of a wave
/// reaches each multiply. Offsets are u32 (the bind checks that every buffer's elements fit
/// one). `_like` names `T`, the activations' dtype the multiply reads. With `deep` the words of the next two rounds and the scales of the next are in
/// flight while a round multiplies; else the next round's words (fewer registers, for two
/// passes).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn sweep<T: Element, B: Block, const P: usize>(
    _like: T,
    b: &B,
    p: &QLinearParams,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    xs: Rw<u32>,
    xsum: Rw<f32>,
    geo: Geometry,
    at: Sweep,
    k0: u32,
    wide: bool,
    deep: bool,
    acc: [[[f32; 2]; 2]; P],
) -> [[[f32; 2]; 2]; P] {
    let groups = mma_groups(B::WAVE);
    let q = b.mma_class();
    let g = b.mma_group();
    let k = p.k;
    let end = if k0 + geo.panel < k {
        k0 + geo.panel
    } else {
        k
    };
    let step = step_codes(B::WAVE);
    let h_count = step_groups(p.group_size, B::WAVE);
    let h_log2 = h_count.trailing_zeros();
    let rounds = (end - k0).div_ceil(step).div_ceil(at.splits);
    let words_per_row = k / WORD_CODES as u32;
    let n_last = p.n - 1;
    let first = b.block_x() * MMA_BLOCK_ROWS + at.tile * 2 * groups + g;
    // Rows past N re-read the last row (computed, not written).
    let rows = [first.min(n_last), (first + groups).min(n_last)];
    let row_words = [rows[0] * words_per_row, rows[1] * words_per_row];
    // Per pass: where this lane's row of `x` starts among the panel's pairs, and which words
    // of its chunk feed its column (bit `w`); the others put zeros in.
    let mut x_row = [0u32; P];
    let mut x_words = [0u32; P];
    let mut pass = 0usize;
    while pass < P {
        let col = (at.first_pass + pass as u32) * groups + g;
        if at.live && col < at.columns {
            x_row[pass] = (col >> h_log2) * geo.panel / 2;
            let mut word = 0u32;
            while word < LANE_WORDS as u32 {
                if word_group(p, step, q, word) == col & (h_count - 1) {
                    x_words[pass] |= 1 << word;
                }
                word += 1;
            }
        }
        pass += 1;
    }
    let bf16 = is_bf16::<T>();
    // The exponent bits the codes are or-ed into, times `min(N, 1)` (1: the bind refuses an
    // empty N): a value only the launch knows stays in a register, where the GPU compilers
    // fuse each code's mask and or into one three-input op (a second constant would not fit).
    let code_bits = if bf16 { 0x4300_4300u32 } else { 0x6400_6400 } * p.n.min(1);
    let offset = if bf16 { 128.0f32 } else { 1024.0 };
    let mut acc = acc;
    // This lane's chunk of round `r` starts at code `k0 + (split + r·splits)·step + q·32`.
    let mut s = at.split;
    let mut w_next = chunk_words(
        w_q,
        row_words,
        chunk_at(k0 + s * step, q, end, at.live),
        end,
        wide,
    );
    let mut w_after = [[0u32; LANE_WORDS]; 2];
    let mut folds_next = [[[[0.0f32; 3]; 2]; 2]; P];
    if deep {
        let after = chunk_at(k0 + (s + at.splits) * step, q, end, at.live);
        w_after = chunk_words(w_q, row_words, after, end, wide);
        folds_next = fold_values(b, p, scales, biases, xsum, geo, rows, at, k0, s, acc);
    }
    let mut round = 0;
    while round < rounds {
        let w = w_next;
        let chunk = chunk_at(k0 + s * step, q, end, at.live);
        let next = s + at.splits;
        let mut folds = folds_next;
        if deep {
            w_next = w_after;
            let after = chunk_at(k0 + (next + at.splits) * step, q, end, at.live);
            w_after = chunk_words(w_q, row_words, after, end, wide);
            folds_next = fold_values(b, p, scales, biases, xsum, geo, rows, at, k0, next, acc);
        } else {
            w_next = chunk_words(
                w_q,
                row_words,
                chunk_at(k0 + next * step, q, end, at.live),
                end,
                wide,
            );
            folds = fold_values(b, p, scales, biases, xsum, geo, rows, at, k0, s, acc);
        }
        let mut c = acc;
        let mut pass = 0usize;
        while pass < P {
            c[pass] = [[0.0f32; 2]; 2];
            pass += 1;
        }
        let mut word = 0usize;
        while word < LANE_WORDS {
            // This word's pairs of `x` for each pass (zeros where the lane feeds no column).
            let mut xw = [[[0u32; 2]; WORD_HALVES]; P];
            let mut pass = 0usize;
            while pass < P {
                if chunk < end && (x_words[pass] >> word) & 1 != 0 {
                    let word_at = (chunk - k0) / 2 + (word * WORD_CODES / 2) as u32;
                    xw[pass] = x_pairs(xs, x_row[pass] + word_at, wide);
                }
                pass += 1;
            }
            let mut half = 0usize;
            while half < WORD_HALVES {
                // Codes `i` and `i + 4` (pair 0), `i + 1` and `i + 5` (pair 1) of the word.
                let i = 2 * half;
                let a = [
                    [
                        code_pair(w[0][word], i, code_bits),
                        code_pair(w[0][word], i + 1, code_bits),
                    ],
                    [
                        code_pair(w[1][word], i, code_bits),
                        code_pair(w[1][word], i + 1, code_bits),
                    ],
                ];
                let mut pass = 0usize;
                while pass < P {
                    c[pass] = b.wave_mma::<T>(a, xw[pass][half], c[pass]);
                    pass += 1;
                }
                half += 1;
            }
            word += 1;
        }
        // Fold this step's sums with the scale and bias of each column's group:
        // `s·C + (b − offset·s)·Σx`, where `C` holds `Σ(offset + q)·x`.
        let mut pass = 0usize;
        while pass < P {
            let mut r = 0usize;
            while r < 2 {
                let mut t = 0usize;
                while t < 2 {
                    let f = folds[pass][r][t];
                    let shift = crate::mul_add(-offset, f[0], f[1]);
                    let with_shift = crate::mul_add(shift, f[2], acc[pass][r][t]);
                    acc[pass][r][t] = crate::mul_add(f[0], c[pass][r][t], with_shift);
                    t += 1;
                }
                r += 1;
            }
            pass += 1;
        }
        s = next;
        round += 1;
    }
    acc
}

/// The first code of this lane's chunk of the step from code `step_at`, or `end` (no chunk)
/// past the panel or when the sweep is not live.
#[inline(always)]
fn chunk_at(step_at: u32, q: u32, end: u32, live: bool) -> u32 {
    let at = step_at + q * LANE_CODES;
    if live && at < end {
        at
    } else {
        end
    }
}

/// The chunk's words of both rows (`row_words`: each row's first word) from code `chunk`
/// (zeros when `chunk` is `end`).
#[inline(always)]
fn chunk_words(
    w_q: Src<u32>,
    row_words: [u32; 2],
    chunk: u32,
    end: u32,
    wide: bool,
) -> [[u32; LANE_WORDS]; 2] {
    let mut w = [[0u32; LANE_WORDS]; 2];
    if chunk < end {
        let word = chunk / WORD_CODES as u32;
        let mut r = 0usize;
        while r < 2 {
            let at = (row_words[r] + word) as usize;
            if wide {
                // SAFETY: the row is below N and the chunk inside its K·4/32 words (bind
                // checked w_q's shape), and `wide` checked that w_q starts on 16 bytes: rows of
                // a multiple of 4 words and chunks at multiples of 4 words keep that.
                w[r] = unsafe { w_q.get_chunk_unchecked::<LANE_WORDS>(at) };
            } else {
                let mut j = 0;
                while j < LANE_WORDS {
                    w[r][j] = w_q.get(at + j);
                    j += 1;
                }
            }
            r += 1;
        }
    }
    w
}

/// The staged pairs of one word of codes from pair `at`: half `h` holds pairs `2h`, `2h + 1`.
#[inline(always)]
fn x_pairs(xs: Rw<u32>, at: u32, wide: bool) -> [[u32; 2]; WORD_HALVES] {
    let v = if wide {
        // SAFETY: the row is below M and the word inside the staged panel, so the 4 pairs are
        // inside the pairs' region; it starts on 16 bytes (checked with `wide`) and every word
        // is 4 pairs from it.
        unsafe { xs.get_chunk_unchecked::<4>(at as usize) }
    } else {
        [
            xs.get(at as usize),
            xs.get(at as usize + 1),
            xs.get(at as usize + 2),
            xs.get(at as usize + 3),
        ]
    };
    [[v[0], v[1]], [v[2], v[3]]]
}

/// Codes `i` and `i + WORD_CODES/2` of `word` as a pair of 16-bit values `offset + q` (the low
/// half the lower code): one shift and one and-or.
#[inline(always)]
fn code_pair(word: u32, i: usize, code_bits: u32) -> u32 {
    let mask = (1u32 << CODE_BITS) - 1;
    ((word >> (i as u32 * CODE_BITS)) & (mask | (mask << 16))) | code_bits
}

/// The scale and bias of the group, and the `Σx` of the span, each of this lane's outputs
/// `[pass][r][t]` folds at step `s` of the panel from `k0` (zeros where the column is none or
/// past the columns, or its span past the panel: the fold then adds nothing).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fold_values<B: Block, const P: usize>(
    b: &B,
    p: &QLinearParams,
    scales: Src<u32>,
    biases: Src<u32>,
    xsum: Rw<f32>,
    geo: Geometry,
    rows: [u32; 2],
    at: Sweep,
    k0: u32,
    s: u32,
    like: [[[f32; 2]; 2]; P],
) -> [[[[f32; 3]; 2]; 2]; P] {
    let _ = like;
    let groups = mma_groups(B::WAVE);
    let step = step_codes(B::WAVE);
    let h_count = step_groups(p.group_size, B::WAVE);
    let end = if k0 + geo.panel < p.k {
        k0 + geo.panel
    } else {
        p.k
    };
    let groups_per_row = p.k >> p.group_log2;
    let span_log2 = span_log2(p, B::WAVE);
    let panel_spans = geo.panel >> span_log2;
    let step_at = k0 + s * step;
    let mut out = [[[[0.0f32; 3]; 2]; 2]; P];
    let mut pass = 0usize;
    while pass < P {
        let mut t = 0usize;
        while t < 2 {
            // A lane's second column may be none (`mma_col` past `G`).
            let mc = b.mma_col(t as u32);
            let col = (at.first_pass + pass as u32) * groups + mc;
            // Column `h` of the step is its span `h`: the group's part inside the step.
            let span_at = step_at + ((col & (h_count - 1)) << span_log2);
            let group = span_at >> p.group_log2;
            let live = at.live && mc < groups && col < at.columns && span_at < end;
            if live {
                let m = col >> h_count.trailing_zeros();
                let span = (span_at - k0) >> span_log2;
                let sum_x = xsum.get((m * panel_spans + span) as usize);
                let mut r = 0usize;
                while r < 2 {
                    let e = rows[r] * groups_per_row + group;
                    out[pass][r][t] = [
                        scale_value(scales, p.scale_dtype, e),
                        scale_value(biases, p.scale_dtype, e),
                        sum_x,
                    ];
                    r += 1;
                }
            }
            t += 1;
        }
        pass += 1;
    }
    out
}

/// Value `e` of packed scale or bias words of the `scale_dtype` code `code`, widened exactly to
/// f32: the word and the half picked by selects, not branches.
#[inline(always)]
fn scale_value(words: Src<u32>, code: u32, e: u32) -> f32 {
    let f32_words = code == SCALE_F32;
    let at = if f32_words { e } else { e >> 1 };
    // SAFETY: `e` is a group of a row below N, so below N·K/group_size, and the bind checked
    // that the words hold that many values of the scale dtype.
    let word = unsafe { words.get_unchecked(at as usize) };
    let half = (word >> ((e & 1) * 16)) & 0xffff;
    let bf = Bf16(half as u16).widen();
    let hf = F16(half as u16).widen();
    if f32_words {
        f32::from_bits(word)
    } else if code == SCALE_BF16 {
        bf
    } else {
        hf
    }
}

/// Adds the splits' and groups' sums of every output of the block and writes `y` (with the
/// bias, and SwiGLU over gate and up pairs with [`ACT_SILU_MUL`]).
#[inline(always)]
fn write_outputs<T: Element, B: Block>(
    b: &B,
    p: &QLinearParams,
    bias: Src<T>,
    y: Dst<T>,
    sums: Rw<f32>,
    geo: Geometry,
) {
    let m_rows = p.m as usize;
    let n_out = p.n as usize;
    let first = (b.block_x() * MMA_BLOCK_ROWS) as usize;
    let pairs = p.act == ACT_SILU_MUL;
    // One output per row, or per gate and up pair.
    let per_row = if pairs { 2 } else { 1 };
    let outs = MMA_BLOCK_ROWS as usize / per_row;
    let at = OutputAt {
        columns: geo.columns as usize,
        h_count: geo.columns as usize / m_rows,
        splits: geo.splits as usize,
    };
    let mut o = b.thread() as usize;
    while o < outs * m_rows {
        let m = o / outs;
        let row = o % outs * per_row;
        let n = first + row;
        if n < n_out {
            let v = output_sum(p, bias, sums, at, m, n, row);
            if pairs {
                let up = output_sum(p, bias, sums, at, m, n + 1, row + 1);
                let out = silu_mul_element(T::from_f32(v), T::from_f32(up));
                y.set(m * (n_out / 2) + n / 2, out);
            } else {
                y.set(m * n_out + n, T::from_f32(v));
            }
        }
        o += b.size() as usize;
    }
}

/// Where the block's sums lie: its columns, groups per step and splits.
#[derive(Clone, Copy)]
struct OutputAt {
    columns: usize,
    h_count: usize,
    splits: usize,
}

/// Output `n` (the block's row `row`) for row `m` of `x`: its sums over the splits and the
/// step's groups, plus its bias.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn output_sum<T: Element>(
    p: &QLinearParams,
    bias: Src<T>,
    sums: Rw<f32>,
    at: OutputAt,
    m: usize,
    n: usize,
    row: usize,
) -> f32 {
    let mut t = 0.0f32;
    let mut split = 0;
    while split < at.splits {
        let first = (split * MMA_BLOCK_ROWS as usize + row) * at.columns + m * at.h_count;
        let mut h = 0;
        while h < at.h_count {
            t += sums.get(first + h);
            h += 1;
        }
        split += 1;
    }
    if p.has_bias != 0 {
        t += bias.get(n).widen();
    }
    t
}
