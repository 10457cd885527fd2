//! Spec §6.2's dual-pivot rounds asked of a row's sorted segments as the `seg`, `seg_stats`
//! and `seg_index` buffers give them (see `rejection_segments`: its reference writes them for
//! the parity cases), written sequentially with f32 sums: a segment's mass above `v` is its running sum at the
//! count of entries above `v`, the row's the sum of its segments' in segment order; the
//! proposal finds its segment from those masses, then walks the segment in natural order from
//! the mass before it, taking the segment's last drawable entry when rounding leaves the goal
//! past it. Everything else is `rejection_sample`'s (the filters, the pivots, the bracket).
//! Whatever the buffers hold, a segment's count is at most its entries and a max index past
//! the row reads as the row's last entry.

use super::rejection_sample::{dual_pivot_rounds, each_row, RowAt};
use super::rejection_segments::Segment;
use kiln_math::kernels::rejection_sample_segmented::SegmentedParams;
use kiln_math::kernels::rejection_segments::STAT_WORDS;
use kiln_math::Element;

/// Row `row`'s segments as the buffers give them.
fn segments_given(
    p: &SegmentedParams,
    row: usize,
    seg: &[f32],
    seg_stats: &[f32],
    seg_index: &[u32],
) -> Vec<Segment> {
    let (len, count, vocab) = (p.seg_len as usize, p.segments as usize, p.vocab as usize);
    (0..count)
        .map(|s| {
            let k = row * count + s;
            let first = s * len;
            let n = (seg_index[k * STAT_WORDS + 1] as usize).min(len.min(vocab - first));
            let at = k * 3 * len;
            Segment {
                first,
                sorted: seg[at..][..n].to_vec(),
                mass: seg[at + len..][..n].to_vec(),
                draw: seg[at + 2 * len..][..n].to_vec(),
                total: seg_stats[k * STAT_WORDS],
                max: (
                    seg_stats[k * STAT_WORDS + 1],
                    seg_index[k * STAT_WORDS].min(p.vocab - 1),
                ),
            }
        })
        .collect()
}

/// (token, accepted, rounds) for one row with its `[top_k, top_p, min_p]` and segments.
pub fn sample_row(
    p: &SegmentedParams,
    row: u32,
    filters: [f32; 3],
    probs: &[f32],
    draw: &[f32],
    segs: &[Segment],
) -> (u32, u32, u32) {
    let (mut p_max, mut arg) = (f32::NEG_INFINITY, 0u32);
    for g in segs {
        let (v, i) = g.max;
        if v > p_max || (v == p_max && i < arg) {
            (p_max, arg) = (v, i);
        }
    }
    let row_at = RowAt {
        key: [p.key0, p.key1],
        row,
        max_rounds: p.max_rounds,
        filters,
        vocab: probs.len(),
        p_max,
        arg,
        total: segs.iter().fold(0.0f32, |t, g| t + g.total),
    };
    let above = |v: f32| {
        segs.iter().fold((0.0f32, 0.0f32), |(n, m), g| {
            let c = g.count_above(v);
            (n + c as f32, m + Segment::at(&g.mass, c))
        })
    };
    dual_pivot_rounds(
        &row_at,
        probs,
        |low, u| propose(segs, probs, draw, low, u),
        above,
    )
}

/// The proposal over `{p > low}` for the uniform `u`, or `None` when no segment claims it.
fn propose(segs: &[Segment], probs: &[f32], draw: &[f32], low: f32, u: f32) -> Option<u32> {
    let weights: Vec<f32> = segs
        .iter()
        .map(|g| Segment::at(&g.draw, g.count_above(low)))
        .collect();
    let drawn = weights.iter().fold(0.0f32, |t, &w| t + w);
    // A mass that is not finite and positive draws nothing.
    if !(drawn > 0.0 && drawn < f32::INFINITY) {
        return None;
    }
    let goal = u * drawn;
    let mut running = 0.0f32;
    let (chosen, mut running) = segs.iter().zip(&weights).find_map(|(g, &w)| {
        if w > 0.0 {
            let before = running;
            running += w;
            if running > goal {
                return Some((g, before));
            }
        }
        None
    })?;
    let mut last = None;
    for i in chosen.first..segment_end(segs, chosen, probs.len()) {
        let w = if probs[i] > low { draw[i] } else { 0.0 };
        if w > 0.0 {
            last = Some(i as u32);
            running += w;
            if running > goal {
                return Some(i as u32);
            }
        }
    }
    last
}

/// One past the last entry of segment `g` (the next segment's first, or the row's end).
fn segment_end(segs: &[Segment], g: &Segment, vocab: usize) -> usize {
    segs.iter()
        .map(|s| s.first)
        .find(|&f| f > g.first)
        .unwrap_or(vocab)
}

/// The unfused chain of [`rejection_sample_segmented`](kiln_math::kernels::rejection_sample_segmented::rejection_sample_segmented):
/// its params and buffers, in list order, as host slices.
#[allow(clippy::too_many_arguments)] // one slice per buffer of the list
pub fn rejection_sample_segmented<T: Element>(
    p: &SegmentedParams,
    probs: &[T],
    probs_draw: &[T],
    filters: &[f32],
    seg: &[f32],
    seg_stats: &[f32],
    seg_index: &[u32],
    ids: &mut [u32],
    accepted: &mut [u32],
    rounds: &mut [u32],
) {
    each_row(p.vocab, probs, probs_draw, filters, ids, accepted, rounds, |r, f, pr, dr| {
        let segs = segments_given(p, r as usize, seg, seg_stats, seg_index);
        sample_row(p, r, f, pr, dr, &segs)
    });
}
