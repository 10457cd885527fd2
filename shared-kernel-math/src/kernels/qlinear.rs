//! Quantized linear layer over MLX's affine layout (spec §13), shared by the `qlinear_<b>bit`
//! entries of the list (one per bit width, so the bit width is a compile-time constant of
//! every port and no port can read codes of another width):
//! `y[M, N] = x[M, K] · Ŵ[N, K]^T (+ bias[N])` with `Ŵ[n, k] = scale[n, g]·q[n, k] + bias_g[n, g]`,
//! `g = k / group_size`, accumulated in f32 and rounded to `T` once; `M` is 1..=8 in one launch
//! that streams the packed weights once.
//!
//! Buffers: `x [M, K]` and `y [M, N]` in `T`; `w_q [N, K·bits/32]` u32 (each row one LSB-first
//! bit stream of `K` codes); `scales` and `biases`, `[N, K/group_size]` values of the scale dtype
//! (f32, f16 or bf16, the `scale_dtype` param) packed little-endian into u32 words (16-bit values
//! two per word, the last word zero-padded); `bias [N]` in `T` when `has_bias` is 1.
//!
//! Geometry: a block owns [`BLOCK_ROWS`] consecutive rows of `W`; its waves take them two at
//! a time, so every `x` element a wave loads serves two rows (and a gate and up pair of the
//! SwiGLU option is always reduced by one wave). The lanes of a wave stride over `K` in units
//! of 32 codes (`bits` whole words at any width); for one or two rows of `x` a lane loads the
//! next unit's words before reducing the current one.
//! A code becomes a float without an integer conversion: its bits go to the top of an f32
//! mantissa, `f = 1 + q·2^-bits` (a shift and one and-or), and `f − 1.5` is exact: the code
//! centred on its range, `(q − 2^(bits−1))·2^-bits`. The scale and bias stay out of the
//! per-code work: per span of one group a lane sums `Σ(f − 1.5)·x` per row of `W` (one FMA per
//! code and row of `x`) and `Σx` once for all rows, then folds
//! `s·2^bits·Σ(f − 1.5)·x + (b + s·2^(bits−1))·Σx = Σ(s·q + b)·x` into its accumulator. The
//! centring keeps the sums' terms at the size of the weights' spread around their middle; an
//! uncentred `Σf·x − Σx` measured 1.5e-5 f32 nrms against the spec's 1e-5.
use super::affine_codes::packed_scale;
use super::fused_silu_mul::silu_mul_element;
use crate::kernel::shape;
use crate::{Block, Dst, Element, Launch, ShapeError, Src};

/// Most rows of `x` one launch takes (one f32 accumulator per row and row of `W`).
pub const MAX_M: usize = 8;

/// Codes per unit: 32 codes fill `bits` whole u32 words at every bit width.
pub const UNIT: usize = 32;

/// Codes per scale span: a unit's scales are applied per half, so a group of 16 (GGUF Q6_K's
/// sub-blocks) needs no other path.
const SPAN: usize = UNIT / 2;

/// Rows of `W` (output features) one block owns, whatever its size or wave.
pub const BLOCK_ROWS: u32 = 8;

/// Threads per block: four waves of a 32-wide GPU; narrower or wider waves split it otherwise.
pub const BLOCK_THREADS: u32 = 128;

/// The launch bound of every `qlinear_<b>bit` kernel: its block is fixed, and four blocks per
/// multiprocessor (16 warps on a 32-wide GPU) is the occupancy batch 1 needs to keep enough loads
/// in flight; the 8-row instance spills a little under it instead of taking every register.
pub const LAUNCH_BOUND: crate::LaunchBound = crate::LaunchBound {
    max_threads: BLOCK_THREADS,
    min_blocks: 4,
};

/// `scale_dtype` codes (defined with the packed-value decoding they name).
pub use super::affine_codes::{SCALE_BF16, SCALE_F16, SCALE_F32};

/// `act`: SwiGLU over interleaved gate and up rows.
pub const ACT_SILU_MUL: u32 = 1;

/// Group sizes the kernels accept (MLX's 32, 64 and 128; 16 for GGUF Q6_K).
pub const GROUP_SIZES: [u32; 4] = [16, 32, 64, 128];

