//! Step one of the segmented rejection sampler: each row cut into segments of `seg_len`
//! entries; per segment its positive entries sorted (descending, ties to the lower index) with
//! their running filter and draw masses (f32, sorted order), its total mass (f32, natural
//! order), its first max and the count of positive entries.

use kiln_math::kernels::rejection_segments::{RejectionSegmentsParams, STAT_WORDS};
use kiln_math::Element;

/// One segment of a row, as the spec of the segmented sampler defines it.
pub struct Segment {
    /// Index in the row of the segment's first entry.
    pub first: usize,
    /// The positive entries, sorted descending (ties: lower index first).
    pub sorted: Vec<f32>,
    /// Running sums of `sorted`.
    pub mass: Vec<f32>,
    /// Running sums of the draw weights of `sorted`'s entries.
    pub draw: Vec<f32>,
    /// Sum of every entry, natural order.
    pub total: f32,
    /// The first max (NaN never wins) and its index in the row; (−inf, 0) when nothing beats −inf.
    pub max: (f32, u32),
}

impl Segment {
    /// Entries above `v` (the positive entries are the only ones a pivot ≥ 0 can see).
    pub fn count_above(&self, v: f32) -> usize {
        self.sorted.iter().filter(|&&x| x > v).count()
    }

    /// Running sum `sums` at the first `count` sorted entries (0 for none).
    pub fn at(sums: &[f32], count: usize) -> f32 {
        if count == 0 {
            0.0
        } else {
            sums[count - 1]
        }
    }
}

/// The segments of one row of `probs` and `draw`, `len` entries each.
pub fn segments_of(probs: &[f32], draw: &[f32], len: usize) -> Vec<Segment> {
    (0..probs.len().div_ceil(len))
        .map(|s| {
            let first = s * len;
            let here = &probs[first..(first + len).min(probs.len())];
            let mut max = (f32::NEG_INFINITY, 0u32);
            for (j, &v) in here.iter().enumerate() {
                if v > max.0 {
                    max = (v, (first + j) as u32);
                }
            }
            let total = here.iter().fold(0.0f32, |t, &v| t + v);
            let mut positive: Vec<usize> = (0..here.len()).filter(|&j| here[j] > 0.0).collect();
            // Stable: equal entries keep their natural order.
            positive.sort_by(|&a, &b| here[b].total_cmp(&here[a]));
            let running = |f: &dyn Fn(usize) -> f32| {
                let mut run = 0.0f32;
                positive
                    .iter()
                    .map(|&j| {
                        run += f(j);
                        run
                    })
                    .collect::<Vec<f32>>()
            };
            Segment {
                first,
                sorted: positive.iter().map(|&j| here[j]).collect(),
                mass: running(&|j| here[j]),
                draw: running(&|j| draw[first + j]),
                total,
                max,
            }
        })
        .collect()
}

/// The unfused chain of [`rejection_segments`](kiln_math::kernels::rejection_segments::rejection_segments): its params and
/// buffers, in list order, as host slices.
pub fn rejection_segments<T: Element>(
    p: &RejectionSegmentsParams,
    probs: &[T],
    probs_draw: &[T],
    seg: &mut [f32],
    seg_stats: &mut [f32],
    seg_index: &mut [u32],
) {
    let (vocab, len, count) = (p.vocab as usize, p.seg_len as usize, p.segments as usize);
    let floats = |x: &[T], r: usize| -> Vec<f32> {
        x[r * vocab..][..vocab].iter().map(|v| v.to_f32()).collect()
    };
    for r in 0..p.rows as usize {
        for (s, g) in segments_of(&floats(probs, r), &floats(probs_draw, r), len)
            .iter()
            .enumerate()
        {
            let k = r * count + s;
            let out = &mut seg[k * 3 * len..][..3 * len];
            let n = g.sorted.len();
            for j in 0..len {
                out[j] = g.sorted.get(j).copied().unwrap_or(0.0);
                out[len + j] = Segment::at(&g.mass, (j + 1).min(n));
                out[2 * len + j] = Segment::at(&g.draw, (j + 1).min(n));
            }
            seg_stats[k * STAT_WORDS] = g.total;
            seg_stats[k * STAT_WORDS + 1] = g.max.0;
            seg_index[k * STAT_WORDS] = g.max.1;
            seg_index[k * STAT_WORDS + 1] = n as u32;
        }
    }
}
