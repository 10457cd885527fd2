//! `silu(gate) · up` as the unfused pair: the product in f64 from the `T` inputs, rounded to `T`
//! once.

use kiln_math::kernels::fused_silu_mul::SiluMulParams;
use kiln_math::Element;

/// The unfused chain of [`fused_silu_mul`](kiln_math::kernels::fused_silu_mul::fused_silu_mul): its params and
/// buffers, in list order, as host slices.
pub fn fused_silu_mul<T: Element>(_p: &SiluMulParams, gate: &[T], up: &[T], out: &mut [T]) {
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        let g = g.to_f32() as f64;
        *o = T::from_f32((g / (1.0 + (-g).exp()) * u.to_f32() as f64) as f32);
    }
}