crate::params! {
    /// Params of the `qlinear_<b>bit` kernels.
    pub struct QLinearParams {
        /// Rows of `x` and `y` (1..=8).
        pub m: u32,
        /// The reduced axis: columns of `x`, codes per row of `w_q`.
        pub k: u32,
        /// Output features: rows of `w_q`, columns of `y`.
        pub n: u32,
        /// 1: add `bias [N]`; 0: no bias (the bias buffer, any one element or more, is ignored).
        pub has_bias: u32 = 0,
        /// Elements per group, one scale and one bias each: 16, 32, 64 or 128.
        pub group_size: u32 = 64,
        /// The dtype of `scales` and `biases`: 0 f32, 1 f16, 2 bf16.
        pub scale_dtype: u32 = 1,
        /// 0: `y = x·Ŵᵀ (+ bias)`, `[M, N]`. 1 ([`ACT_SILU_MUL`]): the rows of `W` are gate and
        /// up rows interleaved (gate `j` is row `2j`, up `j` row `2j + 1`) and
        /// `y[m, j] = silu(g)·u` of the two outputs rounded to `T`, `[M, N/2]`.
        pub act: u32 = 0,
        /// `log2(group_size)`, set by `bind`: the group of a column is a shift, not a division.
        pub group_log2: u32,
    }
}

/// The `scale_dtype` code of a scale dtype (f32, f16 or bf16; anything else reads as f16 and
/// is refused where formats are built).
pub const fn scale_code(dtype: crate::DType) -> u32 {
    match dtype {
        crate::DType::F32 => SCALE_F32,
        crate::DType::Bf16 => SCALE_BF16,
        _ => SCALE_F16,
    }
}

/// Words of `count` packed values of the scale dtype `code` (16-bit values two per word).
pub const fn scale_words(code: u32, count: usize) -> usize {
    if code == SCALE_F32 {
        count
    } else {
        count.div_ceil(2)
    }
}

/// The checks of an affine format's params that every kernel reading the layout makes: a
/// group size of [`GROUP_SIZES`] and a `scale_dtype` code of 0, 1 or 2.
pub fn check_format(group_size: u32, scale_dtype: u32) -> Result<(), ShapeError> {
    if !GROUP_SIZES.contains(&group_size) {
        return Err(ShapeError::Invalid("group_size must be 16, 32, 64 or 128"));
    }
    if scale_dtype > SCALE_BF16 {
        return Err(ShapeError::Range {
            what: "scale_dtype (0 f32, 1 f16, 2 bf16)",
            got: scale_dtype as f64,
            lo: 0.0,
            hi: 2.0,
        });
    }
    Ok(())
}

