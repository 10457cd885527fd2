//! The parity cases of `gated_rms_norm` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// `rows × dim` in `groups` groups, gated or not, with unit-normal inputs and a weight near 1.
fn case(label: &str, (rows, dim, groups, gated): (usize, usize, usize, bool), out: Check) -> Case {
    let y = vec![rows, dim];
    Case {
        label: format!("{label} {rows}x{dim} G{groups} gated {gated}"),
        shapes: vec![y.clone(), y.clone(), vec![dim], y],
        params: vec![
            ("groups", groups.to_string()),
            ("eps", "1e-5".into()),
            ("has_gate", u32::from(gated).to_string()),
        ],
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 2.0),
            Fill::normal(1.0, 0.1),
            Fill::Output,
        ],
        checks: vec![Check::None, Check::None, Check::None, out],
        on_sim: true,
    }
}

/// Chunked and element-wise groups (a group of 250 elements), several groups per row, no gate,
/// and the decode shapes of granite-4.0-h-tiny (`I 3072`, G 1) and Nemotron-H (`I 4096`, G 8),
/// held to the RMSNorm budgets of spec §3.
pub fn cases(dtype: DType) -> Vec<Case> {
    let tolerance = super::fused_add_rms_norm::tolerance(dtype);
    [
        ("one group", (1, 64, 1, true)),
        ("element-wise groups", (3, 1000, 4, true)),
        ("no gate", (2, 512, 2, false)),
        ("narrow groups", (5, 96, 3, true)),
        ("granite-4.0-h-tiny", (1, 3072, 1, true)),
        ("nemotron-h", (8, 4096, 8, true)),
    ]
    .into_iter()
    .map(|(label, s)| case(label, s, tolerance))
    .collect()
}

/// Decode at batch 1 and 8 at granite-4.0-h-tiny's and Nemotron-H's mixer widths.
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    let mut cases = Vec::new();
    for (label, dim, groups) in [("granite-4.0-h-tiny", 3072, 1), ("nemotron-h", 4096, 8)] {
        for rows in [1, 8] {
            cases.push(case(label, (rows, dim, groups, true), Check::None));
        }
    }
    cases
}
