//! The parity cases of `gumbel_max_sample` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use crate::Backend;
use kiln_math::kernels::gumbel_max_sample::splits_for;
use kiln_math::DType;

/// A case of `rows × vocab` at temperature `t` with `splits` blocks per row (0: `[rows]`
/// outputs, one split).
fn case(rows: usize, vocab: usize, t: &str, splits: usize, key: (u32, u32)) -> Case {
    let out = if splits == 0 {
        vec![rows]
    } else {
        vec![rows, splits]
    };
    Case {
        label: match splits {
            0 => format!("{rows}x{vocab} T{t} flat"),
            s => format!("{rows}x{vocab} T{t} S{s}"),
        },
        shapes: vec![vec![rows, vocab], out.clone(), out],
        params: vec![
            ("temperature", t.into()),
            ("key0", format!("{}", key.0)),
            ("key1", format!("{}", key.1)),
        ],
        fill: vec![Fill::normal(0.0, 3.0), Fill::Output, Fill::Output],
        // The partial maxima are bit-identical where the port runs libm's logf and IEEE
        // division (the host ports, CUDA, ROCm); WGSL's are within a few ulp. Indices are exact.
        checks: vec![
            Check::None,
            Check::ExactOn {
                exact_on: &[Backend::Cpu, Backend::Sim, Backend::Cuda, Backend::Rocm],
                nrms: 1e-6,
                nmax: 1e-5,
            },
            Check::Exact,
        ],
        on_sim: true,
    }
}

/// The parity cases of `gumbel_max_sample` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(_dtype: DType) -> Vec<Case> {
    vec![
        case(8, 1000, "1.0", 0, (1, 2)),
        case(3, 5003, "0.7", 1, (0xdead_beef, 7)),
        case(5, 17, "1.5", 0, (42, 0)),
        // Spec §5's rule: one row of 32768 takes 32 splits; a row not a whole number of chunks.
        case(1, 32768, "0.8", 32, (123_456_789, 987_654_321)),
        case(2, 5003, "1.1", 4, (5, 6)),
        // A cold temperature (the logits decide, entries are skipped by their bound) and one
        // whose reciprocal is subnormal (nothing is skipped).
        case(4, 2500, "0.05", 2, (11, 12)),
        case(2, 3000, "3e38", 2, (13, 14)),
    ]
}

/// Spec §5's shapes: Qwen2's 152064-token vocabulary at batch 1, 8 and 64, split by the rule,
/// and 64 rows at 8 to 32 splits (`ops::gumbel_splits_on` takes the most that fit one wave of
/// the device's resident blocks: 8 where an H100 holds four blocks per SM).
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    let rule = [1usize, 8, 64].map(|rows| (rows, splits_for(rows, 152_064)));
    rule.into_iter()
        .chain([(64, 8), (64, 12), (64, 16), (64, 32)])
        .map(|(rows, splits)| case(rows, 152_064, "0.8", splits, (1, 2)))
        .collect()
}
