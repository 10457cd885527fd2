//! Step two of the segmented rejection sampler: spec §6.2's dual-pivot rounds for one row per
//! block, asked of the sorted segments `rejection_segments` wrote instead of the whole row.
//!
//! The same rounds as `rejection_sample` (proposal from `probs_draw` over `{p > low}` by
//! inverse CDF in natural index order, the pivots, the same accept test and bracket), so the
//! token follows the same law; only the sums round in another order:
//! - a segment's mass above `v` is its running sum (sorted order) at the count of entries
//!   above `v`, found by binary search; the row's is the sum of the segments' in segment order;
//! - the proposal finds its segment from those masses, then walks that segment's entries in
//!   natural order from the mass of the segments before it; a goal that rounding leaves past
//!   the walk takes the segment's last drawable entry.
//!
//! Each thread owns a contiguous run of segments and keeps, in shared memory, its segments'
//! counts above `low` and above the round's pivots.

use crate::kernels::rejection_sample::{bit_midpoint, check_rows, fails, row_filters, truncates};
use crate::kernels::rejection_segments::{check_segments, STAT_WORDS};
use crate::random::{philox4x32_10_on, uniform_open};
use crate::sampling::thread_slice;
use crate::{argmax_beats, Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `rejection_sample_segmented`; the filters come per row in the `filters`
    /// buffer.
    pub struct SegmentedParams {
        /// Rows (B, the first axis of `probs`).
        pub rows: u32,
        /// Probabilities per row (V).
        pub vocab: u32,
        /// Entries per segment, as `rejection_segments` cut the rows.
        pub seg_len: u32 = 512,
        /// Segments per row, `ceil(vocab / seg_len)`.
        pub segments: u32,
        /// Philox key, low word (draw a fresh key per call).
        pub key0: u32 = 0,
        /// Philox key, high word.
        pub key1: u32 = 0,
        /// Rounds before giving up with the row's argmax (`accepted = 0`); 32 always suffice.
        pub max_rounds: u32 = 32,
    }
}

/// Descriptor of `rejection_sample_segmented`.
pub struct RejectionSampleSegmented;

impl KernelDef for RejectionSampleSegmented {
    type Params = SegmentedParams;
    const NAME: &'static str = "rejection_sample_segmented";

    /// Buffers: `probs [B, V]`, `probs_draw [B, V]`, `filters [B, 3]` (f32, as
    /// `rejection_sample` reads them), `rejection_segments`' `seg`, `seg_stats`, `seg_index`
    /// for the same rows and `seg_len`, then u32 outputs `ids [B]`, `accepted [B]`,
    /// `rounds [B]`.
    fn bind(p: &mut SegmentedParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [probs, probs_draw, filters, seg, seg_stats, seg_index, ids, accepted, rounds] =
            shapes
        else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 9,
            });
        };
        (p.rows, p.vocab, p.segments) =
            check_segments(p.seg_len, probs, probs_draw, seg, seg_stats, seg_index)?;
        check_rows(p.rows as usize, filters, [ids, accepted, rounds], p.max_rounds)
    }

    fn launch(p: &SegmentedParams) -> Launch {
        Launch {
            grid: [p.rows, 1, 1],
            block: 256,
        }
    }

    fn shared_bytes(p: &SegmentedParams, _block: u32, _wave: u32) -> usize {
        4 * (2 * p.segments as usize + 1)
    }
}

/// Entries of sorted segment `at` (its first word in `seg`) above `v0` and above `v1`: two
/// binary searches over its `positive` sorted entries, stepped together so that their loads
/// overlap.
#[inline(always)]
fn count_above(seg: Src<f32>, at: usize, positive: usize, v0: f32, v1: f32) -> (usize, usize) {
    let (mut lo0, mut hi0, mut lo1, mut hi1) = (0usize, positive, 0usize, positive);
    while lo0 < hi0 || lo1 < hi1 {
        if lo0 < hi0 {
            let mid = (lo0 + hi0) / 2;
            if seg.get(at + mid) > v0 {
                lo0 = mid + 1;
            } else {
                hi0 = mid;
            }
        }
        if lo1 < hi1 {
            let mid = (lo1 + hi1) / 2;
            if seg.get(at + mid) > v1 {
                lo1 = mid + 1;
            } else {
                hi1 = mid;
            }
        }
    }
    (lo0, lo1)
}

/// The running sum (`which` 1: filter mass, 2: draw mass) of sorted segment `at`'s first
/// `count` entries.
#[inline(always)]
fn mass_of(seg: Src<f32>, at: usize, len: usize, which: usize, count: usize) -> f32 {
    if count == 0 {
        0.0
    } else {
        seg.get(at + which * len + count - 1)
    }
}

