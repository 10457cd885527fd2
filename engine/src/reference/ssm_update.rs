//! Mamba2's single-token state update, unfused (spec §8): `dt'`, `dA`, the new state and the
//! output in f64 from the stored inputs (each packed input widened exactly from its dtype), the
//! state rounded to f32 and the output to `T` where the chain stores them.

use super::qlinear::packed_scale;
use kiln_math::kernels::ssm_update::SsmUpdateParams;
use kiln_math::Element;

/// `log(1 + e^z)` without overflow.
fn softplus(z: f64) -> f64 {
    z.max(0.0) + (-z.abs()).exp().ln_1p()
}

/// The unfused chain of [`ssm_update`](kiln_math::kernels::ssm_update::ssm_update): its params
/// and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn ssm_update<T: Element>(
    p: &SsmUpdateParams,
    x: &[T],
    a_log: &[u32],
    b_in: &[u32],
    c_in: &[u32],
    d: &[T],
    dt: &[u32],
    dt_bias: &[u32],
    state_in: &[f32],
    out: &mut [T],
    state_out: &mut [f32],
) {
    let (heads, head_dim, ds) = (p.heads as usize, p.head_dim as usize, p.state_dim as usize);
    let groups = p.groups as usize;
    let (lo, hi) = (p.time_step_min as f64, p.time_step_max as f64);
    for n in 0..p.batch as usize * heads {
        let (batch, h) = (n / heads, n % heads);
        let group = h / (heads / groups);
        let z = packed_scale(dt, p.dt_dtype, n) + packed_scale(dt_bias, p.dt_bias_dtype, h);
        let step = softplus(z).max(lo).min(hi);
        let decay = (-packed_scale(a_log, p.a_log_dtype, h).exp() * step).exp();
        let bc = (batch * groups + group) * ds;
        for r in 0..head_dim {
            let row = n * head_dim + r;
            let xv = x[row].to_f32() as f64;
            let mut y = 0.0f64;
            for s in 0..ds {
                let new = decay * state_in[row * ds + s] as f64
                    + xv * step * packed_scale(b_in, p.b_dtype, bc + s);
                state_out[row * ds + s] = new as f32;
                y += new * packed_scale(c_in, p.c_dtype, bc + s);
            }
            out[row] = T::from_f32((y + xv * d[h].to_f32() as f64) as f32);
        }
    }
}
