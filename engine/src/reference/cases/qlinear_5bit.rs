//! The parity cases of `qlinear_5bit` and the shapes `kiln bench` times it at.

use crate::case::Case;
use kiln_math::DType;

/// The parity cases at `dtype`: see [`super::qlinear`].
pub fn cases(dtype: DType) -> Vec<Case> {
    super::qlinear::cases(5, dtype)
}

/// The bench shapes at `dtype`: see [`super::qlinear`].
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    super::qlinear::bench_cases(5, dtype)
}
