//! Paged decode v1, unfused (spec §9.2): gather each sequence's visible K/V, then f64
//! single-query attention per query head.

use super::primitives::{attend_heads, gather_visible, KvPoolShape};
use kiln_math::kernels::paged_attention_decode::PagedDecodeParams;
use kiln_math::Element;

/// The unfused chain of [`paged_attention_decode`](kiln_math::kernels::paged_attention_decode::paged_attention_decode): its params and
/// buffers, in list order, as host slices.
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