/// The shape checks of every `qlinear_<b>bit` kernel at `bits`.
pub fn bind(p: &mut QLinearParams, shapes: &[&[usize]], bits: u32) -> Result<(), ShapeError> {
    let [x, w_q, scales, biases, bias, y] = shapes else {
        return Err(ShapeError::BufferCount {
            got: shapes.len(),
            want: 6,
        });
    };
    let &[m, k] = *x else {
        return Err(ShapeError::Invalid("x must be two-dimensional: [M, K]"));
    };
    let &[n, words] = *w_q else {
        return Err(ShapeError::Invalid(
            "w_q must be two-dimensional: [N, K·bits/32]",
        ));
    };
    shape::nonzero("M (the rows of x)", m)?;
    if m > MAX_M {
        return Err(ShapeError::Range {
            what: "M (the rows of x; one qlinear launch takes at most 8)",
            got: m as f64,
            lo: 1.0,
            hi: MAX_M as f64,
        });
    }
    shape::nonzero("K (the columns of x)", k)?;
    shape::nonzero("N (the rows of w_q)", n)?;
    if !k.is_multiple_of(UNIT) {
        return Err(ShapeError::Invalid(
            "K (the columns of x) must be a multiple of 32: the kernel reads 32 codes at a time",
        ));
    }
    check_format(p.group_size, p.scale_dtype)?;
    if !k.is_multiple_of(p.group_size as usize) {
        return Err(ShapeError::Invalid(
            "K (the columns of x) must be a multiple of group_size",
        ));
    }
    shape::eq(
        "words per row of w_q against K·bits/32",
        words,
        k / UNIT * bits as usize,
    )?;
    let groups = n.saturating_mul(k / p.group_size as usize);
    let want = scale_words(p.scale_dtype, groups);
    shape::eq(
        "words of scales (N·K/group_size values packed)",
        shape::numel(scales),
        want,
    )?;
    shape::eq(
        "words of biases (N·K/group_size values packed)",
        shape::numel(biases),
        want,
    )?;
    let &[ym, yn] = *y else {
        return Err(ShapeError::Invalid("y must be two-dimensional: [M, N]"));
    };
    shape::eq("rows of y against M (the rows of x)", ym, m)?;
    match p.act {
        0 => shape::eq("columns of y against N (the rows of w_q)", yn, n)?,
        ACT_SILU_MUL => {
            if !n.is_multiple_of(2) {
                return Err(ShapeError::Invalid(
                    "N (the rows of w_q) must be even with act 1: gate and up rows interleaved",
                ));
            }
            shape::eq("columns of y against N/2 (gate and up pairs)", yn, n / 2)?
        }
        a => {
            return Err(ShapeError::Range {
                what: "act (0 none, 1 silu·mul of interleaved gate and up rows)",
                got: a as f64,
                lo: 0.0,
                hi: 1.0,
            })
        }
    }
    match p.has_bias {
        0 => shape::nonzero(
            "elements of bias (unused without has_bias)",
            shape::numel(bias),
        )?,
        1 => {
            let &[bn] = *bias else {
                return Err(ShapeError::Invalid(
                    "bias must be one-dimensional, [N], when has_bias is 1",
                ));
            };
            shape::eq("bias length against N (the rows of w_q)", bn, n)?;
        }
        h => {
            return Err(ShapeError::Range {
                what: "has_bias",
                got: h as f64,
                lo: 0.0,
                hi: 1.0,
            })
        }
    }
    // Every element index must fit the u32 a WGSL index holds.
    shape::to_u32("elements of x", m.saturating_mul(k))?;
    shape::to_u32("words of w_q", n.saturating_mul(words))?;
    shape::to_u32("elements of y", m.saturating_mul(n))?;
    p.m = m as u32;
    p.k = shape::to_u32("K", k)?;
    p.n = shape::to_u32("N", n)?;
    p.group_log2 = p.group_size.trailing_zeros();
    Ok(())
}

/// The launch of every `qlinear_<b>bit` kernel.
pub fn launch(p: &QLinearParams) -> Launch {
    Launch {
        grid: [p.n.div_ceil(BLOCK_ROWS), 1, 1],
        block: BLOCK_THREADS,
    }
}

/// The body at `BITS` bits (the length of `bits`, whose values are unused): dispatches on the
/// rows of `x` to an instance whose accumulators are fixed-size arrays (1, 2, 4 or 8 rows of
/// `x`; the rows past `M` of a padded instance re-read the last row of `x` and are not written)
/// and on them to the rows of `W` a wave reduces at once (two: four at one row of `x` spilled
/// more under the launch bound's 128 registers and ran no faster; see
/// docs/results/qlinear-h200-2026-12-03.md).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn qlinear<T: Element, B: Block, const BITS: usize>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    bias: Src<T>,
    y: Dst<T>,
    bits: [u32; BITS],
) {
    if p.m == 1 {
        row_groups(
            b,
            p,
            x,
            w_q,
            scales,
            biases,
            bias,
            y,
            bits,
            [[0.0f32; 1]; 2],
        );
    } else if p.m == 2 {
        row_groups(
            b,
            p,
            x,
            w_q,
            scales,
            biases,
            bias,
            y,
            bits,
            [[0.0f32; 2]; 2],
        );
    } else if p.m <= 4 {
        row_groups(
            b,
            p,
            x,
            w_q,
            scales,
            biases,
            bias,
            y,
            bits,
            [[0.0f32; 4]; 2],
        );
    } else {
        row_groups(
            b,
            p,
            x,
            w_q,
            scales,
            biases,
            bias,
            y,
            bits,
            [[0.0f32; 8]; 2],
        );
    }
}

