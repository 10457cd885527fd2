//! `moe_route`'s reference, from the routers' definitions: the keys in f32 as the models
//! compute them (softmax numerators `expf(l − max)` and their f32 sum; `1/(1 + expf(−l))` plus
//! the bias), the k largest picked by a stable sort (key descending, then index; NaN keys
//! last), the scores divided and scaled in f64 and stored in f32.

use kiln_math::kernels::moe_route::{MoeRouteParams, MODE_SOFTMAX};
use kiln_math::Element;

/// The unfused chain of [`moe_route`](kiln_math::kernels::moe_route::moe_route): its params
/// and buffers, in list order, as host slices.
pub fn moe_route<T: Element>(
    p: &MoeRouteParams,
    logits: &[T],
    correction_bias: &[f32],
    ids: &mut [u32],
    scores: &mut [f32],
) {
    let (e, k) = (p.experts as usize, p.k as usize);
    let softmax = p.mode == MODE_SOFTMAX;
    for (t, row) in logits.chunks(e).enumerate() {
        let l: Vec<f32> = row.iter().map(|v| v.to_f32()).collect();
        let top = l.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let values: Vec<f32> = l
            .iter()
            .map(|&v| {
                if softmax {
                    libm::expf(v - top)
                } else {
                    1.0 / (1.0 + libm::expf(-v))
                }
            })
            .collect();
        let keys: Vec<f32> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| if softmax { v } else { v + correction_bias[i] })
            .map(|v| if v.is_nan() { f32::NEG_INFINITY } else { v })
            .collect();
        let mut order: Vec<usize> = (0..e).collect();
        // Stable: equal keys keep index order.
        order.sort_by(|&a, &b| keys[b].total_cmp(&keys[a]));
        let picked = &order[..k];
        let picked_sum: f64 = picked.iter().map(|&i| values[i] as f64).sum();
        let denominator = match (softmax, p.renormalize == 1) {
            (true, true) => picked_sum,
            (true, false) => values.iter().map(|&v| v as f64).sum(),
            (false, true) if k > 1 => picked_sum + 1e-20,
            (false, _) => 1.0,
        };
        for (r, &i) in picked.iter().enumerate() {
            ids[t * k + r] = i as u32;
            scores[t * k + r] = (values[i] as f64 / denominator * p.scaling_factor as f64) as f32;
        }
    }
}
