//! `gather_qmm_4bit`'s reference: [`gather_qmm::gather_qmm`](super::gather_qmm::gather_qmm) at 4 bits.

use kiln_math::kernels::gather_qmm::GatherQmmParams;
use kiln_math::Element;

/// The unfused chain of [`gather_qmm_4bit`](kiln_math::kernels::gather_qmm_4bit::gather_qmm_4bit): its
/// params and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn gather_qmm_4bit<T: Element>(
    p: &GatherQmmParams,
    lhs: &[T],
    lhs_idx: &[u32],
    rhs_idx: &[u32],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    out: &mut [T],
) {
    super::gather_qmm::gather_qmm(p, 4, lhs, lhs_idx, rhs_idx, w_q, scales, biases, out)
}
