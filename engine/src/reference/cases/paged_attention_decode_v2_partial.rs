//! The parity cases of `paged_attention_decode_v2_partial` and the shapes `kiln bench` times it at.

use super::paged_cases::{self, PagedCase};
use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// The parity cases of `paged_attention_decode_v2_partial` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(dtype: DType) -> Vec<Case> {
    paged_cases::sim_cases()
        .into_iter()
        .map(|c| v2_case(&c, dtype))
        .collect()
}

/// The v2 partial launch of a paged case at its pages-per-chunk.
pub fn v2_case(c: &PagedCase, dtype: DType) -> Case {
    let b = c.requests.len();
    let t = c.csr();
    let chunks = c.chunks();
    let f = |v: &[i32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    Case {
        label: format!("{} ppc{}", c.label, c.pages_per_chunk),
        shapes: vec![
            vec![b, c.heads_q, 1, c.head_dim],
            c.pool_shape(),
            c.pool_shape(),
            vec![t.indices.len()],
            vec![b + 1],
            vec![b],
            vec![b],
            vec![chunks.len()],
            vec![chunks.len()],
            vec![chunks.len(), c.heads_q, c.head_dim],
            vec![chunks.len(), c.heads_q],
        ],
        params: [("pages_per_chunk", c.pages_per_chunk.to_string())]
            .into_iter()
            .chain(c.sweep_params())
            .collect(),
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 1.0),
            Fill::Values(f(&t.indices)),
            Fill::Values(f(&t.indptr)),
            Fill::Values(f(&t.last_page_len)),
            Fill::Values(f(&t.first_page_offset)),
            Fill::Values(chunks.iter().map(|&(r, _)| r as f64).collect()),
            Fill::Values(chunks.iter().map(|&(_, k)| k as f64).collect()),
            Fill::Output,
            Fill::Output,
        ],
        checks: vec![
            Check::None,
            Check::None,
            Check::None,
            Check::None,
            Check::None,
            Check::None,
            Check::None,
            Check::None,
            Check::None,
            paged_cases::tolerance(dtype),
            paged_cases::tolerance(dtype),
        ],
        on_sim: true,
    }
}

/// Benchmarked at its parity shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    cases(dtype)
}
