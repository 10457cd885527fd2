//! `moe_down` and `moe_combine` in one launch, shared by the `moe_down_sum_<b>bit` entries:
//! `out[t, h] = rnd_T(Σ_k scores[t, k]·d_k)`, `d_k` the dot product of row `h` of expert
//! `indices[t, k]`'s down with `act_g[t, k, :]` (f32). Each `scores·d_k` is the f32 product
//! `moe_down` writes as a partial and the sum runs in slot order from 0 in f32 as
//! `moe_combine`'s does, rounded once: the answer is bit for bit `moe_combine(moe_down(…))`,
//! without the partials' round trip through memory or the third launch.
//!
//! Geometry: grid `(⌈Din / rows_per_block⌉, 1, T)`; one wave per output row, as in
//! [`moe_experts`](super::moe_experts), so `rows_per_block` never changes a bit. A wave takes
//! the slots two at a time and asks for both experts' words of a unit before using either:
//! a decode row of down is one unit a lane per slot, so the slots are what keeps loads in
//! flight.

use super::moe_experts::{
    bind_format, bind_slots, bind_weights, expert_of, unit_dot, unit_scales, MoeParams,
    THREADS_PER_ROW,
};
use super::qlinear::{load_words, UNIT, X_CHUNK};
use crate::{Block, Dst, Element, Launch, ShapeError, Src};

/// Slots whose words a lane has in flight at once.
const SLOTS_AT_ONCE: usize = 2;

/// The shape checks of `moe_down_sum_<b>bit`: buffers `indices [T, K]`, the projection
/// `[E, Din, Dff·bits/32]` with its scales and biases, `act_g [T, K, Dff]` and `scores [T, K]`
/// f32, `out [T, Din]` in `T`.
pub fn bind_down_sum(p: &mut MoeParams, shapes: &[&[usize]], bits: u32) -> Result<(), ShapeError> {
    let [indices, w_q, scales, biases, act_g, scores, out] = shapes else {
        return Err(ShapeError::BufferCount {
            got: shapes.len(),
            want: 7,
        });
    };
    bind_format(p)?;
    if p.act != 0 {
        return Err(ShapeError::Range {
            what: "act (moe_down_sum applies none; leave act 0)",
            got: p.act as f64,
            lo: 0.0,
            hi: 0.0,
        });
    }
    bind_slots(p, indices)?;
    let &[_, _, dff] = *act_g else {
        return Err(ShapeError::Invalid("act_g must be [T, K, Dff]"));
    };
    let (e, din) = bind_weights(
        p.group_size,
        p.scale_dtype,
        "the down weights must be three-dimensional: [E, Din, Dff·bits/32]",
        w_q,
        scales,
        biases,
        dff,
        bits,
    )?;
    p.experts = crate::kernel::shape::to_u32("E", e)?;
    p.din = crate::kernel::shape::to_u32("Din", din)?;
    p.dff = crate::kernel::shape::to_u32("Dff", dff)?;
    let (t, k) = (p.tokens as usize, p.k as usize);
    if *act_g != [t, k, dff] {
        return Err(ShapeError::Invalid("act_g must be [T, K, Dff]"));
    }
    crate::kernel::shape::to_u32("elements of act_g", crate::kernel::shape::numel(act_g))?;
    if *scores != [t, k] {
        return Err(ShapeError::Invalid("scores must be [T, K], like indices"));
    }
    if *out != [t, din] {
        return Err(ShapeError::Invalid("out must be [T, Din]"));
    }
    crate::kernel::shape::to_u32("elements of out", t.saturating_mul(din)).map(|_| ())
}

/// The launch: `rows_per_block` output rows of one token a block.
pub fn launch_down_sum(p: &MoeParams) -> Launch {
    Launch {
        grid: [p.din.div_ceil(p.rows_per_block), 1, p.tokens],
        block: p.rows_per_block * THREADS_PER_ROW,
    }
}

/// The body of `moe_down_sum_<b>bit`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn moe_down_sum<T: Element, B: Block, const BITS: usize>(
    b: &B,
    p: &MoeParams,
    indices: Src<u32>,
    down_q: Src<u32>,
    down_scales: Src<u32>,
    down_biases: Src<u32>,
    act_g: Src<f32>,
    scores: Src<f32>,
    out: Dst<T>,
    bits: [u32; BITS],
) {
    let t = b.block_z() as usize;
    let (k, din, dff) = (p.k as usize, p.din as usize, p.dff as usize);
    let first_slot = t * k;
    let wide = BITS.is_multiple_of(4)
        && down_q.chunk_aligned::<4>(0)
        && act_g.chunk_aligned::<X_CHUNK>(first_slot * dff);
    let first = b.block_x() as usize * p.rows_per_block as usize;
    let here = (p.rows_per_block as usize).min(din - first);
    let mut r = b.wave_id() as usize;
    while r < here {
        let h = first + r;
        let total = if wide {
            row_sum(
                b,
                p,
                indices,
                down_q,
                down_scales,
                down_biases,
                act_g,
                scores,
                t,
                h,
                bits,
                true,
            )
        } else {
            row_sum(
                b,
                p,
                indices,
                down_q,
                down_scales,
                down_biases,
                act_g,
                scores,
                t,
                h,
                bits,
                false,
            )
        };
        if b.lane() == 0 {
            out.set(t * din + h, T::from_f32(total));
        }
        r += b.waves() as usize;
    }
}

