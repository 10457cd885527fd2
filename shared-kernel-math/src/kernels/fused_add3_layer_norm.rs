//! Cohere2's parallel-residual join + LayerNorm, both outputs (spec §11).
//!
//! Per row of length `dim`: `x_out = rnd_T(rnd_T(attn + mlp) + residual)` (the association the
//! unfused `add3` rounds with), then `h_out = rnd_T(w · ((x_out − mean) · inv) + bias)` with
//! `mean = Σ x_out / dim`, `var = Σ (x_out − mean)² / dim`, `inv = 1 / sqrt(var + eps)`, all in
//! f32. The row is kept in shared memory as f32 between the three passes, which is what bounds
//! `dim` (6656, the spec's single-row limit: 26 KiB of shared memory).
//!
//! Reduction order: each thread sums its strided elements in index order, `Block::sum` folds
//! lanes then waves in index order. On a serial block (the cpu port) that is the plain
//! index-order f32 sum, so the cpu port is byte-identical to the unfused pair.

use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Longest row the kernel takes (its row lives in shared memory).
pub const MAX_DIM: usize = 6656;

crate::params! {
    /// Params of `fused_add3_layer_norm`.
    pub struct Add3LayerNormParams {
        /// Rows (product of all but the last axis of `residual`).
        pub rows: u32,
        /// Row length (the last axis of `residual`).
        pub dim: u32,
        /// 1 when `bias` has one value per column, 0 when its single value is broadcast.
        pub bias_stride: u32,
        /// Added to the variance before the square root.
        pub eps: f32 = 1e-5,
    }
}

/// Descriptor of `fused_add3_layer_norm`.
pub struct FusedAdd3LayerNorm;

impl KernelDef for FusedAdd3LayerNorm {
    type Params = Add3LayerNormParams;
    const NAME: &'static str = "fused_add3_layer_norm";

    /// Buffers: `attn`, `mlp`, `residual` `[.., D]` (same shape), `weight [D]`, `bias [D]` or
    /// `[1]` (broadcast; zeros for a norm without bias), `x_out`, `h_out` (the shape of
    /// `residual`).
    fn bind(p: &mut Add3LayerNormParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [attn, mlp, x, weight, bias, x_out, h_out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 7,
            });
        };
        let Some(&dim) = x.last() else {
            return Err(ShapeError::Invalid("residual must have at least one axis"));
        };
        shape::nonzero("dim (the last axis of residual)", dim)?;
        if dim > MAX_DIM {
            return Err(ShapeError::Range {
                what: "dim (the last axis of residual)",
                got: dim as f64,
                lo: 1.0,
                hi: MAX_DIM as f64,
            });
        }
        let n = shape::numel(x);
        shape::nonzero("rows of residual", n)?;
        if attn != x || mlp != x {
            return Err(ShapeError::Invalid(
                "attn and mlp must have the shape of residual",
            ));
        }
        if x_out != x || h_out != x {
            return Err(ShapeError::Invalid(
                "x_out and h_out must have the shape of residual",
            ));
        }
        if weight.len() != 1 {
            return Err(ShapeError::Invalid("weight must be one-dimensional"));
        }
        shape::eq("weight length", weight[0], dim)?;
        p.bias_stride = match bias {
            [len] if *len == dim => 1,
            [1] => 0,
            _ => {
                return Err(ShapeError::Invalid(
                    "bias must be [dim], or [1] to broadcast one value",
                ))
            }
        };
        if !(p.eps.is_finite() && p.eps >= 0.0) {
            return Err(ShapeError::Range {
                what: "eps",
                got: p.eps as f64,
                lo: 0.0,
                hi: f32::MAX as f64,
            });
        }
        p.rows = shape::to_u32("rows", n / dim)?;
        p.dim = shape::to_u32("dim", dim)?;
        Ok(())
    }

    fn launch(p: &Add3LayerNormParams) -> Launch {
        // One block per row; about four elements per thread, 32..=1024 threads.
        let want = p.dim.div_ceil(4).div_ceil(32) * 32;
        Launch {
            grid: [p.rows, 1, 1],
            block: want.clamp(32, 1024),
        }
    }

    fn shared_bytes(p: &Add3LayerNormParams, _block: u32, _wave: u32) -> usize {
        p.dim as usize * 4
    }
}

/// The body: one block per row, threads stride over the row.
#[allow(clippy::too_many_arguments)] // one view per buffer of the list entry
pub fn fused_add3_layer_norm<T: Element, B: Block>(
    b: &B,
    p: &Add3LayerNormParams,
    attn: Src<T>,
    mlp: Src<T>,
    residual: Src<T>,
    weight: Src<T>,
    bias: Src<T>,
    x_out: Dst<T>,
    h_out: Dst<T>,
) {
    let dim = p.dim as usize;
    let base = b.block_x() as usize * dim;
    let step = b.size() as usize;
    let row = b.shared::<f32>(0, dim);

    let mut sum = 0.0f32;
    let mut i = b.thread() as usize;
    while i < dim {
        let branches = T::from_f32(attn.get(base + i).to_f32() + mlp.get(base + i).to_f32());
        let joined = T::from_f32(branches.to_f32() + residual.get(base + i).to_f32());
        x_out.set(base + i, joined);
        row.set(i, joined.to_f32());
        sum += joined.to_f32();
        i += step;
    }
    let mean = b.sum(sum) / p.dim as f32;

    // Each thread re-reads only the shared elements it wrote itself: no barrier needed.
    let mut sq = 0.0f32;
    let mut i = b.thread() as usize;
    while i < dim {
        let c = row.get(i) - mean;
        sq += c * c;
        i += step;
    }
    let inv = 1.0 / crate::sqrt_rn(b.sum(sq) / p.dim as f32 + p.eps);

    let mut i = b.thread() as usize;
    while i < dim {
        let w = weight.get(i).to_f32();
        let bias_v = bias.get(i * p.bias_stride as usize).to_f32();
        h_out.set(
            base + i,
            T::from_f32(w * ((row.get(i) - mean) * inv) + bias_v),
        );
        i += step;
    }
}
