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
        // One block per row; about four elements per thread per sweep, 32..=1024 threads.
        let want = p.dim.div_ceil(4).div_ceil(32) * 32;
        Launch {
            grid: [p.rows, 1, 1],
            block: want.clamp(32, 1024),
        }
    }
}

/// The body: one block per row, threads stride over the row.
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

    // Compensated per-thread sum: with few threads per row (the serial cpu block sums a whole
    // row) a plain f32 sum drifts by ~sqrt(dim) ulps; memory-bound GPUs pay nothing for it.
    let (mut sq, mut carry) = (0.0f32, 0.0f32);
    let mut i = b.thread() as usize;
    while i < dim {
        let s = T::from_f32(x.get(base + i).to_f32() + residual.get(base + i).to_f32());
        residual.set(base + i, s);
        let f = s.to_f32();
        let y = f * f - carry;
        let t = sq + y;
        carry = (t - sq) - y;
        sq = t;
        i += step;
    }
    let inv = 1.0 / libm::sqrtf(b.sum(sq) / p.dim as f32 + p.eps);

    // Each thread re-reads only the residual elements it wrote itself: no barrier needed.
    let mut i = b.thread() as usize;
    while i < dim {
        let w = weight.get(i).to_f32();
        let gain = if p.weight_bias != 0.0 {
            T::from_f32(p.weight_bias + w).to_f32()
        } else {
            w
        };
        let scaled = T::from_f32(residual.get(base + i).to_f32() * inv).to_f32();
        out.set(base + i, T::from_f32(gain * scaled));
        i += step;
    }
}
