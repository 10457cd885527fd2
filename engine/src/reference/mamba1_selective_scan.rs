//! Mamba1's selective scan, unfused (spec §12): the recurrence over the sequence in f64 from the
//! stored inputs, `y` rounded to `T` at every step and the final state to f32, where the chain
//! stores them.

use kiln_math::kernels::mamba1_selective_scan::Mamba1ScanParams;
use kiln_math::Element;

/// The unfused chain of
/// [`mamba1_selective_scan`](kiln_math::kernels::mamba1_selective_scan::mamba1_selective_scan):
/// its params and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn mamba1_selective_scan<T: Element>(
    p: &Mamba1ScanParams,
    x: &[T],
    dt: &[T],
    b_in: &[T],
    c_in: &[T],
    a: &[f32],
    d: &[T],
    state_in: &[f32],
    y: &mut [T],
    state_out: &mut [f32],
) {
    let (batch, len) = (p.batch as usize, p.len as usize);
    let (dm, n) = (p.channels as usize, p.state_dim as usize);
    let wide = |v: T| v.to_f32() as f64;
    let mut s = vec![0.0f64; n];
    for row in 0..batch {
        for ch in 0..dm {
            let state_at = (row * dm + ch) * n;
            for (k, v) in s.iter_mut().enumerate() {
                *v = if p.fresh == 1 {
                    0.0
                } else {
                    state_in[state_at + k] as f64
                };
            }
            for t in 0..len {
                let at = (row * len + t) * dm + ch;
                let bc = (row * len + t) * n;
                let (xt, step) = (wide(x[at]), wide(dt[at]));
                let mut out = wide(d[ch]) * xt;
                for (k, v) in s.iter_mut().enumerate() {
                    let decay = (step * a[ch * n + k] as f64).exp();
                    *v = decay * *v + step * xt * wide(b_in[bc + k]);
                    out += *v * wide(c_in[bc + k]);
                }
                y[at] = T::from_f32(out as f32);
            }
            for (k, v) in s.iter().enumerate() {
                state_out[state_at + k] = *v as f32;
            }
        }
    }
}
