//! The last step of a split Gumbel-max draw (spec §5): per row the first maximum over the
//! splits' (value, index) pairs — larger value, then lower index; an all −inf row yields 0.

use kiln_math::kernels::gumbel_max_merge::GumbelMergeParams;
use kiln_math::Element;

/// The unfused chain of [`gumbel_max_merge`](kiln_math::kernels::gumbel_max_merge::gumbel_max_merge): its params and
/// buffers, in list order, as host slices.
pub fn gumbel_max_merge<T: Element>(
    p: &GumbelMergeParams,
    vals: &[T],
    idxs: &[u32],
    index: &mut [u32],
) {
    let splits = p.splits as usize;
    for (r, out) in index.iter_mut().enumerate() {
        let mut best = (f32::NEG_INFINITY, 0u32);
        for s in r * splits..(r + 1) * splits {
            let (v, i) = (vals[s].to_f32(), idxs[s]);
            if v > best.0 || (v == best.0 && i < best.1) {
                best = (v, i);
            }
        }
        *out = best.1;
    }
}
