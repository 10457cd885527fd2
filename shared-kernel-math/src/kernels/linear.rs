//! Dense linear layer: `y[M, N] = x[M, K] · W[N, K]^T (+ bias[N])`, all in `T`, accumulated in
//! f32 and rounded to `T` once. `M` is 1..=8 in one launch that streams `W` once: a decode GEMV
//! at `M = 1`, a skinny GEMM up to 8 rows.
//!
//! `W` is the only large stream, so the geometry is built around reading it at bandwidth: a
//! block owns `ROWS` consecutive output columns `n` (rows of `W`); its waves take the block's
//! rows `wave_id, wave_id + waves, …`; the lanes of a wave stride over `K` in 16-byte chunks
//! (`CHUNK` elements, several chunks in flight per lane), keep one f32 accumulator per row of
//! `x`, and fold them with `wave_sum`. `x` is small and re-read from cache for every row of `W`.

use crate::kernel::shape;
use crate::{mul_add, Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Most rows of `x` one launch takes (one f32 accumulator per row lives in registers).
pub const MAX_M: usize = 8;

/// Rows of `W` (output columns) one block owns, whatever its size: waves take them round-robin.
pub const ROWS: u32 = 8;

crate::params! {
    /// Params of `linear`.
    pub struct LinearParams {
        /// Rows of `x` and `y` (1..=8).
        pub m: u32,
        /// The reduced axis: columns of `x` and of `w`.
        pub k: u32,
        /// Output features: rows of `w`, columns of `y`.
        pub n: u32,
        /// 1: add `bias [N]`; 0: no bias (the bias buffer, any one element or more, is ignored).
        pub has_bias: u32 = 0,
    }
}

/// Descriptor of `linear`.
pub struct Linear;

impl KernelDef for Linear {
    type Params = LinearParams;
    const NAME: &'static str = "linear";

    /// Buffers: `x [M, K]`, `w [N, K]`, `bias [N]` (or anything of one element or more when
    /// `has_bias` is 0), `y [M, N]`.
    fn bind(p: &mut LinearParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [x, w, bias, y] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 4,
            });
        };
        let &[m, k] = *x else {
            return Err(ShapeError::Invalid("x must be two-dimensional: [M, K]"));
        };
        let &[n, wk] = *w else {
            return Err(ShapeError::Invalid("w must be two-dimensional: [N, K]"));
        };
        shape::nonzero("M (the rows of x)", m)?;
        if m > MAX_M {
            return Err(ShapeError::Range {
                what: "M (the rows of x; one linear launch takes at most 8)",
                got: m as f64,
                lo: 1.0,
                hi: MAX_M as f64,
            });
        }
        shape::nonzero("K (the columns of x)", k)?;
        shape::nonzero("N (the rows of w)", n)?;
        shape::eq("K of w (its columns) against K of x", wk, k)?;
        let &[ym, yn] = *y else {
            return Err(ShapeError::Invalid("y must be two-dimensional: [M, N]"));
        };
        shape::eq("rows of y against M (the rows of x)", ym, m)?;
        shape::eq("columns of y against N (the rows of w)", yn, n)?;
        match p.has_bias {
            0 => shape::nonzero("elements of bias (unused without has_bias)", shape::numel(bias))?,
            1 => {
                let &[bn] = *bias else {
                    return Err(ShapeError::Invalid(
                        "bias must be one-dimensional, [N], when has_bias is 1",
                    ));
                };
                shape::eq("bias length against N (the rows of w)", bn, n)?;
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
        shape::to_u32("elements of w", n.saturating_mul(k))?;
        p.m = m as u32;
        p.k = shape::to_u32("K", k)?;
        p.n = shape::to_u32("N", n)?;
        Ok(())
    }

    fn launch(p: &LinearParams) -> Launch {
        // One wave per row of the block on a 32-wide GPU; a block never has more waves than it
        // has rows to give them.
        Launch {
            grid: [p.n.div_ceil(ROWS), 1, 1],
            block: ROWS.min(p.n) * 32,
        }
    }
}

/// Elements moved per lane access: 16 bytes of a 16-bit `T` (two 16-byte accesses for f32).
const CHUNK: usize = 8;

/// The body: monomorphised on the number of rows of `x`, so the accumulators are a
/// fixed-size array the GPU compilers keep in registers. (The arms are blocks: the WGSL
/// translator drops a unit call written as a bare match-arm expression.) Always inlined: the
/// eight instances make it too big for LLVM to inline into the generated entry by itself, and
/// a called body sees its buffers as generic pointers (nvptx emits generic, not global, loads).
#[inline(always)]
pub fn linear<T: Element, B: Block>(
    b: &B,
    p: &LinearParams,
    x: Src<T>,
    w: Src<T>,
    bias: Src<T>,
    y: Dst<T>,
) {
    match p.m {
        1 => {
            rows(b, p, x, w, bias, y, [0.0f32; 1]);
        }
        2 => {
            rows(b, p, x, w, bias, y, [0.0f32; 2]);
        }
        3 => {
            rows(b, p, x, w, bias, y, [0.0f32; 3]);
        }
        4 => {
            rows(b, p, x, w, bias, y, [0.0f32; 4]);
        }
        5 => {
            rows(b, p, x, w, bias, y, [0.0f32; 5]);
        }
        6 => {
            rows(b, p, x, w, bias, y, [0.0f32; 6]);
        }
        7 => {
            rows(b, p, x, w, bias, y, [0.0f32; 7]);
        }
        _ => {
            rows(b, p, x, w, bias, y, [0.0f32; 8]);
        }
    }
}

