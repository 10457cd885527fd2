//! Mamba2's single-token state update (spec §8): per batch `b` and head `h` (`n = b·H + h`,
//! group `g = h / (H/G)`), with `dt' = clip(softplus(dt[n] + dt_bias[h]), t_min, t_max)` and
//! `dA = exp(−exp(A_log[h])·dt')`,
//! `state'[n, d, s] = dA·state[n, d, s] + (x[n, d]·dt')·B[b, g, s]` and
//! `out[n, d] = rnd_T(Σ_s state'[n, d, s]·C[b, g, s] + x[n, d]·D[h])`, all in f32.
//!
//! Buffers: `x [B, 1, H, Dh]`, `d [H]` and `out [B, 1, H, Dh]` in `T`; the f32 state
//! `state_in` and `state_out`, `[B, H, Dh, Ds]`; `a_log [H]`, `b` and `c` `[B, 1, G, Ds]`,
//! `dt [B, 1, H]` and `dt_bias [H]` in dtypes of their own (f32, f16 or bf16, each named by a
//! param: the dtypes a checkpoint and the layers before store them in), packed little-endian
//! into u32 words (16-bit values two per word, the last word zero-padded). A port is one body
//! per `T` that reads every input dtype by its code, so no port can read one dtype as another.
//!
//! Geometry: a block holds [`BLOCK_ROWS`] rows `(n, d)` of one `n`, its waves two rows at a
//! time; the lanes stride over a row's state in runs of [`RUN`] columns (16 bytes of f32 state),
//! so a wave streams its rows in whole contiguous lines, and fold their `Σ_s` with `wave_sum`.

use super::affine_codes::{packed_scale, SCALE_BF16, SCALE_F16, SCALE_F32};
use super::qlinear::scale_words;
use crate::kernel::shape;
use crate::{
    exp2_approx, ln_1p_unit, mul_add, Bf16, Block, Dst, Element, KernelDef, Launch, LaunchBound, ShapeError,
    Src, F16,
};

/// Rows `(n, d)` one block owns: its waves take them two at a time (two pairs per wave of a
/// 32-wide GPU, over which the head's prologue is shared).
pub const BLOCK_ROWS: u32 = 32;

/// Threads per block: eight waves of a 32-wide GPU; narrower or wider waves split it otherwise.
pub const BLOCK_THREADS: u32 = 256;

/// State columns a lane reads and writes at once (16 bytes of f32).
pub const RUN: usize = 4;

/// The state width must be a multiple of this (spec §8's refusal; also a whole number of runs).
pub const STATE_DIM_MULTIPLE: usize = 32;

crate::params! {
    /// Params of `ssm_update`.
    pub struct SsmUpdateParams {
        /// Groups of `B` and `C` (`G`, dividing `H`).
        pub groups: u32 = 1,
        /// Lower clip bound of `dt'`.
        pub time_step_min: f32 = 0.0,
        /// Upper clip bound of `dt'` (`inf`: none).
        pub time_step_max: f32 = f32::INFINITY,
        /// The dtype of `a_log`: 0 f32, 1 f16, 2 bf16 (`qlinear::scale_code`).
        pub a_log_dtype: u32 = 0,
        /// The dtype of `b`.
        pub b_dtype: u32 = 0,
        /// The dtype of `c`.
        pub c_dtype: u32 = 0,
        /// The dtype of `dt`.
        pub dt_dtype: u32 = 0,
        /// The dtype of `dt_bias`.
        pub dt_bias_dtype: u32 = 0,
        /// Batch (`B`), set by `bind`.
        pub batch: u32,
        /// Heads (`H`), set by `bind`.
        pub heads: u32,
        /// Rows per head (`Dh`), set by `bind`.
        pub head_dim: u32,
        /// State columns per row (`Ds`), set by `bind`.
        pub state_dim: u32,
    }
}

/// Descriptor of `ssm_update`.
pub struct SsmUpdate;

/// `count` values of dtype `code` packed in `words` u32 words, or the mismatch naming `what`.
fn packed_len(what: &'static str, words: &[usize], code: u32, count: usize) -> Result<(), ShapeError> {
    shape::eq(what, shape::numel(words), scale_words(code, count))
}

impl KernelDef for SsmUpdate {
    type Params = SsmUpdateParams;
    const NAME: &'static str = "ssm_update";

