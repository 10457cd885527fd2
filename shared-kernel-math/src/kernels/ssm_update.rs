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
//! Geometry: a block holds [`BLOCK_ROWS`] rows `(n, d)` of one `n`; the lanes cover a row's
//! state in runs of [`RUN`] columns (16 bytes of f32 state), so a wave streams its rows in
//! whole contiguous lines, and fold their `Σ_s` with `wave_sum`. Where a wave's
//! [`WAVE_ROWS`] rows and a lane's one run cover the block, the update is straight-line
//! (`group_rows`); otherwise the waves take rows one at a time.

use super::affine_codes::{packed_word_unchecked, unpack_scale, widen_half, SCALE_BF16, SCALE_F32};
use super::qlinear::scale_words;
use crate::kernel::shape;
use crate::{
    exp2_approx, ln_1p_unit, mul_add, Block, Dst, Element, KernelDef, Launch, LaunchBound, ShapeError,
    Src,
};

/// Rows `(n, d)` one block owns, all of one `n` (so the head's prologue is computed once per
/// block).
pub const BLOCK_ROWS: u32 = 32;

/// Threads per block: four waves of a 32-wide GPU, one group of [`WAVE_ROWS`] rows each;
/// narrower or wider waves split it otherwise.
pub const BLOCK_THREADS: u32 = 128;

