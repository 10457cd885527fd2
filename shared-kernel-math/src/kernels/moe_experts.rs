//! Fused decode MoE experts (spec §7), shared by the `moe_gateup_<b>bit`,
//! `moe_fc1_relu2_<b>bit` and `moe_down_<b>bit` entries of the list (one per bit width, so the
//! width is a compile-time constant of every port, as for `qlinear`), and `moe_combine`'s
//! K-sum. Routing is the caller's: each token brings the `K` expert ids it was routed to and
//! their normalized scores.
//!
//! Weights are stacked experts in MLX's affine layout (spec §13): a projection with `R` output
//! rows and `C` input columns is `w_q [E, R, C·bits/32]` u32 (each row one LSB-first bit stream
//! of `C` codes: 6-bit rows are §7.2's 3-byte packs), `scales` and `biases` `E·R·C/group_size`
//! values of the scale dtype packed as `qlinear` takes them. Gate, up and fc1 have `R = Dff`,
//! `C = Din`; down has `R = Din`, `C = Dff`.
//!
//! * `moe_gateup`: `act_g[t, k, f] = act(g)·u` in f32, `g` and `u` the f32 dot products of row
//!   `f` of expert `indices[t, k]`'s gate and up with `x[t, :]`; `act` SwiGLU
//!   (`silu(g) = g/(1 + e^−g)`) or GeGLU (`0.5·g·(1 + tanh(0.79788456·(g + 0.044715·g³)))`).
//! * `moe_fc1_relu2`: `act_g[t, k, f] = max(g, 0)²` of the one projection (Nemotron-H); NaN
//!   where `g` is not finite.
//! * `moe_down`: `partial[t, k, h] = scores[t, k]·d` in f32, `d` the dot product of row `h` of
//!   the expert's down with `act_g[t, k, :]` — never rounded to 16 bits before the K-sum
//!   (§7.4: per-expert partials that nearly cancel lose everything at bf16).
//! * `moe_combine`: `out[t, h] = rnd_T(Σ_k partial[t, k, h])`, summed in f32 in slot order and
//!   rounded once (§7.6).
//!
//! An expert id ≥ E reads nothing and gives zeros (`ops::moe_experts` refuses such ids before
//! any launch; ids made on the device by a router are below E by construction).
//!
//! Geometry: grid `(⌈R / rows_per_block⌉, K, T)`; a block owns `rows_per_block` rows of one
//! slot and its waves take them in turns, each row reduced by one wave: its lanes stride over
//! the row in units of 32 codes (`bits` whole words at any width), the dot products summed as
//! `qlinear` sums them (centred code floats, the scale and bias folded in once per span), then
//! one wave sum. A row's result depends on the wave size only: rows per block and block size
//! never change a bit. The per-unit sums (`unit_x`, `unit_scales`, `unit_dot`) and the stacked
//! weights' checks also serve `gather_qmm`.

use super::affine_codes::packed_scale;
use super::fused_silu_mul::silu;
use super::qlinear::{check_format, code_float, load_words, scale_words, x_chunk, UNIT, X_CHUNK};
use crate::kernel::shape;
use crate::{Block, Dst, Element, Launch, ShapeError, Src};

/// `act` of `moe_gateup`: SwiGLU.
pub const ACT_SWIGLU: u32 = 0;
/// `act` of `moe_gateup`: GeGLU with the tanh form of spec §7.1.
pub const ACT_GEGLU: u32 = 1;
/// The activation `moe_fc1_relu2` applies (not a value of these kernels' `act` param; `moe_act`
/// takes it).
pub const ACT_RELU2: u32 = 2;

/// Most rows one block owns (the seeds' `sgy` range).
pub const MAX_ROWS_PER_BLOCK: u32 = 32;

/// Threads per row a block is sized for: one wave of a 32-wide GPU per row; wider waves take
/// several rows in turn, narrower ones split the block otherwise.
pub(crate) const THREADS_PER_ROW: u32 = 32;

