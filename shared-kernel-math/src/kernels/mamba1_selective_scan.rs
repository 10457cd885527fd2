//! Mamba1's selective scan over a whole sequence (spec §12), the float-state variant: per batch
//! row `b` and channel `d`, for `t = 0..L`,
//! `s[n] = exp(dt_t·A[d, n])·s[n] + (dt_t·x_t)·B_t[n]` and
//! `y_t = rnd_T(Σ_n s[n]·C_t[n] + D[d]·x_t)`, the state and every operation in f32 across the
//! whole sequence, then the final state stored.
//!
//! Buffers: `x` and `dt` (already softplus'd) `[Bt, L, Dm]`, `b` and `c` `[Bt, L, N]`, `d [Dm]`
//! and `y [Bt, L, Dm]` in `T`; `a [Dm, N]` (already `−exp(A_log)`), `state_in` and `state_out`
//! `[Bt, Dm, N]` in f32; `N ≤ 32`. No z-gate (the caller multiplies by `silu(z)`).
//!
//! Geometry: a block takes [`BLOCK_CHANNELS`] channels of one batch row. A channel's state
//! columns, `N` padded to a power of two, are split over a group of `G = min(padded N, wave)`
//! lanes, lane `l` owning columns `l, l + G, …` in registers (one const-generic instance per
//! columns-per-lane count, 1, 2, 4, …, 32, so no array is sized at run time), and the
//! group folds `Σ_n` with butterfly shuffles inside it. A 32-wide GPU runs Mamba's `N = 16` as
//! two channels per wave, one column per lane: many waves, each step's loads coalesced.

use crate::kernel::shape;
use crate::{exp2_approx, mul_add, Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Channels per block: one per lane group of a 256-thread block at `N = 16` on a 32-wide wave.
pub const BLOCK_CHANNELS: u32 = 16;

/// Threads per block.
pub const BLOCK_THREADS: u32 = 256;

/// The widest state (`N`) a scan accepts: one register instance holds it.
pub const MAX_STATE_DIM: usize = 32;

crate::params! {
    /// Params of `mamba1_selective_scan`.
    pub struct Mamba1ScanParams {
        /// 1: the scan starts from a zero state and `state_in` (one element or more) is not
        /// read; 0: it starts from `state_in`.
        pub fresh: u32 = 0,
        /// Batch rows (`Bt`), set by `bind`.
        pub batch: u32,
        /// Sequence length (`L`), set by `bind`.
        pub len: u32,
        /// Channels (`Dm`), set by `bind`.
        pub channels: u32,
        /// State columns per channel (`N`), set by `bind`.
        pub state_dim: u32,
    }
}

/// Descriptor of `mamba1_selective_scan`.
pub struct Mamba1SelectiveScan;

impl KernelDef for Mamba1SelectiveScan {
    type Params = Mamba1ScanParams;
    const NAME: &'static str = "mamba1_selective_scan";

    /// Buffers: `x [Bt, L, Dm]`, `dt` (its shape), `b` and `c` `[Bt, L, N]`, `a [Dm, N]`,
    /// `d [Dm]`, `state_in [Bt, Dm, N]` (any non-empty shape when `fresh`), `y` (the shape of
    /// `x`), `state_out [Bt, Dm, N]`.
    fn bind(p: &mut Mamba1ScanParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [x, dt, b, c, a, d, state_in, y, state_out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 9,
            });
        };
        let &[batch, len, channels] = *x else {
            return Err(ShapeError::Invalid("x must be three-dimensional: [Bt, L, Dm]"));
        };
        shape::nonzero("Bt (the batch of x)", batch)?;
        shape::nonzero("L (the sequence length of x)", len)?;
        shape::nonzero("Dm (the channels of x)", channels)?;
        if dt != x {
            return Err(ShapeError::Invalid("dt must have the shape of x"));
        }
        if y != x {
            return Err(ShapeError::Invalid("y must have the shape of x"));
        }
        let &[bb, bl, state_dim] = *b else {
            return Err(ShapeError::Invalid("b must be three-dimensional: [Bt, L, N]"));
        };
        shape::eq("batch of b against Bt", bb, batch)?;
        shape::eq("length of b against L", bl, len)?;
        if !(1..=MAX_STATE_DIM).contains(&state_dim) {
            return Err(ShapeError::Range {
                what: "N (the state columns, the last axis of b)",
                got: state_dim as f64,
                lo: 1.0,
                hi: MAX_STATE_DIM as f64,
            });
        }
        if c != b {
            return Err(ShapeError::Invalid("c must have the shape of b"));
        }
        if *a != [channels, state_dim] {
            return Err(ShapeError::Invalid("a must be [Dm, N]"));
        }
        shape::eq("elements of d against Dm", shape::numel(d), channels)?;
        if *state_out != [batch, channels, state_dim] {
            return Err(ShapeError::Invalid("state_out must be [Bt, Dm, N]"));
        }
        match p.fresh {
            0 => {
                if state_in != state_out {
                    return Err(ShapeError::Invalid(
                        "state_in must be [Bt, Dm, N] (or pass fresh = 1)",
                    ));
                }
            }
            1 => shape::nonzero(
                "elements of state_in (unread when fresh)",
                shape::numel(state_in),
            )?,
            v => {
                return Err(ShapeError::Range {
                    what: "fresh",
                    got: v as f64,
                    lo: 0.0,
                    hi: 1.0,
                })
            }
        }
        // Every element index of x (the largest buffer but for a state of N > L) fits a u32.
        shape::to_u32(
            "elements of x",
            batch
                .checked_mul(len)
                .and_then(|r| r.checked_mul(channels))
                .unwrap_or(usize::MAX),
        )?;
        shape::to_u32("elements of state_out", shape::numel(state_out))?;
        p.batch = shape::to_u32("Bt", batch)?;
        p.len = len as u32;
        p.channels = channels as u32;
        p.state_dim = state_dim as u32;
        Ok(())
    }

    fn launch(p: &Mamba1ScanParams) -> Launch {
        Launch {
            grid: [p.channels.div_ceil(BLOCK_CHANNELS), p.batch, 1],
            block: BLOCK_THREADS,
        }
    }
}

