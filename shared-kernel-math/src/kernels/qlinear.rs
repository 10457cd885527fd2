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
//! Geometry: a block owns [`BLOCK_ROWS`] consecutive rows of `W`. Its waves take them in row
//! groups (four rows per wave for one or two rows of `x`, two for more), so every `x` element a
//! lane loads serves each row of its group; waves left over split `K` between them. The lanes
//! of a wave stride over `K` in units of 32 codes (`bits` whole words at any width); for one or
//! two rows of `x` a lane loads the next unit's words before reducing the current one. Each
//! wave's sums go through shared memory, and after one barrier the block adds the splits in
//! order and writes `y`.
//!
//! A code becomes the exact float `q` without an integer conversion (one mask-and-or and one
//! add, see `code_value`), meets every row of `x` in one FMA each, and per span of 16 codes a
//! row's dot products are folded in as `scale·Σ q·x + bias·Σ x`: the per-code work is that of
//! one FMA per row of `x`, and the result differs from the spec's `Σ (scale·q + bias)·x` only
//! by the rounding of two more terms per span.
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
/// in flight.
pub const LAUNCH_BOUND: crate::LaunchBound = crate::LaunchBound {
    max_threads: BLOCK_THREADS,
    min_blocks: 4,
};

/// `scale_dtype` codes.
pub const SCALE_F32: u32 = 0;
/// 16-bit IEEE scales and biases.
pub const SCALE_F16: u32 = 1;
/// bfloat16 scales and biases.
pub const SCALE_BF16: u32 = 2;

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
    if !GROUP_SIZES.contains(&p.group_size) {
        return Err(ShapeError::Invalid("group_size must be 16, 32, 64 or 128"));
    }
    if !k.is_multiple_of(p.group_size as usize) {
        return Err(ShapeError::Invalid(
            "K (the columns of x) must be a multiple of group_size",
        ));
    }
    if p.scale_dtype > SCALE_BF16 {
        return Err(ShapeError::Range {
            what: "scale_dtype (0 f32, 1 f16, 2 bf16)",
            got: p.scale_dtype as f64,
            lo: 0.0,
            hi: 2.0,
        });
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

/// Kernel shared memory: one f32 partial per split of `K`, row of the block and row of `x`.
pub fn shared_bytes(p: &QLinearParams, block: u32, wave: u32) -> usize {
    let waves = block.div_ceil(wave) as usize;
    4 * k_splits(waves, rows_per_wave(p.m)) * BLOCK_ROWS as usize * MAX_M
}

/// Rows of `W` a wave reduces at once for `m` rows of `x` (the length of the instance's
/// row arrays in [`qlinear`]).
const fn rows_per_wave(m: u32) -> usize {
    if m <= 2 {
        ROWS_FEW_X
    } else {
        ROWS_MANY_X
    }
}

/// Splits of `K` over the waves of a block: the waves its row groups leave over.
const fn k_splits(waves: usize, rows_per_wave: usize) -> usize {
    let row_groups = BLOCK_ROWS as usize / rows_per_wave;
    if waves > row_groups {
        waves / row_groups
    } else {
        1
    }
}

/// The body at `BITS` bits (the length of `bits`, whose values are unused): dispatches on the
/// rows of `x` to an instance whose accumulators are fixed-size arrays (1, 2, 4 or 8 rows of
/// `x`; the rows past `M` of a padded instance re-read the last row of `x` and are not
/// written), each reducing [`rows_per_wave`] rows of `W` per wave.
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
    let few = [bits; ROWS_FEW_X];
    let many = [bits; ROWS_MANY_X];
    if p.m == 1 {
        row_groups(b, p, x, w_q, scales, biases, few, [0.0f32; 1]);
    } else if p.m == 2 {
        row_groups(b, p, x, w_q, scales, biases, few, [0.0f32; 2]);
    } else if p.m <= 4 {
        row_groups(b, p, x, w_q, scales, biases, many, [0.0f32; 4]);
    } else {
        row_groups(b, p, x, w_q, scales, biases, many, [0.0f32; 8]);
    }
    write_outputs(b, p, bias, y);
}

/// Rows of `W` per wave for one or two rows of `x`: each loaded `x` element serves four rows.
const ROWS_FEW_X: usize = 4;
/// Rows of `W` per wave for three to eight rows of `x`, whose accumulators take the registers.
const ROWS_MANY_X: usize = 2;

