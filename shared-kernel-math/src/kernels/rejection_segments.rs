//! Step one of the segmented rejection sampler (`rejection_sample_segmented`): each row cut
//! into segments of `seg_len` entries, one block per segment, each segment's positive `probs`
//! sorted (descending, ties to the lower index) with their running filter and draw masses.
//!
//! One block per row must sweep the whole vocabulary every round (latency-bound on one
//! multiprocessor); with the segments sorted, a round's question "how many entries, and how
//! much mass, lie above `v`?" is one binary search per segment, and every segment's sort runs
//! in parallel.
//!
//! Per segment `s` of row `r`, `seg [rows, segments, 3, seg_len]` holds the sorted positive
//! entries (0 past them), then the running sums of those entries and of their `probs_draw`
//! (f32, in sorted order, constant past the last positive entry); `seg_stats [rows, segments,
//! 2]` holds the segment's total filter mass (every entry, natural order) and its max;
//! `seg_index [rows, segments, 2]` the max's index in the row (ties to the lowest; 0 when no
//! entry beats −inf) and the count of positive entries.

use crate::sampling::thread_slice;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Longest segment: a block sorts it in shared memory (8 bytes an entry), and kernel two packs
/// two of its counts in one u32.
pub const MAX_SEG_LEN: usize = 1024;

/// Most segments per row (kernel two keeps two words per segment in shared memory).
pub const MAX_SEGMENTS: usize = 1024;

/// Words per segment of `seg_stats` and of `seg_index`.
pub const STAT_WORDS: usize = 2;

/// The segment length a `vocab`-entry row is cut into: about one segment per thread of the
/// rounds' 256-thread block, a power of two in 64 ..= 1024.
pub fn seg_len_for(vocab: usize) -> usize {
    vocab.div_ceil(256).next_power_of_two().clamp(64, MAX_SEG_LEN)
}

crate::params! {
    /// Params of `rejection_segments`.
    pub struct RejectionSegmentsParams {
        /// Rows (B, the first axis of `probs`).
        pub rows: u32,
        /// Entries per row (V).
        pub vocab: u32,
        /// Entries per segment: a power of two in 2 ..= 1024.
        pub seg_len: u32 = 512,
        /// Segments per row, `ceil(vocab / seg_len)` (at most 1024).
        pub segments: u32,
    }
}

/// Descriptor of `rejection_segments`.
pub struct RejectionSegments;

/// Checks the segmented sampler's common buffers: `probs` and `probs_draw [rows, vocab]`, and
/// `seg`, `seg_stats`, `seg_index` laid out for `seg_len`. Returns `(rows, vocab, segments)`.
pub fn check_segments(
    seg_len: u32,
    probs: &[usize],
    probs_draw: &[usize],
    seg: &[usize],
    seg_stats: &[usize],
    seg_index: &[usize],
) -> Result<(u32, u32, u32), ShapeError> {
    let &[rows, vocab] = probs else {
        return Err(ShapeError::Invalid("probs must be [rows, vocab]"));
    };
    let (rows32, vocab32) = crate::sampling::rows_and_vocab(
        "rows",
        rows,
        vocab,
        MAX_SEG_LEN * MAX_SEGMENTS,
        rows * vocab,
    )?;
    if probs_draw != probs {
        return Err(ShapeError::Invalid(
            "probs_draw must have the shape of probs",
        ));
    }
    let len = seg_len as usize;
    if !(len.is_power_of_two() && (2..=MAX_SEG_LEN).contains(&len)) {
        return Err(ShapeError::Range {
            what: "seg_len (a power of two)",
            got: len as f64,
            lo: 2.0,
            hi: MAX_SEG_LEN as f64,
        });
    }
    let segments = vocab.div_ceil(len);
    if segments > MAX_SEGMENTS {
        return Err(ShapeError::Range {
            what: "segments (vocab / seg_len)",
            got: segments as f64,
            lo: 1.0,
            hi: MAX_SEGMENTS as f64,
        });
    }
    if *seg != [rows, segments, 3, len] {
        return Err(ShapeError::Invalid(
            "seg must be [rows, ceil(vocab / seg_len), 3, seg_len]",
        ));
    }
    if *seg_stats != [rows, segments, STAT_WORDS] || *seg_index != [rows, segments, STAT_WORDS]
    {
        return Err(ShapeError::Invalid(
            "seg_stats and seg_index must be [rows, ceil(vocab / seg_len), 2]",
        ));
    }
    crate::kernel::shape::to_u32("seg elements", rows * segments * 3 * len)?;
    Ok((rows32, vocab32, segments as u32))
}

impl KernelDef for RejectionSegments {
    type Params = RejectionSegmentsParams;
    const NAME: &'static str = "rejection_segments";

    /// Buffers: `probs [B, V]`, `probs_draw [B, V]` (f32), then the outputs `seg [B, S, 3,
    /// seg_len]`, `seg_stats [B, S, 2]` (f32) and `seg_index [B, S, 2]` (u32), `S =
    /// ceil(V / seg_len)`.
    fn bind(p: &mut RejectionSegmentsParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [probs, probs_draw, seg, seg_stats, seg_index] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 5,
            });
        };
        (p.rows, p.vocab, p.segments) =
            check_segments(p.seg_len, probs, probs_draw, seg, seg_stats, seg_index)?;
        Ok(())
    }

    fn launch(p: &RejectionSegmentsParams) -> Launch {
        Launch {
            grid: [p.rows, p.segments, 1],
            block: 256,
        }
    }

    fn shared_bytes(p: &RejectionSegmentsParams, _block: u32, _wave: u32) -> usize {
        8 * p.seg_len as usize
    }
}

