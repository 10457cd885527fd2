//! The K-sum of the MoE experts (spec §7.6): `out[t, h] = rnd_T(Σ_k partial[t, k, h])`, the
//! f32 partials of `moe_down_<b>bit` (scores already applied) summed in f32 in slot order and
//! rounded to `T` once.
//!
//! Geometry: grid `(⌈Din / TILE⌉, T)`; a thread sums whole columns `h`, so the order of the sum
//! is the slot order on every port and for any block.

use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `moe_combine`.
    pub struct MoeCombineParams {
        /// Tokens: rows of `out`.
        pub tokens: u32,
        /// Slots summed per token.
        pub k: u32,
        /// Model width: columns of `out`.
        pub din: u32,
    }
}

/// Columns per block.
const TILE: u32 = 256;

/// Descriptor of `moe_combine`.
pub struct MoeCombine;

impl KernelDef for MoeCombine {
    type Params = MoeCombineParams;
    const NAME: &'static str = "moe_combine";

    /// Buffers: `partial [T, K, Din]` f32, `out [T, Din]` in `T`.
    fn bind(p: &mut MoeCombineParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [partial, out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 2,
            });
        };
        let &[t, k, din] = *partial else {
            return Err(ShapeError::Invalid(
                "partial must be three-dimensional: [T, K, Din]",
            ));
        };
        shape::nonzero("T (the tokens: rows of partial)", t)?;
        shape::nonzero("K (the slots of partial)", k)?;
        shape::nonzero("Din (the columns of partial)", din)?;
        if *out != [t, din] {
            return Err(ShapeError::Invalid("out must be [T, Din], like partial's rows"));
        }
        shape::to_u32("elements of partial", shape::numel(partial))?;
        p.tokens = t as u32;
        p.k = k as u32;
        p.din = din as u32;
        Ok(())
    }

    fn launch(p: &MoeCombineParams) -> Launch {
        Launch {
            grid: [p.din.div_ceil(TILE), p.tokens, 1],
            block: TILE,
        }
    }
}

/// The body: block `(c, t)` writes columns `c·TILE ..` of row `t`, thread `i` columns
/// `i, i + size, …` of the tile.
pub fn moe_combine<T: Element, B: Block>(
    b: &B,
    p: &MoeCombineParams,
    partial: Src<f32>,
    out: Dst<T>,
) {
    let din = p.din as usize;
    let t = b.block_y() as usize;
    let start = b.block_x() as usize * TILE as usize;
    let end = (start + TILE as usize).min(din);
    let mut h = start + b.thread() as usize;
    while h < end {
        let mut sum = 0.0f32;
        let mut k = 0;
        while k < p.k as usize {
            sum += partial.get((t * p.k as usize + k) * din + h);
            k += 1;
        }
        out.set(t * din + h, T::from_f32(sum));
        h += b.size() as usize;
    }
}