crate::params! {
    /// Params of the MoE expert kernels.
    pub struct MoeParams {
        /// Tokens: rows of `x`, of `indices` and of the outputs.
        pub tokens: u32,
        /// Slots per token: the experts each token was routed to.
        pub k: u32,
        /// Experts stacked in the weights.
        pub experts: u32,
        /// Model width: columns of gate, up and fc1, rows of down.
        pub din: u32,
        /// Expert FFN width: rows of gate, up and fc1, columns of down.
        pub dff: u32,
        /// Elements per group, one scale and one bias each: 16, 32, 64 or 128.
        pub group_size: u32 = 64,
        /// The dtype of the scales and biases: 0 f32, 1 f16, 2 bf16 (`qlinear::scale_code`).
        pub scale_dtype: u32 = 1,
        /// `moe_gateup` only: 0 SwiGLU, 1 GeGLU (0 for the other kernels).
        pub act: u32 = 0,
        /// Rows of one slot a block owns, 1..=32; never changes a result.
        pub rows_per_block: u32 = 8,
        /// `log2(group_size)`, set by `bind`.
        pub group_log2: u32,
    }
}

/// The checks every expert kernel makes of its format and rows per block.
pub(crate) fn bind_format(p: &mut MoeParams) -> Result<(), ShapeError> {
    check_format(p.group_size, p.scale_dtype)?;
    if p.rows_per_block == 0 || p.rows_per_block > MAX_ROWS_PER_BLOCK {
        return Err(ShapeError::Range {
            what: "rows_per_block",
            got: p.rows_per_block as f64,
            lo: 1.0,
            hi: MAX_ROWS_PER_BLOCK as f64,
        });
    }
    p.group_log2 = p.group_size.trailing_zeros();
    Ok(())
}

/// `[T, K]` of `indices`, bound into `p.tokens` and `p.k`.
pub(crate) fn bind_slots(p: &mut MoeParams, indices: &[usize]) -> Result<(), ShapeError> {
    let &[t, k] = indices else {
        return Err(ShapeError::Invalid(
            "indices must be two-dimensional: [T, K]",
        ));
    };
    shape::nonzero("T (the tokens: rows of indices)", t)?;
    shape::nonzero("K (the slots: columns of indices)", k)?;
    p.tokens = shape::to_u32("T", t)?;
    p.k = shape::to_u32("K", k)?;
    Ok(())
}

/// A stacked projection `w_q [E, R, C·bits/32]` with its scales and biases (of `group_size`
/// and the `scale_dtype` code); returns `(E, R)` once `C` (from `cols`, the reduced axis)
/// checks against the format. Shared with `gather_qmm`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bind_weights(
    group_size: u32,
    scale_dtype: u32,
    what: &'static str,
    w_q: &[usize],
    scales: &[usize],
    biases: &[usize],
    cols: usize,
    bits: u32,
) -> Result<(usize, usize), ShapeError> {
    let &[e, r, words] = w_q else {
        return Err(ShapeError::Invalid(what));
    };
    shape::nonzero("E (the experts: first axis of the weights)", e)?;
    shape::nonzero("rows of a projection", r)?;
    if !cols.is_multiple_of(UNIT) {
        return Err(ShapeError::Invalid(
            "a projection's columns must be a multiple of 32: the kernels read 32 codes at a time",
        ));
    }
    if !cols.is_multiple_of(group_size as usize) {
        return Err(ShapeError::Invalid(
            "a projection's columns must be a multiple of group_size",
        ));
    }
    shape::eq(
        "words per row of a projection against its columns·bits/32",
        words,
        cols / UNIT * bits as usize,
    )?;
    let groups = e
        .saturating_mul(r)
        .saturating_mul(cols / group_size as usize);
    let want = scale_words(scale_dtype, groups);
    shape::eq(
        "words of scales (E·R·C/group_size values packed)",
        shape::numel(scales),
        want,
    )?;
    shape::eq(
        "words of biases (E·R·C/group_size values packed)",
        shape::numel(biases),
        want,
    )?;
    // Every element index must fit the u32 a WGSL index holds.
    shape::to_u32(
        "words of a projection",
        e.saturating_mul(r).saturating_mul(words),
    )?;
    Ok((e, r))
}

