//! Residual add + RMSNorm with both outputs (spec §3).
//!
//! Per row of length `dim`: `residual ← rnd_T(x + residual)` (the new residual stream), then
//! `out = rnd_T(gain · rnd_T(residual · inv))` with `inv = 1 / sqrt(mean(residual²) + eps)` and
//! `gain = w` (or `rnd_T(weight_bias + w)` for Gemma's `1 + w`). The sum of squares reads the
//! rounded residual, as the unfused add → rms_norm pair would.

use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, Rw, ShapeError, Src};

crate::params! {
    /// Params of `fused_add_rms_norm`.
    pub struct AddRmsNormParams {
        /// Rows (product of all but the last axis of `x`).
        pub rows: u32,
        /// Row length (the last axis of `x`).
        pub dim: u32,
        /// Added to the mean square before the square root.
        pub eps: f32 = 1e-6,
        /// 0 for standard RMSNorm, 1 for Gemma's `(1 + w)` gain.
        pub weight_bias: f32 = 0.0,
    }
}

/// Descriptor of `fused_add_rms_norm`.
pub struct FusedAddRmsNorm;

impl KernelDef for FusedAddRmsNorm {
    type Params = AddRmsNormParams;
    const NAME: &'static str = "fused_add_rms_norm";

    /// Buffers: `x [.., D]`, `residual [.., D]` (same shape), `weight [D]`, `out [.., D]`.
    fn bind(p: &mut AddRmsNormParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [x, residual, weight, out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 4,
            });
        };
        let Some(&dim) = x.last() else {
            return Err(ShapeError::Invalid("x must have at least one axis"));
        };
        shape::nonzero("dim (the last axis of x)", dim)?;
        let n = shape::numel(x);
        shape::nonzero("rows of x", n)?;
        for (what, s) in [("residual", residual), ("out", out)] {
            if s != x {
                return Err(ShapeError::Invalid(match what {
                    "residual" => "residual must have the shape of x",
                    _ => "out must have the shape of x",
                }));
            }
        }
        if weight.len() != 1 {
            return Err(ShapeError::Invalid("weight must be one-dimensional"));
        }
        shape::eq("weight length", weight[0], dim)?;
        if !(p.eps.is_finite() && p.eps >= 0.0) {
            return Err(ShapeError::Range {
                what: "eps",
                got: p.eps as f64,
                lo: 0.0,
                hi: f32::MAX as f64,
            });
        }
        if !p.weight_bias.is_finite() {
            return Err(ShapeError::Invalid("weight_bias must be finite"));
        }
        p.rows = shape::to_u32("rows", n / dim)?;
        p.dim = shape::to_u32("dim", dim)?;
        Ok(())
    }

    fn launch(p: &AddRmsNormParams) -> Launch {
        // One block per row, one chunk per thread per sweep, 32..=512 threads: a decode row of
        // 4096 takes one chunk per thread (a thread's chain of dependent steps is what a lone
        // row waits on), while blocks stay small enough that several rows share a
        // multiprocessor and one row's reduction overlaps the others' loads (1024-thread blocks
        // measured 37% of copy bandwidth on the H200 for bf16, 256 measured 60%).
        let want = p.dim.div_ceil(CHUNK as u32).div_ceil(32) * 32;
        Launch {
            grid: [p.rows, 1, 1],
            block: want.clamp(32, 512),
        }
    }
}

/// Contiguous elements a thread handles per sweep: one 16-byte access per buffer for 16-bit
/// types (two for f32), so each memory instruction moves enough bytes to stream at bandwidth
/// (16 elements measured slower: the unrolled chunk loop no longer fits and spills).
const CHUNK: usize = 8;
const _: () = assert!(CHUNK.is_multiple_of(2), "the chunk loops convert pairs");

/// The body: one block per row; thread `t` handles chunks `t, t + size, …` of `CHUNK` contiguous
/// elements when the row allows chunks, else elements `t, t + size, …` one by one.
pub fn fused_add_rms_norm<T: Element, B: Block>(
    b: &B,
    p: &AddRmsNormParams,
    x: Src<T>,
    residual: Rw<T>,
    weight: Src<T>,
    out: Dst<T>,
) {
    let dim = p.dim as usize;
    let base = b.block_x() as usize * dim;
    let step = b.size() as usize;
    // Elements are read with `widen` (one hardware conversion on GPUs, no NaN-payload select):
    // every read value goes straight into f32 arithmetic, which keeps no NaN payload on GPUs.
    // Chunked when every row start allows it (uniform over the block), else element-wise.
    let wide = dim.is_multiple_of(CHUNK)
        && x.chunk_aligned::<CHUNK>(base)
        && residual.chunk_aligned::<CHUNK>(base)
        && out.chunk_aligned::<CHUNK>(base)
        && weight.chunk_aligned::<CHUNK>(0);
    let chunks = if wide { dim / CHUNK } else { 0 };
    let tail = chunks * CHUNK;

    // Two chunks per iteration, both loaded before either is used: twice the bytes in
    // flight per thread (16-bit rows stream at about 60% of copy bandwidth with one).
    // The per-thread sum is compensated: with few threads per row (the serial cpu block sums a
    // whole row) a plain f32 sum drifts by ~sqrt(dim) ulps, up to the f32 bound on 3072-wide
    // rows; memory-bound GPUs pay nothing for it.
    let (mut sq, mut carry) = (0.0f32, 0.0f32);
    let mut c = b.thread() as usize;
    while c + step < chunks {
        let (at, next) = (base + c * CHUNK, base + (c + step) * CHUNK);
        let (x0, r0) = (x.get_chunk::<CHUNK>(at), residual.get_chunk::<CHUNK>(at));
        let (x1, r1) = (
            x.get_chunk::<CHUNK>(next),
            residual.get_chunk::<CHUNK>(next),
        );
        let (s0, q0) = add_chunk(x0, r0);
        let (s1, q1) = add_chunk(x1, r1);
        residual.set_chunk(at, s0);
        residual.set_chunk(next, s1);
        (sq, carry) = compensated_add(sq, carry, q0 + q1);
        c += 2 * step;
    }
    if c < chunks {
        let at = base + c * CHUNK;
        let (s0, q0) = add_chunk(x.get_chunk::<CHUNK>(at), residual.get_chunk::<CHUNK>(at));
        residual.set_chunk(at, s0);
        (sq, carry) = compensated_add(sq, carry, q0);
    }
    let mut i = tail + b.thread() as usize;
    while i < dim {
        let s = T::from_f32(x.get(base + i).widen() + residual.get(base + i).widen());
        residual.set(base + i, s);
        let f = s.widen();
        (sq, carry) = compensated_add(sq, carry, f * f);
        i += step;
    }
    let inv = inverse_rms(b.sum(sq), p.dim, p.eps);

    // Each thread re-reads only the residual elements it wrote itself: no barrier needed.
    // The gain's form is uniform, so it is chosen once per launch, not per element.
    if p.weight_bias != 0.0 {
        let gain = |w: T| T::from_f32(p.weight_bias + w.widen()).widen();
        normalize(b, p, residual, weight, out, inv, base, chunks, gain);
    } else {
        normalize(b, p, residual, weight, out, inv, base, chunks, |w: T| {
            w.widen()
        });
    }
}