/// Rows a wave updates together on the straight-line path: all their state loads are issued
/// before any of their math, so one memory latency covers them.
pub const WAVE_ROWS: usize = 8;

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

    /// Five blocks per multiprocessor (20 warps on a 32-wide GPU): the state loads in flight
    /// bound the update, and the 96 registers a thread may keep at that occupancy hold a
    /// group's eight state runs with every other load it issues before its math (`B`, `C`, `x`,
    /// the prologue's words) without a spill; at six blocks (80 registers) that order spilled
    /// and ran slower than five (docs/results/s34-h100-2026-12-07.md).
    const LAUNCH_BOUND: Option<LaunchBound> = Some(LaunchBound {
        max_threads: BLOCK_THREADS,
        min_blocks: 5,
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
    let mut w = [0u32; RUN];
    if code == SCALE_F32 && wide {
        w = words.get_chunk::<RUN>(e);
    } else {
        let mut j = 0;
        while j < RUN {
            w[j] = words.get(run_word(code, e, j));
            j += 1;
        }
    }
    widen_run(code, w)
}

/// The word [`packed_run`] reads as the run's `j`-th: `e + j` of f32; of 16-bit values word
/// `e/2 + j` for the run's two words and the second again after them (a run reads `RUN` words
/// whatever the dtype, so its loads need no branch).
#[inline(always)]
fn run_word(code: u32, e: usize, j: usize) -> usize {
    if code == SCALE_F32 {
        e + j
    } else {
        e / 2 + j.min(RUN / 2 - 1)
    }
}

/// [`packed_run`]'s words loaded without a branch, for the straight-line path to issue with
/// its other loads before it decodes any.
///
/// # Safety
/// Values `e..e + RUN` of dtype `code` lie inside `words`.
#[inline(always)]
unsafe fn packed_run_words(words: Src<u32>, code: u32, e: usize) -> [u32; RUN] {
    let mut w = [0u32; RUN];
    let mut j = 0;
    while j < RUN {
        // SAFETY: `run_word` stays inside the run's words (the caller's precondition).
        w[j] = unsafe { words.get_unchecked(run_word(code, e, j)) };
        j += 1;
    }
    w
}

/// The run of [`RUN`] values of dtype `code` from its words `w` (as [`run_word`] reads them),
/// widened exactly.
#[inline(always)]
fn widen_run(code: u32, w: [u32; RUN]) -> [f32; RUN] {
    let mut v = [0.0f32; RUN];
    if code == SCALE_F32 {
        let mut j = 0;
        while j < RUN {
            v[j] = f32::from_bits(w[j]);
            j += 1;
        }
    } else {
        let mut k = 0;
        while k < RUN / 2 {
            v[2 * k] = widen_half(w[k] as u16, code);
            v[2 * k + 1] = widen_half((w[k] >> 16) as u16, code);
            k += 1;
        }
    }
    v
}

/// Where the rows of one block of `n = b·H + h` are (no loads needed).
#[derive(Clone, Copy)]
struct Head {
    /// The block's first row, `n·Dh + block_x·BLOCK_ROWS`.
    first_row: usize,
    /// The block's rows (fewer in the head's last block).
    rows: usize,
    /// The first element of its group's row of `B` and `C`.
    bc_row: usize,
}

/// What every row of one `n` shares from its loads: `dt'`, `dA` and `D[h]`.
#[derive(Clone, Copy)]
struct Prologue {
    /// `dt'`.
    step: f32,
    /// `dA`.
    decay: f32,
    /// `D[h]`.
    skip: f32,
}

/// The head's prologue: `dt'` (softplus, clipped), `dA = exp(−exp(A_log[h])·dt')` and `D[h]`.
#[inline(always)]
fn prologue<T: Element>(
    p: &SsmUpdateParams,
    n: usize,
    a_log: Src<u32>,
    d: Src<T>,
    dt: Src<u32>,
    dt_bias: Src<u32>,
) -> Prologue {
    let words = prologue_words(p, n, a_log, dt, dt_bias);
    prologue_from(p, n, words, d.get(n % p.heads as usize).widen())
}

/// The words the prologue decodes for `n`, `[dt, dt_bias, A_log]`, loaded and not yet used.
#[inline(always)]
fn prologue_words(
    p: &SsmUpdateParams,
    n: usize,
    a_log: Src<u32>,
    dt: Src<u32>,
    dt_bias: Src<u32>,
) -> [u32; 3] {
    let h = n % p.heads as usize;
    // SAFETY: bind checked `dt` holds B·H values and `dt_bias`, `a_log` H, so `n < B·H` and
    // `h < H` are inside them.
    unsafe {
        [
            packed_word_unchecked(dt, p.dt_dtype, n),
            packed_word_unchecked(dt_bias, p.dt_bias_dtype, h),
            packed_word_unchecked(a_log, p.a_log_dtype, h),
        ]
    }
}

/// The prologue from [`prologue_words`]' words and `D[h]` widened.
#[inline(always)]
fn prologue_from(p: &SsmUpdateParams, n: usize, words: [u32; 3], skip: f32) -> Prologue {
    let h = n % p.heads as usize;
    let raw = unpack_scale(words[0], p.dt_dtype, n) + unpack_scale(words[1], p.dt_bias_dtype, h);
    let step = softplus(raw).max(p.time_step_min).min(p.time_step_max);
    Prologue {
        step,
        decay: exp(-exp(unpack_scale(words[2], p.a_log_dtype, h)) * step),
        skip,
    }
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

/// One run's new state, `decay·old + input·B`, and `acc + Σ new·C` (both paths' one order).
#[inline(always)]
fn run_math(
    decay: f32,
    old: [f32; RUN],
    input: f32,
    bv: [f32; RUN],
    cv: [f32; RUN],
    acc: f32,
) -> ([f32; RUN], f32) {
    let mut acc = acc;
    let mut new = [0.0f32; RUN];
    let mut j = 0;
    while j < RUN {
        new[j] = mul_add(decay, old[j], input * bv[j]);
        acc = mul_add(new[j], cv[j], acc);
        j += 1;
    }
    (new, acc)
}

/// One run of a row: the new state (stored) and its `Σ state'·C` added to `acc`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn update_run<const ACCESS: usize>(
    _access: [u32; ACCESS],
    state_out: Dst<f32>,
    at: usize,
    old: [f32; RUN],
    decay: f32,
    input: f32,
    bv: [f32; RUN],
    cv: [f32; RUN],
    acc: f32,
) -> f32 {
    let (new, acc) = run_math(decay, old, input, bv, cv, acc);
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

/// The body: the block's rows and the head's shared values (its prologue). A block whose rows
/// take one group of [`WAVE_ROWS`] per wave and one state run per lane (`Ds ≤ RUN·wave`), with
/// 16-byte state access, runs `group_rows`: straight-line, every load of the group (the
/// prologue's too) in flight at once, nothing checked per state access. Any other shape, wave
/// or view goes one row at a time (`rows`, 16-byte or element access as separate instances so
/// the compiler never merges the two paths), which never sets the register count.
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
    let (dh, ds) = (p.head_dim as usize, p.state_dim as usize);
    let first = b.block_x() as usize * BLOCK_ROWS as usize;
    let head = Head {
        first_row: n * dh + first,
        rows: (BLOCK_ROWS as usize).min(dh - first),
        bc_row: (batch * p.groups as usize + group) * ds,
    };
    let wide = state_in.chunk_aligned::<RUN>(0) && state_out.chunk_aligned::<RUN>(0);
    // The head's rows end inside both state views (bind sizes them; a longer view is fine).
    let head_end = (n + 1) * dh * ds;
    let straight = wide
        && ds / RUN <= B::WAVE as usize
        && head.rows <= b.waves() as usize * WAVE_ROWS
        && head_end <= state_in.len()
        && head_end <= state_out.len();
    if straight {
        group_rows(
            b, p, n, head, x, a_log, b_in, c_in, d, dt, dt_bias, state_in, out, state_out,
        );
        return;
    }
    let pro = prologue(p, n, a_log, d, dt, dt_bias);
    if wide {
        rows(b, p, head, pro, [0u32; 2], x, b_in, c_in, state_in, out, state_out);
    } else {
        rows(b, p, head, pro, [0u32; 1], x, b_in, c_in, state_in, out, state_out);
    }
}

/// [`ssm_update`]'s straight-line path: wave `w` takes rows `w·WAVE_ROWS ..` of the block
/// (rows past the head repeat its last row, computed and never stored), lane `l` state
/// columns `l·RUN ..`. The group's state runs are loaded first, then `x`, the words of `B`/`C`
/// and the prologue's: nothing that waits on a load (a 16-bit value's decode, the prologue's
/// math) comes before the last load is issued, so one memory latency covers them all.
/// The caller has checked that the group and the run cover the wave's rows and the row, that
/// both state views are 16-byte aligned and hold the head's rows.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn group_rows<T: Element, B: Block>(
    b: &B,
    p: &SsmUpdateParams,
    n: usize,
    head: Head,
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
    let ds = p.state_dim as usize;
    let lane = b.lane() as usize;
    let g = b.wave_id() as usize * WAVE_ROWS;
    // Wave-uniform: every lane of a wave reaches its `wave_sum`s or none does.
    if g >= head.rows {
        return;
    }
    let base = head.first_row + g;
    let last = (head.rows - g).min(WAVE_ROWS) - 1;
    let active = lane < ds / RUN;
    let col = lane * RUN;
    let mut at = [0usize; WAVE_ROWS];
    let mut old = [[0.0f32; RUN]; WAVE_ROWS];
    if active {
        // bind proves every state index fits a u32: 32-bit offsets, one add per row.
        let at0 = (base * ds + col) as u32;
        let mut i = 0;
        while i < WAVE_ROWS {
            at[i] = (at0 + (i.min(last) * ds) as u32) as usize;
            // SAFETY: `at[i] + RUN ≤ (n + 1)·Dh·Ds ≤ len()` and `at[i]` is a multiple of RUN
            // on an aligned view (the caller's checks).
            old[i] = unsafe { state_in.get_chunk_unchecked::<RUN>(at[i]) };
            i += 1;
        }
    }
    // Then every other load, none behind a branch (a bounds check's trap is one), before any
    // value is decoded: a decode waits on its load and would hold back the loads after it.
    let mut xs = [T::from_f32(0.0); WAVE_ROWS];
    let mut i = 0;
    while i < WAVE_ROWS {
        // SAFETY: the group's rows (repeating its last) are rows of the head, inside `x`.
        xs[i] = unsafe { x.get_unchecked(base + i.min(last)) };
        i += 1;
    }
    let (mut b_words, mut c_words) = ([0u32; RUN], [0u32; RUN]);
    if active {
        let at = head.bc_row + col;
        // SAFETY: bind checked `b` and `c` hold B·G·Ds values; the lane's run is inside its
        // group's row of them.
        unsafe {
            b_words = packed_run_words(b_in, p.b_dtype, at);
            c_words = packed_run_words(c_in, p.c_dtype, at);
        }
    }
    let words = prologue_words(p, n, a_log, dt, dt_bias);
    // SAFETY: bind checked `d` holds H values.
    let skip = unsafe { d.get_unchecked(n % p.heads as usize) };
    let pro = prologue_from(p, n, words, skip.widen());
    let mut acc = [0.0f32; WAVE_ROWS];
    if active {
        let bv = widen_run(p.b_dtype, b_words);
        let cv = widen_run(p.c_dtype, c_words);
        let mut i = 0;
        while i < WAVE_ROWS {
            let input = xs[i].widen() * pro.step;
            let (new, sum) = run_math(pro.decay, old[i], input, bv, cv, acc[i]);
            acc[i] = sum;
            if i <= last {
                // SAFETY: as for the loads.
                unsafe { state_out.set_chunk_unchecked(at[i], new) };
            }
            i += 1;
        }
    }
    let mut total = [0.0f32; WAVE_ROWS];
    let mut i = 0;
    while i < WAVE_ROWS {
        total[i] = b.wave_sum(acc[i]);
        i += 1;
    }
    if lane == 0 {
        let mut i = 0;
        while i <= last {
            out.set(base + i, T::from_f32(mul_add(xs[i].widen(), pro.skip, total[i])));
            i += 1;
        }
    }
}