/// `[T, K, n]` of an f32 per-slot buffer.
pub(crate) fn bind_per_slot(
    p: &MoeParams,
    what: &'static str,
    s: &[usize],
    n: usize,
) -> Result<(), ShapeError> {
    if s != [p.tokens as usize, p.k as usize, n] {
        return Err(ShapeError::Invalid(what));
    }
    shape::to_u32("elements of a per-slot buffer", shape::numel(s))?;
    Ok(())
}

/// The shape checks of `moe_gateup_<b>bit` (`gated`) and `moe_fc1_relu2_<b>bit`: buffers
/// `x [T, Din]`, `indices [T, K]`, one or two projections (`w_q`, `scales`, `biases`) of
/// `[E, Dff, Din·bits/32]`, `act_g [T, K, Dff]`.
pub fn bind_up(
    p: &mut MoeParams,
    shapes: &[&[usize]],
    bits: u32,
    gated: bool,
) -> Result<(), ShapeError> {
    let want = if gated { 9 } else { 6 };
    if shapes.len() != want {
        return Err(ShapeError::BufferCount {
            got: shapes.len(),
            want,
        });
    }
    bind_format(p)?;
    let limit = if gated { ACT_GEGLU } else { 0 };
    if p.act > limit {
        return Err(ShapeError::Range {
            what: if gated {
                "act (0 SwiGLU, 1 GeGLU)"
            } else {
                "act (moe_fc1_relu2 applies relu²; leave act 0)"
            },
            got: p.act as f64,
            lo: 0.0,
            hi: limit as f64,
        });
    }
    let &[t, din] = shapes[0] else {
        return Err(ShapeError::Invalid("x must be two-dimensional: [T, Din]"));
    };
    shape::nonzero("Din (the columns of x)", din)?;
    bind_slots(p, shapes[1])?;
    shape::eq(
        "rows of x against T (the rows of indices)",
        t,
        p.tokens as usize,
    )?;
    let layout = "the gate, up and fc1 weights must be three-dimensional: [E, Dff, Din·bits/32]";
    let (gs, sd) = (p.group_size, p.scale_dtype);
    let (e, dff) = bind_weights(gs, sd, layout, shapes[2], shapes[3], shapes[4], din, bits)?;
    if gated {
        let (e_up, dff_up) =
            bind_weights(gs, sd, layout, shapes[5], shapes[6], shapes[7], din, bits)?;
        shape::eq("experts of up against gate", e_up, e)?;
        shape::eq("rows of up against gate (Dff)", dff_up, dff)?;
    }
    p.experts = shape::to_u32("E", e)?;
    p.din = shape::to_u32("Din", din)?;
    p.dff = shape::to_u32("Dff", dff)?;
    bind_per_slot(p, "act_g must be [T, K, Dff]", shapes[want - 1], dff)?;
    shape::to_u32("elements of x", t.saturating_mul(din)).map(|_| ())
}