/// The block's rows of `W`, `R` per wave at a time, for `M` rows of `x` (`zero` is `R × M`
/// zeros: it fixes both).
///
/// Wave-uniform control flow around `wave_sum`: a wave's row group and its unit loops depend
/// only on the group, so every lane of a wave reaches each `wave_sum`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn row_groups<T: Element, B: Block, const BITS: usize, const M: usize, const R: usize>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    bias: Src<T>,
    y: Dst<T>,
    bits: [u32; BITS],
    zero: [[f32; M]; R],
) {
    // 16-byte loads of `W` and `x` when every unit starts on 16 bytes (uniform over the
    // launch); the sweep over `K` is built twice, with the test taken once per row group
    // rather than in every unit, so neither copy carries the other's loads.
    let wide = BITS.is_multiple_of(4) && w_q.chunk_aligned::<4>(0) && x.chunk_aligned::<X_CHUNK>(0);
    let n_out = p.n as usize;
    let first = (b.block_x() * BLOCK_ROWS) as usize;
    let here = BLOCK_ROWS.min(p.n - b.block_x() * BLOCK_ROWS) as usize;
    let groups_here = here.div_ceil(R);
    let lane = b.lane() as usize;
    let wave = B::WAVE as usize;
    let units = p.k as usize / UNIT;
    let words_per_row = units * BITS;
    let groups_per_row = p.k as usize >> p.group_log2;
    let mut g = b.wave_id() as usize;
    while g < groups_here {
        let n0 = first + g * R;
        // Rows past N re-read the last row (computed, not written).
        let mut words_at = [0usize; R];
        let mut groups_at = [0usize; R];
        let mut r = 0;
        while r < R {
            let n = if n0 + r < n_out { n0 + r } else { n_out - 1 };
            words_at[r] = n * words_per_row;
            groups_at[r] = n * groups_per_row;
            r += 1;
        }
        let acc = if wide {
            sweep(
                b, p, x, w_q, scales, biases, words_at, groups_at, bits, zero, true,
            )
        } else {
            sweep(
                b, p, x, w_q, scales, biases, words_at, groups_at, bits, zero, false,
            )
        };
        let mut tot = zero;
        let mut r = 0;
        while r < R {
            let mut m = 0;
            while m < M {
                tot[r][m] = b.wave_sum(acc[r][m]);
                m += 1;
            }
            r += 1;
        }
        // Lane `m` writes row `m` of `y` (a wave narrower than `M` takes the rows in turns):
        // the writes run in parallel and the epilogue (silu's exp) is in the code once.
        let mut base = 0;
        while base < M {
            let m = base + lane;
            if m < p.m as usize {
                let mut t = [0.0f32; R];
                let mut i = 0;
                while i < M {
                    if i == m {
                        let mut r = 0;
                        while r < R {
                            t[r] = tot[r][i];
                            r += 1;
                        }
                    }
                    i += 1;
                }
                write_rows(p, bias, y, n0, m, t);
            }
            base += wave;
        }
        g += b.waves() as usize;
    }
}

/// One lane's share of a row group's sums over `K`: units `lane, lane + wave, …` of the rows
/// at `words_at` (their first words) and `groups_at` (their first scales); `wide` is a
/// constant in each caller's copy.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn sweep<T: Element, B: Block, const BITS: usize, const M: usize, const R: usize>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    words_at: [usize; R],
    groups_at: [usize; R],
    bits: [u32; BITS],
    zero: [[f32; M]; R],
    wide: bool,
) -> [[f32; M]; R] {
    let wave = B::WAVE as usize;
    let units = p.k as usize / UNIT;
    let mut acc = zero;
    let mut u = b.lane() as usize;
    // For one or two rows of `x`, one unit's words are loaded ahead of the one being reduced
    // (two units in flight per lane, one copy of the reduction in the code); more rows of `x`
    // give each load enough work to hide it, and the registers go to them.
    if M <= 2 {
        let mut w = [bits; R];
        if u < units {
            w = load_rows(w_q, words_at, u * BITS, wide, w);
        }
        while u < units {
            let next = u + wave;
            let mut ahead = w;
            if next < units {
                ahead = load_rows(w_q, words_at, next * BITS, wide, w);
            }
            acc = unit(p, x, scales, biases, groups_at, u * UNIT, w, wide, acc);
            w = ahead;
            u = next;
        }
    } else {
        while u < units {
            let w = load_rows(w_q, words_at, u * BITS, wide, [bits; R]);
            acc = unit(p, x, scales, biases, groups_at, u * UNIT, w, wide, acc);
            u += wave;
        }
    }
    acc
}

