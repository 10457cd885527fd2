//! What the paged decode sweeps share (spec §9): the geometry of the pool, of the span of
//! tokens a block attends to and of its query-head group, the slice width, and the base-2
//! log-sum-exp they end with. Both sweeps (`decode_attention`'s strided one and
//! `decode_two_pass`) import it; it imports neither.

use crate::is_neg_infinity;

/// The most query heads one block serves (the per-lane score and accumulator registers are
/// sized by it).
pub const MAX_GROUP_HEADS: usize = 4;

/// Head-dim elements of one slice (what a lane loads at once): one 16-byte chunk of a 16-bit
/// pool.
pub const LANE_DIMS: usize = 8;

/// Query heads per block for `q_per_kv` query heads per KV head: its largest divisor that is
/// at most [`MAX_GROUP_HEADS`].
pub const fn group_heads(q_per_kv: u32) -> u32 {
    let mut g = if q_per_kv < MAX_GROUP_HEADS as u32 {
        q_per_kv
    } else {
        MAX_GROUP_HEADS as u32
    };
    while g > 1 && !q_per_kv.is_multiple_of(g) {
        g -= 1;
    }
    if g == 0 {
        1
    } else {
        g
    }
}

/// The pool's geometry (layout A: `[num_blocks, block_size, heads_kv, head_dim]`).
#[derive(Clone, Copy)]
pub struct PoolShape {
    /// Tokens per page.
    pub block_size: usize,
    /// KV heads per token.
    pub heads_kv: usize,
    /// Elements per head.
    pub head_dim: usize,
}

/// Which of a sequence's tokens one block attends to, and where they live.
#[derive(Clone, Copy)]
pub struct TokenSpan {
    /// Index in the page table of the sequence's first page.
    pub table_base: usize,
    /// Position of visible token 0 inside the sequence's first page (a sliding window's start).
    pub start: usize,
    /// Visible tokens `[begin, end)` this block covers.
    pub begin: usize,
    /// One past the last visible token this block covers.
    pub end: usize,
}

/// The query-head group a block serves: `heads` consecutive query heads of KV head `kv_head`.
#[derive(Clone, Copy)]
pub struct HeadGroup {
    /// The KV head the group's queries attend with.
    pub kv_head: usize,
    /// Query heads in the group (the GQA ratio, or fewer).
    pub heads: usize,
    /// Element offset of the group's first query (its `heads · head_dim` queries are contiguous).
    pub q_base: usize,
    /// Element offset of the group's first output row (also contiguous).
    pub out_base: usize,
    /// Index of the group's first log-sum-exp output, when the caller wants them.
    pub lse_base: usize,
}

/// The base-2 log-sum-exp of merged state `(m, l)`: `m + log2(l)`, `-inf` when empty, NaN
/// when a score was not finite.
#[inline(always)]
pub fn log_sum(m_all: f32, l_all: f32) -> f32 {
    if is_neg_infinity(m_all) {
        f32::NEG_INFINITY
    } else {
        m_all + libm::log2f(l_all)
    }
}

/// `a[i]` for `i < MAX_GROUP_HEADS`, read without a dynamic register index.
#[inline(always)]
pub fn pick_head(a: [f32; MAX_GROUP_HEADS], i: usize) -> f32 {
    let mut v = a[0];
    let mut j = 1;
    while j < MAX_GROUP_HEADS {
        if j == i {
            v = a[j];
        }
        j += 1;
    }
    v
}
