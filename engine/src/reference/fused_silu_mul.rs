//! `silu(gate) · up` as the unfused pair: the product in f64 from the `T` inputs, rounded to `T`
//! once.

use crate::case::{Case, Check, Fill};
use kiln_math::kernels::fused_silu_mul::SiluMulParams;
use kiln_math::{DType, Element};

pub fn fused_silu_mul<T: Element>(_p: &SiluMulParams, gate: &[T], up: &[T], out: &mut [T]) {
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        let g = g.to_f32() as f64;
        *o = T::from_f32((g / (1.0 + (-g).exp()) * u.to_f32() as f64) as f32);
    }
}

/// The linear-layer budgets of the dtype (f32 computes `e^−g` to about an ulp).
fn check(dtype: DType) -> Check {
    let (nrms, nmax) = match dtype {
        DType::F32 => (1e-5, 1e-4),
        DType::F16 => (2e-3, 1.2e-2),
        _ => (1.6e-2, 7e-2),
    };
    Check::Tolerance { nrms, nmax }
}

fn case(dtype: DType, label: &str, shape: Vec<usize>, gate: Fill) -> Case {
    Case {
        label: label.into(),
        shapes: vec![shape.clone(), shape.clone(), shape],
        params: vec![],
        fill: vec![gate, Fill::normal(0.0, 1.0), Fill::Output],
        checks: vec![Check::None, Check::None, check(dtype)],
    }
}

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
