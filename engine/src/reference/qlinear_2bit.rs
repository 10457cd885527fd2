//! `qlinear_2bit`'s reference: [`qlinear`](super::qlinear) at 2 bits.

use kiln_math::kernels::qlinear::QLinearParams;
use kiln_math::Element;

/// The unfused chain of [`qlinear_2bit`](kiln_math::kernels::qlinear_2bit::qlinear_2bit):
/// its params and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn qlinear_2bit<T: Element>(
    p: &QLinearParams,
    x: &[T],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    bias: &[T],
    y: &mut [T],
) {
    super::qlinear::qlinear(p, 2, x, w_q, scales, biases, bias, y)
}
