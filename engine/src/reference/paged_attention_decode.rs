//! Paged decode v1, unfused (spec §9.2): gather each sequence's visible K/V, then f64
//! single-query attention per query head.

use super::primitives::{attend_heads, gather_visible, KvPoolShape};
use super::paged_cases::{self, PagedCase};
use crate::case::{Case, Check, Fill};
use kiln_math::kernels::paged_attention_decode::PagedDecodeParams;
use kiln_math::{DType, Element};

#[allow(clippy::too_many_arguments)]
pub fn paged_attention_decode<T: Element>(
    p: &PagedDecodeParams,
    q: &[f32],
    k_pool: &[T],
    v_pool: &[T],
    rows: &[i32],
    row_offsets: &[i32],
    logical_starts: &[i32],
    visible_lens: &[i32],
    out: &mut [f32],
) {
    let (hq, hkv, d) = (p.heads_q as usize, p.heads_kv as usize, p.head_dim as usize);
    let shape = KvPoolShape {
        num_blocks: k_pool.len() / (p.block_size as usize * hkv * d).max(1),
        block_size: p.block_size as usize,
        heads_kv: hkv,
        head_dim: d,
    };
    for s in 0..p.batch as usize {
        let seq_out = &mut out[s * hq * d..(s + 1) * hq * d];
        // A malformed table gives NaN rows here; the typed ops refuse it before any launch.
        let gathered = (|| {
            let first = usize::try_from(row_offsets[s]).ok()?;
            let last = usize::try_from(row_offsets[s + 1]).ok()?;
            let pages = rows.get(first..last)?;
            let start = usize::try_from(logical_starts[s]).ok()?;
            let len = usize::try_from(visible_lens[s]).ok()?;
            Some((
                gather_visible(k_pool, shape, pages, start, len)?,
                gather_visible(v_pool, shape, pages, start, len)?,
            ))
        })();
        let Some((keys, values)) = gathered else {
            seq_out.fill(f32::NAN);
            continue;
        };
        let q_rows = &q[s * hq * d..(s + 1) * hq * d];
        attend_heads(q_rows, &keys, &values, hkv, d, p.scale as f64, seq_out);
    }
}

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
        params: vec![],
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
    }
}

/// Benchmarked at its parity shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    cases(dtype)
}
