//! `moe_fc1_relu2_8bit`'s reference: [`moe::up`](super::moe::up) at 8 bits.

use kiln_math::kernels::moe_experts::MoeParams;
use kiln_math::Element;

/// The unfused chain of [`moe_fc1_relu2_8bit`](kiln_math::kernels::moe_fc1_relu2_8bit::moe_fc1_relu2_8bit): its params and
/// buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn moe_fc1_relu2_8bit<T: Element>(
    p: &MoeParams,
    x: &[T],
    indices: &[u32],
    fc1_q: &[u32],
    fc1_scales: &[u32],
    fc1_biases: &[u32],
    act_g: &mut [f32],
) {
    super::moe::up(
        p,
        8,
        x,
        indices,
        (fc1_q, fc1_scales, fc1_biases),
        None,
        act_g,
    )
}
