//! The parity cases of `ssm_update` and the shapes `kiln bench` times it at.
//!
//! Spec §8's shapes and input laws: `exp(A_log) ∈ [1, 16]`, `dt_bias ∈ [−3, −1]`,
//! `D ∈ [0.5, 1.5]`, `x`, `B`, `C`, `dt` and the state `N(0, 1)`; the packed inputs in the dtypes
//! the models store them in (granite's bf16 `A_log`, Nemotron-H's f32) and in mixed ones.

use super::linear_tolerance;
use crate::case::{Case, Check, Fill};
use kiln_math::kernels::qlinear::{scale_code, scale_words};
use kiln_math::DType;

/// Spec §8: `out` at the dtype's budget (§0.2's f32 / f16 / bf16 budgets, those of a linear
/// layer), the state always at the f32 budget.
fn checks(dtype: DType) -> Vec<Check> {
    let mut c = vec![Check::None; 8];
    c.push(linear_tolerance(dtype));
    c.push(linear_tolerance(DType::F32));
    c
}

/// One update's geometry and the dtypes of its packed inputs.
#[derive(Clone, Copy)]
struct Shape {
    batch: usize,
    heads: usize,
    head_dim: usize,
    groups: usize,
    state_dim: usize,
    limits: (f32, f32),
    /// Dtypes of `a_log`, `b`, `c`, `dt`, `dt_bias`.
    packed: [DType; 5],
}

/// `count` values of `dtype` drawn by `of`, packed into words.
fn packed(dtype: DType, count: usize, of: Fill) -> (Vec<usize>, Fill) {
    (
        vec![scale_words(scale_code(dtype), count)],
        Fill::Packed {
            dtype,
            of: Box::new(of),
        },
    )
}

fn case(label: &str, s: Shape, checks: Vec<Check>, on_sim: bool) -> Case {
    let Shape {
        batch,
        heads,
        head_dim,
        groups,
        state_dim,
        limits,
        packed: [ta, tb, tc, tdt, tbias],
    } = s;
    let bc = batch * groups * state_dim;
    // exp(A_log) uniform on [1, 16]: A_log uniform on [0, ln 16].
    let (a_shape, a_fill) = packed(ta, heads, Fill::Uniform { lo: 0.0, hi: 16f64.ln() });
    let (b_shape, b_fill) = packed(tb, bc, Fill::normal(0.0, 1.0));
    let (c_shape, c_fill) = packed(tc, bc, Fill::normal(0.0, 1.0));
    let (dt_shape, dt_fill) = packed(tdt, batch * heads, Fill::normal(0.0, 1.0));
    let (bias_shape, bias_fill) = packed(tbias, heads, Fill::Uniform { lo: -3.0, hi: -1.0 });
    let x = vec![batch, 1, heads, head_dim];
    let state = vec![batch, heads, head_dim, state_dim];
    let names = |d: [DType; 5]| d.map(|t| t.name()).join("/");
    Case {
        label: format!(
            "{label} B{batch} H{heads} Dh{head_dim} G{groups} Ds{state_dim} \
             dt∈[{}, {}] a_log/b/c/dt/dt_bias {}",
            limits.0,
            limits.1,
            names(s.packed)
        ),
        shapes: vec![
            x.clone(),
            a_shape,
            b_shape,
            c_shape,
            vec![heads],
            dt_shape,
            bias_shape,
            state.clone(),
            x,
            state,
        ],
        params: vec![
            ("groups", groups.to_string()),
            ("time_step_min", limits.0.to_string()),
            ("time_step_max", limits.1.to_string()),
            ("a_log_dtype", scale_code(ta).to_string()),
            ("b_dtype", scale_code(tb).to_string()),
            ("c_dtype", scale_code(tc).to_string()),
            ("dt_dtype", scale_code(tdt).to_string()),
            ("dt_bias_dtype", scale_code(tbias).to_string()),
        ],
        fill: vec![
            Fill::normal(0.0, 1.0),
            a_fill,
            b_fill,
            c_fill,
            Fill::Uniform { lo: 0.5, hi: 1.5 },
            dt_fill,
            bias_fill,
            Fill::normal(0.0, 1.0),
            Fill::Output,
            Fill::Output,
        ],
        checks,
        on_sim,
    }
}

/// The parity cases at activation `dtype`: spec §8's three shapes (granite-4.0-h-tiny and
/// Nemotron-H off the sim, which they would keep for minutes; padded rows), the narrowest
/// state with rows that fill no block, and a small grouped update for the sim.
pub fn cases(dtype: DType) -> Vec<Case> {
    use DType::{Bf16, F16, F32};
    let t = dtype;
    let shapes = [
        (
            false,
            "granite-4.0-h-tiny",
            Shape {
                batch: 1,
                heads: 48,
                head_dim: 64,
                groups: 1,
                state_dim: 128,
                limits: (0.001, 100.0),
                packed: [Bf16, t, t, t, Bf16],
            },
        ),
        (
            false,
            "nemotron-h",
            Shape {
                batch: 2,
                heads: 64,
                head_dim: 64,
                groups: 8,
                state_dim: 128,
                limits: (1e-3, 0.1),
                packed: [F32, t, t, t, F32],
            },
        ),
        (
            true,
            "padded rows",
            Shape {
                batch: 1,
                heads: 4,
                head_dim: 60,
                groups: 2,
                state_dim: 64,
                limits: (0.0, f32::INFINITY),
                packed: [F32, F16, Bf16, F32, Bf16],
            },
        ),
        (
            true,
            "narrowest state",
            Shape {
                batch: 2,
                heads: 6,
                head_dim: 5,
                groups: 3,
                state_dim: 32,
                limits: (0.0, f32::INFINITY),
                packed: [F16, Bf16, F32, Bf16, F16],
            },
        ),
        (
            true,
            "grouped",
            Shape {
                batch: 2,
                heads: 8,
                head_dim: 9,
                groups: 2,
                state_dim: 128,
                limits: (1e-3, 0.1),
                packed: [Bf16, t, t, F32, F32],
            },
        ),
    ];
    shapes
        .iter()
        .map(|&(on_sim, label, s)| case(label, s, checks(dtype), on_sim))
        .collect()
}

/// Decode shapes at batch 1 and 8, f32 state, the inputs in the activation dtype and `A_log`
/// f32: granite-4.0-h-tiny (`H 48, Dh 64, G 1, Ds 128`) and Nemotron-H (`H 64, Dh 64, G 8,
/// Ds 128`).
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut cases = Vec::new();
    for (label, heads, groups) in [("granite-4.0-h-tiny", 48, 1), ("nemotron-h", 64, 8)] {
        for batch in [1, 8] {
            let s = Shape {
                batch,
                heads,
                head_dim: 64,
                groups,
                state_dim: 128,
                limits: (1e-3, 100.0),
                packed: [DType::F32, dtype, dtype, dtype, DType::F32],
            };
            cases.push(case(label, s, vec![Check::None; 10], false));
        }
    }
    cases
}