/// Row `m` of `y` at the group's rows `n0..n0 + R` (those below N) from their sums `t`, with
/// the bias and, with [`ACT_SILU_MUL`], SwiGLU over the group's gate and up pairs.
#[inline(always)]
fn write_rows<T: Element, const R: usize>(
    p: &QLinearParams,
    bias: Src<T>,
    y: Dst<T>,
    n0: usize,
    m: usize,
    t: [f32; R],
) {
    let n_out = p.n as usize;
    if p.act == ACT_SILU_MUL {
        // Groups start on even rows and N is even: a pair is whole or past N.
        let mut r = 0;
        while r + 1 < R {
            let n = n0 + r;
            if n < n_out {
                let g = T::from_f32(t[r] + bias_of(p, bias, n));
                let u = T::from_f32(t[r + 1] + bias_of(p, bias, n + 1));
                y.set(m * (n_out / 2) + n / 2, silu_mul_element(g, u));
            }
            r += 2;
        }
    } else {
        let mut r = 0;
        while r < R {
            let n = n0 + r;
            if n < n_out {
                y.set(m * n_out + n, T::from_f32(t[r] + bias_of(p, bias, n)));
            }
            r += 1;
        }
    }
}

/// Elements of `x` per load: 16 bytes of a 16-bit `T` (two 16-byte accesses for f32).
pub const X_CHUNK: usize = 8;

/// `bias[n]` widened, or 0 without a bias.
#[inline(always)]
fn bias_of<T: Element>(p: &QLinearParams, bias: Src<T>, n: usize) -> f32 {
    if p.has_bias != 0 {
        bias.get(n).widen()
    } else {
        0.0
    }
}

/// The `BITS` words of one unit (32 codes) starting at word `at`: 16-byte loads when `wide`.
#[inline(always)]
pub fn load_words<const BITS: usize>(
    w_q: Src<u32>,
    at: usize,
    wide: bool,
    zero: [u32; BITS],
) -> [u32; BITS] {
    // Two loops from 0, not one resumed: every index stays a constant the GPU compilers keep
    // in registers.
    if wide {
        return words_from_chunks(zero, |j| w_q.get_chunk::<4>(at + j));
    }
    let mut w = zero;
    let mut j = 0;
    while j < BITS {
        w[j] = w_q.get(at + j);
        j += 1;
    }
    w
}

/// The `BITS` words of a unit from its 16-byte chunks (`chunk(j)`: words `j..j + 4`; `BITS` is
/// a multiple of 4).
#[inline(always)]
fn words_from_chunks<const BITS: usize>(
    zero: [u32; BITS],
    chunk: impl Fn(usize) -> [u32; 4],
) -> [u32; BITS] {
    let mut w = zero;
    let mut j = 0;
    while j + 4 <= BITS {
        let c = chunk(j);
        w[j] = c[0];
        w[j + 1] = c[1];
        w[j + 2] = c[2];
        w[j + 3] = c[3];
        j += 4;
    }
    w
}

/// The words of one unit (32 codes, `BITS` words) of every row of a group, `at` words into
/// each row (`rows` holds the rows' first words).
#[inline(always)]
fn load_rows<const BITS: usize, const R: usize>(
    w_q: Src<u32>,
    rows: [usize; R],
    at: usize,
    wide: bool,
    zero: [[u32; BITS]; R],
) -> [[u32; BITS]; R] {
    let mut w = zero;
    let mut r = 0;
    while r < R {
        w[r] = if wide {
            // SAFETY: `bind` checked `w_q` is `[N, K·BITS/32]`; a row below N and a unit below
            // K/32 end inside it, and `wide` checked the buffer's alignment (rows and units are
            // whole chunks). The host ports check every access anyway.
            unsafe { load_unit_unchecked(w_q, rows[r] + at, zero[r]) }
        } else {
            load_words(w_q, rows[r] + at, false, zero[r])
        };
        r += 1;
    }
    w
}

