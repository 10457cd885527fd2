//! The parity and bench cases of `moe_down_sum_4bit`: [`moe`](super::moe)'s at 4 bits.

use super::moe::Kind;
use crate::case::Case;
use kiln_math::DType;

/// The parity cases (the sum's budget is the output dtype's).
pub fn cases(dtype: DType) -> Vec<Case> {
    super::moe::cases(Kind::DownSum, 4, dtype)
}

/// One token at model shapes, scales in bf16 (MLX's usual checkpoint dtype).
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    super::moe::bench_cases(Kind::DownSum, 4, DType::Bf16)
}