/// The shape checks of `moe_down_<b>bit`: buffers `indices [T, K]`, the projection
/// `[E, Din, Dff·bits/32]` with its scales and biases, `act_g [T, K, Dff]` and `scores [T, K]`
/// in f32, `partial [T, K, Din]` f32.
pub fn bind_down(p: &mut MoeParams, shapes: &[&[usize]], bits: u32) -> Result<(), ShapeError> {
    let [indices, w_q, scales, biases, act_g, scores, partial] = shapes else {
        return Err(ShapeError::BufferCount {
            got: shapes.len(),
            want: 7,
        });
    };
    bind_format(p)?;
    if p.act != 0 {
        return Err(ShapeError::Range {
            what: "act (moe_down applies none; leave act 0)",
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
    p.experts = shape::to_u32("E", e)?;
    p.din = shape::to_u32("Din", din)?;
    p.dff = shape::to_u32("Dff", dff)?;
    bind_per_slot(p, "act_g must be [T, K, Dff]", act_g, dff)?;
    if *scores != [p.tokens as usize, p.k as usize] {
        return Err(ShapeError::Invalid("scores must be [T, K], like indices"));
    }
    bind_per_slot(p, "partial must be [T, K, Din]", partial, din)
}

/// The launch of every expert kernel over `rows` rows per slot (Dff for the up projections,
/// Din for down).
pub fn launch(p: &MoeParams, rows: u32) -> Launch {
    Launch {
        grid: [rows.div_ceil(p.rows_per_block), p.k, p.tokens],
        block: p.rows_per_block * THREADS_PER_ROW,
    }
}

/// The body of `moe_gateup_<b>bit` (`gated`, act from `p.act`) and `moe_fc1_relu2_<b>bit`
/// (one projection, relu²; the `up_*` views are the fc1 ones again and never read).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn moe_up<T: Element, B: Block, const BITS: usize>(
    b: &B,
    p: &MoeParams,
    x: Src<T>,
    indices: Src<u32>,
    gate_q: Src<u32>,
    gate_scales: Src<u32>,
    gate_biases: Src<u32>,
    up_q: Src<u32>,
    up_scales: Src<u32>,
    up_biases: Src<u32>,
    act_g: Dst<f32>,
    gated: bool,
    bits: [u32; BITS],
) {
    let slot = b.block_z() as usize * p.k as usize + b.block_y() as usize;
    let x_at = b.block_z() as usize * p.din as usize;
    let act = if gated { p.act } else { ACT_RELU2 };
    let wide = BITS.is_multiple_of(4)
        && gate_q.chunk_aligned::<4>(0)
        && up_q.chunk_aligned::<4>(0)
        && x.chunk_aligned::<X_CHUNK>(x_at);
    let (expert, known) = expert_of(p, indices, slot);
    let dff = p.dff as usize;
    let first = b.block_x() as usize * p.rows_per_block as usize;
    let here = (p.rows_per_block as usize).min(dff - first);
    let mut r = b.wave_id() as usize;
    while r < here {
        let f = first + r;
        let row = expert * dff + f;
        let mut sums = (0.0f32, 0.0f32);
        if known {
            sums = if wide {
                lane_sums(
                    b,
                    p,
                    x,
                    x_at,
                    p.din,
                    gate_q,
                    gate_scales,
                    gate_biases,
                    up_q,
                    up_scales,
                    up_biases,
                    row,
                    gated,
                    bits,
                    true,
                )
            } else {
                lane_sums(
                    b,
                    p,
                    x,
                    x_at,
                    p.din,
                    gate_q,
                    gate_scales,
                    gate_biases,
                    up_q,
                    up_scales,
                    up_biases,
                    row,
                    gated,
                    bits,
                    false,
                )
            };
        }
        let g = b.wave_sum(sums.0);
        let u = if gated { b.wave_sum(sums.1) } else { 0.0 };
        if b.lane() == 0 {
            act_g.set(slot * dff + f, activation(act, g, u));
        }
        r += b.waves() as usize;
    }
}

/// The body of `moe_down_<b>bit` (`T` is f32: `act_g`, `scores` and `partial`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn moe_down<T: Element, B: Block, const BITS: usize>(
    b: &B,
    p: &MoeParams,
    indices: Src<u32>,
    down_q: Src<u32>,
    down_scales: Src<u32>,
    down_biases: Src<u32>,
    act_g: Src<T>,
    scores: Src<T>,
    partial: Dst<T>,
    bits: [u32; BITS],
) {
    let slot = b.block_z() as usize * p.k as usize + b.block_y() as usize;
    let dff = p.dff as usize;
    let x_at = slot * dff;
    let wide = BITS.is_multiple_of(4)
        && down_q.chunk_aligned::<4>(0)
        && act_g.chunk_aligned::<X_CHUNK>(x_at);
    let (expert, known) = expert_of(p, indices, slot);
    let din = p.din as usize;
    let first = b.block_x() as usize * p.rows_per_block as usize;
    let here = (p.rows_per_block as usize).min(din - first);
    let mut r = b.wave_id() as usize;
    while r < here {
        let h = first + r;
        let row = expert * din + h;
        let mut sums = (0.0f32, 0.0f32);
        if known {
            sums = if wide {
                lane_sums(
                    b,
                    p,
                    act_g,
                    x_at,
                    p.dff,
                    down_q,
                    down_scales,
                    down_biases,
                    down_q,
                    down_scales,
                    down_biases,
                    row,
                    false,
                    bits,
                    true,
                )
            } else {
                lane_sums(
                    b,
                    p,
                    act_g,
                    x_at,
                    p.dff,
                    down_q,
                    down_scales,
                    down_biases,
                    down_q,
                    down_scales,
                    down_biases,
                    row,
                    false,
                    bits,
                    false,
                )
            };
        }
        let d = b.wave_sum(sums.0);
        if b.lane() == 0 {
            let s = if known { scores.get(slot).widen() } else { 0.0 };
            partial.set(slot * din + h, T::from_f32(s * d));
        }
        r += b.waves() as usize;
    }
}

/// The expert of `slot` and whether it is in range (an unknown one reads expert 0's offsets,
/// and nothing).
#[inline(always)]
pub(crate) fn expert_of(p: &MoeParams, indices: Src<u32>, slot: usize) -> (usize, bool) {
    let e = indices.get(slot) as usize;
    let known = e < p.experts as usize;
    (if known { e } else { 0 }, known)
}

/// `act` of the two dot products of a row (`u` unused by relu²). Shared with `moe_act`.
#[allow(clippy::excessive_precision)] // spec §7.1's constant as written
#[inline(always)]
pub(crate) fn activation(act: u32, g: f32, u: f32) -> f32 {
    if act == ACT_RELU2 {
        // A non-finite `g` gives NaN: whether a sum meets an infinity as ±inf or NaN depends
        // on its order, so relu² of −inf (0) is not an answer every order gives.
        let r = if g > 0.0 { g } else { 0.0 };
        // Non-finite on the bits, which no compiler folds away.
        if (g.to_bits() & 0x7fff_ffff) < 0x7f80_0000 {
            r * r
        } else {
            f32::from_bits(0x7fc0_0000)
        }
    } else if act == ACT_GEGLU {
        let inner = 0.797_884_56 * (g + 0.044_715 * g * g * g);
        0.5 * g * (1.0 + libm::tanhf(inner)) * u
    } else {
        silu(g) * u
    }
}

/// One lane's share of the dot products of row `row` of projection one (and of projection two
/// when `two`) with the `cols` elements of `x` from `x_at`: units `lane, lane + wave, …`, in
/// that order; `wide` is a constant in each caller's copy. At 4 bits and below two units'
/// words are asked for before either is used, so a lane has both in flight (a decode row is
/// one or two units a lane: one DRAM round trip instead of two).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn lane_sums<T: Element, B: Block, const BITS: usize>(
    b: &B,
    p: &MoeParams,
    x: Src<T>,
    x_at: usize,
    cols: u32,
    one_q: Src<u32>,
    one_scales: Src<u32>,
    one_biases: Src<u32>,
    two_q: Src<u32>,
    two_scales: Src<u32>,
    two_biases: Src<u32>,
    row: usize,
    two: bool,
    bits: [u32; BITS],
    wide: bool,
) -> (f32, f32) {
    let units = cols as usize / UNIT;
    let words_at = row * units * BITS;
    let groups_at = row * (cols as usize >> p.group_log2);
    let wave = B::WAVE as usize;
    // Wider codes already bring twice the bytes a unit (and the registers to hold them).
    let ahead = BITS <= 4;
    let step = if ahead { 2 * wave } else { wave };
    let mut acc = (0.0f32, 0.0f32);
    let mut u = b.lane() as usize;
    while u < units {
        let later = u + wave;
        let has_later = ahead && later < units;
        let first_one = load_words(one_q, words_at + u * BITS, wide, bits);
        let mut first_two = bits;
        let mut later_one = bits;
        let mut later_two = bits;
        if two {
            first_two = load_words(two_q, words_at + u * BITS, wide, bits);
        }
        if has_later {
            later_one = load_words(one_q, words_at + later * BITS, wide, bits);
            if two {
                later_two = load_words(two_q, words_at + later * BITS, wide, bits);
            }
        }
        acc = unit_pair(
            p, x, x_at, u, wide, first_one, one_scales, one_biases, first_two, two_scales,
            two_biases, groups_at, two, acc,
        );
        if has_later {
            acc = unit_pair(
                p, x, x_at, later, wide, later_one, one_scales, one_biases, later_two, two_scales,
                two_biases, groups_at, two, acc,
            );
        }
        u += step;
    }
    acc
}