/// The block's rows of `W`, `R` per wave (the length of `zero_w`, one unit's words per row),
/// for `M` rows of `x` (`zero` is `M` zeros): each wave reduces its row group over its split
/// of `K`, and lane 0 leaves the sums in shared memory for [`write_outputs`].
///
/// Wave-uniform control flow around `wave_sum`: a wave's row group, its split and its unit
/// loops depend only on the wave, so every lane of a wave reaches each `wave_sum`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn row_groups<T: Element, B: Block, const BITS: usize, const R: usize, const M: usize>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    zero_w: [[u32; BITS]; R],
    zero: [f32; M],
) {
    let k = p.k as usize;
    let n_out = p.n as usize;
    let first = (b.block_x() * BLOCK_ROWS) as usize;
    let here = BLOCK_ROWS.min(p.n - b.block_x() * BLOCK_ROWS) as usize;
    let lane = b.lane() as usize;
    let wave = B::WAVE as usize;
    let waves = b.waves() as usize;
    let row_group_count = BLOCK_ROWS as usize / R;
    let splits = k_splits(waves, R);
    let units = k / UNIT;
    let words_per_row = units * BITS;
    let groups_per_row = k >> p.group_log2;
    // Wide loads when every unit starts on 16 bytes (uniform over the launch).
    let wide_w = BITS.is_multiple_of(4) && w_q.chunk_aligned::<4>(0);
    let wide_x = x.chunk_aligned::<X_CHUNK>(0);
    let partials = b.shared::<f32>(0, splits * BLOCK_ROWS as usize * MAX_M);

    let w_id = b.wave_id() as usize;
    // A block with fewer waves than row groups (the serial cpu block) takes them in turns.
    let (mut group, group_step, split) = if waves >= row_group_count {
        (
            w_id % row_group_count,
            row_group_count,
            w_id / row_group_count,
        )
    } else {
        (w_id, waves, 0)
    };
    while split < splits && group < row_group_count && group * R < here {
        let r0 = group * R;
        // Rows past N re-read the last row (computed, not written).
        let mut rows = [0usize; R];
        let mut r = 0;
        while r < R {
            let n = first + r0 + r;
            rows[r] = if n < n_out { n } else { n_out - 1 };
            r += 1;
        }
        let mut acc = [zero; R];
        let step = splits * wave;
        let mut u = split * wave + lane;
        // For one or two rows of `x`, one unit's words are loaded ahead of the one being
        // reduced (two units in flight per lane, one copy of the reduction in the code); more
        // rows of `x` give each load enough work to hide it, and the registers go to them.
        if M <= 2 {
            let mut cur = zero_w;
            if u < units {
                cur = load_rows(w_q, rows, words_per_row, u, wide_w, zero_w);
            }
            while u < units {
                let next = u + step;
                let mut ahead = cur;
                if next < units {
                    ahead = load_rows(w_q, rows, words_per_row, next, wide_w, zero_w);
                }
                acc = unit(
                    p,
                    x,
                    scales,
                    biases,
                    rows,
                    groups_per_row,
                    u,
                    cur,
                    wide_x,
                    acc,
                );
                cur = ahead;
                u = next;
            }
        } else {
            while u < units {
                let cur = load_rows(w_q, rows, words_per_row, u, wide_w, zero_w);
                acc = unit(
                    p,
                    x,
                    scales,
                    biases,
                    rows,
                    groups_per_row,
                    u,
                    cur,
                    wide_x,
                    acc,
                );
                u += step;
            }
        }
        let mut r = 0;
        while r < R {
            let mut m = 0;
            while m < M {
                let total = b.wave_sum(acc[r][m]);
                if lane == 0 {
                    partials.set((split * BLOCK_ROWS as usize + r0 + r) * MAX_M + m, total);
                }
                m += 1;
            }
            r += 1;
        }
        group += group_step;
    }
}

/// After every wave has left its sums: one thread per output element of the block adds the
/// splits in order, then the bias and the act, and writes `y` (once per kernel, whatever the
/// instance, so silu's exp is in the code once).
#[inline(always)]
fn write_outputs<T: Element, B: Block>(b: &B, p: &QLinearParams, bias: Src<T>, y: Dst<T>) {
    let n_out = p.n as usize;
    let first = (b.block_x() * BLOCK_ROWS) as usize;
    let here = BLOCK_ROWS.min(p.n - b.block_x() * BLOCK_ROWS) as usize;
    let splits = k_splits(b.waves() as usize, rows_per_wave(p.m));
    let partials = b.shared::<f32>(0, splits * BLOCK_ROWS as usize * MAX_M);
    b.barrier();
    let m_rows = p.m as usize;
    let pairs = p.act == ACT_SILU_MUL;
    let outputs = if pairs { here / 2 } else { here };
    let mut e = b.thread() as usize;
    while e < outputs * m_rows {
        let m = e % m_rows;
        let o = e / m_rows;
        let r = if pairs { 2 * o } else { o };
        let y0 = T::from_f32(split_sum(partials, splits, r, m) + bias_of(p, bias, first + r));
        if pairs {
            // Pairs start on even rows and N is even: row r + 1 is in the block.
            let y1 = T::from_f32(
                split_sum(partials, splits, r + 1, m) + bias_of(p, bias, first + r + 1),
            );
            y.set(m * (n_out / 2) + (first + r) / 2, silu_mul_element(y0, y1));
        } else {
            y.set(m * n_out + first + r, y0);
        }
        e += b.size() as usize;
    }
}

