//! `moe_act`'s reference: each slot's activation of spec §7.1 in f64 from the `T` gate and up
//! values, times the slot's score, rounded to f32 once.

use super::moe::activation;
use kiln_math::kernels::moe_act::MoeActParams;
use kiln_math::kernels::moe_experts::ACT_RELU2;
use kiln_math::Element;

/// The unfused chain of [`moe_act`](kiln_math::kernels::moe_act::moe_act): its params and
/// buffers, in list order, as host slices.
pub fn moe_act<T: Element>(
    p: &MoeActParams,
    gate: &[T],
    up: &[T],
    scores: &[f32],
    act_g: &mut [f32],
) {
    let cols = p.cols as usize;
    for (i, a) in act_g.iter_mut().enumerate() {
        let g = gate[i].to_f32() as f64;
        let u = (p.act != ACT_RELU2).then(|| up[i].to_f32() as f64);
        *a = (scores[i / cols] as f64 * activation(p.act, g, u)) as f32;
    }
}