/// [`load_words`]'s wide loads without their bounds and alignment checks on GPUs (one check
/// per load was a third of the unit's integer work).
///
/// # Safety
/// Words `at..at + BITS` are inside `w_q`, `BITS` is a multiple of 4 and `at` is 16-byte aligned.
#[inline(always)]
unsafe fn load_unit_unchecked<const BITS: usize>(
    w_q: Src<u32>,
    at: usize,
    zero: [u32; BITS],
) -> [u32; BITS] {
    // SAFETY: the caller's precondition.
    words_from_chunks(zero, |j| unsafe { w_q.get_chunk_unchecked::<4>(at + j) })
}

/// One unit (32 codes from column `col`) of every row of a group against every row of `x`.
/// Per chunk of 8 codes, each row of `x` is widened once and meets the chunk's centred code
/// floats `f − 1.5` of every row of `W` (`f = 1 + q·2^-BITS`) in one FMA each; per scale span
/// (16 codes for groups of 16, else the unit) the sums are folded in as
/// `s·2^BITS·Σ(f − 1.5)·x + (b + s·2^(BITS−1))·Σx = Σ(s·q + b)·x`, so the scale costs nothing
/// per code.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn unit<T: Element, const BITS: usize, const M: usize, const R: usize>(
    p: &QLinearParams,
    x: Src<T>,
    scales: Src<u32>,
    biases: Src<u32>,
    groups_at: [usize; R],
    col: usize,
    w: [[u32; BITS]; R],
    wide_x: bool,
    acc: [[f32; M]; R],
) -> [[f32; M]; R] {
    let split = p.group_size as usize == SPAN;
    let levels = (1u32 << BITS as u32) as f32;
    // The chunks are four calls, not a loop: at every width and size each chunk's word
    // indices are then constants, and no instance leaves the words in local memory.
    let mut acc = acc;
    let (mut dot, mut xs) = chunk(p, x, w, col, 0, wide_x, zeroed(acc), zeroed_row(acc[0]));
    (dot, xs) = chunk(p, x, w, col, X_CHUNK, wide_x, dot, xs);
    if split {
        let group = col >> p.group_log2;
        acc = fold(p, scales, biases, groups_at, group, levels, dot, xs, acc);
        dot = zeroed(dot);
        xs = zeroed_row(xs);
    }
    (dot, xs) = chunk(p, x, w, col, 2 * X_CHUNK, wide_x, dot, xs);
    (dot, xs) = chunk(p, x, w, col, 3 * X_CHUNK, wide_x, dot, xs);
    let group = (col + UNIT - 1) >> p.group_log2;
    fold(p, scales, biases, groups_at, group, levels, dot, xs, acc)
}

/// The chunk of 8 codes at `first` of a unit (from column `col`): each row of `x` widened
/// once, added to `xs`, and met by the chunk's centred codes of every row of `W` in `dot`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn chunk<T: Element, const BITS: usize, const M: usize, const R: usize>(
    p: &QLinearParams,
    x: Src<T>,
    w: [[u32; BITS]; R],
    col: usize,
    first: usize,
    wide_x: bool,
    dot: [[f32; M]; R],
    xs: [f32; M],
) -> ([[f32; M]; R], [f32; M]) {
    let k = p.k as usize;
    let last_m = p.m as usize - 1;
    let mut dot = dot;
    let mut xs = xs;
    let mut m = 0;
    while m < M {
        let row = if m < last_m { m } else { last_m };
        let at = row * k + col + first;
        let xc = if wide_x {
            // SAFETY: `bind` checked `x` is `[M, K]`; a row below M and a chunk of a unit below
            // K/32 end inside it, and `wide` checked its alignment (K is a multiple of 32).
            unsafe { x.get_chunk_unchecked::<X_CHUNK>(at) }
        } else {
            x_chunk(x, at, false)
        };
        let mut xf = [0.0f32; X_CHUNK];
        let mut j = 0;
        while j < X_CHUNK {
            xf[j] = xc[j].widen();
            xs[m] += xf[j];
            j += 1;
        }
        let mut r = 0;
        while r < R {
            let mut j = 0;
            while j < X_CHUNK {
                let centred = code_float(w[r], first + j) - 1.5;
                dot[r][m] = crate::mul_add(centred, xf[j], dot[r][m]);
                j += 1;
            }
            r += 1;
        }
        m += 1;
    }
    (dot, xs)
}

