//! The parity cases of `fused_silu_mul` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use kiln_math::DType;

fn case(dtype: DType, label: &str, shape: Vec<usize>, gate: Fill) -> Case {
    Case {
        label: label.into(),
        shapes: vec![shape.clone(), shape.clone(), shape],
        params: vec![],
        fill: vec![gate, Fill::normal(0.0, 1.0), Fill::Output],
        checks: vec![Check::None, Check::None, super::linear_tolerance(dtype)],
        on_sim: true,
    }
}

/// The parity cases of `fused_silu_mul` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(dtype: DType) -> Vec<Case> {
    vec![
        // Two whole tiles and a ragged one; an odd row; saturated gates both ways.
        case(dtype, "3x1536", vec![3, 1536], Fill::normal(0.0, 2.0)),
        case(dtype, "1x77", vec![1, 77], Fill::normal(-1.0, 3.0)),
        case(
            dtype,
            "wide gate 4096",
            vec![4096],
            Fill::Uniform { lo: -90.0, hi: 90.0 },
        ),
    ]
}

/// Decode (1 and 8 tokens) and prefill (4096 tokens) at Llama-3.1-8B's FFN width.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut v = cases(dtype);
    for rows in [1, 8, 4096] {
        let mut c = case(dtype, "", vec![rows, 14336], Fill::normal(0.0, 2.0));
        c.label = format!("{rows}x14336");
        c.checks = vec![Check::None; 3];
        v.push(c);
    }
    v
}