/// The block's rows of `W` for `M` rows of `x` (`zero` is `M` zeros: it fixes `M`).
///
/// Wave-uniform control flow around `wave_sum`: the row loop's bound (the block's rows that
/// exist) is the same for the whole block, and within a row every lane of a wave runs the
/// same `K` loops (their bounds depend only on the row), so every lane of a wave reaches each
/// `wave_sum`; waves left without a row (more waves than rows) call none.
#[inline(always)]
fn rows<T: Element, B: Block, const M: usize>(
    b: &B,
    p: &LinearParams,
    x: Src<T>,
    w: Src<T>,
    bias: Src<T>,
    y: Dst<T>,
    zero: [f32; M],
) {
    let k = p.k as usize;
    let n_out = p.n as usize;
    let first = (b.block_x() * ROWS) as usize;
    let here = ROWS.min(p.n - b.block_x() * ROWS) as usize;
    let lane = b.lane() as usize;
    let wave = B::WAVE as usize;
    // Chunked when every row of x and w starts on a chunk (uniform over the launch).
    let wide = k.is_multiple_of(CHUNK) && w.chunk_aligned::<CHUNK>(0) && x.chunk_aligned::<CHUNK>(0);
    let chunks = if wide { k / CHUNK } else { 0 };
    let tail = chunks * CHUNK;

    let mut r = b.wave_id() as usize;
    while r < here {
        let n = first + r;
        let row = n * k;
        let mut acc = zero;
        // Chunks of W in flight per lane, all loaded before use: four (64 bytes of a 16-bit W)
        // for one or two rows of x, two up to four rows, one beyond, where the rows' x chunks
        // are in flight too (and the register budget, the kernel's largest instance's on a GPU,
        // stays small enough for the M = 1 instance to run at full occupancy).
        let step = wave * CHUNK;
        let mut c = lane;
        if M <= 2 {
            while c + 3 * wave < chunks {
                let at = c * CHUNK;
                let w0 = w.get_chunk::<CHUNK>(row + at);
                let w1 = w.get_chunk::<CHUNK>(row + at + step);
                let w2 = w.get_chunk::<CHUNK>(row + at + 2 * step);
                let w3 = w.get_chunk::<CHUNK>(row + at + 3 * step);
                acc = accumulate(x, k, at, w0, acc);
                acc = accumulate(x, k, at + step, w1, acc);
                acc = accumulate(x, k, at + 2 * step, w2, acc);
                acc = accumulate(x, k, at + 3 * step, w3, acc);
                c += 4 * wave;
            }
        }
        if M <= 4 {
            while c + wave < chunks {
                let at = c * CHUNK;
                let w0 = w.get_chunk::<CHUNK>(row + at);
                let w1 = w.get_chunk::<CHUNK>(row + at + step);
                acc = accumulate(x, k, at, w0, acc);
                acc = accumulate(x, k, at + step, w1, acc);
                c += 2 * wave;
            }
        }
        while c < chunks {
            let at = c * CHUNK;
            let w0 = w.get_chunk::<CHUNK>(row + at);
            acc = accumulate(x, k, at, w0, acc);
            c += wave;
        }
        // Element-wise: the whole row when it cannot be chunked.
        let mut i = tail + lane;
        while i < k {
            let wv = w.get(row + i).widen();
            let mut m = 0;
            while m < M {
                acc[m] = mul_add(wv, x.get(m * k + i).widen(), acc[m]);
                m += 1;
            }
            i += wave;
        }
        let add = if p.has_bias != 0 {
            bias.get(n).widen()
        } else {
            0.0
        };
        let mut m = 0;
        while m < M {
            let total = b.wave_sum(acc[m]);
            if lane == 0 {
                y.set(m * n_out + n, T::from_f32(total + add));
            }
            m += 1;
        }
        r += b.waves() as usize;
    }
}

/// `acc[m] += Σ_j w[j] · x[m, at + j]` over one chunk of `W` (widened once for every row of x);
/// each row's chunk sum is its own chain, added to the accumulator once.
#[inline(always)]
fn accumulate<T: Element, const M: usize>(
    x: Src<T>,
    k: usize,
    at: usize,
    wc: [T; CHUNK],
    acc: [f32; M],
) -> [f32; M] {
    let mut acc = acc;
    let mut wf = [0.0f32; CHUNK];
    let mut j = 0;
    while j < CHUNK {
        wf[j] = wc[j].widen();
        j += 1;
    }
    let mut m = 0;
    while m < M {
        let xc = x.get_chunk::<CHUNK>(m * k + at);
        let mut s = 0.0f32;
        let mut j = 0;
        while j < CHUNK {
            s = mul_add(wf[j], xc[j].widen(), s);
            j += 1;
        }
        acc[m] += s;
        m += 1;
    }
    acc
}
