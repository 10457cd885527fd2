//! The parity cases of `linear` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// `[m, k] · [n, k]^T`, with or without bias; unit-normal x and w, a bias of scale 1.
fn case(m: usize, k: usize, n: usize, has_bias: bool, checks: Vec<Check>) -> Case {
    Case {
        label: format!("{m}x{k}->{n}{}", if has_bias { " +bias" } else { "" }),
        shapes: vec![
            vec![m, k],
            vec![n, k],
            if has_bias { vec![n] } else { vec![1] },
            vec![m, n],
        ],
        params: vec![("has_bias", if has_bias { "1" } else { "0" }.into())],
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 1.0),
            Fill::Output,
        ],
        checks,
        on_sim: true,
    }
}

/// The parity cases of `linear` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(dtype: DType) -> Vec<Case> {
    // M over 1, 3 and 8 (GEMV, odd, the limit), 2 and 5 (each chunk-loop width: four chunks
    // in flight up to M = 2, two up to 4, one beyond); K 1 and 37 (element-wise rows), 64, 256,
    // 320 and 1016 (chunked: 127 chunks run the four-, two- and one-chunk loops on the cpu and
    // leave lanes of a wave with different trip counts); N 1, 5, 9 and 13 (odd, a block's rows
    // partly past N) and 64 (several blocks); with and without bias.
    let shapes = [
        (1, 1, 1, false),
        (1, 256, 64, false),
        (1, 37, 5, true),
        (3, 37, 64, false),
        (3, 256, 5, true),
        (8, 1, 5, false),
        (8, 256, 64, true),
        (8, 37, 1, true),
        (2, 320, 13, true),
        (5, 64, 9, false),
        (1, 1016, 3, false),
    ];
    shapes
        .iter()
        .map(|&(m, k, n, b)| {
            case(
                m,
                k,
                n,
                b,
                vec![Check::None, Check::None, Check::None, super::linear_tolerance(dtype)],
            )
        })
        .collect()
}

/// Llama-3.1-8B decode projections at 1 and 8 rows: q/o (4096→4096), k/v (4096→1024), fused
/// qkv (4096→6144), up (4096→14336), fused gate+up (4096→28672), down (14336→4096) and the LM
/// head (4096→128256).
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    let shapes = [
        (4096, 4096),
        (4096, 1024),
        (4096, 6144),
        (4096, 14336),
        (4096, 28672),
        (14336, 4096),
        (4096, 128256),
    ];
    let mut cases = Vec::new();
    for m in [1, 8] {
        for &(k, n) in &shapes {
            cases.push(case(m, k, n, false, vec![Check::None; 4]));
        }
    }
    cases
}