/// `acc` plus unit `u` of projection one (words `one`) and of projection two (`other`, when
/// `two`) against the same 32 elements of `x`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn unit_pair<T: Element, const BITS: usize>(
    p: &MoeParams,
    x: Src<T>,
    x_at: usize,
    u: usize,
    wide: bool,
    one: [u32; BITS],
    one_scales: Src<u32>,
    one_biases: Src<u32>,
    other: [u32; BITS],
    other_scales: Src<u32>,
    other_biases: Src<u32>,
    groups_at: usize,
    two: bool,
    acc: (f32, f32),
) -> (f32, f32) {
    let col = u * UNIT;
    let split = p.group_size as usize == UNIT / 2;
    let levels = (1u32 << BITS as u32) as f32;
    let (log2, dtype) = (p.group_log2, p.scale_dtype);
    let xs = unit_x(x, x_at + col, wide);
    let spans = unit_scales(
        split, log2, dtype, levels, one_scales, one_biases, groups_at, col,
    );
    let first = unit_dot(one, xs, spans, split, acc.0);
    let second = if two {
        let spans = unit_scales(
            split,
            log2,
            dtype,
            levels,
            other_scales,
            other_biases,
            groups_at,
            col,
        );
        unit_dot(other, xs, spans, split, acc.1)
    } else {
        acc.1
    };
    (first, second)
}

