//! xIELU as the unfused elementwise graph (spec §10): each op stores a `T` tensor.

use super::primitives::{map, scalar, zip};
use kiln_math::kernels::fused_xielu::XieluParams;
use kiln_math::Element;

/// The unfused chain of [`fused_xielu`](kiln_math::kernels::fused_xielu::fused_xielu): its params and
/// buffers, in list order, as host slices.
pub fn fused_xielu<T: Element>(p: &XieluParams, x: &[T], out: &mut [T]) {
    let (alpha_p, alpha_n) = (scalar::<T>(p.alpha_p), scalar::<T>(p.alpha_n));
    let (beta, eps) = (scalar::<T>(p.beta), scalar::<T>(p.eps));
    let square = map(x, |v| v * v);
    let positive = map(&square, |v| alpha_p * v);
    let clamped = map(x, |v| if v.is_nan() { v } else { v.min(eps) });
    // The graph's expm1 runs in f32; libm's is the one every port calls.
    let em1 = map(&clamped, |v| libm::expm1f(v as f32) as f64);
    let shifted = zip(&em1, x, |a, b| a - b);
    let negative = map(&shifted, |v| v * alpha_n);
    let selected: Vec<T> = x
        .iter()
        .zip(positive.iter().zip(&negative))
        .map(|(v, (&pos, &neg))| if v.to_f32() > 0.0 { pos } else { neg })
        .collect();
    let linear = map(x, |v| v * beta);
    out.copy_from_slice(&zip(&selected, &linear, |a, b| a + b));
}
