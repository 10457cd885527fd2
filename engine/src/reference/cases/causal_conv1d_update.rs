//! The parity cases of `causal_conv1d_update` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// One conv step: `batch × channels` at kernel width `k`.
struct Shape {
    batch: usize,
    channels: usize,
    k: usize,
    bias: bool,
    silu: bool,
}

fn case(label: &str, s: Shape, checks: Vec<Check>) -> Case {
    let Shape {
        batch,
        channels,
        k,
        bias,
        silu,
    } = s;
    let state = vec![batch, k - 1, channels];
    Case {
        label: format!("{label} B{batch} C{channels} k{k} bias {bias} silu {silu}"),
        shapes: vec![
            vec![batch, channels],
            vec![channels, k],
            vec![channels],
            state.clone(),
            vec![batch, channels],
            state,
        ],
        params: vec![
            ("has_bias", u32::from(bias).to_string()),
            ("silu", u32::from(silu).to_string()),
        ],
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 0.5),
            Fill::normal(0.0, 0.5),
            Fill::normal(0.0, 1.0),
            Fill::Output,
            Fill::Output,
        ],
        checks,
        on_sim: true,
    }
}

/// The output to the linear budgets (a k-term dot product, one rounding); the new state is a
/// copy of inputs, bit for bit.
fn checks(dtype: DType) -> Vec<Check> {
    let mut c = vec![Check::None; 4];
    c.extend([super::linear_tolerance(dtype), Check::Exact]);
    c
}

/// Every kernel width, with and without bias and SiLU, ragged tiles and batches, and the conv
/// widths of granite-4.0-h-tiny (`I 3072 + 2·G·Ds`, G 1) and Nemotron-H (G 8) at decode.
pub fn cases(dtype: DType) -> Vec<Case> {
    let shapes = [
        ("one tile", 1, 64, 4, true, true),
        ("ragged tile", 3, 300, 4, true, true),
        ("width 2, no bias", 2, 70, 2, false, true),
        ("width 3, no silu", 1, 33, 3, true, false),
        ("granite-4.0-h-tiny", 1, 3328, 4, true, true),
        ("nemotron-h", 2, 6144, 4, true, true),
    ];
    shapes
        .into_iter()
        .map(|(label, batch, channels, k, bias, silu)| {
            let s = Shape {
                batch,
                channels,
                k,
                bias,
                silu,
            };
            case(label, s, checks(dtype))
        })
        .collect()
}

/// Decode at batch 1 and 8 at the conv widths of granite-4.0-h-tiny and Nemotron-H.
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    let mut cases = Vec::new();
    for (label, channels) in [("granite-4.0-h-tiny", 3328), ("nemotron-h", 6144)] {
        for batch in [1, 8] {
            let s = Shape {
                batch,
                channels,
                k: 4,
                bias: true,
                silu: true,
            };
            cases.push(case(label, s, vec![Check::None; 6]));
        }
    }
    cases
}