/// The 32 elements of `x` of a unit, widened, as four chunks of [`X_CHUNK`].
#[inline(always)]
pub(crate) fn unit_x<T: Element>(x: Src<T>, at: usize, wide: bool) -> [[f32; X_CHUNK]; 4] {
    let mut xs = [[0.0f32; X_CHUNK]; 4];
    let mut c = 0;
    while c < 4 {
        let xc = x_chunk(x, at + c * X_CHUNK, wide);
        let mut j = 0;
        while j < X_CHUNK {
            xs[c][j] = xc[j].widen();
            j += 1;
        }
        c += 1;
    }
    xs
}

/// The scale spans of one unit of a row (one span, or two halves for groups of 16 when
/// `split`): each span's `s·levels` and its centre weight `b + s·levels/2`, `levels = 2^bits`.
/// Read once per unit and row, whatever number of `x` rows the unit then meets.
#[derive(Clone, Copy)]
pub(crate) struct UnitScales {
    /// The first span's `s·levels`.
    first_scale: f32,
    /// The first span's centre weight.
    first_mid: f32,
    /// The second half's `s·levels` (groups of 16 only).
    second_scale: f32,
    /// The second half's centre weight (groups of 16 only).
    second_mid: f32,
}

/// The [`UnitScales`] of the unit at column `col` of the row whose first group is `groups_at`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) fn unit_scales(
    split: bool,
    group_log2: u32,
    scale_dtype: u32,
    levels: f32,
    scales: Src<u32>,
    biases: Src<u32>,
    groups_at: usize,
    col: usize,
) -> UnitScales {
    let group = groups_at + (col >> group_log2);
    let (first_scale, first_mid) = span_scale(scales, biases, scale_dtype, group, levels);
    let (second_scale, second_mid) = if split {
        span_scale(scales, biases, scale_dtype, group + 1, levels)
    } else {
        (0.0, 0.0)
    };
    UnitScales {
        first_scale,
        first_mid,
        second_scale,
        second_mid,
    }
}

