//! The parity and bench cases of `moe_down_4bit`: [`moe`](super::moe)'s at 4 bits.

use super::moe::Kind;
use crate::case::Case;
use kiln_math::DType;

/// The parity cases.
pub fn cases(dtype: DType) -> Vec<Case> {
    super::moe::cases(Kind::Down, 4, dtype)
}

/// One token at model shapes, scales in bf16 (MLX's usual checkpoint dtype; `T` is f32).
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    super::moe::bench_cases(Kind::Down, 4, DType::Bf16)
}
