//! Gumbel-max sampling from the spec's definition (§5): the Philox stream per (row, element),
//! the open-interval uniform, `c_i = f32(logit_i) / T − ln(−ln u_i)` in f32, and per split (the
//! chunks of 1024 entries `s, s + S, …`) the first maximum, (−inf, 0) when none is above −inf.

use super::sampling::{open_uniform, philox};
use crate::case::{Case, Check, Fill};
use crate::Backend;
use kiln_math::kernels::gumbel_max_sample::{splits_for, GumbelParams, CHUNK};
use kiln_math::{DType, Element};

/// The uniform on (0, 1) of element `i` of `row`: word `i mod 4` of its Philox call.
pub fn uniform(key: [u32; 2], row: u32, i: u32) -> f32 {
    open_uniform(philox([i / 4, 0, row, 0], key)[(i % 4) as usize])
}

pub fn gumbel_max_sample<T: Element>(
    p: &GumbelParams,
    logits: &[T],
    vals: &mut [f32],
    idxs: &mut [u32],
) {
    let vocab = p.vocab as usize;
    let splits = p.splits as usize;
    let key = [p.key0, p.key1];
    for (r, row) in logits.chunks(vocab).enumerate() {
        let mut best = vec![(f32::NEG_INFINITY, 0u32); splits];
        for (i, l) in row.iter().enumerate() {
            let u = uniform(key, r as u32, i as u32);
            let c = l.to_f32() / p.temperature - libm::logf(-libm::logf(u));
            let b = &mut best[(i / CHUNK) % splits];
            if c > b.0 {
                *b = (c, i as u32);
            }
        }
        for (s, (v, i)) in best.into_iter().enumerate() {
            vals[r * splits + s] = v;
            idxs[r * splits + s] = i;
        }
    }
}

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
    }
}

pub fn cases(_dtype: DType) -> Vec<Case> {
    vec![
        case(8, 1000, "1.0", 0, (1, 2)),
        case(3, 5003, "0.7", 1, (0xdead_beef, 7)),
        case(5, 17, "1.5", 0, (42, 0)),
        // Spec §5's rule: one row of 32768 takes 32 splits; a row not a whole number of chunks.
        case(1, 32768, "0.8", 32, (123_456_789, 987_654_321)),
        case(2, 5003, "1.1", 4, (5, 6)),
    ]
}

/// Spec §5's shapes: Qwen2's 152064-token vocabulary at batch 1, 8 and 64, split by the rule.
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    [1usize, 8, 64]
        .into_iter()
        .map(|rows| case(rows, 152_064, "0.8", splits_for(rows, 152_064), (1, 2)))
        .collect()
}
