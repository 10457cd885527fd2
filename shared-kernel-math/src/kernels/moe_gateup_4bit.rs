//! `moe_gateup` at 4 bits per code: the body and every contract are in
//! [`moe_experts`](super::moe_experts).

use super::moe_experts::{bind_up, launch, moe_up, MoeParams};
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Descriptor of `moe_gateup_4bit`.
pub struct MoeGateup4Bit;

impl KernelDef for MoeGateup4Bit {
    type Params = MoeParams;
    const NAME: &'static str = "moe_gateup_4bit";

    /// Buffers: `x [T, Din]`, `indices [T, K]`, gate and up (`w_q [E, Dff, Din·4/32]`, `scales`,
    /// `biases`: packed words of `E·Dff·Din/group_size` values each), `act_g [T, K, Dff]` f32.
    fn bind(p: &mut MoeParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        bind_up(p, shapes, 4, true)
    }

    fn launch(p: &MoeParams) -> Launch {
        launch(p, p.dff)
    }
}

/// The body at 4 bits.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn moe_gateup_4bit<T: Element, B: Block>(
    b: &B,
    p: &MoeParams,
    x: Src<T>,
    indices: Src<u32>,
    gate_q: Src<u32>,
    gate_scales: Src<u32>,
    gate_biases: Src<u32>,
    up_q: Src<u32>,
    up_scales: Src<u32>,
    up_biases: Src<u32>,
    act_g: Dst<f32>,
) {
    moe_up(
        b,
        p,
        x,
        indices,
        gate_q,
        gate_scales,
        gate_biases,
        up_q,
        up_scales,
        up_biases,
        act_g,
        true,
        [0u32; 4],
    );
}
