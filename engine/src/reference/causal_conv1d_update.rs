//! Mamba's conv step unfused: the window `concat(state, x)` per channel, the dot product with
//! its taps plus bias in f64, SiLU (or none), rounded to `T` once; the new state is the last
//! `k − 1` inputs, copied.

use kiln_math::kernels::causal_conv1d_update::ConvUpdateParams;
use kiln_math::Element;

/// The unfused chain of
/// [`causal_conv1d_update`](kiln_math::kernels::causal_conv1d_update::causal_conv1d_update): its
/// params and buffers, in list order, as host slices.
pub fn causal_conv1d_update<T: Element>(
    p: &ConvUpdateParams,
    x: &[T],
    weight: &[T],
    bias: &[T],
    state_in: &[T],
    out: &mut [T],
    state_out: &mut [T],
) {
    let (channels, k) = (p.channels as usize, p.width as usize);
    let f = |v: T| v.to_f32() as f64;
    for b in 0..p.batch as usize {
        let state = |j: usize| (b * (k - 1) + j) * channels;
        for c in 0..channels {
            let window: Vec<T> = (0..k - 1)
                .map(|j| state_in[state(j) + c])
                .chain([x[b * channels + c]])
                .collect();
            let mut acc = if p.has_bias == 1 { f(bias[c]) } else { 0.0 };
            for (j, &u) in window.iter().enumerate() {
                acc += f(weight[c * k + j]) * f(u);
            }
            if p.silu == 1 {
                acc /= 1.0 + (-acc).exp();
            }
            out[b * channels + c] = T::from_f32(acc as f32);
            for (j, &u) in window[1..].iter().enumerate() {
                state_out[state(j) + c] = u;
            }
        }
    }
}
