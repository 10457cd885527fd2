//! Mamba2's gated RMSNorm unfused, in f64: `h = y · silu(gate)`, each group of `I / G` elements
//! divided by `sqrt(mean(h²) + eps)`, times the weight, rounded to `T` once.

use super::primitives;
use kiln_math::kernels::gated_rms_norm::GatedRmsNormParams;
use kiln_math::Element;

/// The unfused chain of [`gated_rms_norm`](kiln_math::kernels::gated_rms_norm::gated_rms_norm):
/// its params and buffers, in list order, as host slices.
pub fn gated_rms_norm<T: Element>(
    p: &GatedRmsNormParams,
    y: &[T],
    gate: &[T],
    weight: &[T],
    out: &mut [T],
) {
    let len = p.group_len as usize;
    let f = |v: T| v.to_f32() as f64;
    for (g, group) in out.chunks_mut(len).enumerate() {
        let at = g * len;
        let h: Vec<f64> = (at..at + len)
            .map(|i| {
                if p.has_gate == 1 {
                    let s = f(gate[i]);
                    f(y[i]) * s / (1.0 + (-s).exp())
                } else {
                    f(y[i])
                }
            })
            .collect();
        let inv = primitives::inverse_rms(h.iter().map(|v| v * v).sum(), len, p.eps);
        let first = at % weight.len();
        for (i, o) in group.iter_mut().enumerate() {
            *o = T::from_f32((f(weight[first + i]) * h[i] * inv) as f32);
        }
    }
}
