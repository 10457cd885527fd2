//! The parity cases of `qlinear_mma_4bit` and the shapes `kiln bench` times it at: those of
//! `qlinear_4bit`, plus shapes that cross its own geometry.

use crate::case::Case;
use kiln_math::DType;

/// The parity cases at `dtype`: `qlinear_4bit`'s (see [`super::qlinear`]), then shapes over
/// several steps per split of `K` with a ragged last step, rows over three blocks, and every
/// group size at 8 rows of `x` (up to 64 columns of the multiply: several passes and sweeps).
pub fn cases(dtype: DType) -> Vec<Case> {
    let mut cases = super::qlinear::cases(4, dtype);
    for (gs, scale_dtype, m, k, n, bias) in [
        (64, DType::Bf16, 1, 1024 + 64, 40, true),
        (128, DType::F16, 2, 1280, 33, false),
        (16, DType::F32, 8, 256, 18, false),
        (32, DType::Bf16, 8, 160, 16, true),
        (64, DType::F16, 7, 320, 20, false),
    ] {
        cases.push(super::qlinear::case_at(4, gs, scale_dtype, [m, k, n], bias, dtype));
    }
    cases
}

/// The bench shapes at `dtype`: `qlinear_4bit`'s.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    super::qlinear::bench_cases(4, dtype)
}
