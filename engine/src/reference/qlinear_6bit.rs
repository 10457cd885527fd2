//! `qlinear_6bit`'s reference: [`qlinear`](super::qlinear) at 6 bits.

use kiln_math::kernels::qlinear::QLinearParams;
use kiln_math::Element;

/// The unfused chain of [`qlinear_6bit`](kiln_math::kernels::qlinear_6bit::qlinear_6bit):
/// its params and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn qlinear_6bit<T: Element>(
    p: &QLinearParams,
    x: &[T],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    bias: &[T],
    y: &mut [T],
) {
    super::qlinear::qlinear(p, 6, x, w_q, scales, biases, bias, y)
}