/// `1 / sqrt(sum_sq / n + eps)`, or NaN when the sum of squares is not finite (a NaN or ±Inf in
/// the row, or squares past f32), so the whole row is NaN on every arm (docs/non-finite.md).
#[inline(always)]
pub fn inverse_rms(sum_sq: f32, n: u32, eps: f32) -> f32 {
    if sum_sq.is_finite() {
        1.0 / crate::sqrt_rn(sum_sq / n as f32 + eps)
    } else {
        f32::NAN
    }
}

/// Kahan summation step: `(sum + v, the rounding error carried to the next step)`.
#[inline(always)]
pub fn compensated_add(sum: f32, carry: f32, v: f32) -> (f32, f32) {
    let y = v - carry;
    let t = sum + y;
    (t, (t - sum) - y)
}

/// `out = rnd_T(gain(w) · rnd_T(residual · inv))` over one row, chunked for the first
/// `chunks · CHUNK` elements, element-wise after.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn normalize<T: Element, B: Block>(
    b: &B,
    p: &AddRmsNormParams,
    residual: Rw<T>,
    weight: Src<T>,
    out: Dst<T>,
    inv: f32,
    base: usize,
    chunks: usize,
    gain: impl Fn(T) -> f32,
) {
    let dim = p.dim as usize;
    let step = b.size() as usize;
    let tail = chunks * CHUNK;
    let norm = |w: T, s: T| T::from_f32(gain(w) * T::from_f32(s.widen() * inv).widen());
    // `norm` two elements at a time (one packed conversion per rounding on sm_80+).
    let norm_chunk = |ws: [T; CHUNK], rs: [T; CHUNK]| {
        let mut o = rs;
        let mut j = 0;
        while j < CHUNK {
            let t = T::from_f32_pair(rs[j].widen() * inv, rs[j + 1].widen() * inv);
            let n = T::from_f32_pair(gain(ws[j]) * t[0].widen(), gain(ws[j + 1]) * t[1].widen());
            o[j] = n[0];
            o[j + 1] = n[1];
            j += 2;
        }
        o
    };
    let mut c = b.thread() as usize;
    while c + step < chunks {
        let (at, next) = (c * CHUNK, (c + step) * CHUNK);
        let (w0, r0) = (
            weight.get_chunk::<CHUNK>(at),
            residual.get_chunk::<CHUNK>(base + at),
        );
        let (w1, r1) = (
            weight.get_chunk::<CHUNK>(next),
            residual.get_chunk::<CHUNK>(base + next),
        );
        out.set_chunk(base + at, norm_chunk(w0, r0));
        out.set_chunk(base + next, norm_chunk(w1, r1));
        c += 2 * step;
    }
    if c < chunks {
        let at = c * CHUNK;
        let o = norm_chunk(
            weight.get_chunk::<CHUNK>(at),
            residual.get_chunk::<CHUNK>(base + at),
        );
        out.set_chunk(base + at, o);
    }
    let mut i = tail + b.thread() as usize;
    while i < dim {
        out.set(base + i, norm(weight.get(i), residual.get(base + i)));
        i += step;
    }
}

/// `s = rnd_T(x + r)` over a chunk (`CHUNK` is even), and the sum of `s²` (in element order).
#[inline(always)]
fn add_chunk<T: Element>(xs: [T; CHUNK], rs: [T; CHUNK]) -> ([T; CHUNK], f32) {
    let mut s = rs;
    let mut sq = 0.0f32;
    let mut j = 0;
    // Two elements at a time (one packed conversion on sm_80+); squares summed in element order.
    while j < CHUNK {
        let t = T::from_f32_pair(
            xs[j].widen() + rs[j].widen(),
            xs[j + 1].widen() + rs[j + 1].widen(),
        );
        s[j] = t[0];
        s[j + 1] = t[1];
        let (f0, f1) = (t[0].widen(), t[1].widen());
        sq += f0 * f0;
        sq += f1 * f1;
        j += 2;
    }
    (s, sq)
}
