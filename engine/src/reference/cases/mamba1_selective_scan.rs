//! The parity cases of `mamba1_selective_scan` and the shapes `kiln bench` times it at.
//!
//! Spec §12's input laws: `x`, `B`, `C` and `D` uniform on `[−1, 1)`, `dt` on `0.3 ± 0.25`, `A`
//! on `−1 ± 0.5`, a carried state on `±0.5`.

use super::linear_tolerance;
use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// Spec §12: f32 `y` and the state at `max_rel < 1e-5`; a 16-bit `y` at its dtype's budget (one
/// rounding of an f32 sum), the f32 state at `1e-5` from the same rounded inputs.
fn checks(dtype: DType) -> Vec<Check> {
    let mut c = vec![Check::None; 7];
    c.push(match dtype {
        DType::F32 => Check::MaxRel { bound: 1e-5 },
        _ => linear_tolerance(dtype),
    });
    c.push(Check::MaxRel { bound: 1e-5 });
    c
}

/// A scan of `batch` rows of `len` tokens over `dm` channels of `n` state columns, from a
/// carried state or (`fresh`) from zeros with `state_in` one NaN that must never be read.
fn case(label: &str, dims: [usize; 4], fresh: bool, checks: Vec<Check>, on_sim: bool) -> Case {
    let [batch, len, dm, n] = dims;
    let unit = Fill::Uniform { lo: -1.0, hi: 1.0 };
    let (state_shape, state_fill) = if fresh {
        (vec![1], Fill::Values(vec![f64::NAN]))
    } else {
        (vec![batch, dm, n], Fill::Uniform { lo: -0.5, hi: 0.5 })
    };
    let x = vec![batch, len, dm];
    Case {
        label: format!(
            "{label} Bt{batch} L{len} Dm{dm} N{n} {}",
            if fresh { "fresh" } else { "carried" }
        ),
        shapes: vec![
            x.clone(),
            x.clone(),
            vec![batch, len, n],
            vec![batch, len, n],
            vec![dm, n],
            vec![dm],
            state_shape,
            x,
            vec![batch, dm, n],
        ],
        params: vec![("fresh", if fresh { "1" } else { "0" }.into())],
        fill: vec![
            unit.clone(),
            Fill::Uniform { lo: 0.05, hi: 0.55 },
            unit.clone(),
            unit.clone(),
            Fill::Uniform { lo: -1.5, hi: -0.5 },
            unit,
            state_fill,
            Fill::Output,
            Fill::Output,
        ],
        checks,
        on_sim,
    }
}

/// The parity cases at `dtype`: spec §12's grid (`Bt 2, Dm 24`, `N` 8, 16 and 32, `L` 1 and 7,
/// fresh and carried), padded widths (`N` 1, 5 and 20) over two blocks of channels, one of
/// them partial, and Falcon-Mamba-7B's mixer (`Dm 8192, N 16`) over 64 tokens off the sim.
pub fn cases(dtype: DType) -> Vec<Case> {
    let mut cases = Vec::new();
    for n in [8, 16, 32] {
        for len in [1, 7] {
            for fresh in [false, true] {
                cases.push(case("spec §12", [2, len, 24, n], fresh, checks(dtype), true));
            }
        }
    }
    for (n, fresh) in [(1, false), (5, true), (20, false)] {
        cases.push(case("padded", [1, 5, 70, n], fresh, checks(dtype), true));
    }
    cases.push(case(
        "falcon-mamba-7b",
        [1, 64, 8192, 16],
        false,
        checks(dtype),
        false,
    ));
    cases
}

/// Falcon-Mamba-7B's scan (`Dm 8192, N 16`) at batch 1 and 8, one token (decode) and 512
/// (a prompt), from a carried state.
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    let mut cases = Vec::new();
    for batch in [1, 8] {
        for len in [1, 512] {
            cases.push(case(
                "falcon-mamba-7b",
                [batch, len, 8192, 16],
                false,
                vec![Check::None; 9],
                false,
            ));
        }
    }
    cases
}
