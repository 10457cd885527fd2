//! add → RMSNorm, unfused (spec §3).

use super::primitives;
use kiln_math::kernels::fused_add_rms_norm::AddRmsNormParams;
use kiln_math::Element;

/// The unfused chain of [`fused_add_rms_norm`](kiln_math::kernels::fused_add_rms_norm::fused_add_rms_norm): its params and
/// buffers, in list order, as host slices.
pub fn fused_add_rms_norm<T: Element>(
    p: &AddRmsNormParams,
    x: &[T],
    residual: &mut [T],
    weight: &[T],
    out: &mut [T],
) {
    let sum = primitives::add(x, residual);
    residual.copy_from_slice(&sum);
    primitives::rms_norm(residual, &primitives::norm_gain(weight, p.weight_bias), p.eps, out);
}
