//! `moe_combine`'s reference: the K-sum of the f32 partials in f64, rounded to `T` once.

use kiln_math::kernels::moe_combine::MoeCombineParams;
use kiln_math::Element;

/// The unfused chain of [`moe_combine`](kiln_math::kernels::moe_combine::moe_combine): its
/// params and buffers, in list order, as host slices.
pub fn moe_combine<T: Element>(p: &MoeCombineParams, partial: &[f32], out: &mut [T]) {
    let (k, din) = (p.k as usize, p.din as usize);
    for (t, row) in out.chunks_mut(din).enumerate() {
        for (h, o) in row.iter_mut().enumerate() {
            let sum: f64 = (0..k).map(|s| partial[(t * k + s) * din + h] as f64).sum();
            *o = T::from_f32(sum as f32);
        }
    }
}
