//! The activation of the `gather_qmm` MoE chain (spec §7.8 step 2's unfused path, §7.1's
//! activations): from the `T` rows of the gate and up gathers, `act_g[s, f] = scores[s] ·
//! act(gate[s, f], up[s, f])` in f32, `act` SwiGLU, GeGLU (the tanh form) or relu² of `gate`
//! (`up` unread). The slot's score is applied here and the row stays f32: down is linear in its
//! input, so the f32 down gather of these rows gives the score-weighted partials that
//! `moe_combine` sums and rounds once (spec §7.4: never a per-expert partial in 16 bits).
//!
//! Geometry: grid `⌈S·F / TILE⌉` blocks, each a contiguous tile of elements that its threads
//! stride through, so every element is computed the same way on any block and wave.

use super::moe_experts::{activation, ACT_RELU2};
use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `moe_act`.
    pub struct MoeActParams {
        /// 0 SwiGLU, 1 GeGLU, 2 relu² (the `moe_experts` codes).
        pub act: u32 = 0,
        /// Slots: rows of `gate`, `up` and `act_g`, elements of `scores`.
        pub slots: u32,
        /// Columns of a row (the experts' Dff).
        pub cols: u32,
    }
}

/// Elements per block.
const TILE: u32 = 2048;

/// Threads per block on a GPU: eight elements each.
const BLOCK: u32 = 256;

/// Descriptor of `moe_act`.
pub struct MoeAct;

impl KernelDef for MoeAct {
    type Params = MoeActParams;
    const NAME: &'static str = "moe_act";

    /// Buffers: `gate [S, F]` and `up [S, F]` in `T` (relu² reads no `up`: pass `gate`),
    /// `scores [S]` f32, `act_g [S, F]` f32.
    fn bind(p: &mut MoeActParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [gate, up, scores, act_g] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 4,
            });
        };
        if p.act > ACT_RELU2 {
            return Err(ShapeError::Range {
                what: "act (0 SwiGLU, 1 GeGLU, 2 relu²)",
                got: p.act as f64,
                lo: 0.0,
                hi: ACT_RELU2 as f64,
            });
        }
        let &[s, f] = *gate else {
            return Err(ShapeError::Invalid("gate must be two-dimensional: [S, F]"));
        };
        shape::nonzero("S (the slots: rows of gate)", s)?;
        shape::nonzero("F (the columns of gate)", f)?;
        if up != gate {
            return Err(ShapeError::Invalid(
                "up must have the shape of gate (relu² reads none: pass gate)",
            ));
        }
        if *scores != [s] {
            return Err(ShapeError::Invalid(
                "scores must be [S]: one per row of gate",
            ));
        }
        if act_g != gate {
            return Err(ShapeError::Invalid("act_g must have the shape of gate"));
        }
        shape::to_u32("elements of gate", s.saturating_mul(f))?;
        p.slots = s as u32;
        p.cols = f as u32;
        Ok(())
    }

    fn launch(p: &MoeActParams) -> Launch {
        Launch {
            grid: [(p.slots * p.cols).div_ceil(TILE), 1, 1],
            block: BLOCK,
        }
    }
}

/// The body: block `k` handles the elements `[k·TILE, (k+1)·TILE)`, thread `t` the elements
/// `t, t + size, …` of them.
pub fn moe_act<T: Element, B: Block>(
    b: &B,
    p: &MoeActParams,
    gate: Src<T>,
    up: Src<T>,
    scores: Src<f32>,
    act_g: Dst<f32>,
) {
    let cols = p.cols as usize;
    let start = b.block_x() as usize * TILE as usize;
    let end = (start + TILE as usize).min(p.slots as usize * cols);
    let gated = p.act != ACT_RELU2;
    let mut i = start + b.thread() as usize;
    while i < end {
        let g = gate.get(i).to_f32();
        let u = if gated { up.get(i).to_f32() } else { 0.0 };
        act_g.set(i, scores.get(i / cols) * activation(p.act, g, u));
        i += b.size() as usize;
    }
}
