//! `moe_gateup_4bit`'s reference: [`moe::up`](super::moe::up) at 4 bits.

use kiln_math::kernels::moe_experts::MoeParams;
use kiln_math::Element;

/// The unfused chain of [`moe_gateup_4bit`](kiln_math::kernels::moe_gateup_4bit::moe_gateup_4bit): its params and
/// buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn moe_gateup_4bit<T: Element>(
    p: &MoeParams,
    x: &[T],
    indices: &[u32],
    gate_q: &[u32],
    gate_scales: &[u32],
    gate_biases: &[u32],
    up_q: &[u32],
    up_scales: &[u32],
    up_biases: &[u32],
    act_g: &mut [f32],
) {
    super::moe::up(
        p,
        4,
        x,
        indices,
        (gate_q, gate_scales, gate_biases),
        Some((up_q, up_scales, up_biases)),
        act_g,
    )
}
