//! Paged decode attention, v1 (spec §9.2): one block per (sequence, query-head group) sweeps
//! the sequence's whole visible range.
//!
//! For query head `h` of sequence `s`, visible token `t < visible_lens[s]` sits at absolute
//! position `a = logical_starts[s] + t`, in pool row `rows[row_offsets[s] + a / block_size]`,
//! slot `a mod block_size`, KV head `h / (heads_q / heads_kv)`. The output is
//! `Σ_t softmax(scale · q·k_t) v_t`; an empty range gives zeros.

use super::decode_attention::{
    attend_span, group_heads, shared_words, HeadGroup, PoolShape, TokenSpan,
};
use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `paged_attention_decode`.
    pub struct PagedDecodeParams {
        /// Sequences (the first axis of `q`).
        pub batch: u32,
        /// Query heads (Hq).
        pub heads_q: u32,
        /// KV heads of the pool (Hkv).
        pub heads_kv: u32,
        /// Elements per head (D).
        pub head_dim: u32,
        /// Tokens per pool row.
        pub block_size: u32,
        /// Query heads one block serves (a divisor of heads_q / heads_kv).
        pub group_heads: u32,
        /// Blocks per KV head: (heads_q / heads_kv) / group_heads.
        pub q_groups: u32,
        /// Softmax scale on q·k; 0 means 1 / sqrt(head_dim).
        pub scale: f32 = 0.0,
        /// 1: the tensor-core sweep where it fits (16-bit pool, head dim 128, a port whose wave
        /// multiply is hardware); 0: never (the two-pass or strided sweep).
        pub mma: u32 = 1,
    }
}

/// The largest grid dimension every backend accepts (CUDA/HIP y and z, WebGPU every axis).
pub const MAX_GRID_DIM: u32 = 65535;

/// Descriptor of `paged_attention_decode`.
pub struct PagedAttentionDecode;

/// Checks `q` (`[B, Hq, D]` or `[B, Hq, 1, D]`) and returns `(B, Hq, D)`.
pub(crate) fn query_shape(q: &[usize]) -> Result<(usize, usize, usize), ShapeError> {
    match *q {
        [b, h, d] | [b, h, 1, d] => Ok((b, h, d)),
        _ => Err(ShapeError::Invalid("q must be [B, Hq, D] or [B, Hq, 1, D]")),
    }
}

/// Checks the two pools (`[num_blocks, block_size, Hkv, D]`, equal shapes) against `head_dim`
/// and returns `(block_size, Hkv)`.
pub(crate) fn pool_shape(
    k_pool: &[usize],
    v_pool: &[usize],
    head_dim: usize,
) -> Result<(usize, usize), ShapeError> {
    let [num_blocks, block_size, heads_kv, d] = *k_pool else {
        return Err(ShapeError::Invalid(
            "k_pool must be [num_blocks, block_size, Hkv, D]",
        ));
    };
    if v_pool != k_pool {
        return Err(ShapeError::Invalid("v_pool must have the shape of k_pool"));
    }
    shape::nonzero("num_blocks", num_blocks)?;
    shape::nonzero("block_size", block_size)?;
    shape::nonzero("Hkv", heads_kv)?;
    shape::eq("head_dim of the pool", d, head_dim)?;
    Ok((block_size, heads_kv))
}

/// Checks the head counts and returns `(group_heads, q_groups)`.
pub(crate) fn head_groups(heads_q: usize, heads_kv: usize) -> Result<(u32, u32), ShapeError> {
    shape::nonzero("Hq", heads_q)?;
    if !heads_q.is_multiple_of(heads_kv) {
        return Err(ShapeError::Invalid("Hq must be a multiple of Hkv"));
    }
    let per_kv = shape::to_u32("Hq / Hkv", heads_q / heads_kv)?;
    let g = group_heads(per_kv);
    let groups = per_kv / g;
    if heads_kv as u64 * groups as u64 > MAX_GRID_DIM as u64 {
        return Err(ShapeError::Range {
            what: "Hkv · query-head groups (a grid dimension)",
            got: (heads_kv as u64 * groups as u64) as f64,
            lo: 1.0,
            hi: MAX_GRID_DIM as f64,
        });
    }
    Ok((g, groups))
}

