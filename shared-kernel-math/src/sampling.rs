//! What the sampler kernels share: their row checks, each thread's slice of a row, and the
//! inverse-CDF draw in natural index order.

use crate::kernel::shape;
use crate::{Block, ShapeError};

/// Longest vocabulary of a sampler that counts tokens or sums masses in f32 (exact below 2^24).
pub const MAX_VOCAB: usize = 1 << 24;

/// Checks a sampler's row count and vocabulary (both non-zero, the vocabulary at most
/// `max_vocab`) and that its largest buffer, `elements` long, is addressable in u32. Returns
/// `(rows, vocab)` as the params hold them.
pub fn rows_and_vocab(
    rows_name: &'static str,
    rows: usize,
    vocab: usize,
    max_vocab: usize,
    elements: usize,
) -> Result<(u32, u32), ShapeError> {
    shape::nonzero(rows_name, rows)?;
    shape::nonzero("vocab", vocab)?;
    if vocab > max_vocab {
        return Err(ShapeError::Range {
            what: "vocab",
            got: vocab as f64,
            lo: 1.0,
            hi: max_vocab as f64,
        });
    }
    shape::to_u32("elements of the largest buffer", elements)?;
    Ok((
        shape::to_u32(rows_name, rows)?,
        shape::to_u32("vocab", vocab)?,
    ))
}

/// The contiguous slice `[first, end)` of a `len`-long row that this thread owns. Contiguous
/// slices in thread order keep a block's cumulative sums in natural index order.
#[inline(always)]
pub fn thread_slice<B: Block>(b: &B, len: usize) -> (usize, usize) {
    let chunk = len.div_ceil(b.size() as usize);
    let first = (b.thread() as usize * chunk).min(len);
    (first, (first + chunk).min(len))
}

/// Inverse-CDF draw over one row, one block per row, each thread over its `[first, end)`: the
/// first index (natural order) whose running weight exceeds `u · Σ weight`. Returns
/// `(claimed, index, Σ weight)`; `claimed` is false when rounding left the goal in no slice, or
/// when `Σ weight` is not finite and positive (a NaN, ±Inf or negative weight: no slice order
/// decides then, docs/non-finite.md); the index is then meaningless and the caller picks its own.
#[inline(always)]
pub fn inverse_cdf<B: Block>(
    b: &B,
    first: usize,
    end: usize,
    u: f32,
    weight: impl Fn(usize) -> f32,
) -> (bool, u32, f32) {
    let mut mine = 0.0f32;
    let mut i = first;
    while i < end {
        mine += weight(i);
        i += 1;
    }
    let (below, mass) = b.scan_sum(mine);
    let goal = u * mass;
    let (mut claim, mut pick) = (0.0f32, 0u32);
    let drawable = mass.is_finite() && mass > 0.0;
    if drawable && mine > 0.0 && below + mine > goal {
        // This slice holds the goal (or a later one does and the lowest claim wins).
        let mut running = below;
        let mut i = first;
        while i < end {
            let w = weight(i);
            if w > 0.0 {
                pick = i as u32;
                running += w;
                if running > goal {
                    break;
                }
            }
            i += 1;
        }
        claim = 1.0;
    }
    // Slices are in thread order: the lowest claimed index is the lowest claiming slice's.
    let (claimed, lowest) = b.argmax(claim, pick);
    (claimed > 0.0, lowest, mass)
}