/// Row `r` of the block, row `m` of `x`: the sum of its partials over the splits of `K`, in
/// split order.
#[inline(always)]
fn split_sum(partials: crate::Rw<f32>, splits: usize, r: usize, m: usize) -> f32 {
    let mut t = partials.get(r * MAX_M + m);
    let mut s = 1;
    while s < splits {
        t += partials.get((s * BLOCK_ROWS as usize + r) * MAX_M + m);
        s += 1;
    }
    t
}

/// Elements of `x` per load: 16 bytes of a 16-bit `T` (two 16-byte accesses for f32).
const X_CHUNK: usize = 8;

/// `bias[n]` widened, or 0 without a bias.
#[inline(always)]
fn bias_of<T: Element>(p: &QLinearParams, bias: Src<T>, n: usize) -> f32 {
    if p.has_bias != 0 {
        bias.get(n).widen()
    } else {
        0.0
    }
}

/// Unit `u`'s words in each of the wave's rows of `W`.
#[inline(always)]
fn load_rows<const BITS: usize, const R: usize>(
    w_q: Src<u32>,
    rows: [usize; R],
    words_per_row: usize,
    u: usize,
    wide: bool,
    zero_w: [[u32; BITS]; R],
) -> [[u32; BITS]; R] {
    let mut w = zero_w;
    let mut r = 0;
    while r < R {
        w[r] = load_words(w_q, rows[r] * words_per_row + u * BITS, wide, zero_w[r]);
        r += 1;
    }
    w
}

/// The `BITS` words of one unit (32 codes) starting at word `at`: 16-byte loads when `wide`.
#[inline(always)]
fn load_words<const BITS: usize>(
    w_q: Src<u32>,
    at: usize,
    wide: bool,
    zero: [u32; BITS],
) -> [u32; BITS] {
    // Two loops from 0, not one resumed: every index stays a constant the GPU compilers keep
    // in registers.
    let mut w = zero;
    let mut j = 0;
    if wide {
        while j + 4 <= BITS {
            let c = w_q.get_chunk::<4>(at + j);
            w[j] = c[0];
            w[j + 1] = c[1];
            w[j + 2] = c[2];
            w[j + 3] = c[3];
            j += 4;
        }
    } else {
        while j < BITS {
            w[j] = w_q.get(at + j);
            j += 1;
        }
    }
    w
}

/// One unit (32 codes at column `32u`) of the wave's rows of `W` against every row of `x`:
/// two spans of 16 codes, each span's dot products of codes and `x` folded into the
/// accumulators with its group's scale and bias.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn unit<T: Element, const BITS: usize, const R: usize, const M: usize>(
    p: &QLinearParams,
    x: Src<T>,
    scales: Src<u32>,
    biases: Src<u32>,
    rows: [usize; R],
    groups_per_row: usize,
    u: usize,
    w: [[u32; BITS]; R],
    wide_x: bool,
    acc: [[f32; M]; R],
) -> [[f32; M]; R] {
    let col = u * UNIT;
    let g0 = col >> p.group_log2;
    let g1 = (col + SPAN) >> p.group_log2;
    let center = code_center(BITS as u32);
    let mut s0 = [0.0f32; R];
    let mut o0 = [0.0f32; R];
    let mut r = 0;
    while r < R {
        (s0[r], o0[r]) =
            scale_and_midpoint(p, scales, biases, rows[r] * groups_per_row + g0, center);
        r += 1;
    }
    let mut acc = span(p, x, col, 0, w, s0, o0, wide_x, acc);
    // The second span has its own group only at group size 16 (uniform over the launch).
    let mut s1 = s0;
    let mut o1 = o0;
    if g1 != g0 {
        let mut r = 0;
        while r < R {
            (s1[r], o1[r]) =
                scale_and_midpoint(p, scales, biases, rows[r] * groups_per_row + g1, center);
            r += 1;
        }
    }
    acc = span(p, x, col, 1, w, s1, o1, wide_x, acc);
    acc
}

/// Scale `e` and the group's midpoint `bias + scale·center` (`center = 2^(bits−1)`), the coefficients of a
/// span's `Σ (q − 2^(bits−1))·x` and `Σ x`.
#[inline(always)]
fn scale_and_midpoint(
    p: &QLinearParams,
    scales: Src<u32>,
    biases: Src<u32>,
    e: usize,
    center: f32,
) -> (f32, f32) {
    let s = packed_scale(scales, p.scale_dtype, e);
    let b = packed_scale(biases, p.scale_dtype, e);
    (s, crate::mul_add(s, center, b))
}

