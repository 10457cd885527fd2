//! The parity cases of `paged_attention_decode` and the shapes `kiln bench` times it at.

use super::paged_cases::{self, PagedCase};
use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// The parity cases of `paged_attention_decode` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(dtype: DType) -> Vec<Case> {
    paged_cases::sim_cases()
        .into_iter()
        .map(|c| v1_case(&c, dtype))
        .collect()
}

/// The v1 launch of a paged case: the CSR table becomes rows / row_offsets / logical starts /
/// visible lengths.
pub fn v1_case(c: &PagedCase, dtype: DType) -> Case {
    let b = c.requests.len();
    let (rows, offsets, starts, lens) = c.v1_tables();
    let q = vec![b, c.heads_q, 1, c.head_dim];
    Case {
        label: c.label.clone(),
        shapes: vec![
            q.clone(),
            c.pool_shape(),
            c.pool_shape(),
            vec![rows.len()],
            vec![b + 1],
            vec![b],
            vec![b],
            q,
        ],
        params: c.sweep_params(),
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 1.0),
            Fill::normal(0.0, 1.0),
            Fill::Values(rows),
            Fill::Values(offsets),
            Fill::Values(starts),
            Fill::Values(lens),
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
            paged_cases::tolerance(dtype),
        ],
        on_sim: true,
    }
}

/// Benchmarked at its parity shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    cases(dtype)
}
