//! The parity cases of `fused_add_rms_norm` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// Spec §3 / §15 bounds on `out`.
pub fn tolerance(dtype: DType) -> Check {
    match dtype {
        DType::F32 => Check::Tolerance {
            nrms: 1e-6,
            nmax: 1e-5,
        },
        DType::F16 => Check::Tolerance {
            nrms: 2e-3,
            nmax: 1.2e-2,
        },
        _ => Check::Tolerance {
            nrms: 1.6e-2,
            nmax: 7e-2,
        },
    }
}

/// `new_residual` is exact in f32; in 16-bit at most 1% of elements may be 1 ulp off.
fn residual_check(dtype: DType) -> Check {
    match dtype {
        DType::F32 => Check::Exact,
        _ => Check::Ulp { max_frac: 0.01 },
    }
}

/// The parity cases of `fused_add_rms_norm` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(dtype: DType) -> Vec<Case> {
    // Spec §3's shapes, plus a row length that is no multiple of any chunk width (element-wise
    // paths and unaligned row starts).
    let shapes = [
        (1, 128),
        (1, 2048),
        (5, 4096),
        (33, 2048),
        (1, 3072),
        (3, 1001),
    ];
    let mut cases: Vec<Case> = shapes
        .iter()
        .map(|&(rows, d)| {
            let checks = vec![
                Check::None,
                residual_check(dtype),
                Check::None,
                tolerance(dtype),
            ];
            rows_case(rows, d, checks)
        })
        .collect();
    // Gemma: gain (1 + w) with w small; a LoRA-scaled weight; a 3-D input.
    cases.push(Case {
        label: "gemma 4x1024".into(),
        shapes: vec![vec![4, 1024], vec![4, 1024], vec![1024], vec![4, 1024]],
        params: vec![("eps", "1e-6".into()), ("weight_bias", "1".into())],
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 0.1),
            Fill::Output,
        ],
        checks: vec![
            Check::None,
            residual_check(dtype),
            Check::None,
            tolerance(dtype),
        ],
        on_sim: true,
    });
    cases.push(Case {
        label: "lora-scaled 2x3x512".into(),
        shapes: vec![vec![2, 3, 512], vec![2, 3, 512], vec![512], vec![2, 3, 512]],
        params: vec![("eps", "1e-5".into())],
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 3.0),
            Fill::normal(1.37, 0.137),
            Fill::Output,
        ],
        checks: vec![
            Check::None,
            residual_check(dtype),
            Check::None,
            tolerance(dtype),
        ],
        on_sim: true,
    });
    cases
}

/// `rows × d`: unit-normal x and residual, a weight near 1, eps 1e-6.
fn rows_case(rows: usize, d: usize, checks: Vec<Check>) -> Case {
    Case {
        label: format!("{rows}x{d}"),
        shapes: vec![vec![rows, d], vec![rows, d], vec![d], vec![rows, d]],
        params: vec![("eps", "1e-6".into())],
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 1.0),
            Fill::normal(1.0, 0.1),
            Fill::Output,
        ],
        checks,
        on_sim: true,
    }
}

/// Llama's hidden size at decode (1 and 32 rows) and a prefill-sized block of 4096 × 8192.
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    [(1usize, 4096usize), (32, 4096), (4096, 8192)]
        .into_iter()
        .map(|(rows, dim)| rows_case(rows, dim, vec![Check::None; 4]))
        .collect()
}
