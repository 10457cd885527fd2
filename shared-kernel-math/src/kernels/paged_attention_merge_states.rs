//! Merge of attention states (spec §9.4): output row `o` combines the normalised partials
//! `[o_indptr[o], o_indptr[o+1])` of every head by their base-2 log-sum-exp. A partial with LSE
//! `-inf` is empty and skipped; a row with no other partial is zeros with LSE `-inf`. A NaN or
//! `+inf` LSE makes the row's output and LSE NaN, and a non-finite output element is NaN
//! (docs/non-finite.md).
//!
//! With `m = max lse_i` and `w_i = 2^(lse_i − m)`: `v = Σ w_i v_i / Σ w_i`,
//! `lse = m + log2 Σ w_i`. Each thread owns dims of one (row, head) and walks its partials
//! with a running maximum, so the kernel has no barrier and no lane operation.

use crate::kernel::shape;
use crate::{
    exp2_approx, is_neg_infinity, max_keeping_nan, nan_unless_finite, Block, Dst, Element, KernelDef, Launch,
    ShapeError, Src,
};

use super::paged_attention_decode::MAX_GRID_DIM;

crate::params! {
    /// Params of `paged_attention_merge_states`.
    pub struct MergeStatesParams {
        /// Partials (the first axis of `v_in`).
        pub partials: u32,
        /// Output rows (the first axis of `v_out`).
        pub rows: u32,
        /// Heads per row (H).
        pub heads: u32,
        /// Elements per head (D).
        pub head_dim: u32,
    }
}

/// Descriptor of `paged_attention_merge_states`.
pub struct PagedAttentionMergeStates;

impl KernelDef for PagedAttentionMergeStates {
    type Params = MergeStatesParams;
    const NAME: &'static str = "paged_attention_merge_states";

    /// Buffers: `v_in [N, H, D]`, `lse_in [N, H]` (f32, log2 units), `o_indptr [M+1]` (i32),
    /// `v_out [M, H, D]`, `lse_out [M, H]` (f32).
    fn bind(p: &mut MergeStatesParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [v_in, lse_in, o_indptr, v_out, lse_out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 5,
            });
        };
        let [partials, heads, head_dim] = **v_in else {
            return Err(ShapeError::Invalid("v_in must be [N, H, D]"));
        };
        shape::nonzero("heads", heads)?;
        shape::nonzero("head_dim", head_dim)?;
        if *lse_in != [partials, heads] {
            return Err(ShapeError::Invalid(
                "lse_in must be [N, H] with v_in [N, H, D]",
            ));
        }
        let [rows_plus_one] = **o_indptr else {
            return Err(ShapeError::Invalid("o_indptr must be one-dimensional"));
        };
        let rows = rows_plus_one.saturating_sub(1);
        shape::nonzero("output rows (o_indptr length − 1)", rows)?;
        // Decode writes the merged rows straight into a `[B, Hq, 1, D]` output.
        if *v_out != [rows, heads, head_dim] && *v_out != [rows, heads, 1, head_dim] {
            return Err(ShapeError::Invalid(
                "v_out must be [M, H, D] or [M, H, 1, D] with o_indptr [M+1]",
            ));
        }
        if *lse_out != [rows, heads] {
            return Err(ShapeError::Invalid("lse_out must be [M, H]"));
        }
        for (what, n) in [
            ("heads (a grid dimension)", heads),
            ("output rows (a grid dimension)", rows),
        ] {
            if n > MAX_GRID_DIM as usize {
                return Err(ShapeError::Range {
                    what,
                    got: n as f64,
                    lo: 1.0,
                    hi: MAX_GRID_DIM as f64,
                });
            }
        }
        p.partials = shape::to_u32("partials", partials)?;
        p.rows = shape::to_u32("rows", rows)?;
        p.heads = shape::to_u32("heads", heads)?;
        p.head_dim = shape::to_u32("head_dim", head_dim)?;
        Ok(())
    }

    fn launch(p: &MergeStatesParams) -> Launch {
        Launch {
            grid: [p.heads, p.rows, 1],
            block: p.head_dim.div_ceil(32).clamp(1, 8) * 32,
        }
    }
}

/// The body: block `(x, y)` merges head `x` of output row `y`; threads stride over dims.
pub fn paged_attention_merge_states<T: Element, B: Block>(
    b: &B,
    p: &MergeStatesParams,
    v_in: Src<T>,
    lse_in: Src<T>,
    o_indptr: Src<i32>,
    v_out: Dst<T>,
    lse_out: Dst<T>,
) {
    let head = b.block_x() as usize;
    let row = b.block_y() as usize;
    let heads = p.heads as usize;
    let d_len = p.head_dim as usize;
    // A malformed range (refused on the host) reads as empty.
    let first = o_indptr.get(row).max(0) as usize;
    let last = o_indptr.get(row + 1).max(0) as usize;

    let mut d = b.thread() as usize;
    while d < d_len {
        let mut m = f32::NEG_INFINITY;
        let mut l = 0.0f32;
        let mut acc = 0.0f32;
        let mut i = first;
        while i < last {
            let lse = lse_in.get(i * heads + head).to_f32();
            if !is_neg_infinity(lse) {
                // A NaN stays the maximum, and `+inf` gives `2^(inf − inf)`: both make `l` NaN.
                let m_new = max_keeping_nan(lse, m);
                let corr = exp2_approx(m - m_new);
                let w = exp2_approx(lse - m_new);
                l = l * corr + w;
                acc = acc * corr + w * v_in.get((i * heads + head) * d_len + d).to_f32();
                m = m_new;
            }
            i += 1;
        }
        // A partial that is not empty gives `l ≥ 1`.
        let out = if is_neg_infinity(m) { 0.0 } else { acc / l };
        v_out.set(
            (row * heads + head) * d_len + d,
            T::from_f32(nan_unless_finite(out)),
        );
        if d == 0 {
            let lse = if is_neg_infinity(m) {
                f32::NEG_INFINITY
            } else {
                m + libm::log2f(l)
            };
            lse_out.set(row * heads + head, T::from_f32(lse));
        }
        d += b.size() as usize;
    }
}
