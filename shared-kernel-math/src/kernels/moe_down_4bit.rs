//! `moe_down` at 4 bits per code: the body and every contract are in
//! [`moe_experts`](super::moe_experts).

use super::moe_experts::{bind_down, launch, moe_down, MoeParams};
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Descriptor of `moe_down_4bit`.
pub struct MoeDown4Bit;

impl KernelDef for MoeDown4Bit {
    type Params = MoeParams;
    const NAME: &'static str = "moe_down_4bit";

    /// Buffers: `indices [T, K]`, down (`w_q [E, Din, Dff·4/32]`, `scales`, `biases`: packed
    /// words of `E·Din·Dff/group_size` values each), `act_g [T, K, Dff]` and `scores [T, K]`
    /// f32, `partial [T, K, Din]` f32.
    fn bind(p: &mut MoeParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        bind_down(p, shapes, 4)
    }

    fn launch(p: &MoeParams) -> Launch {
        launch(p, p.din)
    }
}

/// The body at 4 bits (`T` is f32).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn moe_down_4bit<T: Element, B: Block>(
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
        [0u32; 4],
    );
}
