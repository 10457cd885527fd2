//! Paged decode v2 partials, unfused (spec §9.3): per chunk, gather the chunk's visible K/V and
//! run f64 attention; the LSE is reported in log2 units.

use super::primitives::{attend_heads, gather_visible, KvPoolShape};
use kiln_math::kernels::paged_attention_decode_v2_partial::PagedDecodeV2Params;
use kiln_math::Element;

/// Request `r`'s table as (pages, first offset, visible length), or `None` if malformed.
fn request<'a>(
    indices: &'a [i32],
    indptr: &[i32],
    last_page_len: &[i32],
    first_page_offset: &[i32],
    page_size: usize,
    r: usize,
) -> Option<(&'a [i32], usize, usize)> {
    let first = usize::try_from(*indptr.get(r)?).ok()?;
    let last = usize::try_from(*indptr.get(r + 1)?).ok()?;
    let pages = indices.get(first..last)?;
    // An empty request sees nothing, whatever its last-page length and offset say.
    if pages.is_empty() {
        return Some((pages, 0, 0));
    }
    let fpo = usize::try_from(*first_page_offset.get(r)?).ok()?;
    let lpl = usize::try_from(*last_page_len.get(r)?).ok()?;
    let visible = ((pages.len() - 1) * page_size + lpl).checked_sub(fpo)?;
    Some((pages, fpo, visible))
}

/// The unfused chain of [`paged_attention_decode_v2_partial`](kiln_math::kernels::paged_attention_decode_v2_partial::paged_attention_decode_v2_partial): its params and
/// buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)]
pub fn paged_attention_decode_v2_partial<T: Element>(
    p: &PagedDecodeV2Params,
    q: &[f32],
    k_pool: &[T],
    v_pool: &[T],
    indices: &[i32],
    indptr: &[i32],
    last_page_len: &[i32],
    first_page_offset: &[i32],
    request_indices: &[i32],
    kv_tile_indices: &[i32],
    out_v: &mut [f32],
    out_lse: &mut [f32],
) {
    let (hq, hkv, d, ps) = (
        p.heads_q as usize,
        p.heads_kv as usize,
        p.head_dim as usize,
        p.page_size as usize,
    );
    let ppc = p.pages_per_chunk as usize;
    let shape = KvPoolShape {
        num_blocks: k_pool.len() / (ps * hkv * d).max(1),
        block_size: ps,
        heads_kv: hkv,
        head_dim: d,
    };
    for c in 0..p.chunks as usize {
        let chunk_v = &mut out_v[c * hq * d..(c + 1) * hq * d];
        let chunk_lse = &mut out_lse[c * hq..(c + 1) * hq];
        let gathered = (|| {
            let r = usize::try_from(request_indices[c]).ok()?;
            let tile = usize::try_from(kv_tile_indices[c]).ok()?;
            let (pages, fpo, visible) =
                request(indices, indptr, last_page_len, first_page_offset, ps, r)?;
            // The chunk's pages [tile·ppc, min((tile+1)·ppc, pages)) as visible-token indices.
            let page_end = ((tile + 1) * ppc).min(pages.len());
            let begin = (tile * ppc * ps).saturating_sub(fpo).min(visible);
            let end = if page_end == pages.len() {
                visible
            } else {
                (page_end * ps).saturating_sub(fpo).min(visible)
            };
            let len = end.saturating_sub(begin);
            Some((
                r,
                gather_visible(k_pool, shape, pages, fpo + begin, len)?,
                gather_visible(v_pool, shape, pages, fpo + begin, len)?,
            ))
        })();
        let Some((r, keys, values)) = gathered.filter(|g| g.0 < p.batch as usize) else {
            chunk_v.fill(f32::NAN);
            chunk_lse.fill(f32::NAN);
            continue;
        };
        let q_rows = &q[r * hq * d..(r + 1) * hq * d];
        let lse = attend_heads(q_rows, &keys, &values, hkv, d, p.scale as f64, chunk_v);
        for (dst, l) in chunk_lse.iter_mut().zip(lse) {
            *dst = (l * std::f64::consts::LOG2_E) as f32;
        }
    }
}
