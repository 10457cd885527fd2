//! `qlinear_8bit`'s reference: [`qlinear`](super::qlinear) at 8 bits.

use kiln_math::kernels::qlinear::QLinearParams;
use kiln_math::Element;

/// The unfused chain of [`qlinear_8bit`](kiln_math::kernels::qlinear_8bit::qlinear_8bit):
/// its params and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn qlinear_8bit<T: Element>(
    p: &QLinearParams,
    x: &[T],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    bias: &[T],
    y: &mut [T],
) {
    super::qlinear::qlinear(p, 8, x, w_q, scales, biases, bias, y)
}
