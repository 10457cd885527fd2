//! Merge of attention states, unfused (spec §9.4): the closed form over each row's non-empty
//! partials (LSE not `-inf`) in f64; a NaN or `+inf` LSE makes the row NaN, and a non-finite
//! output element is NaN (docs/non-finite.md).

use kiln_math::kernels::paged_attention_merge_states::MergeStatesParams;
use kiln_math::Element;

/// The unfused chain of [`paged_attention_merge_states`](kiln_math::kernels::paged_attention_merge_states::paged_attention_merge_states): its params and
/// buffers, in list order, as host slices.
pub fn paged_attention_merge_states<T: Element>(
    p: &MergeStatesParams,
    v_in: &[T],
    lse_in: &[T],
    o_indptr: &[i32],
    v_out: &mut [T],
    lse_out: &mut [T],
) {
    let (h_len, d_len) = (p.heads as usize, p.head_dim as usize);
    for o in 0..p.rows as usize {
        let range = usize::try_from(o_indptr[o])
            .ok()
            .zip(usize::try_from(o_indptr[o + 1]).ok())
            .filter(|&(a, b)| a <= b && b <= p.partials as usize);
        for h in 0..h_len {
            let at = (o * h_len + h) * d_len;
            let Some((first, last)) = range else {
                v_out[at..at + d_len].fill(T::from_f32(f32::NAN));
                lse_out[o * h_len + h] = T::from_f32(f32::NAN);
                continue;
            };
            let present: Vec<(usize, f64)> = (first..last)
                .map(|i| (i, lse_in[i * h_len + h].to_f32() as f64))
                .filter(|&(_, l)| l != f64::NEG_INFINITY)
                .collect();
            if present.iter().any(|(_, l)| !l.is_finite()) {
                v_out[at..at + d_len].fill(T::from_f32(f32::NAN));
                lse_out[o * h_len + h] = T::from_f32(f32::NAN);
                continue;
            }
            let Some(m) = present.iter().map(|&(_, l)| l).reduce(f64::max) else {
                v_out[at..at + d_len].fill(T::from_f32(0.0));
                lse_out[o * h_len + h] = T::from_f32(f32::NEG_INFINITY);
                continue;
            };
            let total: f64 = present.iter().map(|&(_, l)| (l - m).exp2()).sum();
            for d in 0..d_len {
                let sum: f64 = present
                    .iter()
                    .map(|&(i, l)| {
                        (l - m).exp2() * v_in[(i * h_len + h) * d_len + d].to_f32() as f64
                    })
                    .sum();
                v_out[at + d] = T::from_f32(kiln_math::nan_unless_finite((sum / total) as f32));
            }
            lse_out[o * h_len + h] = T::from_f32((m + total.log2()) as f32);
        }
    }
}
