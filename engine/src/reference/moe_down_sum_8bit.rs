//! `moe_down_sum_8bit`'s reference: [`moe::down_sum`](super::moe::down_sum) at 8 bits.

use kiln_math::kernels::moe_experts::MoeParams;
use kiln_math::Element;

/// The unfused chain of [`moe_down_sum_8bit`](kiln_math::kernels::moe_down_sum_8bit::moe_down_sum_8bit):
/// its params and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn moe_down_sum_8bit<T: Element>(
    p: &MoeParams,
    indices: &[u32],
    down_q: &[u32],
    down_scales: &[u32],
    down_biases: &[u32],
    act_g: &[f32],
    scores: &[f32],
    out: &mut [T],
) {
    super::moe::down_sum(
        p,
        8,
        indices,
        down_q,
        down_scales,
        down_biases,
        act_g,
        scores,
        out,
    )
}