    /// Buffers: `x [B, 1, H, Dh]`, `a_log`, `b`, `c`, `d [H]`, `dt`, `dt_bias`,
    /// `state_in [B, H, Dh, Ds]`, `out` (the shape of `x`), `state_out` (that of `state_in`);
    /// the packed buffers of any shape holding exactly their values' words.
    fn bind(p: &mut SsmUpdateParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [x, a_log, b, c, d, dt, dt_bias, state_in, out, state_out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 10,
            });
        };
        let &[batch, tokens, heads, head_dim] = *x else {
            return Err(ShapeError::Invalid("x must be four-dimensional: [B, 1, H, Dh]"));
        };
        shape::eq("tokens of x (the update takes a single token)", tokens, 1)?;
        shape::nonzero("B (the batch of x)", batch)?;
        shape::nonzero("H (the heads of x)", heads)?;
        shape::nonzero("Dh (the rows per head of x)", head_dim)?;
        let &[sb, sh, sd, state_dim] = *state_in else {
            return Err(ShapeError::Invalid(
                "state_in must be four-dimensional: [B, H, Dh, Ds]",
            ));
        };
        shape::eq("batch of state_in against B", sb, batch)?;
        shape::eq("heads of state_in against H", sh, heads)?;
        shape::eq("rows of state_in against Dh", sd, head_dim)?;
        if state_dim < STATE_DIM_MULTIPLE || !state_dim.is_multiple_of(STATE_DIM_MULTIPLE) {
            return Err(ShapeError::Invalid(
                "Ds (the state columns) must be a positive multiple of 32",
            ));
        }
        let groups = p.groups as usize;
        shape::nonzero("G (the groups param)", groups)?;
        if !heads.is_multiple_of(groups) {
            return Err(ShapeError::Invalid("H must be a multiple of the groups param"));
        }
        for (what, code) in [
            ("a_log_dtype", p.a_log_dtype),
            ("b_dtype", p.b_dtype),
            ("c_dtype", p.c_dtype),
            ("dt_dtype", p.dt_dtype),
            ("dt_bias_dtype", p.dt_bias_dtype),
        ] {
            if code > SCALE_BF16 {
                return Err(ShapeError::Range {
                    what,
                    got: code as f64,
                    lo: 0.0,
                    hi: SCALE_BF16 as f64,
                });
            }
        }
        let (lo, hi) = (p.time_step_min, p.time_step_max);
        if lo.is_nan() || hi.is_nan() || lo > hi || lo == f32::INFINITY {
            return Err(ShapeError::Invalid(
                "time_step_min and time_step_max must be numbers with min ≤ max and min finite",
            ));
        }
        let bc = batch * groups * state_dim;
        packed_len("words of a_log against H values", a_log, p.a_log_dtype, heads)?;
        packed_len("words of b against B·G·Ds values", b, p.b_dtype, bc)?;
        packed_len("words of c against B·G·Ds values", c, p.c_dtype, bc)?;
        packed_len("words of dt against B·H values", dt, p.dt_dtype, batch * heads)?;
        packed_len("words of dt_bias against H values", dt_bias, p.dt_bias_dtype, heads)?;
        shape::eq("elements of d against H", shape::numel(d), heads)?;
        if out != x {
            return Err(ShapeError::Invalid("out must have the shape of x"));
        }
        if state_out != state_in {
            return Err(ShapeError::Invalid("state_out must have the shape of state_in"));
        }
        // Every element index must fit the u32 a WGSL index holds.
        shape::to_u32(
            "elements of state_in",
            batch
                .checked_mul(heads * head_dim)
                .and_then(|r| r.checked_mul(state_dim))
                .unwrap_or(usize::MAX),
        )?;
        p.batch = batch as u32;
        p.heads = heads as u32;
        p.head_dim = head_dim as u32;
        p.state_dim = state_dim as u32;
        Ok(())
    }

    /// Three blocks per multiprocessor (24 warps on a 32-wide GPU): the state loads in flight
    /// bound the update, and 85 registers hold two rows' runs without a spill (four blocks
    /// leave 64 and spill).
    const LAUNCH_BOUND: Option<LaunchBound> = Some(LaunchBound {
        max_threads: BLOCK_THREADS,
        min_blocks: 3,
    });

    fn launch(p: &SsmUpdateParams) -> Launch {
        Launch {
            grid: [p.head_dim.div_ceil(BLOCK_ROWS), p.batch * p.heads, 1],
            block: BLOCK_THREADS,
        }
    }
}

