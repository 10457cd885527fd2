//! The parity cases of `fused_xielu` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use crate::Backend;
use kiln_math::DType;

/// Byte-identical on the host backends and CUDA (same rounding points, libm's expm1 bit for bit);
/// the §15 budgets of the dtype elsewhere.
fn check(dtype: DType) -> Check {
    let (nrms, nmax) = match dtype {
        DType::F32 => (1e-6, 1e-5),
        DType::F16 => (2e-3, 1.2e-2),
        _ => (1.6e-2, 7e-2),
    };
    Check::ExactOn {
        exact_on: &[Backend::Cpu, Backend::Sim, Backend::Cuda],
        nrms,
        nmax,
    }
}

/// The parity cases of `fused_xielu` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(dtype: DType) -> Vec<Case> {
    let case =
        |label: &str, shape: Vec<usize>, fill: Fill, params: Vec<(&'static str, String)>| Case {
            label: label.into(),
            shapes: vec![shape.clone(), shape],
            params,
            fill: vec![fill, Fill::Output],
            checks: vec![Check::None, check(dtype)],
            on_sim: true,
        };
    let apertus = || {
        vec![
            ("alpha_p", "0.7936".into()),
            ("alpha_n", "1.2931".into()),
            ("beta", "0.5".into()),
            ("eps", "-1e-6".into()),
        ]
    };
    let every = every_value(dtype);
    vec![
        case("16410", vec![16410], Fill::normal(0.0, 2.0), apertus()),
        // The emulator's lanes add nothing here that the cases above do not test.
        Case {
            on_sim: false,
            ..case(
                "every finite value",
                vec![every.len()],
                Fill::Values(every),
                apertus(),
            )
        },
        case("3x5x77", vec![3, 5, 77], Fill::normal(-0.5, 4.0), apertus()),
        case(
            "near zero 1000",
            vec![1000],
            Fill::Uniform {
                lo: -1e-5,
                hi: 1e-5,
            },
            apertus(),
        ),
        case(
            "wide range 4096, eps -0.5",
            vec![4096],
            Fill::normal(0.0, 30.0),
            vec![
                ("alpha_p", "2.5".into()),
                ("alpha_n", "0.31".into()),
                ("beta", "-0.25".into()),
                ("eps", "-0.5".into()),
            ],
        ),
    ]
}

/// Every value of a 16-bit `dtype` but NaN and −inf (whose negative branch is `inf − inf`, a NaN
/// whose payload no contract fixes), in bit order; for f32 every such bf16 value, which spans
/// f32's range.
fn every_value(dtype: DType) -> Vec<f64> {
    (0..=u16::MAX)
        .map(|h| match dtype {
            DType::F16 => kiln_math::f16_bits_to_f32_soft(h),
            _ => f32::from_bits((h as u32) << 16),
        })
        .filter(|v| !v.is_nan() && *v != f32::NEG_INFINITY)
        .map(f64::from)
        .collect()
}

/// Benchmarked at its parity shapes and at a prefill-sized MLP activation (4096 tokens × 8192),
/// where an elementwise kernel should stream at the copy bandwidth.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut v = cases(dtype);
    // The first parity case's inputs and scalars (normal(0, 2), Apertus' values) at that size.
    let mut big = v[0].clone();
    big.label = "4096x8192".into();
    big.shapes = vec![vec![4096, 8192], vec![4096, 8192]];
    big.checks = vec![Check::None, Check::None];
    v.push(big);
    v
}