/// `Σ_k scores[t, k]·d_k` of output row `h` in f32, slot order from 0 (the value of every lane
/// after the wave sums); `wide` is a constant in each caller's copy.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn row_sum<B: Block, const BITS: usize>(
    b: &B,
    p: &MoeParams,
    indices: Src<u32>,
    down_q: Src<u32>,
    down_scales: Src<u32>,
    down_biases: Src<u32>,
    act_g: Src<f32>,
    scores: Src<f32>,
    t: usize,
    h: usize,
    bits: [u32; BITS],
    wide: bool,
) -> f32 {
    let (k, din, dff) = (p.k as usize, p.din as usize, p.dff as usize);
    let units = dff / UNIT;
    let groups = dff >> p.group_log2;
    let wave = B::WAVE as usize;
    let mut total = 0.0f32;
    let mut slot = t * k;
    let end = slot + k;
    while slot < end {
        // Slots past `end` are read as unknown experts: no words, no term.
        let (e0, ok0) = slot_expert(p, indices, slot, end);
        let (e1, ok1) = slot_expert(p, indices, slot + 1, end);
        let rows = [e0 * din + h, e1 * din + h];
        let mut acc = [0.0f32; SLOTS_AT_ONCE];
        let mut u = b.lane() as usize;
        while u < units {
            // Every load first, then the arithmetic: the slots' words travel together.
            let mut w = [bits; SLOTS_AT_ONCE];
            if ok0 {
                w[0] = load_words(down_q, (rows[0] * units + u) * BITS, wide, bits);
            }
            if ok1 {
                w[1] = load_words(down_q, (rows[1] * units + u) * BITS, wide, bits);
            }
            let col = u * UNIT;
            if ok0 {
                acc[0] = slot_unit(
                    p,
                    act_g,
                    slot * dff,
                    col,
                    wide,
                    w[0],
                    down_scales,
                    down_biases,
                    rows[0] * groups,
                    acc[0],
                );
            }
            if ok1 {
                acc[1] = slot_unit(
                    p,
                    act_g,
                    (slot + 1) * dff,
                    col,
                    wide,
                    w[1],
                    down_scales,
                    down_biases,
                    rows[1] * groups,
                    acc[1],
                );
            }
            u += wave;
        }
        // The terms in slot order; the guards are uniform over the wave (its sums need all).
        total = with_term(b, p, indices, scores, slot, end, acc[0], total);
        total = with_term(b, p, indices, scores, slot + 1, end, acc[1], total);
        slot += SLOTS_AT_ONCE;
    }
    total
}

/// The expert of `slot` and whether it has one in range (false for slots at or past `end`).
#[inline(always)]
fn slot_expert(p: &MoeParams, indices: Src<u32>, slot: usize, end: usize) -> (usize, bool) {
    if slot < end {
        expert_of(p, indices, slot)
    } else {
        (0, false)
    }
}

/// `acc` plus one unit (at column `col`) of a slot's row (`moe_experts`' unit arithmetic, one
/// projection), the slot's `act_g` row starting at `x_at`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn slot_unit<const BITS: usize>(
    p: &MoeParams,
    act_g: Src<f32>,
    x_at: usize,
    col: usize,
    wide: bool,
    words: [u32; BITS],
    scales: Src<u32>,
    biases: Src<u32>,
    groups_at: usize,
    acc: f32,
) -> f32 {
    let at = x_at + col;
    let xs = [
        act_chunk(act_g, at, wide),
        act_chunk(act_g, at + X_CHUNK, wide),
        act_chunk(act_g, at + 2 * X_CHUNK, wide),
        act_chunk(act_g, at + 3 * X_CHUNK, wide),
    ];
    let split = p.group_size as usize == UNIT / 2;
    let levels = (1u32 << BITS as u32) as f32;
    let spans = unit_scales(
        split,
        p.group_log2,
        p.scale_dtype,
        levels,
        scales,
        biases,
        groups_at,
        col,
    );
    unit_dot(words, xs, spans, split, acc)
}

/// [`X_CHUNK`] values of `act_g` from `at` (one wide load when `wide`).
#[inline(always)]
fn act_chunk(act_g: Src<f32>, at: usize, wide: bool) -> [f32; X_CHUNK] {
    if wide {
        act_g.get_chunk::<X_CHUNK>(at)
    } else {
        let mut c = [0.0f32; X_CHUNK];
        let mut j = 0;
        while j < X_CHUNK {
            c[j] = act_g.get(at + j);
            j += 1;
        }
        c
    }
}

/// `total + scores[slot]·Σ_lanes acc` for a slot before `end` (`moe_down`'s partial: 0 for an
/// unknown expert), else `total`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn with_term<B: Block>(
    b: &B,
    p: &MoeParams,
    indices: Src<u32>,
    scores: Src<f32>,
    slot: usize,
    end: usize,
    acc: f32,
    total: f32,
) -> f32 {
    if slot >= end {
        return total;
    }
    let d = b.wave_sum(acc);
    let (_, ok) = expert_of(p, indices, slot);
    let s = if ok { scores.get(slot) } else { 0.0 };
    total + s * d
}