/// The [`UnitScales`] of no unit: what a sweep holds before its first load (never applied).
#[inline(always)]
pub(crate) fn no_unit_scales() -> UnitScales {
    UnitScales {
        first_scale: 0.0,
        first_mid: 0.0,
        second_scale: 0.0,
        second_mid: 0.0,
    }
}

/// `(s·levels, b + s·levels/2)` of scale and bias `e`.
#[inline(always)]
fn span_scale(
    scales: Src<u32>,
    biases: Src<u32>,
    scale_dtype: u32,
    e: usize,
    levels: f32,
) -> (f32, f32) {
    let sc = packed_scale(scales, scale_dtype, e) * levels;
    // The weight at the centre code: `s·q + b = s·levels·(f − 1.5) + mid`.
    (
        sc,
        crate::mul_add(sc, 0.5, packed_scale(biases, scale_dtype, e)),
    )
}

/// `acc` plus one unit's `Σ(s·q + b)·x` of a row: per chunk the centred code floats
/// `f − 1.5` (`f = 1 + q·2^-BITS`) meet `x` in one FMA each, and per scale span (16 codes when
/// `split`, else the unit) the sums fold in as `s·2^BITS·Σ(f − 1.5)·x + (b +
/// s·2^(BITS−1))·Σx` (the `qlinear` form).
#[inline(always)]
pub(crate) fn unit_dot<const BITS: usize>(
    w: [u32; BITS],
    xs: [[f32; X_CHUNK]; 4],
    spans: UnitScales,
    split: bool,
    acc: f32,
) -> f32 {
    // The chunks are four calls, not a loop: each chunk's word indices stay constants.
    let (d0, s0) = chunk_dot(w, xs[0], 0);
    let (d1, s1) = chunk_dot(w, xs[1], X_CHUNK);
    let (d2, s2) = chunk_dot(w, xs[2], 2 * X_CHUNK);
    let (d3, s3) = chunk_dot(w, xs[3], 3 * X_CHUNK);
    if split {
        let acc = fold(spans.first_scale, spans.first_mid, d0 + d1, s0 + s1, acc);
        fold(spans.second_scale, spans.second_mid, d2 + d3, s2 + s3, acc)
    } else {
        let dot = (d0 + d1) + (d2 + d3);
        fold(
            spans.first_scale,
            spans.first_mid,
            dot,
            (s0 + s1) + (s2 + s3),
            acc,
        )
    }
}

/// `(Σ(f − 1.5)·x, Σx)` over the chunk of [`X_CHUNK`] codes at `first` of a unit.
#[inline(always)]
fn chunk_dot<const BITS: usize>(w: [u32; BITS], x: [f32; X_CHUNK], first: usize) -> (f32, f32) {
    let mut dot = 0.0f32;
    let mut sum = 0.0f32;
    let mut j = 0;
    while j < X_CHUNK {
        let centred = code_float(w, first + j) - 1.5;
        dot = crate::mul_add(centred, x[j], dot);
        sum += x[j];
        j += 1;
    }
    (dot, sum)
}

/// `acc + sc·dot + mid·sum`: a span's sums with its `s·levels` and centre weight folded in.
#[inline(always)]
fn fold(sc: f32, mid: f32, dot: f32, sum: f32, acc: f32) -> f32 {
    let with_mid = crate::mul_add(mid, sum, acc);
    crate::mul_add(sc, dot, with_mid)
}
