//! Qwen3-Next's Gated DeltaNet recurrence, unfused (spec §14, mlx-lm's `gated_delta_kernel`):
//! each row's state in f64, step by step — decay, the delta rule's correction from `k`, `v` and
//! `beta`, the output against `q` — rounded to `T` where the chain stores it (every `y`, the
//! final state, and with `chain_parity` the state after every step).

use kiln_math::kernels::gated_delta_step::{GatedDeltaParams, MASK_BYTES, MASK_WORDS};
use kiln_math::Element;

/// Whether step `i = b·T + t` runs under `p.mask_kind`.
fn step_runs(p: &GatedDeltaParams, mask: &[u32], i: usize) -> bool {
    match p.mask_kind {
        MASK_WORDS => mask[i] != 0,
        MASK_BYTES => mask[i / 4].to_le_bytes()[i % 4] != 0,
        _ => true,
    }
}

/// `v` rounded to `T` and back (through f32, as a stored tensor holds it).
fn rounded<T: Element>(v: f64) -> f64 {
    T::from_f32(v as f32).to_f32() as f64
}

/// The unfused chain of
/// [`gated_delta_step`](kiln_math::kernels::gated_delta_step::gated_delta_step): its params and
/// buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn gated_delta_step<T: Element>(
    p: &GatedDeltaParams,
    q: &[T],
    k: &[T],
    v: &[T],
    g: &[T],
    beta: &[T],
    mask: &[u32],
    state_in: &[T],
    y: &mut [T],
    state_out: &mut [T],
) {
    let (steps, hk_n, hv_n) = (
        p.steps as usize,
        p.key_heads as usize,
        p.value_heads as usize,
    );
    let (dk, dv) = (p.key_dim as usize, p.value_dim as usize);
    let f = |x: T| x.to_f32() as f64;
    for b in 0..p.batch as usize {
        for hv in 0..hv_n {
            let hk = hv / (hv_n / hk_n);
            for d in 0..dv {
                let row = ((b * hv_n + hv) * dv + d) * dk;
                let mut s: Vec<f64> = state_in[row..row + dk].iter().map(|&x| f(x)).collect();
                for t in 0..steps {
                    let bt = b * steps + t;
                    let head = bt * hv_n + hv;
                    let at = head * dv + d;
                    if !step_runs(p, mask, bt) {
                        y[at] = T::from_f32(0.0);
                        continue;
                    }
                    let keys = (bt * hk_n + hk) * dk;
                    for (c, sc) in s.iter_mut().enumerate() {
                        let gate = if p.gate_per_key == 1 {
                            g[head * dk + c]
                        } else {
                            g[head]
                        };
                        *sc *= f(gate);
                    }
                    let kv: f64 = (0..dk).map(|c| s[c] * f(k[keys + c])).sum();
                    let delta = (f(v[at]) - kv) * f(beta[head]);
                    for (c, sc) in s.iter_mut().enumerate() {
                        *sc += f(k[keys + c]) * delta;
                    }
                    let out: f64 = (0..dk).map(|c| s[c] * f(q[keys + c])).sum();
                    y[at] = T::from_f32(out as f32);
                    if p.chain_parity == 1 {
                        s.iter_mut().for_each(|sc| *sc = rounded::<T>(*sc));
                    }
                }
                for (c, sc) in s.iter().enumerate() {
                    state_out[row + c] = T::from_f32(*sc as f32);
                }
            }
        }
    }
}
