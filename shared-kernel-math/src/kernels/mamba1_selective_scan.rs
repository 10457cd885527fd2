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
//! Geometry: a block takes [`BLOCK_CHANNELS`] channels of one batch row, a thread one channel
//! (a block with fewer threads strides), with its state and its row of `A` in registers: one
//! instance per padded state width of [`STATE_WIDTHS`], so no register array is sized at run
//! time. Neighbouring threads read neighbouring channels of `x`, `dt` and `y`; every thread of
//! a block reads the same `B_t` and `C_t`.

use crate::kernel::shape;
use crate::{exp2_approx, mul_add, Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Channels per block.
pub const BLOCK_CHANNELS: u32 = 64;

/// The padded state widths of the register instances; `N` takes the narrowest that holds it.
pub const STATE_WIDTHS: [usize; 3] = [8, 16, 32];

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
            block: BLOCK_CHANNELS,
        }
    }
}

/// The body: the register instance of the narrowest width in [`STATE_WIDTHS`] that holds `N`.
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
    let n = p.state_dim as usize;
    if n <= 8 {
        channels(b, p, [0u32; 8], x, dt, b_in, c_in, a, d, state_in, y, state_out);
    } else if n <= 16 {
        channels(b, p, [0u32; 16], x, dt, b_in, c_in, a, d, state_in, y, state_out);
    } else {
        channels(b, p, [0u32; 32], x, dt, b_in, c_in, a, d, state_in, y, state_out);
    }
}

/// Block `(i, row)`'s channels `i·BLOCK_CHANNELS + k`, thread `t` taking `k = t, t + size, …`;
/// `W` (the length of `width`: the WGSL translator binds const generics from array lengths)
/// is the padded state width, columns `N..W` held at zero and never read or stored.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn channels<T: Element, B: Block, const W: usize>(
    b: &B,
    p: &Mamba1ScanParams,
    width: [u32; W],
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
    let dm = p.channels as usize;
    let row = b.block_y() as usize;
    let start = b.block_x() as usize * BLOCK_CHANNELS as usize;
    let end = (start + BLOCK_CHANNELS as usize).min(dm);
    let mut ch = start + b.thread() as usize;
    while ch < end {
        scan_channel(p, width, row, ch, x, dt, b_in, c_in, a, d, state_in, y, state_out);
        ch += b.size() as usize;
    }
}

/// One channel's scan over the whole sequence. `A` is held as `A·log2 e`, so each decay is one
/// `2^x` (the rounding of that product moves the exponent by an ulp of it, far inside §12's
/// `1e-5`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn scan_channel<T: Element, const W: usize>(
    p: &Mamba1ScanParams,
    _width: [u32; W],
    row: usize,
    ch: usize,
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
    let (len, dm, n) = (p.len as usize, p.channels as usize, p.state_dim as usize);
    let state_at = (row * dm + ch) * n;
    let mut s = [0.0f32; W];
    let mut a2 = [0.0f32; W];
    let mut j = 0;
    while j < W {
        if j < n {
            a2[j] = a.get(ch * n + j) * core::f32::consts::LOG2_E;
            if p.fresh == 0 {
                s[j] = state_in.get(state_at + j);
            }
        }
        j += 1;
    }
    let skip = d.get(ch).widen();
    let mut t = 0;
    while t < len {
        let at = (row * len + t) * dm + ch;
        let bc = (row * len + t) * n;
        let xt = x.get(at).widen();
        let step = dt.get(at).widen();
        let input = step * xt;
        let mut acc = 0.0f32;
        let mut j = 0;
        while j < W {
            if j < n {
                let decay = exp2_approx(step * a2[j]);
                s[j] = mul_add(decay, s[j], input * b_in.get(bc + j).widen());
                acc = mul_add(s[j], c_in.get(bc + j).widen(), acc);
            }
            j += 1;
        }
        y.set(at, T::from_f32(mul_add(skip, xt, acc)));
        t += 1;
    }
    let mut j = 0;
    while j < W {
        if j < n {
            state_out.set(state_at + j, s[j]);
        }
        j += 1;
    }
}