/// Block `(i, n)`'s rows one at a time: wave `w` takes rows `w`, `w + waves()`, …, its lanes
/// striding over the row's runs. `ACCESS` (the length of `access`: the WGSL translator binds
/// const generics from array lengths) is 2 for 16-byte state runs, 1 for element access. The
/// row loop's bound and each row's run loop are the same for every lane of a wave, so every
/// lane reaches each `wave_sum`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn rows<T: Element, B: Block, const ACCESS: usize>(
    b: &B,
    p: &SsmUpdateParams,
    head: Head,
    pro: Prologue,
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
    let mut r = b.wave_id() as usize;
    while r < head.rows {
        let row = head.first_row + r;
        let xv = x.get(row).widen();
        let input = xv * pro.step;
        let mut acc = 0.0f32;
        let mut u = lane;
        while u < runs {
            let col = u * RUN;
            let at = row * ds + col;
            let old = state_run(state_in, at, access);
            let bv = packed_run(b_in, p.b_dtype, head.bc_row + col, b_wide);
            let cv = packed_run(c_in, p.c_dtype, head.bc_row + col, c_wide);
            acc = update_run(access, state_out, at, old, pro.decay, input, bv, cv, acc);
            u += wave;
        }
        let total = b.wave_sum(acc);
        if lane == 0 {
            out.set(row, T::from_f32(mul_add(xv, pro.skip, total)));
        }
        r += b.waves() as usize;
    }
}