/// Resolves a scale of 0 to `1 / sqrt(head_dim)` and checks it.
pub(crate) fn resolve_scale(scale: f32, head_dim: usize) -> Result<f32, ShapeError> {
    let s = if scale == 0.0 {
        1.0 / crate::sqrt_rn(head_dim as f32)
    } else {
        scale
    };
    if s.is_finite() {
        Ok(s)
    } else {
        Err(ShapeError::Invalid("scale must be finite"))
    }
}

impl KernelDef for PagedAttentionDecode {
    type Params = PagedDecodeParams;
    const NAME: &'static str = "paged_attention_decode";

    /// Buffers: `q [B, Hq, (1,) D]` f32, `k_pool`/`v_pool [NB, BS, Hkv, D]`, `rows [R]`,
    /// `row_offsets [B+1]`, `logical_starts [B]`, `visible_lens [B]` (i32), `out` like `q`.
    fn bind(p: &mut PagedDecodeParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [q, k_pool, v_pool, rows, row_offsets, logical_starts, visible_lens, out] = shapes
        else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 8,
            });
        };
        let (batch, heads_q, head_dim) = query_shape(q)?;
        shape::nonzero("batch", batch)?;
        shape::nonzero("head_dim", head_dim)?;
        let (block_size, heads_kv) = pool_shape(k_pool, v_pool, head_dim)?;
        let (g, groups) = head_groups(heads_q, heads_kv)?;
        if rows.len() != 1 {
            return Err(ShapeError::Invalid("rows must be one-dimensional"));
        }
        shape::eq("row_offsets length", shape::numel(row_offsets), batch + 1)?;
        shape::eq("logical_starts length", shape::numel(logical_starts), batch)?;
        shape::eq("visible_lens length", shape::numel(visible_lens), batch)?;
        if out != q {
            return Err(ShapeError::Invalid("out must have the shape of q"));
        }
        if batch > MAX_GRID_DIM as usize {
            return Err(ShapeError::Range {
                what: "batch (a grid dimension)",
                got: batch as f64,
                lo: 1.0,
                hi: MAX_GRID_DIM as f64,
            });
        }
        p.scale = resolve_scale(p.scale, head_dim)?;
        p.batch = shape::to_u32("batch", batch)?;
        p.heads_q = shape::to_u32("Hq", heads_q)?;
        p.heads_kv = shape::to_u32("Hkv", heads_kv)?;
        p.head_dim = shape::to_u32("head_dim", head_dim)?;
        p.block_size = shape::to_u32("block_size", block_size)?;
        p.group_heads = g;
        p.q_groups = groups;
        Ok(())
    }

    fn launch(p: &PagedDecodeParams) -> Launch {
        Launch {
            grid: [p.heads_kv * p.q_groups, p.batch, 1],
            block: 128,
        }
    }

    fn shared_bytes(p: &PagedDecodeParams, block: u32, wave: u32) -> usize {
        4 * shared_words(p.group_heads, p.head_dim, block, wave)
    }
}

/// The body: block `(x, y)` serves query-head group `x` of sequence `y`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn paged_attention_decode<T: Element, B: Block>(
    b: &B,
    p: &PagedDecodeParams,
    q: Src<f32>,
    k_pool: Src<T>,
    v_pool: Src<T>,
    rows: Src<i32>,
    row_offsets: Src<i32>,
    logical_starts: Src<i32>,
    visible_lens: Src<i32>,
    out: Dst<f32>,
) {
    let seq = b.block_y() as usize;
    let kv_head = (b.block_x() / p.q_groups) as usize;
    let q_group = (b.block_x() % p.q_groups) as usize;
    let per_kv = (p.heads_q / p.heads_kv) as usize;
    let first_head = kv_head * per_kv + q_group * p.group_heads as usize;
    let d = p.head_dim as usize;
    let row = (seq * p.heads_q as usize + first_head) * d;
    let group = HeadGroup {
        kv_head,
        heads: p.group_heads as usize,
        q_base: row,
        out_base: row,
        lse_base: 0,
    };
    // Negative starts and lengths are refused on the host; here they read as empty.
    let span = TokenSpan {
        table_base: row_offsets.get(seq).max(0) as usize,
        start: logical_starts.get(seq).max(0) as usize,
        begin: 0,
        end: visible_lens.get(seq).max(0) as usize,
    };
    let pool = PoolShape {
        block_size: p.block_size as usize,
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
        &rows,
        &out,
        None,
    );
}