/// `e^x` through the GPUs' `2^x` instruction (a few ulp, plus the rounding of `x·log2 e`): the
/// head's values are computed by every thread of its block, and libm's `expf` made that
/// prologue most of the update's instructions.
#[inline(always)]
fn exp(x: f32) -> f32 {
    exp2_approx(x * core::f32::consts::LOG2_E)
}

/// `softplus(z) = log(1 + e^z)`, written so neither branch overflows: `max(z, 0) + log1p(e^−|z|)`.
#[inline(always)]
pub fn softplus(z: f32) -> f32 {
    let (pos, neg_abs) = if z > 0.0 { (z, -z) } else { (0.0, z) };
    pos + ln_1p_unit(exp(neg_abs))
}

/// The run of [`RUN`] values from value `e` (a multiple of `RUN`, which is even) of words of
/// dtype `code`: `RUN` words of f32, or `RUN / 2` of 16-bit halves (lower first), widened with
/// one dtype test per run.
#[inline(always)]
fn packed_run(words: Src<u32>, code: u32, e: usize, wide: bool) -> [f32; RUN] {
    let mut v = [0.0f32; RUN];
    if code == SCALE_F32 {
        let mut w = [0u32; RUN];
        if wide {
            w = words.get_chunk::<RUN>(e);
        } else {
            let mut j = 0;
            while j < RUN {
                w[j] = words.get(e + j);
                j += 1;
            }
        }
        let mut j = 0;
        while j < RUN {
            v[j] = f32::from_bits(w[j]);
            j += 1;
        }
    } else {
        let f16 = code == SCALE_F16;
        let mut k = 0;
        while k < RUN / 2 {
            let word = words.get(e / 2 + k);
            let (lo, hi) = ((word & 0xffff) as u16, (word >> 16) as u16);
            if f16 {
                v[2 * k] = F16(lo).widen();
                v[2 * k + 1] = F16(hi).widen();
            } else {
                v[2 * k] = Bf16(lo).widen();
                v[2 * k + 1] = Bf16(hi).widen();
            }
            k += 1;
        }
    }
    v
}

/// What every row of one `n = b·H + h` shares.
#[derive(Clone, Copy)]
struct Head {
    /// Its first row, `n·Dh`.
    first_row: usize,
    /// `dt'`.
    step: f32,
    /// `dA`.
    decay: f32,
    /// `D[h]`.
    skip: f32,
    /// The first element of its group's row of `B` and `C`.
    bc_row: usize,
}

/// The run of [`RUN`] f32 state values at element `at`: one 16-byte load when `ACCESS` is 2,
/// element loads when it is 1.
#[inline(always)]
fn state_run<const ACCESS: usize>(state: Src<f32>, at: usize, _access: [u32; ACCESS]) -> [f32; RUN] {
    if ACCESS == 2 {
        return state.get_chunk::<RUN>(at);
    }
    let mut s = [0.0f32; RUN];
    let mut j = 0;
    while j < RUN {
        s[j] = state.get(at + j);
        j += 1;
    }
    s
}

/// One run of a row: the new state (stored) and its `Σ state'·C` added to `acc`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn update_run<const ACCESS: usize>(
    _access: [u32; ACCESS],
    state_out: Dst<f32>,
    at: usize,
    old: [f32; RUN],
    head: Head,
    input: f32,
    bv: [f32; RUN],
    cv: [f32; RUN],
    acc: f32,
) -> f32 {
    let mut acc = acc;
    let mut new = [0.0f32; RUN];
    let mut j = 0;
    while j < RUN {
        new[j] = mul_add(head.decay, old[j], input * bv[j]);
        acc = mul_add(new[j], cv[j], acc);
        j += 1;
    }
    if ACCESS == 2 {
        state_out.set_chunk(at, new);
    } else {
        let mut j = 0;
        while j < RUN {
            state_out.set(at + j, new[j]);
            j += 1;
        }
    }
    acc
}

