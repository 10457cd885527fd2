//! Paged decode attention, v2 partial (spec §9.3): the KV range of each request is cut into
//! chunks of `pages_per_chunk` pages; one block per (chunk, query-head group) writes that
//! chunk's normalised partial output and its base-2 log-sum-exp, which
//! `paged_attention_merge_states` combines (or, with one chunk per request, is the answer).
//!
//! Request `r` owns pages `indices[indptr[r] .. indptr[r+1]]`; its visible length is
//! `(pages − 1) · page_size + last_page_len[r] − first_page_offset[r]` and visible token `i`
//! sits at entry `first_page_offset[r] + i` counted from its first page.

use super::decode_attention::{attend_span, shared_words, HeadGroup, PoolShape, TokenSpan};
use super::paged_attention_decode::{
    head_groups, pool_shape, query_shape, resolve_scale, MAX_GRID_DIM,
};
use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `paged_attention_decode_v2_partial`.
    pub struct PagedDecodeV2Params {
        /// Requests (the first axis of `q`).
        pub batch: u32,
        /// Query heads (Hq).
        pub heads_q: u32,
        /// KV heads of the pool (Hkv).
        pub heads_kv: u32,
        /// Elements per head (D).
        pub head_dim: u32,
        /// Tokens per page (pool row).
        pub page_size: u32,
        /// Query heads one block serves (a divisor of heads_q / heads_kv).
        pub group_heads: u32,
        /// Blocks per KV head: (heads_q / heads_kv) / group_heads.
        pub q_groups: u32,
        /// Chunks of the plan (the first axis of `out_v`).
        pub chunks: u32,
        /// Pages per chunk (the host plan's choice).
        pub pages_per_chunk: u32 = 1,
        /// Softmax scale on q·k; 0 means 1 / sqrt(head_dim).
        pub scale: f32 = 0.0,
        /// 1: the tensor-core sweep where it fits (16-bit pool, head dim 128, a port whose wave
        /// multiply is hardware); 0: never (the two-pass or strided sweep).
        pub mma: u32 = 1,
    }
}

/// Descriptor of `paged_attention_decode_v2_partial`.
pub struct PagedAttentionDecodeV2Partial;

impl KernelDef for PagedAttentionDecodeV2Partial {
    type Params = PagedDecodeV2Params;
    const NAME: &'static str = "paged_attention_decode_v2_partial";

    /// Buffers: `q [B, Hq, (1,) D]` f32, `k_pool`/`v_pool [NB, PS, Hkv, D]`, `indices [P]`,
    /// `indptr [B+1]`, `last_page_len [B]`, `first_page_offset [B]`, `request_indices [C]`,
    /// `kv_tile_indices [C]` (i32), `out_v [C, Hq, D]`, `out_lse [C, Hq]` (f32).
    fn bind(p: &mut PagedDecodeV2Params, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [q, k_pool, v_pool, indices, indptr, last_page_len, first_page_offset, request_indices, kv_tile_indices, out_v, out_lse] =
            shapes
        else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 11,
            });
        };
        let (batch, heads_q, head_dim) = query_shape(q)?;
        shape::nonzero("batch", batch)?;
        shape::nonzero("head_dim", head_dim)?;
        let (page_size, heads_kv) = pool_shape(k_pool, v_pool, head_dim)?;
        let (g, groups) = head_groups(heads_q, heads_kv)?;
        if indices.len() != 1 {
            return Err(ShapeError::Invalid("indices must be one-dimensional"));
        }
        shape::eq("indptr length", shape::numel(indptr), batch + 1)?;
        shape::eq("last_page_len length", shape::numel(last_page_len), batch)?;
        shape::eq(
            "first_page_offset length",
            shape::numel(first_page_offset),
            batch,
        )?;
        let chunks = shape::numel(request_indices);
        shape::nonzero("chunks (request_indices length)", chunks)?;
        shape::eq(
            "kv_tile_indices length",
            shape::numel(kv_tile_indices),
            chunks,
        )?;
        // A merge-free plan writes the answer straight into a `[B, Hq, 1, D]` output.
        if *out_v != [chunks, heads_q, head_dim] && *out_v != [chunks, heads_q, 1, head_dim] {
            return Err(ShapeError::Invalid(
                "out_v must be [chunks, Hq, D] or [chunks, Hq, 1, D]",
            ));
        }
        if *out_lse != [chunks, heads_q] {
            return Err(ShapeError::Invalid("out_lse must be [chunks, Hq]"));
        }
        if chunks > MAX_GRID_DIM as usize {
            return Err(ShapeError::Range {
                what: "chunks (a grid dimension)",
                got: chunks as f64,
                lo: 1.0,
                hi: MAX_GRID_DIM as f64,
            });
        }
        if p.pages_per_chunk == 0 {
            return Err(ShapeError::Empty {
                what: "pages_per_chunk",
            });
        }
        p.scale = resolve_scale(p.scale, head_dim)?;
        p.batch = shape::to_u32("batch", batch)?;
        p.heads_q = shape::to_u32("Hq", heads_q)?;
        p.heads_kv = shape::to_u32("Hkv", heads_kv)?;
        p.head_dim = shape::to_u32("head_dim", head_dim)?;
        p.page_size = shape::to_u32("page_size", page_size)?;
        p.group_heads = g;
        p.q_groups = groups;
        p.chunks = shape::to_u32("chunks", chunks)?;
        Ok(())
    }

    fn launch(p: &PagedDecodeV2Params) -> Launch {
        Launch {
            grid: [p.heads_kv * p.q_groups, p.chunks, 1],
            block: 128,
        }
    }

    fn shared_bytes(p: &PagedDecodeV2Params, block: u32, wave: u32) -> usize {
        4 * shared_words(p.group_heads, p.head_dim, block, wave)
    }
}

