//! `moe_down_sum` at 4 bits per code: the body and every contract are in
//! [`moe_down_sum`](super::moe_down_sum).

use super::moe_down_sum::{bind_down_sum, launch_down_sum, moe_down_sum};
use super::moe_experts::MoeParams;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Descriptor of `moe_down_sum_4bit`.
pub struct MoeDownSum4Bit;

impl KernelDef for MoeDownSum4Bit {
    type Params = MoeParams;
    const NAME: &'static str = "moe_down_sum_4bit";

    /// Buffers: `indices [T, K]`, down (`w_q [E, Din, Dff·4/32]`, `scales`, `biases`: packed
    /// words of `E·Din·Dff/group_size` values each), `act_g [T, K, Dff]` and `scores [T, K]`
    /// f32, `out [T, Din]` in `T`.
    fn bind(p: &mut MoeParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        bind_down_sum(p, shapes, 4)
    }

    fn launch(p: &MoeParams) -> Launch {
        launch_down_sum(p)
    }
}

/// The body at 4 bits.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn moe_down_sum_4bit<T: Element, B: Block>(
    b: &B,
    p: &MoeParams,
    indices: Src<u32>,
    down_q: Src<u32>,
    down_scales: Src<u32>,
    down_biases: Src<u32>,
    act_g: Src<f32>,
    scores: Src<f32>,
    out: Dst<T>,
) {
    moe_down_sum(
        b,
        p,
        indices,
        down_q,
        down_scales,
        down_biases,
        act_g,
        scores,
        out,
        [0u32; 4],
    );
}
