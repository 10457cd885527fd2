//! add3 → LayerNorm, unfused (spec §11): `x_out = (attn + mlp) + residual` rounded after each
//! add, then an f32 LayerNorm that sums in index order.

use super::primitives;
use kiln_math::kernels::fused_add3_layer_norm::Add3LayerNormParams;
use kiln_math::Element;

/// The unfused chain of [`fused_add3_layer_norm`](kiln_math::kernels::fused_add3_layer_norm::fused_add3_layer_norm): its params and
/// buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)] // one slice per buffer of the list entry
pub fn fused_add3_layer_norm<T: Element>(
    p: &Add3LayerNormParams,
    attn: &[T],
    mlp: &[T],
    residual: &[T],
    weight: &[T],
    bias: &[T],
    x_out: &mut [T],
    h_out: &mut [T],
) {
    let joined = primitives::add(&primitives::add(attn, mlp), residual);
    x_out.copy_from_slice(&joined);
    primitives::layer_norm_f32(&joined, weight, bias, p.eps, h_out);
}