/// Visible tokens `[begin, end)` of chunk `tile` of a request with `pages` pages, `page_size`
/// entries per page, `first_offset` hidden entries at the start of its first page and
/// `last_len` valid entries in its last page.
#[inline(always)]
pub fn chunk_tokens(
    pages: usize,
    page_size: usize,
    first_offset: usize,
    last_len: usize,
    pages_per_chunk: usize,
    tile: usize,
) -> (usize, usize) {
    if pages == 0 {
        return (0, 0);
    }
    let visible = ((pages - 1) * page_size + last_len).saturating_sub(first_offset);
    let page_begin = tile * pages_per_chunk;
    let page_end = page_begin + pages_per_chunk;
    let begin = (page_begin * page_size).saturating_sub(first_offset);
    let end = if page_end >= pages {
        visible
    } else {
        (page_end * page_size).saturating_sub(first_offset)
    };
    let end = if end < visible { end } else { visible };
    let begin = if begin < end { begin } else { end };
    (begin, end)
}

/// The body: block `(x, y)` serves query-head group `x` of chunk `y`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn paged_attention_decode_v2_partial<T: Element, B: Block>(
    b: &B,
    p: &PagedDecodeV2Params,
    q: Src<f32>,
    k_pool: Src<T>,
    v_pool: Src<T>,
    indices: Src<i32>,
    indptr: Src<i32>,
    last_page_len: Src<i32>,
    first_page_offset: Src<i32>,
    request_indices: Src<i32>,
    kv_tile_indices: Src<i32>,
    out_v: Dst<f32>,
    out_lse: Dst<f32>,
) {
    let chunk = b.block_y() as usize;
    let request = request_indices.get(chunk).max(0) as usize;
    let tile = kv_tile_indices.get(chunk).max(0) as usize;
    let kv_head = (b.block_x() / p.q_groups) as usize;
    let q_group = (b.block_x() % p.q_groups) as usize;
    let per_kv = (p.heads_q / p.heads_kv) as usize;
    let first_head = kv_head * per_kv + q_group * p.group_heads as usize;
    let d = p.head_dim as usize;
    let hq = p.heads_q as usize;

    // Malformed tables (refused on the host) read as empty here rather than wrapping.
    let page_begin = indptr.get(request).max(0) as usize;
    let page_end = indptr.get(request + 1).max(0) as usize;
    let pages = page_end.saturating_sub(page_begin);
    let first_offset = first_page_offset.get(request).max(0) as usize;
    let (begin, end) = chunk_tokens(
        pages,
        p.page_size as usize,
        first_offset,
        last_page_len.get(request).max(0) as usize,
        p.pages_per_chunk as usize,
        tile,
    );
    let group = HeadGroup {
        kv_head,
        heads: p.group_heads as usize,
        q_base: (request * hq + first_head) * d,
        out_base: (chunk * hq + first_head) * d,
        lse_base: chunk * hq + first_head,
    };
    let span = TokenSpan {
        table_base: page_begin,
        start: first_offset,
        begin,
        end,
    };
    let pool = PoolShape {
        block_size: p.page_size as usize,
        heads_kv: p.heads_kv as usize,
        head_dim: d,
    };
    let scale_log2 = p.scale * core::f32::consts::LOG2_E;
    attend_span(
        b,
        pool,
        group,
        span,
        scale_log2,
        p.mma != 0,
        &q,
        &k_pool,
        &v_pool,
        &indices,
        &out_v,
        Some(&out_lse),
    );
}
