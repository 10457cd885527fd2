//! `qlinear_mma_4bit`'s reference: [`qlinear`](super::qlinear) at 4 bits, as for `qlinear_4bit`.

use kiln_math::kernels::qlinear::QLinearParams;
use kiln_math::Element;

/// The unfused chain of
/// [`qlinear_mma_4bit`](kiln_math::kernels::qlinear_mma_4bit::qlinear_mma_4bit): its params
/// and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn qlinear_mma_4bit<T: Element>(
    p: &QLinearParams,
    x: &[T],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    bias: &[T],
    y: &mut [T],
) {
    super::qlinear::qlinear(p, 4, x, w_q, scales, biases, bias, y)
}
