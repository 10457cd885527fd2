//! `moe_down` at 6 bits per code: the body and every contract are in
//! [`moe_experts`](super::moe_experts).

use super::moe_experts::{bind_down, launch, moe_down, MoeParams};
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Descriptor of `moe_down_6bit`.
pub struct MoeDown6Bit;

impl KernelDef for MoeDown6Bit {
    type Params = MoeParams;
    const NAME: &'static str = "moe_down_6bit";

    /// Buffers: `indices [T, K]`, down (`w_q [E, Din, Dff·6/32]`, `scales`, `biases`: packed
    /// words of `E·Din·Dff/group_size` values each), `act_g [T, K, Dff]` and `scores [T, K]`
    /// f32, `partial [T, K, Din]` f32.
    fn bind(p: &mut MoeParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        bind_down(p, shapes, 6)
    }

    fn launch(p: &MoeParams) -> Launch {
        launch(p, p.din)
    }
}

/// The body at 6 bits (`T` is f32).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn moe_down_6bit<T: Element, B: Block>(
    b: &B,
    p: &MoeParams,
    indices: Src<u32>,
    down_q: Src<u32>,
    down_scales: Src<u32>,
    down_biases: Src<u32>,
    act_g: Src<T>,
    scores: Src<T>,
    partial: Dst<T>,
) {
    moe_down(
        b,
        p,
        indices,
        down_q,
        down_scales,
        down_biases,
        act_g,
        scores,
        partial,
        [0u32; 6],
    );
}
