//! `gather_qmm`, unfused, from spec §13: for every slot the expert's rows dequantized as the
//! affine format writes them (scale and bias widened exactly from their stored dtype), the dot
//! product with the slot's `lhs` row in f64, rounded to `T` once. The `sorted` hint and the
//! tiling params change nothing here, as they must change nothing in the kernels. A slot whose
//! expert is ≥ E or whose `lhs` row is ≥ L gives zeros, the kernels' documented answer. Shared
//! by the `gather_qmm_<b>bit` references.

use super::moe::{dot, widened, AffineRows};
use kiln_math::kernels::gather_qmm::GatherQmmParams;
use kiln_math::Element;

/// The unfused chain at `bits` bits per code, over host slices in list order.
#[allow(clippy::too_many_arguments)]
pub fn gather_qmm<T: Element>(
    p: &GatherQmmParams,
    bits: u32,
    lhs: &[T],
    lhs_idx: &[u32],
    rhs_idx: &[u32],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    out: &mut [T],
) {
    let (c, n) = (p.cols as usize, p.rows as usize);
    let experts = AffineRows::new(p.group_size, p.scale_dtype, bits, (w_q, scales, biases));
    for s in 0..p.slots as usize {
        let (l, e) = (lhs_idx[s] as usize, rhs_idx[s] as usize);
        let known = l < p.lhs_rows as usize && e < p.experts as usize;
        let x = if known {
            widened(&lhs[l * c..(l + 1) * c])
        } else {
            Vec::new()
        };
        for r in 0..n {
            let v = if known {
                dot(&x, &experts.row(e * n + r, c))
            } else {
                0.0
            };
            out[s * n + r] = T::from_f32(v as f32);
        }
    }
}
