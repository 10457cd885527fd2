//! The parity cases of `moe_route` and the shapes `kiln bench` times it at.

use super::linear_tolerance;
use crate::case::{Case, Check, Fill};
use kiln_math::DType;

#[allow(clippy::too_many_arguments)]
fn case(
    t: usize,
    e: usize,
    k: usize,
    mode: u32,
    renormalize: u32,
    scaling: f32,
    logits: Fill,
    on_sim: bool,
) -> Case {
    let names = ["softmax", "sigmoid+bias"];
    Case {
        label: format!(
            "T{t} E{e} K{k} {}{} x{scaling}",
            names[mode as usize],
            if renormalize == 1 { " renorm" } else { "" }
        ),
        shapes: vec![vec![t, e], vec![e], vec![t, k], vec![t, k]],
        params: vec![
            ("mode", mode.to_string()),
            ("renormalize", renormalize.to_string()),
            ("scaling_factor", scaling.to_string()),
        ],
        fill: vec![
            logits,
            Fill::Uniform { lo: -0.5, hi: 0.5 },
            Fill::Output,
            Fill::Output,
        ],
        // Picks exact; scores at the f32 budget (one division and one product in f32).
        checks: vec![
            Check::None,
            Check::None,
            Check::Exact,
            linear_tolerance(DType::F32),
        ],
        on_sim,
    }
}

/// Both routers with and without renormalization, K 1 to E, expert counts below and above a
/// block, tied logits (small integers: ties go to the lower index) and several tokens.
pub fn cases(_dtype: DType) -> Vec<Case> {
    let normal = || Fill::normal(0.0, 2.0);
    // Small integers, many equal.
    let ties = || Fill::Values((0..48).map(|i| ((i * 7) % 4) as f64 - 1.0).collect());
    vec![
        case(1, 8, 2, 0, 1, 1.0, normal(), true),
        case(3, 60, 8, 0, 0, 1.0, normal(), true),
        case(2, 300, 6, 1, 1, 2.5, normal(), true),
        case(1, 16, 4, 1, 0, 1.0, normal(), true),
        case(2, 5, 5, 0, 1, 1.0, normal(), true),
        case(4, 12, 3, 1, 1, 1.0, ties(), true),
    ]
}

/// Decode (1 token) and prefill (512) routing over Qwen3-30B-A3B's 128 experts (top 8) and
/// a 256-expert sigmoid router (top 8, DeepSeek-V3's shape).
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    let mut v = Vec::new();
    for t in [1, 512] {
        v.push(case(t, 128, 8, 0, 1, 1.0, Fill::normal(0.0, 2.0), true));
        v.push(case(t, 256, 8, 1, 1, 2.5, Fill::normal(0.0, 2.0), true));
    }
    v
}