/// `acc[r][m] += s·levels·dot[r][m] + (b + s·levels/2)·xs[m]` with row `r`'s scale and bias
/// of group `group` (`levels = 2^bits`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn fold<const M: usize, const R: usize>(
    p: &QLinearParams,
    scales: Src<u32>,
    biases: Src<u32>,
    groups_at: [usize; R],
    group: usize,
    levels: f32,
    dot: [[f32; M]; R],
    xs: [f32; M],
    acc: [[f32; M]; R],
) -> [[f32; M]; R] {
    let mut acc = acc;
    let mut r = 0;
    while r < R {
        let (sc, of) = scale_pair(p, scales, biases, groups_at[r] + group, levels);
        // The weight at the centre code: `s·q + b = s·levels·(f − 1.5) + mid`.
        let mid = crate::mul_add(sc, 0.5, of);
        let mut m = 0;
        while m < M {
            let with_mid = crate::mul_add(mid, xs[m], acc[r][m]);
            acc[r][m] = crate::mul_add(sc, dot[r][m], with_mid);
            m += 1;
        }
        r += 1;
    }
    acc
}

/// `a` with every element 0.
#[inline(always)]
fn zeroed<const M: usize, const R: usize>(a: [[f32; M]; R]) -> [[f32; M]; R] {
    let mut a = a;
    let mut r = 0;
    while r < R {
        a[r] = zeroed_row(a[r]);
        r += 1;
    }
    a
}

/// `a` with every element 0.
#[inline(always)]
fn zeroed_row<const M: usize>(a: [f32; M]) -> [f32; M] {
    let mut a = a;
    let mut m = 0;
    while m < M {
        a[m] = 0.0;
        m += 1;
    }
    a
}

/// `X_CHUNK` elements of `x` from `at`: one chunk load when `wide`.
#[inline(always)]
pub fn x_chunk<T: Element>(x: Src<T>, at: usize, wide: bool) -> [T; X_CHUNK] {
    if wide {
        x.get_chunk::<X_CHUNK>(at)
    } else {
        let mut c = [x.get(at); X_CHUNK];
        let mut j = 1;
        while j < X_CHUNK {
            c[j] = x.get(at + j);
            j += 1;
        }
        c
    }
}

/// Code `i` of a unit's words as `1 + q·2^-BITS`: the code's bits moved to the top of an f32
/// mantissa under the exponent of 1 (a shift and a mask; no integer-to-float conversion).
#[inline(always)]
pub fn code_float<const BITS: usize>(w: [u32; BITS], i: usize) -> f32 {
    let bit = i * BITS;
    let word = bit / 32;
    let shift = (bit % 32) as u32;
    // The mantissa bit the code's lowest bit lands on.
    let top = 23 - BITS as u32;
    let mut placed = if shift >= top {
        w[word] >> (shift - top)
    } else {
        w[word] << (top - shift)
    };
    if shift + BITS as u32 > 32 {
        // The code's high bits start the next word.
        placed |= w[word + 1] << (top + 32 - shift);
    }
    let mask = ((1u32 << BITS as u32) - 1) << top;
    f32::from_bits((placed & mask) | 0x3f80_0000)
}

/// `(scale·levels, bias)` of scale index `e`, `levels = 2^bits`: the FMA that turns `f − 1` of
/// a code float into `scale·q + bias` (see the module docs).
#[inline(always)]
fn scale_pair(
    p: &QLinearParams,
    scales: Src<u32>,
    biases: Src<u32>,
    e: usize,
    levels: f32,
) -> (f32, f32) {
    (
        packed_scale(scales, p.scale_dtype, e) * levels,
        packed_scale(biases, p.scale_dtype, e),
    )
}
