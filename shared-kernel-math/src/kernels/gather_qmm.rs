//! Expert-indexed quantized matmul (spec §13's `gather_qmm`, affine mode, `transpose = True`),
//! shared by the `gather_qmm_<b>bit` entries of the list (one per bit width, so the width is a
//! compile-time constant of every port, as for `qlinear` and the MoE experts):
//! `out[s, :] = lhs[lhs_idx[s], :] · Ŵ[rhs_idx[s]]^T` for every slot `s` of `S`, each element
//! summed in f32 and rounded to `T` once.
//!
//! Buffers: `lhs [L, C]` and `out [S, N]` in `T`; `lhs_idx [S]` and `rhs_idx [S]` u32; the
//! stacked experts in MLX's affine layout, `w_q [E, N, C·bits/32]` u32 (each row one LSB-first
//! bit stream of `C` codes: 6-bit rows are §7.2's 3-byte packs), `scales` and `biases`
//! `E·N·C/group_size` values of the scale dtype packed as `qlinear` takes them. MoE decode
//! calls it with `lhs = x [T, Din]`, `lhs_idx[s] = s / K` and `rhs_idx` the top-k ids (gate,
//! up, fc1), and down with `lhs = act [T·K, Dff]`, `lhs_idx[s] = s`.
//!
//! A slot whose `rhs_idx` is ≥ E or whose `lhs_idx` is ≥ L reads nothing and gives zeros (the
//! host op refuses both before any launch; ids made on the device are in range by
//! construction).
//!
//! Geometry: grid `(⌈S / tile⌉, ⌈N / rows_per_block⌉)`; a block owns `tile` consecutive slots
//! (`rows_per_tile` with the `sorted` hint, else 1) and `rows_per_block` rows of the experts
//! (columns of `out`), its waves taking the rows in turns. For one row a lane walks units
//! `lane, lane + wave, …` of 32 codes; per unit it runs over the tile's slots in order and
//! loads the unit's words and scales once per run of equal `rhs_idx`, applying them to every
//! slot of the run. Prefill sorts the slots by expert (`gather_sort` on the host), so a run is
//! up to a whole tile and each weight word is read once per tile instead of once per slot.
//!
//! Why the hint never changes a bit: a slot's sum is its own accumulator (in shared memory,
//! one per thread and slot of the tile), fed the same units in the same order by the same
//! code, `moe_experts`'s per-unit form, then one wave sum. Which slots share a tile, and
//! whether their experts form one run or several, decides only how often a word is loaded.
//! So `sorted`, `rows_per_tile`, `rows_per_block` and the block size never change a result; the
//! wave size does (the sum's tree), as for every wave-reduced kernel.

use super::moe_experts::{bind_weights, no_unit_scales, unit_dot, unit_scales, unit_x};
use super::qlinear::{check_format, load_words, UNIT, X_CHUNK};
use crate::kernel::shape;
use crate::{Block, Dst, Element, Launch, ShapeError, Src};

/// Most slots one block takes with the `sorted` hint.
pub const MAX_ROWS_PER_TILE: u32 = 16;

/// Most expert rows (columns of `out`) one block owns.
pub const MAX_ROWS_PER_BLOCK: u32 = 8;

/// Threads per expert row a block is sized for: one wave of a 32-wide GPU per row; wider waves
/// take several rows in turn, narrower ones split the block otherwise.
const THREADS_PER_ROW: u32 = 32;

/// The most blocks along grid y (CUDA's limit there): the expert rows' tiles.
const MAX_GRID_Y: usize = 65535;

crate::params! {
    /// Params of the `gather_qmm_<b>bit` kernels.
    pub struct GatherQmmParams {
        /// S: the slots, rows of `out` and entries of both index lists.
        pub slots: u32,
        /// L: rows of `lhs`.
        pub lhs_rows: u32,
        /// E: experts stacked in the weights.
        pub experts: u32,
        /// C: the reduced axis, columns of `lhs` and codes per expert row.
        pub cols: u32,
        /// N: rows of each expert, columns of `out`.
        pub rows: u32,
        /// Elements per group, one scale and one bias each: 16, 32, 64 or 128.
        pub group_size: u32 = 64,
        /// The dtype of the scales and biases: 0 f32, 1 f16, 2 bf16 (`qlinear::scale_code`).
        pub scale_dtype: u32 = 1,
        /// 1: the slots come sorted by `rhs_idx` (a hint: any order gives the same bits), and
        /// a block takes `rows_per_tile` of them; 0: one slot per block.
        pub sorted: u32 = 0,
        /// Consecutive slots a block takes when `sorted` is 1: 1..=16; never changes a result.
        pub rows_per_tile: u32 = 8,
        /// Expert rows a block owns, 1..=8; never changes a result.
        pub rows_per_block: u32 = 8,
        /// `log2(group_size)`, set by `bind`.
        pub group_log2: u32,
        /// Slots per block, set by `bind`: `rows_per_tile` when sorted, else 1.
        pub tile: u32,
    }
}