/// The body: the head's shared values, then its rows at 16-byte state access where both state
/// views allow it (a separate instance, so the compiler never merges the two access paths into
/// element loads).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn ssm_update<T: Element, B: Block>(
    b: &B,
    p: &SsmUpdateParams,
    x: Src<T>,
    a_log: Src<u32>,
    b_in: Src<u32>,
    c_in: Src<u32>,
    d: Src<T>,
    dt: Src<u32>,
    dt_bias: Src<u32>,
    state_in: Src<f32>,
    out: Dst<T>,
    state_out: Dst<f32>,
) {
    let n = b.block_y() as usize;
    let heads = p.heads as usize;
    let (batch, h) = (n / heads, n % heads);
    let group = h / (heads / p.groups as usize);
    let raw = packed_scale(dt, p.dt_dtype, n) + packed_scale(dt_bias, p.dt_bias_dtype, h);
    let step = softplus(raw).max(p.time_step_min).min(p.time_step_max);
    let head = Head {
        first_row: n * p.head_dim as usize,
        step,
        decay: exp(-exp(packed_scale(a_log, p.a_log_dtype, h)) * step),
        skip: d.get(h).widen(),
        bc_row: (batch * p.groups as usize + group) * p.state_dim as usize,
    };
    if state_in.chunk_aligned::<RUN>(0) && state_out.chunk_aligned::<RUN>(0) {
        rows(b, p, head, [0u32; 2], x, b_in, c_in, state_in, out, state_out);
    } else {
        rows(b, p, head, [0u32; 1], x, b_in, c_in, state_in, out, state_out);
    }
}

/// Block `(i, n)`'s rows `d = i·BLOCK_ROWS + r`: wave `w` takes rows `2w` and `2w + 1`, then
/// those `2·waves()` further on, both rows' state loads in flight before either is reduced.
/// `ACCESS` (the length of `access`: the WGSL translator binds const generics from array
/// lengths) is 2 for 16-byte state runs, 1 for element access. The row-pair loop's bound and
/// each row's run loop are the same for every lane of a wave, so every lane reaches each
/// `wave_sum`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn rows<T: Element, B: Block, const ACCESS: usize>(
    b: &B,
    p: &SsmUpdateParams,
    head: Head,
    access: [u32; ACCESS],
    x: Src<T>,
    b_in: Src<u32>,
    c_in: Src<u32>,
    state_in: Src<f32>,
    out: Dst<T>,
    state_out: Dst<f32>,
) {
    let ds = p.state_dim as usize;
    let lane = b.lane() as usize;
    let wave = B::WAVE as usize;
    let b_wide = b_in.chunk_aligned::<RUN>(0);
    let c_wide = c_in.chunk_aligned::<RUN>(0);
    let runs = ds / RUN;
    let first = b.block_x() as usize * BLOCK_ROWS as usize;
    let here = (BLOCK_ROWS as usize).min(p.head_dim as usize - first);
    let mut r = 2 * b.wave_id() as usize;
    while r < here {
        // The pair's second row, or the first again (computed, not stored) past the block.
        let second = r + 1 < here;
        let row0 = head.first_row + first + r;
        let row1 = if second { row0 + 1 } else { row0 };
        let (x0, x1) = (x.get(row0).widen(), x.get(row1).widen());
        let (in0, in1) = (x0 * head.step, x1 * head.step);
        let (mut acc0, mut acc1) = (0.0f32, 0.0f32);
        let mut u = lane;
        while u < runs {
            let col = u * RUN;
            let (at0, at1) = (row0 * ds + col, row1 * ds + col);
            let old0 = state_run(state_in, at0, access);
            let old1 = state_run(state_in, at1, access);
            let bv = packed_run(b_in, p.b_dtype, head.bc_row + col, b_wide);
            let cv = packed_run(c_in, p.c_dtype, head.bc_row + col, c_wide);
            acc0 = update_run(access, state_out, at0, old0, head, in0, bv, cv, acc0);
            if second {
                acc1 = update_run(access, state_out, at1, old1, head, in1, bv, cv, acc1);
            }
            u += wave;
        }
        let total0 = b.wave_sum(acc0);
        let total1 = b.wave_sum(acc1);
        if lane == 0 {
            out.set(row0, T::from_f32(mul_add(x0, head.skip, total0)));
            if second {
                out.set(row1, T::from_f32(mul_add(x1, head.skip, total1)));
            }
        }
        r += 2 * b.waves() as usize;
    }
}
