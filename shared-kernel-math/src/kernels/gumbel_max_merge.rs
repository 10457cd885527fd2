//! The last step of a split `gumbel_max_sample` (spec §5): per row, the first maximum over the
//! splits' partial maxima, ties to the lower index, an all −inf row to index 0.
//!
//! Spec §5 leaves this step to the host. It runs as a kernel so a split draw never waits for a
//! copy back; it only compares the (value, index) pairs the splits wrote, in the same order as
//! the splits' own reduction, so the token is bit-identical to an unsplit draw on every port.

use crate::kernel::shape;
use crate::{argmax_beats, Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `gumbel_max_merge`.
    pub struct GumbelMergeParams {
        /// Rows (B, the first axis of `vals`).
        pub rows: u32,
        /// Partial maxima per row (the second axis of `vals`).
        pub splits: u32,
    }
}

/// Descriptor of `gumbel_max_merge`.
pub struct GumbelMaxMerge;

impl KernelDef for GumbelMaxMerge {
    type Params = GumbelMergeParams;
    const NAME: &'static str = "gumbel_max_merge";

    /// Buffers: the splits' `vals [B, S]` (f32) and `idxs [B, S]` (u32), the token `index [B]`.
    fn bind(p: &mut GumbelMergeParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [vals, idxs, index] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 3,
            });
        };
        let &[rows, splits] = *vals else {
            return Err(ShapeError::Invalid("vals must be [rows, splits]"));
        };
        shape::nonzero("rows", rows)?;
        shape::nonzero("splits", splits)?;
        if idxs != vals {
            return Err(ShapeError::Invalid("idxs must have the shape of vals"));
        }
        if *index != [rows] {
            return Err(ShapeError::Invalid("index must be [rows]"));
        }
        shape::to_u32("vals elements", rows * splits)?;
        p.rows = rows as u32;
        p.splits = splits as u32;
        Ok(())
    }

    fn launch(p: &GumbelMergeParams) -> Launch {
        Launch {
            grid: [p.rows, 1, 1],
            block: 64,
        }
    }
}

/// The body: one block per row, threads strided over the splits (`T` is f32: the list
/// instantiates it for f32 only).
pub fn gumbel_max_merge<T: Element, B: Block>(
    b: &B,
    p: &GumbelMergeParams,
    vals: Src<T>,
    idxs: Src<u32>,
    index: Dst<u32>,
) {
    let row = b.block_x() as usize;
    let base = row * p.splits as usize;
    // (−inf, 0) as in the splits: an all −inf row yields index 0 whatever the partials say.
    let (mut best, mut best_i) = (f32::NEG_INFINITY, 0u32);
    let mut s = b.thread() as usize;
    while s < p.splits as usize {
        let (v, i) = (vals.get(base + s).to_f32(), idxs.get(base + s));
        if argmax_beats(v, i, best, best_i) {
            best = v;
            best_i = i;
        }
        s += b.size() as usize;
    }
    let (_, winner) = b.argmax(best, best_i);
    if b.thread() == 0 {
        index.set(row, winner);
    }
}
