//! `qlinear_5bit`'s reference: [`qlinear`](super::qlinear) at 5 bits.

use kiln_math::kernels::qlinear::QLinearParams;
use kiln_math::Element;

/// The unfused chain of [`qlinear_5bit`](kiln_math::kernels::qlinear_5bit::qlinear_5bit):
/// its params and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn qlinear_5bit<T: Element>(
    p: &QLinearParams,
    x: &[T],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    bias: &[T],
    y: &mut [T],
) {
    super::qlinear::qlinear(p, 5, x, w_q, scales, biases, bias, y)
}
