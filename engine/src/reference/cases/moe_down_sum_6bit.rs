//! The parity and bench cases of `moe_down_sum_6bit`: [`moe`](super::moe)'s at 6 bits.

use super::moe::Kind;
use crate::case::Case;
use kiln_math::DType;

/// The parity cases (the sum's budget is the output dtype's).
pub fn cases(dtype: DType) -> Vec<Case> {
    super::moe::cases(Kind::DownSum, 6, dtype)
}

/// One token at model shapes, scales in bf16 (MLX's usual checkpoint dtype).
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    super::moe::bench_cases(Kind::DownSum, 6, DType::Bf16)
}