/// The body: the register instance holding `padded N / G` columns per lane.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn mamba1_selective_scan<T: Element, B: Block>(
    b: &B,
    p: &Mamba1ScanParams,
    x: Src<T>,
    dt: Src<T>,
    b_in: Src<T>,
    c_in: Src<T>,
    a: Src<f32>,
    d: Src<T>,
    state_in: Src<f32>,
    y: Dst<T>,
    state_out: Dst<f32>,
) {
    let padded = padded_width(p.state_dim);
    let columns = padded / padded.min(B::WAVE);
    // A wave as wide as the widest state always takes one column per lane: the test is a
    // constant there, so a GPU compiles only that instance (gfx942 spilled the 32-column one).
    if B::WAVE >= MAX_STATE_DIM as u32 || columns == 1 {
        groups(b, p, [0u32; 1], x, dt, b_in, c_in, a, d, state_in, y, state_out);
    } else if columns == 2 {
        groups(b, p, [0u32; 2], x, dt, b_in, c_in, a, d, state_in, y, state_out);
    } else if columns == 4 {
        groups(b, p, [0u32; 4], x, dt, b_in, c_in, a, d, state_in, y, state_out);
    } else if columns == 8 {
        groups(b, p, [0u32; 8], x, dt, b_in, c_in, a, d, state_in, y, state_out);
    } else if columns == 16 {
        groups(b, p, [0u32; 16], x, dt, b_in, c_in, a, d, state_in, y, state_out);
    } else {
        groups(b, p, [0u32; 32], x, dt, b_in, c_in, a, d, state_in, y, state_out);
    }
}

/// `n` rounded up to a power of two.
#[inline(always)]
fn padded_width(n: u32) -> u32 {
    let mut w = 1;
    while w < n {
        w *= 2;
    }
    w
}

/// One lane group's view of its channel: where it is and what the lane owns.
#[derive(Clone, Copy)]
struct Lanes {
    /// Lanes per channel (`G`, a power of two dividing the wave).
    group: u32,
    /// This lane's index in its group.
    lane: u32,
    /// The batch row.
    row: u32,
    /// The channel (clamped into the block's range).
    channel: u32,
    /// Whether the channel is the group's own (not a clamped stand-in): only then it stores.
    owns: bool,
}

