//! The parity and bench cases of `gather_qmm_6bit`: [`gather_qmm`](super::gather_qmm)'s at 6 bits.

use crate::case::Case;
use kiln_math::DType;

/// The parity cases at `dtype`.
pub fn cases(dtype: DType) -> Vec<Case> {
    super::gather_qmm::cases(6, dtype)
}

/// Decode and sorted prefill at model shapes.
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    super::gather_qmm::bench_cases(6)
}