/// `what` (a count param) within `1..=hi`.
fn in_range(what: &'static str, v: u32, hi: u32) -> Result<(), ShapeError> {
    if v == 0 || v > hi {
        return Err(ShapeError::Range {
            what,
            got: v as f64,
            lo: 1.0,
            hi: hi as f64,
        });
    }
    Ok(())
}

/// The shape checks of every `gather_qmm_<b>bit` kernel at `bits`.
pub fn bind(p: &mut GatherQmmParams, shapes: &[&[usize]], bits: u32) -> Result<(), ShapeError> {
    let [lhs, lhs_idx, rhs_idx, w_q, scales, biases, out] = shapes else {
        return Err(ShapeError::BufferCount {
            got: shapes.len(),
            want: 7,
        });
    };
    check_format(p.group_size, p.scale_dtype)?;
    if p.sorted > 1 {
        return Err(ShapeError::Range {
            what: "sorted (0 no hint, 1 slots sorted by rhs_idx)",
            got: p.sorted as f64,
            lo: 0.0,
            hi: 1.0,
        });
    }
    in_range("rows_per_tile", p.rows_per_tile, MAX_ROWS_PER_TILE)?;
    in_range("rows_per_block", p.rows_per_block, MAX_ROWS_PER_BLOCK)?;
    let &[l, c] = *lhs else {
        return Err(ShapeError::Invalid("lhs must be two-dimensional: [L, C]"));
    };
    shape::nonzero("L (the rows of lhs)", l)?;
    shape::nonzero("C (the columns of lhs)", c)?;
    let &[s] = *lhs_idx else {
        return Err(ShapeError::Invalid("lhs_idx must be one-dimensional: [S]"));
    };
    shape::nonzero("S (the slots: entries of lhs_idx)", s)?;
    if *rhs_idx != [s] {
        return Err(ShapeError::Invalid(
            "rhs_idx must be one-dimensional with S entries, like lhs_idx",
        ));
    }
    let (e, n) = bind_weights(
        p.group_size,
        p.scale_dtype,
        "w_q must be three-dimensional: [E, N, C·bits/32]",
        w_q,
        scales,
        biases,
        c,
        bits,
    )?;
    if *out != [s, n] {
        return Err(ShapeError::Invalid(
            "out must be [S, N]: a row per slot, a column per expert row",
        ));
    }
    if n.div_ceil(p.rows_per_block as usize) > MAX_GRID_Y {
        return Err(ShapeError::Range {
            what: "N / rows_per_block (the blocks along grid y)",
            got: n.div_ceil(p.rows_per_block as usize) as f64,
            lo: 1.0,
            hi: MAX_GRID_Y as f64,
        });
    }
    // Every element index must fit the u32 a WGSL index holds.
    shape::to_u32("elements of lhs", l.saturating_mul(c))?;
    shape::to_u32("elements of out", s.saturating_mul(n))?;
    p.slots = shape::to_u32("S", s)?;
    p.lhs_rows = shape::to_u32("L", l)?;
    p.experts = shape::to_u32("E", e)?;
    p.cols = shape::to_u32("C", c)?;
    p.rows = shape::to_u32("N", n)?;
    p.group_log2 = p.group_size.trailing_zeros();
    p.tile = if p.sorted == 1 { p.rows_per_tile } else { 1 };
    Ok(())
}

/// The launch of every `gather_qmm_<b>bit` kernel.
pub fn launch(p: &GatherQmmParams) -> Launch {
    Launch {
        grid: [
            p.slots.div_ceil(p.tile),
            p.rows.div_ceil(p.rows_per_block),
            1,
        ],
        block: p.rows_per_block * THREADS_PER_ROW,
    }
}

/// Shared memory of a launch with `block` threads: an f32 accumulator per thread and slot of
/// the tile, then each slot's expert and first `lhs` element.
pub fn shared_bytes(p: &GatherQmmParams, block: u32) -> usize {
    (block as usize * p.tile as usize + 2 * p.tile as usize) * 4
}