/// Block `(i, row)`'s channels `i·BLOCK_CHANNELS + k`, lane group `g` of the block taking
/// `k = g, g + groups, …`. Every group of a wave runs the same rounds (a group past the block's
/// channels scans its last one again without storing), so every lane reaches each shuffle.
/// `C` (the length of `columns`: the WGSL translator binds const generics from array lengths)
/// is the columns per lane.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn groups<T: Element, B: Block, const C: usize>(
    b: &B,
    p: &Mamba1ScanParams,
    columns: [u32; C],
    x: Src<T>,
    dt: Src<T>,
    b_in: Src<T>,
    c_in: Src<T>,
    a: Src<f32>,
    d: Src<T>,
    state_in: Src<f32>,
    y: Dst<T>,
    state_out: Dst<f32>,
) {
    let group = padded_width(p.state_dim).min(B::WAVE);
    let per_block = b.size() / group;
    let start = b.block_x() * BLOCK_CHANNELS;
    let end = (start + BLOCK_CHANNELS).min(p.channels);
    let rounds = (BLOCK_CHANNELS - 1) / per_block + 1;
    let mut k = b.thread() / group;
    let mut round = 0;
    while round < rounds {
        let channel = start + k;
        let lanes = Lanes {
            group,
            lane: b.thread() % group,
            row: b.block_y(),
            channel: channel.min(end - 1),
            owns: channel < end,
        };
        scan(b, p, columns, lanes, x, dt, b_in, c_in, a, d, state_in, y, state_out);
        k += per_block;
        round += 1;
    }
}

/// `Σ` over the lanes of one group (butterflies with masks below `G`); every lane of the group
/// gets the same bits.
#[inline(always)]
fn group_sum<B: Block>(b: &B, v: f32, group: u32) -> f32 {
    let mut v = v;
    let mut m = group / 2;
    while m > 0 {
        v += f32::from_bits(b.shuffle_xor(v.to_bits(), m));
        m /= 2;
    }
    v
}

/// One channel's scan over the whole sequence, the lane's columns `lane + G·i` in registers.
/// `A` is held as `A·log2 e`, so each decay is one `2^x` (the rounding of that product moves
/// the exponent by an ulp of it, far inside §12's `1e-5`). Indices are u32 (`bind` checked).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn scan<T: Element, B: Block, const C: usize>(
    b: &B,
    p: &Mamba1ScanParams,
    _columns: [u32; C],
    l: Lanes,
    x: Src<T>,
    dt: Src<T>,
    b_in: Src<T>,
    c_in: Src<T>,
    a: Src<f32>,
    d: Src<T>,
    state_in: Src<f32>,
    y: Dst<T>,
    state_out: Dst<f32>,
) {
    let (len, dm, n) = (p.len, p.channels, p.state_dim);
    let state_at = (l.row * dm + l.channel) * n;
    let mut s = [0.0f32; C];
    let mut a2 = [0.0f32; C];
    let mut i = 0;
    while i < C {
        let col = l.lane + l.group * i as u32;
        if col < n {
            a2[i] = a.get((l.channel * n + col) as usize) * core::f32::consts::LOG2_E;
            if p.fresh == 0 {
                s[i] = state_in.get((state_at + col) as usize);
            }
        }
        i += 1;
    }
    let skip = d.get(l.channel as usize).widen();
    let mut at = l.row * len * dm + l.channel;
    let mut bc = l.row * len * n;
    let mut t = 0;
    while t < len {
        let xt = x.get(at as usize).widen();
        let step = dt.get(at as usize).widen();
        let input = step * xt;
        let mut acc = 0.0f32;
        let mut i = 0;
        while i < C {
            let col = l.lane + l.group * i as u32;
            if col < n {
                let decay = exp2_approx(step * a2[i]);
                let at_col = (bc + col) as usize;
                s[i] = mul_add(decay, s[i], input * b_in.get(at_col).widen());
                acc = mul_add(s[i], c_in.get(at_col).widen(), acc);
            }
            i += 1;
        }
        let total = group_sum(b, acc, l.group);
        if l.owns && l.lane == 0 {
            y.set(at as usize, T::from_f32(mul_add(skip, xt, total)));
        }
        at += dm;
        bc += n;
        t += 1;
    }
    if l.owns {
        let mut i = 0;
        while i < C {
            let col = l.lane + l.group * i as u32;
            if col < n {
                state_out.set((state_at + col) as usize, s[i]);
            }
            i += 1;
        }
    }
}