/// Whether sort entry `(ka, ia)` comes before `(kb, ib)`: larger key, then lower index.
#[inline(always)]
fn sorts_before(ka: f32, ia: u32, kb: f32, ib: u32) -> bool {
    ka > kb || (ka == kb && ia < ib)
}

/// The body: block `(row, segment)` loads its entries, sorts the positive ones by a bitonic
/// network in shared memory, then writes the running sums in sorted order.
pub fn rejection_segments<T: Element, B: Block>(
    b: &B,
    p: &RejectionSegmentsParams,
    probs: Src<T>,
    probs_draw: Src<T>,
    seg: Dst<f32>,
    seg_stats: Dst<f32>,
    seg_index: Dst<u32>,
) {
    let (row, s) = (b.block_x() as usize, b.block_y() as usize);
    let len = p.seg_len as usize;
    let first = s * len;
    let here = len.min(p.vocab as usize - first);
    let base = row * p.vocab as usize + first;
    let keys = b.shared::<f32>(0, len);
    let order = b.shared::<u32>(4 * len, len);

    // Natural order: total mass, the first max, the count of positive entries; each entry's
    // sort key (non-positive and NaN entries, and the padding, sort last as −1).
    let (tf, te) = thread_slice(b, here);
    let (mut total, mut best, mut best_i, mut positive) = (0.0f32, f32::NEG_INFINITY, 0u32, 0.0f32);
    let mut j = tf;
    while j < te {
        let v = probs.get(base + j).to_f32();
        total += v;
        if v > best {
            best = v;
            best_i = (first + j) as u32;
        }
        let key = if v > 0.0 { v } else { -1.0 };
        positive += if v > 0.0 { 1.0 } else { 0.0 };
        keys.set(j, key);
        order.set(j, j as u32);
        j += 1;
    }
    let mut j = here + b.thread() as usize;
    while j < len {
        keys.set(j, -1.0);
        order.set(j, j as u32);
        j += b.size() as usize;
    }
    // The sort reads every thread's keys (a one-wave block's reductions hold no barrier).
    b.barrier();
    let (max, max_i) = b.argmax(best, best_i);
    let (total, positive) = b.sum_pair(total, positive);
    let positive = positive as usize;

    // Bitonic sort: runs of `k` merge pairwise at distance `j`; a run whose bit `k` is set
    // sorts the other way, so the next merge sees bitonic sequences. `len`, `k` and `dist` are
    // powers of two, so pair `q`'s first entry is `q` with a zero bit inserted at `dist`. The
    // indices are u32 (one instruction per step where a GPU's usize takes two).
    let (n, half) = (len as u32, len as u32 / 2);
    let mut k = 2u32;
    while k <= n {
        let mut dist = k / 2;
        while dist > 0 {
            let mut q = b.thread();
            while q < half {
                let first = ((q & !(dist - 1)) << 1) | (q & (dist - 1));
                let (i, m) = (first as usize, (first + dist) as usize);
                // SAFETY: `q < len / 2` puts `i` in a pair's lower half, so `i < m < len`,
                // inside both `len`-entry arrays.
                unsafe {
                    let (ki, ii) = (keys.get_unchecked(i), order.get_unchecked(i));
                    let (km, im) = (keys.get_unchecked(m), order.get_unchecked(m));
                    if ((first & k) == 0) == sorts_before(km, im, ki, ii) {
                        keys.set_unchecked(i, km);
                        order.set_unchecked(i, im);
                        keys.set_unchecked(m, ki);
                        order.set_unchecked(m, ii);
                    }
                }
                q += b.size();
            }
            b.barrier();
            dist /= 2;
        }
        k *= 2;
    }

    // Running masses in sorted order: each thread's contiguous run, offset by the runs before.
    let (cf, ce) = thread_slice(b, len);
    let draw_at = |j: usize| probs_draw.get(base + order.get(j) as usize).to_f32();
    let (mut mass, mut draw) = (0.0f32, 0.0f32);
    let mut j = cf;
    while j < ce && j < positive {
        mass += keys.get(j);
        draw += draw_at(j);
        j += 1;
    }
    let (mut mass_run, _) = b.scan_sum(mass);
    let (mut draw_run, _) = b.scan_sum(draw);
    let out = (row * p.segments as usize + s) * 3 * len;
    let mut j = cf;
    while j < ce {
        let mut key = 0.0f32;
        if j < positive {
            key = keys.get(j);
            mass_run += key;
            draw_run += draw_at(j);
        }
        seg.set(out + j, key);
        seg.set(out + len + j, mass_run);
        seg.set(out + 2 * len + j, draw_run);
        j += 1;
    }
    if b.thread() == 0 {
        let at = (row * p.segments as usize + s) * STAT_WORDS;
        seg_stats.set(at, total);
        seg_stats.set(at + 1, max);
        seg_index.set(at, max_i);
        seg_index.set(at + 1, positive as u32);
    }
}
