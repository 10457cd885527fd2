//! Dense linear layer, unfused: `y[m, n] = rnd_T(Σ_k x[m, k] · w[n, k] + bias[n])`, the dot
//! products and the bias add in f64 over the `T` inputs, rounded to `T` once.

use kiln_math::kernels::linear::LinearParams;
use kiln_math::Element;

/// The unfused chain of [`linear`](kiln_math::kernels::linear::linear): its params and
/// buffers, in list order, as host slices.
pub fn linear<T: Element>(p: &LinearParams, x: &[T], w: &[T], bias: &[T], y: &mut [T]) {
    let (m, k, n) = (p.m as usize, p.k as usize, p.n as usize);
    for r in 0..m {
        let xr = &x[r * k..(r + 1) * k];
        for c in 0..n {
            let wr = &w[c * k..(c + 1) * k];
            let dot: f64 = xr
                .iter()
                .zip(wr)
                .map(|(a, b)| a.to_f32() as f64 * b.to_f32() as f64)
                .sum();
            let b = if p.has_bias != 0 {
                bias[c].to_f32() as f64
            } else {
                0.0
            };
            y[r * n + c] = T::from_f32((dot + b) as f32);
        }
    }
}
