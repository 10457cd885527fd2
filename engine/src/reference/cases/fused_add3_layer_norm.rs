//! The parity cases of `fused_add3_layer_norm` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use crate::Backend;
use kiln_math::DType;

/// `h_out`: byte-identical on the cpu port (a serial block sums in index order, as the
/// reference does); elsewhere the reduction order differs and the §3 norm budgets apply, except
/// f32: the reference's own index-order f32 sum of up to 6656 values is off by up to
/// ~sqrt(D)·2^-24 ≈ 5e-6 of the row scale, so the f32 budget is 5e-6 / 5e-5.
fn h_check(dtype: DType) -> Check {
    let (nrms, nmax) = match dtype {
        DType::F32 => (5e-6, 5e-5),
        DType::F16 => (2e-3, 1.2e-2),
        _ => (1.6e-2, 7e-2),
    };
    Check::ExactOn {
        exact_on: &[Backend::Cpu],
        nrms,
        nmax,
    }
}

/// The parity cases of `fused_add3_layer_norm` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(dtype: DType) -> Vec<Case> {
    // (rows, width, per-column bias); widths of the spec's identity tests, 6656 the limit.
    sized(
        dtype,
        &[
            (3, 5, true),
            (2, 1025, false),
            (1, 4096, true),
            (2, 6656, true),
            (4, 256, false),
        ],
    )
}

/// Cases of the given (rows, width, per-column bias).
fn sized(dtype: DType, shapes: &[(usize, usize, bool)]) -> Vec<Case> {
    shapes
        .iter()
        .map(|&(rows, d, has_bias)| {
            let bias_shape = if has_bias { vec![d] } else { vec![1] };
            let bias_fill = if has_bias {
                Fill::normal(0.0, 0.1)
            } else {
                Fill::Uniform { lo: 0.0, hi: 0.0 }
            };
            Case {
                label: format!("{rows}x{d}{}", if has_bias { "" } else { " no bias" }),
                shapes: vec![
                    vec![rows, d],
                    vec![rows, d],
                    vec![rows, d],
                    vec![d],
                    bias_shape,
                    vec![rows, d],
                    vec![rows, d],
                ],
                params: vec![("eps", "1e-5".into())],
                fill: vec![
                    Fill::normal(0.0, 1.0),
                    Fill::normal(0.0, 1.0),
                    Fill::normal(0.5, 2.0),
                    Fill::normal(1.0, 0.1),
                    bias_fill,
                    Fill::Output,
                    Fill::Output,
                ],
                checks: vec![
                    Check::None,
                    Check::None,
                    Check::None,
                    Check::None,
                    Check::None,
                    Check::Exact,
                    h_check(dtype),
                ],
                on_sim: true,
            }
        })
        .collect()
}

/// The parity shapes, then a Cohere2-style layer (Command R7B's hidden 4096, with bias)
/// decoding 1, 8 and 64 rows and prefilling 4096, and the kernel's widest row (6656; wider
/// hidden sizes such as 8192 take the caller's unfused path, spec §3) at 1 and 64 rows.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut v = cases(dtype);
    v.extend(sized(
        dtype,
        &[
            (1, 4096, true),
            (8, 4096, true),
            (64, 4096, true),
            (4096, 4096, true),
            (1, 6656, true),
            (64, 6656, true),
        ],
    ));
    v
}