/// The body: one block per row.
#[allow(clippy::too_many_arguments)] // one view per buffer of the list
pub fn rejection_sample_segmented<T: Element, B: Block>(
    b: &B,
    p: &SegmentedParams,
    probs: Src<T>,
    probs_draw: Src<T>,
    filters: Src<f32>,
    seg: Src<f32>,
    seg_stats: Src<f32>,
    seg_index: Src<u32>,
    ids: Dst<u32>,
    accepted: Dst<u32>,
    rounds: Dst<u32>,
) {
    let row = b.block_x();
    let len = p.seg_len as usize;
    let segments = p.segments as usize;
    let vocab = p.vocab as usize;
    let base = row as usize * vocab;
    let first_seg = row as usize * segments;
    let seg_at = |s: usize| (first_seg + s) * 3 * len;
    // At most the segment's entries, whatever the buffer holds: a search never leaves it.
    let positive = |s: usize| {
        let here = len.min(vocab - s * len);
        (seg_index.get((first_seg + s) * STAT_WORDS + 1) as usize).min(here)
    };
    let (sf, se) = thread_slice(b, segments);
    // Per owned segment: entries above `low`, and above the round's pivots (pivot1's count in
    // the high half; a count is at most 1024).
    let at_low = b.shared::<u32>(0, segments);
    let at_pivots = b.shared::<u32>(4 * segments, segments);
    let walk_from = b.shared::<f32>(8 * segments, 1);

    // The row's first max and total mass, from the segments' in segment order.
    let (mut best, mut best_i, mut mass) = (f32::NEG_INFINITY, 0u32, 0.0f32);
    let mut s = sf;
    while s < se {
        let at = (first_seg + s) * STAT_WORDS;
        mass += seg_stats.get(at);
        // An index past the row (whatever the buffer holds) reads as the row's last entry.
        let (v, i) = (seg_stats.get(at + 1), seg_index.get(at).min(p.vocab - 1));
        if argmax_beats(v, i, best, best_i) {
            best = v;
            best_i = i;
        }
        s += 1;
    }
    let (p_max, arg_max) = b.argmax(best, best_i);
    let total = b.sum(mass);
    let write = |id: u32, ok: u32, used: u32| {
        if b.thread() == 0 {
            ids.set(row as usize, id);
            accepted.set(row as usize, ok);
            rounds.set(row as usize, used);
        }
    };
    // A row without positive mass (all zero, −inf logits or NaN) yields its argmax.
    if p_max.is_nan() || p_max <= 0.0 {
        write(arg_max, 1, 0);
        return;
    }
    let (filter, mut low) = row_filters(filters, row, p.vocab, p_max, total);
    let mut high = p_max;
    let mut s = sf;
    while s < se {
        // Every positive entry is above a floor of 0.
        let n = positive(s);
        let above = if low > 0.0 { count_above(seg, seg_at(s), n, low, low).0 } else { n };
        at_low.set(s, above as u32);
        s += 1;
    }

    let mut round = 0u32;
    while round < p.max_rounds {
        let u = uniform_open(philox4x32_10_on(b, [round, 0, row, 0], [p.key0, p.key1])[0]);
        // The proposal's segment: running draw masses above `low`, in segment order.
        let mut mine = 0.0f32;
        let mut s = sf;
        while s < se {
            mine += mass_of(seg, seg_at(s), len, 2, at_low.get(s) as usize);
            s += 1;
        }
        let (below, drawn) = b.scan_sum(mine);
        let goal = u * drawn;
        let (mut claim, mut pick, mut before) = (0.0f32, 0u32, 0.0f32);
        // A mass that is not finite and positive draws nothing (docs/non-finite.md).
        if drawn.is_finite() && drawn > 0.0 {
            let mut running = below;
            let mut s = sf;
            while s < se {
                let w = mass_of(seg, seg_at(s), len, 2, at_low.get(s) as usize);
                if w > 0.0 {
                    before = running;
                    running += w;
                    if running > goal {
                        claim = 1.0;
                        pick = s as u32;
                        break;
                    }
                }
                s += 1;
            }
        }
        // Segments are in thread order: the lowest claim is the lowest claiming thread's.
        let (claimed, chosen) = b.argmax(claim, pick);
        // Last round's readers of `walk_from` are past it (a one-wave block's reductions hold no
        // barrier).
        b.barrier();
        if claim > 0.0 && pick == chosen {
            walk_from.set(0, before);
        }
        b.barrier();
        let mut candidate = arg_max;
        if claimed > 0.0 {
            // The walk in natural order over the chosen segment, from the mass before it.
            let first = chosen as usize * len;
            let here = len.min(vocab - first);
            let (wf, we) = thread_slice(b, here);
            let weight = |i: usize| {
                if probs.get(base + first + i).to_f32() > low {
                    probs_draw.get(base + first + i).to_f32()
                } else {
                    0.0
                }
            };
            let mut part = 0.0f32;
            let mut i = wf;
            while i < we {
                let w = weight(i);
                if w > 0.0 {
                    part += w;
                }
                i += 1;
            }
            let (part_below, _) = b.scan_sum(part);
            let mut running = walk_from.get(0) + part_below;
            let (mut hit, mut hit_i, mut last) = (0.0f32, 0u32, -1.0f32);
            let mut i = wf;
            while i < we {
                let w = weight(i);
                if w > 0.0 {
                    last = (first + i) as f32;
                    running += w;
                    if running > goal {
                        hit = 1.0;
                        hit_i = (first + i) as u32;
                        break;
                    }
                }
                i += 1;
            }
            let (found, at) = b.argmax(hit, hit_i);
            // Indices are below 2^20, exact in f32: the largest is the last drawable entry.
            let (last, _) = b.argmax(last, 0);
            if found > 0.0 {
                candidate = at;
            } else if last >= 0.0 {
                candidate = last as u32;
            }
        }

        let pivot0 = probs.get(base + candidate as usize).to_f32();
        let pivot1 = bit_midpoint(pivot0, if high > pivot0 { high } else { pivot0 });
        let (mut above0, mut mass0, mut above1, mut mass1) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
        if truncates(filter) {
            let mut s = sf;
            while s < se {
                let (at, n) = (seg_at(s), positive(s));
                let (c0, c1) = count_above(seg, at, n, pivot0, pivot1);
                at_pivots.set(s, (c0 | (c1 << 16)) as u32);
                above0 += c0 as f32;
                mass0 += mass_of(seg, at, len, 1, c0);
                above1 += c1 as f32;
                mass1 += mass_of(seg, at, len, 1, c1);
                s += 1;
            }
            (above0, mass0) = b.sum_pair(above0, mass0);
            (above1, mass1) = b.sum_pair(above1, mass1);
        }
        if !fails(filter, above0, mass0) {
            write(candidate, 1, round + 1);
            return;
        }
        // Everything at or below a failing pivot fails too: raise the floor.
        let raise_to_pivot1 = fails(filter, above1, mass1);
        if raise_to_pivot1 {
            low = pivot1;
        } else {
            low = pivot0;
            high = pivot1;
        }
        let mut s = sf;
        while s < se {
            let c = at_pivots.get(s);
            at_low.set(s, if raise_to_pivot1 { c >> 16 } else { c & 0xffff });
            s += 1;
        }
        round += 1;
    }
    write(arg_max, 0, p.max_rounds);
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::count_above;
    use crate::{Src, View};
    use std::vec;
    use std::vec::Vec;

    /// The searches count what a scan counts, over sorted entries of every length a segment
    /// can hold, at values below, between, on and above the entries (with runs of ties).
    #[test]
    fn count_above_counts_the_entries_above_each_value() {
        let mut state = 0x2545_f491_u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        for len in (0..=40).chain([63, 64, 65, 255, 511, 512, 1000, 1023, 1024]) {
            // Descending, with ties: values on a coarse grid.
            let mut sorted: Vec<f32> = (0..len).map(|_| (next() % 97) as f32 / 97.0 + 0.01).collect();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let mut buf = vec![0.5f32; len + 3];
            buf[2..2 + len].copy_from_slice(&sorted);
            // SAFETY: the view covers `buf`, which outlives it.
            let seg = unsafe { Src::<f32>::from_raw_parts(buf.as_mut_ptr().cast(), buf.len()) };
            let probes: Vec<f32> = (0..30).map(|_| (next() % 110) as f32 / 97.0).collect();
            for v0 in probes.into_iter().chain([0.0, 2.0]) {
                let v1 = sorted.get(next() as usize % len.max(1)).copied().unwrap_or(0.3);
                let want = |v: f32| sorted.iter().filter(|&&x| x > v).count();
                assert_eq!(
                    count_above(seg, 2, len, v0, v1),
                    (want(v0), want(v1)),
                    "len {len}, values {v0} and {v1}"
                );
            }
        }
    }
}
