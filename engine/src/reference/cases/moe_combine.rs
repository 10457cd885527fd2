//! The parity cases of `moe_combine` and the shapes `kiln bench` times it at.

use super::linear_tolerance;
use crate::case::{Case, Check, Fill};
use kiln_math::DType;

fn case(t: usize, k: usize, din: usize, dtype: DType) -> Case {
    Case {
        label: format!("T{t} K{k} Din {din}"),
        shapes: vec![vec![t, k, din], vec![t, din]],
        params: vec![],
        fill: vec![Fill::normal(0.0, 1.0), Fill::Output],
        checks: vec![Check::None, linear_tolerance(dtype)],
        on_sim: true,
    }
}

/// One to three tokens, K 1 to 8, widths ragged against the block's tile.
pub fn cases(dtype: DType) -> Vec<Case> {
    [(1, 8, 96), (2, 1, 300), (3, 4, 33), (1, 6, 520)]
        .iter()
        .map(|&(t, k, din)| case(t, k, din, dtype))
        .collect()
}

/// One token's K slots at Qwen3-30B-A3B's and Mixtral's widths.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    vec![case(1, 8, 2048, dtype), case(1, 2, 4096, dtype)]
}