/// The body at `BITS` bits (the length of `bits`, whose values are unused).
///
/// Uniform control flow around `barrier` and `wave_sum`: the barrier is reached by every
/// thread before any row, and a wave's rows, its tile loop and their trip counts depend only
/// on the block and the wave, so every lane of a wave reaches each `wave_sum`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn gather_qmm<T: Element, B: Block, const BITS: usize>(
    b: &B,
    p: &GatherQmmParams,
    lhs: Src<T>,
    lhs_idx: Src<u32>,
    rhs_idx: Src<u32>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    out: Dst<T>,
    bits: [u32; BITS],
) {
    let tile = p.tile as usize;
    let first_slot = b.block_x() as usize * tile;
    let slots_here = tile.min(p.slots as usize - first_slot);
    let size = b.size() as usize;
    let sums_len = size * tile;
    // The tile's slots once: an expert past E (or a row past L) becomes E, "read nothing".
    let experts = b.shared::<u32>(4 * sums_len, tile);
    let x_at = b.shared::<u32>(4 * (sums_len + tile), tile);
    let mut j = b.thread() as usize;
    while j < slots_here {
        let e = rhs_idx.get(first_slot + j);
        let l = lhs_idx.get(first_slot + j);
        let known = e < p.experts && l < p.lhs_rows;
        experts.set(j, if known { e } else { p.experts });
        x_at.set(j, if known { l * p.cols } else { 0 });
        j += size;
    }
    b.barrier();
    // 16-byte loads of the words and of `lhs` when every unit starts on 16 bytes (uniform
    // over the launch: C is a multiple of 32); each choice is its own copy of the sweep.
    let wide =
        BITS.is_multiple_of(4) && w_q.chunk_aligned::<4>(0) && lhs.chunk_aligned::<X_CHUNK>(0);
    let slots = SlotTile {
        first: first_slot,
        here: slots_here,
    };
    if wide {
        block_rows(
            b, p, lhs, w_q, scales, biases, out, experts, x_at, slots, bits, true,
        );
    } else {
        block_rows(
            b, p, lhs, w_q, scales, biases, out, experts, x_at, slots, bits, false,
        );
    }
}

/// The slots of a block's tile: the first one and how many there are (the last tile may be
/// short).
#[derive(Clone, Copy)]
struct SlotTile {
    /// The tile's first slot.
    first: usize,
    /// Its slots.
    here: usize,
}

/// The block's expert rows for its tile of slots, a wave per row at a time; `experts` and
/// `x_at` hold each slot's expert (E: none) and first element of its `lhs` row.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn block_rows<T: Element, B: Block, const BITS: usize>(
    b: &B,
    p: &GatherQmmParams,
    lhs: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    out: Dst<T>,
    experts: crate::Rw<u32>,
    x_at: crate::Rw<u32>,
    slots: SlotTile,
    bits: [u32; BITS],
    wide: bool,
) {
    let size = b.size() as usize;
    // Slot `j`'s accumulator of this thread: consecutive threads, consecutive words.
    let sums = b.shared::<f32>(0, size * p.tile as usize);
    let mine = b.thread() as usize;
    let n = p.rows as usize;
    let none = p.experts as usize;
    let units = p.cols as usize / UNIT;
    let groups_per_row = p.cols as usize >> p.group_log2;
    let split = p.group_size as usize == UNIT / 2;
    let levels = (1u32 << BITS as u32) as f32;
    let first_row = b.block_y() as usize * p.rows_per_block as usize;
    let rows_here = (p.rows_per_block as usize).min(n - first_row);
    let mut r = b.wave_id() as usize;
    while r < rows_here {
        let row = first_row + r;
        let mut j = 0;
        while j < slots.here {
            sums.set(j * size + mine, 0.0);
            j += 1;
        }
        let mut u = b.lane() as usize;
        while u < units {
            // The words and scales of the run in hand; `none` until the first known slot.
            let mut loaded = none;
            let mut w = bits;
            let mut spans = no_unit_scales();
            let mut j = 0;
            while j < slots.here {
                let e = experts.get(j) as usize;
                if e != none {
                    if e != loaded {
                        let w_row = e * n + row;
                        w = load_words(w_q, (w_row * units + u) * BITS, wide, bits);
                        spans = unit_scales(
                            split,
                            p.group_log2,
                            p.scale_dtype,
                            levels,
                            scales,
                            biases,
                            w_row * groups_per_row,
                            u * UNIT,
                        );
                        loaded = e;
                    }
                    let xs = unit_x(lhs, x_at.get(j) as usize + u * UNIT, wide);
                    let at = j * size + mine;
                    sums.set(at, unit_dot(w, xs, spans, split, sums.get(at)));
                }
                j += 1;
            }
            u += B::WAVE as usize;
        }
        let mut j = 0;
        while j < slots.here {
            let total = b.wave_sum(sums.get(j * size + mine));
            if b.lane() == 0 {
                out.set((slots.first + j) * n + row, T::from_f32(total));
            }
            j += 1;
        }
        r += b.waves() as usize;
    }
}
