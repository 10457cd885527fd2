//! The parity cases of `qlinear_mma_4bit` and the shapes `kiln bench` times it at: those of
//! `qlinear_4bit`, plus shapes that cross its own geometry.

use crate::case::Case;
use kiln_math::DType;

/// The parity cases at `dtype`: `qlinear_4bit`'s (see [`super::qlinear`]) at the group sizes
/// it reads (32, 64, 128), then shapes over several splits of `K` with a short last split,
/// rows over three blocks and past a block at one split, and every group size at 7 and 8 rows
/// of `x` (several passes of columns on narrow waves).
pub fn cases(dtype: DType) -> Vec<Case> {
    let mut cases: Vec<Case> = super::qlinear::cases(4, dtype)
        .into_iter()
        .filter(|c| {
            c.params
                .iter()
                .all(|(name, value)| *name != "group_size" || value != "16")
        })
        .collect();
    for (gs, scale_dtype, m, k, n, bias) in [
        (64, DType::Bf16, 1, 1024 + 64, 40, true),
        (128, DType::F16, 2, 1280, 33, false),
        (32, DType::F32, 8, 256, 18, false),
        (32, DType::Bf16, 8, 160, 16, true),
        (64, DType::F16, 7, 320, 20, false),
        (32, DType::Bf16, 3, 4096, 7, false),
        (64, DType::Bf16, 1, 128, 300, true),
    ] {
        cases.push(super::qlinear::case_at(4, gs, scale_dtype, [m, k, n], bias, dtype));
    }
    cases
}

/// The bench shapes at `dtype`: `qlinear_4bit`'s.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    super::qlinear::bench_cases(4, dtype)
}
