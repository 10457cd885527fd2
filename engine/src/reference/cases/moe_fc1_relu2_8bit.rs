//! The parity and bench cases of `moe_fc1_relu2_8bit`: [`moe`](super::moe)'s at 8 bits.

use super::moe::Kind;
use crate::case::Case;
use kiln_math::DType;

/// The parity cases (the same at every dtype: the outputs are f32).
pub fn cases(dtype: DType) -> Vec<Case> {
    super::moe::cases(Kind::Fc1, 8, dtype)
}

/// One token at model shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    super::moe::bench_cases(Kind::Fc1, 8, dtype)
}
