//! Merge of attention states (spec §9.4): output row `o` combines the normalised partials
//! `[o_indptr[o], o_indptr[o+1])` of every head by their base-2 log-sum-exp. A partial with LSE
//! `-inf` is empty and skipped; a row with no other partial is zeros with LSE `-inf`. A NaN or
//! `+inf` LSE makes the row's output and LSE NaN, and a non-finite output element is NaN
//! (docs/non-finite.md).
//!
//! With `m = max lse_i` and `w_i = 2^(lse_i − m)`: `v = Σ w_i v_i / Σ w_i`,
//! `lse = m + log2 Σ w_i`. A block merges one (row, head): it splits the row's partials among
//! [`merge_groups`] groups of threads, each group's threads owning dims and folding their
//! partials `MERGE_BATCH` at a time (independent loads that overlap) into a running state
//! (maximum, denominator, sums); the groups' states meet in shared memory after one barrier.
//! A long row (split-KV decode at batch 1 has tens of partials) thus costs a few dependent
//! loads and no block reduction.

use crate::kernel::shape;
use crate::{
    exp2_approx, is_neg_infinity, max_keeping_nan, mul_add, nan_unless_finite, Block, Dst, Element,
    KernelDef, Launch, ShapeError, Src,
};

use super::decode_parts::merged_max_sum;
use super::decode_span::log_sum;
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
            block: dim_threads(p) * merge_groups(p),
        }
    }

    fn shared_bytes(p: &MergeStatesParams, _block: u32, _wave: u32) -> usize {
        4 * merge_groups(p) as usize * (p.head_dim as usize + 2)
    }
}

/// Threads of one group: the head dim in warps of 32, at most 8.
fn dim_threads(p: &MergeStatesParams) -> u32 {
    p.head_dim.div_ceil(32).clamp(1, 8) * 32
}

/// Groups a block splits a row's partials among: one per `MERGE_BATCH` partials of an average
/// row, within 1024 threads.
pub fn merge_groups(p: &MergeStatesParams) -> u32 {
    let per_row = p.partials.div_ceil(p.rows.max(1));
    per_row
        .div_ceil(MERGE_BATCH as u32)
        .clamp(1, 1024 / dim_threads(p))
}

/// Partials a thread reads before using any (their loads are independent, so they overlap).
const MERGE_BATCH: usize = 8;

/// The body: block `(x, y)` merges head `x` of output row `y` (see the module docs).
#[inline(always)]
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
    let threads = b.size() as usize;
    // Any block is correct: at most a group per thread; threads past the last whole group
    // only take part in the final sums.
    let groups = (merge_groups(p) as usize).min(threads);
    let per_group = threads / groups;
    let group = b.thread() as usize / per_group;
    let lane = b.thread() as usize % per_group;
    // A malformed range (refused on the host) reads as empty.
    let first = o_indptr.get(row).max(0) as usize;
    let last = o_indptr.get(row + 1).max(0) as usize;

    // Group `group` folds partials first + group, + groups, … into a running state (maximum,
    // denominator, one sum per dim); a state is `d_len` sums, then its maximum and denominator.
    let stride = d_len + 2;
    let states = b.shared::<f32>(0, groups * stride);
    let mut d = if group < groups { lane } else { d_len };
    while d < d_len {
        let (mut m, mut l, mut acc) = (f32::NEG_INFINITY, 0.0f32, 0.0f32);
        let mut i = first + group;
        while i < last {
            let lse = lse_batch(&lse_in, i, groups, last, heads, head);
            let mut v = [0.0f32; MERGE_BATCH];
            let mut u = 0;
            while u < MERGE_BATCH {
                if i + u * groups < last {
                    v[u] = v_in.get(((i + u * groups) * heads + head) * d_len + d).to_f32();
                }
                u += 1;
            }
            let mut top = m;
            let mut u = 0;
            while u < MERGE_BATCH {
                if !is_neg_infinity(lse[u]) {
                    top = max_keeping_nan(lse[u], top);
                }
                u += 1;
            }
            // Empty partials (`-inf`) add nothing; until one is not, there is no state.
            if !is_neg_infinity(top) {
                let scale = if is_neg_infinity(m) {
                    0.0
                } else {
                    exp2_approx(m - top)
                };
                l *= scale;
                acc *= scale;
                m = top;
                let mut u = 0;
                while u < MERGE_BATCH {
                    if !is_neg_infinity(lse[u]) {
                        let w = exp2_approx(lse[u] - m);
                        l += w;
                        acc = mul_add(w, v[u], acc);
                    }
                    u += 1;
                }
            }
            i += MERGE_BATCH * groups;
        }
        states.set(group * stride + d, acc);
        if d == 0 {
            states.set(group * stride + d_len, m);
            states.set(group * stride + d_len + 1, l);
        }
        d += per_group;
    }
    b.barrier();

    // The groups' states meet: the largest maximum (NaN wins), then the rescaled sums.
    let (m, l) = merged_max_sum(&states, d_len, d_len + 1, stride, groups);
    // A NaN or `+inf` LSE poisons the row (tested by bits: see `is_neg_infinity`).
    let poisoned = m.is_nan() || (m.is_infinite() && m.is_sign_positive());
    let empty = is_neg_infinity(m);
    let mut d = b.thread() as usize;
    while d < d_len {
        let mut acc = 0.0f32;
        let mut g = 0;
        while g < groups {
            let mg = states.get(g * stride + d_len);
            if !empty && !is_neg_infinity(mg) {
                acc = mul_add(exp2_approx(mg - m), states.get(g * stride + d), acc);
            }
            g += 1;
        }
        // The largest partial weighs 1, so `l ≥ 1` when the row has one.
        let out = if poisoned {
            f32::NAN
        } else if empty {
            0.0
        } else {
            nan_unless_finite(acc / l)
        };
        v_out.set((row * heads + head) * d_len + d, T::from_f32(out));
        if d == 0 {
            let lse = if poisoned { f32::NAN } else { log_sum(m, l) };
            lse_out.set(row * heads + head, T::from_f32(lse));
        }
        d += threads;
    }
}

/// The LSEs of partials `i + u · stride`, `u < MERGE_BATCH` (`-inf`, empty, past `last`).
#[inline(always)]
fn lse_batch<T: Element>(
    lse_in: &Src<T>,
    i: usize,
    stride: usize,
    last: usize,
    heads: usize,
    head: usize,
) -> [f32; MERGE_BATCH] {
    let mut lse = [f32::NEG_INFINITY; MERGE_BATCH];
    let mut u = 0;
    while u < MERGE_BATCH {
        if i + u * stride < last {
            lse[u] = lse_in.get((i + u * stride) * heads + head).to_f32();
        }
        u += 1;
    }
    lse
}
