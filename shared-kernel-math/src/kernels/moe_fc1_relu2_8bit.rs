//! `moe_fc1_relu2` at 8 bits per code: the body and every contract are in
//! [`moe_experts`](super::moe_experts).

use super::moe_experts::{bind_up, launch, moe_up, MoeParams};
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Descriptor of `moe_fc1_relu2_8bit`.
pub struct MoeFc1Relu28Bit;

impl KernelDef for MoeFc1Relu28Bit {
    type Params = MoeParams;
    const NAME: &'static str = "moe_fc1_relu2_8bit";

    /// Buffers: `x [T, Din]`, `indices [T, K]`, fc1 (`w_q [E, Dff, Din·8/32]`, `scales`, `biases`:
    /// packed words of `E·Dff·Din/group_size` values each), `act_g [T, K, Dff]` f32.
    fn bind(p: &mut MoeParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        bind_up(p, shapes, 8, false)
    }

    fn launch(p: &MoeParams) -> Launch {
        launch(p, p.dff)
    }
}

/// The body at 8 bits.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn moe_fc1_relu2_8bit<T: Element, B: Block>(
    b: &B,
    p: &MoeParams,
    x: Src<T>,
    indices: Src<u32>,
    fc1_q: Src<u32>,
    fc1_scales: Src<u32>,
    fc1_biases: Src<u32>,
    act_g: Dst<f32>,
) {
    // One projection: the second is fc1 again, never read.
    moe_up(
        b,
        p,
        x,
        indices,
        fc1_q,
        fc1_scales,
        fc1_biases,
        fc1_q,
        fc1_scales,
        fc1_biases,
        act_g,
        false,
        [0u32; 8],
    );
}
