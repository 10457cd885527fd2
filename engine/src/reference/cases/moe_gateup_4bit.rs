//! The parity and bench cases of `moe_gateup_4bit`: [`moe`](super::moe)'s at 4 bits.

use super::moe::Kind;
use crate::case::Case;
use kiln_math::DType;

/// The parity cases (the same at every dtype: the outputs are f32).
pub fn cases(dtype: DType) -> Vec<Case> {
    super::moe::cases(Kind::GateUp, 4, dtype)
}

/// One token at model shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    super::moe::bench_cases(Kind::GateUp, 4, dtype)
}