/// Span `h` (codes `16h..16h + 16` of the unit at column `col`): per chunk of `x`, the chunk's
/// codes of every row of `W` as exact floats, multiplied into every row of `x`; then per row
/// of `W` and of `x`, `acc += scale·Σ q'·x + mid·Σ x` with `q' = q − 2^(bits−1)` and
/// `mid = bias + scale·2^(bits−1)` (spec §13's `Ŵ = scale·q + bias`,
/// factored so the per-code work is one FMA per row of `x`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn span<T: Element, const BITS: usize, const R: usize, const M: usize>(
    p: &QLinearParams,
    x: Src<T>,
    col: usize,
    h: usize,
    w: [[u32; BITS]; R],
    scale: [f32; R],
    offset: [f32; R],
    wide_x: bool,
    acc: [[f32; M]; R],
) -> [[f32; M]; R] {
    let k = p.k as usize;
    let last_m = p.m as usize - 1;
    let zero_m = acc[0];
    let mut dot = acc;
    let mut x_sum = zero_m;
    let mut r = 0;
    while r < R {
        let mut m = 0;
        while m < M {
            dot[r][m] = 0.0;
            m += 1;
        }
        r += 1;
    }
    let mut m = 0;
    while m < M {
        x_sum[m] = 0.0;
        m += 1;
    }
    let mut c = 0;
    while c < SPAN / X_CHUNK {
        let first = h * SPAN + c * X_CHUNK;
        let mut q = [[0.0f32; X_CHUNK]; R];
        let mut r = 0;
        while r < R {
            let mut j = 0;
            while j < X_CHUNK {
                q[r][j] = code_value(w[r], first + j);
                j += 1;
            }
            r += 1;
        }
        let mut m = 0;
        while m < M {
            let row = if m < last_m { m } else { last_m };
            let xc = x_chunk(x, row * k + col + first, wide_x);
            let mut j = 0;
            while j < X_CHUNK {
                let xv = xc[j].widen();
                x_sum[m] += xv;
                let mut r = 0;
                while r < R {
                    dot[r][m] = crate::mul_add(q[r][j], xv, dot[r][m]);
                    r += 1;
                }
                j += 1;
            }
            m += 1;
        }
        c += 1;
    }
    let mut acc = acc;
    let mut r = 0;
    while r < R {
        let mut m = 0;
        while m < M {
            let with_offset = crate::mul_add(offset[r], x_sum[m], acc[r][m]);
            acc[r][m] = crate::mul_add(scale[r], dot[r][m], with_offset);
            m += 1;
        }
        r += 1;
    }
    acc
}

/// `X_CHUNK` elements of `x` from `at`: one chunk load when `wide`.
#[inline(always)]
fn x_chunk<T: Element>(x: Src<T>, at: usize, wide: bool) -> [T; X_CHUNK] {
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

/// Code `i` of a unit's words as the exact float `q − 2^(bits−1)`, without an integer conversion: the code's
/// bits, left where they lie at `2^e` in a word (or the word shifted by 9, or two words joined
/// for a code that crosses them, so that `e + BITS <= 23`), become mantissa bits under the
/// exponent of `2^(23−e)`, whose ulp is `2^−e`: that float is `2^(23−e) + q`, and subtracting
/// `2^(23−e)` is exact. With `BITS` and `i` constants this is one mask-and-or and one add.
#[inline(always)]
fn code_value<const BITS: usize>(w: [u32; BITS], i: usize) -> f32 {
    let bit = i * BITS;
    let word = bit / 32;
    let shift = (bit % 32) as u32;
    let width = BITS as u32;
    let (v, e) = if shift + width > 32 {
        // The code's high bits start the next word; shift > 24 here.
        ((w[word] >> shift) | (w[word + 1] << (32 - shift)), 0)
    } else if shift + width <= 23 {
        (w[word], shift)
    } else {
        (w[word] >> 9, shift - 9)
    };
    let mask = ((1u32 << width) - 1) << e;
    let exponent = (127 + 23 - e) << 23;
    f32::from_bits((v & mask) | exponent) - (f32::from_bits(exponent) + code_center(width))
}

/// `2^(bits−1)`: codes are taken centred, `q − 2^(bits−1)`, so that the bias term of a span,
/// `(bias + scale·2^(bits−1))·Σ x`, is the group's midpoint and small, and the two terms of a
/// span do not cancel (exact: the constant is folded into `code_value`'s subtraction).
#[inline(always)]
fn code_center(bits: u32) -> f32 {
    (1u32 << (bits - 1)) as f32
}
