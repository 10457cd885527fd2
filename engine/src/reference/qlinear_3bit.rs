//! `qlinear_3bit`'s reference: [`qlinear`](super::qlinear) at 3 bits.

use kiln_math::kernels::qlinear::QLinearParams;
use kiln_math::Element;

/// The unfused chain of [`qlinear_3bit`](kiln_math::kernels::qlinear_3bit::qlinear_3bit):
/// its params and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn qlinear_3bit<T: Element>(
    p: &QLinearParams,
    x: &[T],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    bias: &[T],
    y: &mut [T],
) {
    super::qlinear::qlinear(p, 3, x, w_q, scales, biases, bias, y)
}
