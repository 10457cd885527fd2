//! Softmax-free categorical sampling: `argmax_i (logit_i / T + G_i)` (spec §5).
//!
//! `G_i` is Gumbel noise from word `i mod 4` of `philox((⌊i/4⌋, 0, row, 0), key)`, a pure
//! function of (key, row, i). A row may be split over `S` blocks (spec §5's `NumSplits`, so a
//! small batch with a large vocabulary fills a GPU): split `s` takes every `S`-th chunk of 1024
//! entries starting at chunk `s` and writes its first maximum to `vals [B, S]`, `idxs [B, S]`;
//! `gumbel_max_merge` then takes the first maximum over the splits. Ties go to the lower index
//! and a row whose candidates are all −inf (or NaN) yields index 0, so the token is the same
//! for every `S` and every block size.
//!
//! Most entries cannot beat their thread's running maximum, so each is first bounded cheaply:
//! `x / T` from above by `x · (1/T)` widened by more than its rounding, the noise from above by
//! a block-shared table indexed by the word's top bits (the noise of the largest word with
//! those bits, widened past any `logf`'s error; the noise grows with the word). Only an entry
//! whose bound reaches both its thread's maximum and its wave's pays for the division and the
//! two logarithms, and every maximum is an exact candidate, so the result is the spec's bit for
//! bit. On its first step a thread takes the exact candidate of the highest bound first, so
//! that the wave's maximum is known before the rest of the step is bounded against it.

use crate::random::{gumbel_noise, philox4x32_10_on};
use crate::sampling::rows_and_vocab;
use crate::{Block, Dst, Element, KernelDef, Launch, LaunchBound, Rw, ShapeError, Src};

/// Entries per chunk, the unit that splits take in turn (spec §5's 256 threads × 4 entries).
pub const CHUNK: usize = 1024;
/// Top bits of a random word that index the noise-bound table's first level.
pub const BOUND_BITS: u32 = 8;
/// Entries of each level of the noise-bound table.
const LEVEL: u32 = 1 << BOUND_BITS;
/// Entries of the noise-bound table (f32 each, in the block's shared memory): the top
/// [`BOUND_BITS`] bits of a word, and for words whose top bits are all ones (where the noise
/// climbs steepest, and where the winners come from) the next [`BOUND_BITS`] bits.
pub const BOUNDS: usize = 2 * LEVEL as usize;

/// The noise-bound table entry of word `w` (see [`BOUNDS`]).
#[inline(always)]
pub fn bound_index(w: u32) -> u32 {
    let top = w >> (32 - BOUND_BITS);
    if top == LEVEL - 1 {
        LEVEL + ((w >> (32 - 2 * BOUND_BITS)) & (LEVEL - 1))
    } else {
        top
    }
}

/// An upper bound of `gumbel_noise(w)` for every word `w` with [`bound_index`] `j`: the noise
/// of the largest such word, plus `(|g| + 1)·2^-16` (far above the few ulps by which any
/// port's `logf` may break monotonicity).
#[inline(always)]
pub fn noise_bound(j: u32) -> f32 {
    let largest = if j < LEVEL {
        (j << (32 - BOUND_BITS)) | (u32::MAX >> BOUND_BITS)
    } else {
        let next = (j - LEVEL) << (32 - 2 * BOUND_BITS);
        ((LEVEL - 1) << (32 - BOUND_BITS)) | next | (u32::MAX >> (2 * BOUND_BITS))
    };
    let g = gumbel_noise(largest);
    g + (g.abs() + 1.0) * (1.0 / 65536.0)
}

/// An upper bound of `x / T` (correctly rounded, or a Vulkan `/` within 2.5 ulp) from
/// `q = x · (1/T)` where `1/T` is normal (`T ≤ 2^126`; the kernel bounds nothing otherwise):
/// two roundings put `q` within 3 ulp-halves of the quotient, and the margin is `|q|·2^-21`
/// (about 8 ulp) plus the smallest normal for results near the subnormals.
#[inline(always)]
pub fn quotient_bound(q: f32) -> f32 {
    q + (q.abs() * (1.0 / 2_097_152.0) + f32::MIN_POSITIVE)
}

/// Most splits of a row (spec §5).
pub const MAX_SPLITS: usize = 64;
/// Blocks a launch should reach before rows are split further (spec §5's `want` rule).
pub const TARGET_BLOCKS: usize = 64;

/// Spec §5's split count: `want`, the smallest power of two with `rows · want ≥ 64`, and
/// `cap`, the largest power of two ≤ `ceil(vocab / 1024)`, both at most 64; `S = min(want, cap)`.
pub fn splits_for(rows: usize, vocab: usize) -> usize {
    let mut want = 1;
    while want < MAX_SPLITS && rows.saturating_mul(want) < TARGET_BLOCKS {
        want *= 2;
    }
    let chunks = vocab.div_ceil(CHUNK);
    let mut cap = 1;
    while cap < MAX_SPLITS && 2 * cap <= chunks {
        cap *= 2;
    }
    want.min(cap)
}

/// The split count on a device that holds `resident` blocks of the kernel at once: the most
/// splits whose `rows · S` blocks still run in one wave (a partial second wave leaves most of the
/// device idle while it runs: 64 rows at 16 splits were 1.3 waves of an H100's 792 blocks), at
/// least spec §5's rule, at most 64 and a row's chunks of 1024 entries. Any split count gives
/// the same token.
pub fn splits_for_resident(rows: usize, vocab: usize, resident: usize) -> usize {
    let most = MAX_SPLITS.min(vocab.div_ceil(CHUNK)).max(1);
    (resident / rows.max(1)).clamp(splits_for(rows, vocab), most)
}

crate::params! {
    /// Params of `gumbel_max_sample`.
    pub struct GumbelParams {
        /// Rows (B, the first axis of `logits`).
        pub rows: u32,
        /// Logits per row (V).
        pub vocab: u32,
        /// Blocks per row (the second dimension of `vals` and `idxs`).
        pub splits: u32,
        /// Philox key, low word (draw a fresh key per call).
        pub key0: u32 = 0,
        /// Philox key, high word.
        pub key1: u32 = 0,
        /// Softmax temperature, > 0 (greedy decoding never reaches this kernel).
        pub temperature: f32 = 1.0,
    }
}

/// The split count of per-split outputs shaped `[rows, S]`, or `[rows]` for one split.
fn splits_of(out: &[usize], rows: usize) -> Option<usize> {
    match *out {
        [r, s] if r == rows => Some(s),
        [r] if r == rows => Some(1),
        _ => None,
    }
}

/// Threads per block.
pub const BLOCK_THREADS: u32 = 256;

/// Four blocks per multiprocessor at least (64 registers a thread on CUDA; the body takes 69
/// without): with it the body ran a row in 5.34 µs against the unbounded previous body's 6.63
/// on an H100, 64 rows unchanged, and without it v6b's early stop lost 8% at 64 rows
/// (docs/results/s38-h100-2026-12-07.md).
pub const GUMBEL_LAUNCH_BOUND: LaunchBound = LaunchBound {
    max_threads: BLOCK_THREADS,
    min_blocks: 4,
};

/// Descriptor of `gumbel_max_sample`.
pub struct GumbelMaxSample;

impl KernelDef for GumbelMaxSample {
    type Params = GumbelParams;
    const NAME: &'static str = "gumbel_max_sample";
    const LAUNCH_BOUND: Option<LaunchBound> = Some(GUMBEL_LAUNCH_BOUND);

    /// Buffers: `logits [B, V]`, then per split the first maximum `vals [B, S]` (f32) and its
    /// index `idxs [B, S]` (u32). With one split both may be `[B]`: `idxs` is then the token.
    fn bind(p: &mut GumbelParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [logits, vals, idxs] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 3,
            });
        };
        let &[rows, vocab] = *logits else {
            return Err(ShapeError::Invalid("logits must be [rows, vocab]"));
        };
        // Group counters and flat offsets stay in u32, and so do step starts past the row's
        // last chunk (at most 64 chunks past it).
        (p.rows, p.vocab) =
            rows_and_vocab("rows", rows, vocab, u32::MAX as usize / 2, rows * vocab)?;
        let Some(splits) = splits_of(vals, rows) else {
            return Err(ShapeError::Invalid("vals must be [rows, splits] or [rows]"));
        };
        if idxs != vals {
            return Err(ShapeError::Invalid("idxs must have the shape of vals"));
        }
        if !(1..=MAX_SPLITS).contains(&splits) {
            return Err(ShapeError::Range {
                what: "splits",
                got: splits as f64,
                lo: 1.0,
                hi: MAX_SPLITS as f64,
            });
        }
        if !(p.temperature.is_finite() && p.temperature > 0.0) {
            return Err(ShapeError::Range {
                what: "temperature",
                got: p.temperature as f64,
                lo: f32::MIN_POSITIVE as f64,
                hi: f32::MAX as f64,
            });
        }
        p.splits = splits as u32;
        Ok(())
    }

    fn launch(p: &GumbelParams) -> Launch {
        Launch {
            grid: [p.rows, p.splits, 1],
            block: BLOCK_THREADS,
        }
    }

    fn shared_bytes(_p: &GumbelParams, _block: u32, _wave: u32) -> usize {
        BOUNDS * 4
    }
}

/// Entries a thread takes per step: two Philox groups, so that 16-bit logits arrive in one
/// 16-byte load and f32 logits in two, issued before the Philox rounds they wait behind.
pub const STEP: usize = 8;
/// Steps per chunk of [`CHUNK`] entries.
const STEPS_PER_CHUNK: u32 = (CHUNK / STEP) as u32;

/// The wave's maximum of values that are never NaN (a thread's running best): one compare per
/// butterfly, where [`Block::wave_max`] also orders NaN and signed zeros.
#[inline(always)]
fn wave_max_of_numbers<B: Block>(b: &B, v: f32) -> f32 {
    let mut v = v;
    let mut m = B::WAVE / 2;
    while m > 0 {
        let other = f32::from_bits(b.shuffle_xor(v.to_bits(), m));
        if other > v {
            v = other;
        }
        m /= 2;
    }
    v
}

/// The first entry of step `step` of a split (`split` of `p.splits`, `steps` steps): the
/// split's first step's where `step` is past the split's last or starts past the row's end (a
/// repeated candidate changes no first maximum).
#[inline(always)]
fn step_start(p: &GumbelParams, split: u32, steps: u32, step: u32) -> u32 {
    let mut step = step;
    if step >= steps {
        step = 0;
    }
    let chunk = split + (step / STEPS_PER_CHUNK) * p.splits;
    let start = chunk * CHUNK as u32 + (step % STEPS_PER_CHUNK) * STEP as u32;
    if start < p.vocab {
        start
    } else {
        split * CHUNK as u32
    }
}

/// A step's logits, −inf past the row's end; `wide`: the row starts on a chunk boundary, so
/// a whole step is one chunk load.
#[inline(always)]
fn load_step<T: Element>(
    p: &GumbelParams,
    logits: &Src<T>,
    row: u32,
    start: u32,
    wide: bool,
) -> [f32; STEP] {
    let base = row as usize * p.vocab as usize;
    let mut x = [f32::NEG_INFINITY; STEP];
    if wide && start + STEP as u32 <= p.vocab {
        // SAFETY: `start + STEP <= vocab` keeps the chunk inside row `row` of the
        // `[rows, vocab]` logits, and a row that starts on a chunk boundary keeps every multiple
        // of STEP on one (`wide`).
        let v = unsafe { logits.get_chunk_unchecked::<STEP>(base + start as usize) };
        let mut k = 0;
        while k < STEP {
            x[k] = v[k].to_f32();
            k += 1;
        }
    } else {
        let mut k = 0;
        while k < STEP {
            if start + (k as u32) < p.vocab {
                x[k] = logits.get(base + start as usize + k).to_f32();
            }
            k += 1;
        }
    }
    x
}

/// A step's Philox words and the upper bounds of its candidates (a NaN bound is a NaN or −inf
/// candidate's, which cannot win).
#[inline(always)]
fn bound_step<B: Block>(
    b: &B,
    p: &GumbelParams,
    bounds: &Rw<f32>,
    row: u32,
    start: u32,
    x: [f32; STEP],
    inv_t: f32,
) -> ([u32; STEP], [f32; STEP]) {
    let group = start / 4;
    let lo = philox4x32_10_on(b, [group, 0, row, 0], [p.key0, p.key1]);
    let hi = philox4x32_10_on(b, [group + 1, 0, row, 0], [p.key0, p.key1]);
    let mut w = [0u32; STEP];
    let mut bound = [0.0f32; STEP];
    let mut k = 0;
    while k < STEP {
        w[k] = if k < 4 { lo[k] } else { hi[k - 4] };
        bound[k] = quotient_bound(x[k] * inv_t) + bounds.get(bound_index(w[k]) as usize);
        k += 1;
    }
    (w, bound)
}

/// The exact candidates of a step's entries whose bound reaches `threshold` (all but `skip`),
/// folded into `(best, best_i)`: larger value, then lower index. A lane takes its entries one
/// at a time, lowest first, each selected rather than branched to, so a wave pays for the most
/// entries any one lane takes, not for every position some lane takes.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn take_step(
    p: &GumbelParams,
    start: u32,
    x: [f32; STEP],
    w: [u32; STEP],
    bound: [f32; STEP],
    skip: usize,
    threshold: f32,
    wave_best: f32,
    best: f32,
    best_i: u32,
) -> (f32, u32) {
    let (mut best, mut best_i) = (best, best_i);
    let mut left = 0u32;
    let mut k = 0;
    while k < STEP {
        if k != skip && bound[k] >= threshold {
            left |= 1 << k;
        }
        k += 1;
    }
    while left != 0 {
        let at = left.trailing_zeros() as usize;
        left &= left - 1;
        let (mut xk, mut wk, mut bk) = (0.0f32, 0u32, 0.0f32);
        let mut k = 0;
        while k < STEP {
            if k == at {
                xk = x[k];
                wk = w[k];
                bk = bound[k];
            }
            k += 1;
        }
        // An earlier entry of the step may have raised the best past this one's bound.
        if bk >= best.max(wave_best) || threshold == f32::NEG_INFINITY {
            let c = xk / p.temperature + gumbel_noise(wk);
            let i = start + at as u32;
            if c > best || (c == best && i < best_i) {
                best = c;
                best_i = i;
            }
        }
    }
    (best, best_i)
}

/// The body: block `(row, split)` numbers its chunks' steps of [`STEP`] entries in index order
/// and each thread takes every `size`-th step (a thread past the split's last step repeats
/// the split's first: a repeated candidate changes no first maximum). Per step a thread bounds
/// its eight candidates from above and takes the exact ones whose bound reaches both its own
/// best and its wave's. On the first step it first takes its highest bound's candidate and
/// refreshes the wave's best, so the rest of that step is bounded against a real maximum.
/// The block's argmax picks the lowest-index maximum.
pub fn gumbel_max_sample<T: Element, B: Block>(
    b: &B,
    p: &GumbelParams,
    logits: Src<T>,
    vals: Dst<f32>,
    idxs: Dst<u32>,
) {
    let (row, split) = (b.block_x(), b.block_y());
    let chunks = p.vocab.div_ceil(CHUNK as u32);
    // The split's chunks are `split, split + S, …`.
    let mut steps = 0u32;
    if split < chunks {
        steps = (chunks - split).div_ceil(p.splits) * STEPS_PER_CHUNK;
    }
    // Whole steps are one chunk load where the row starts on a chunk boundary.
    let wide = logits.chunk_aligned::<STEP>(row as usize * p.vocab as usize);
    // Each turn asks for the next turn's logits before its own Philox rounds, so a load has a
    // whole turn to arrive; the first turn's are asked for before the table is built.
    let mut start = step_start(p, split, steps, b.thread());
    let mut x = [f32::NEG_INFINITY; STEP];
    if steps > 0 {
        x = load_step(p, &logits, row, start, wide);
    }
    let bounds = b.shared::<f32>(0, BOUNDS);
    let mut j = b.thread();
    while j < BOUNDS as u32 {
        bounds.set(j as usize, noise_bound(j));
        j += b.size();
    }
    b.barrier();
    let inv_t = 1.0 / p.temperature;
    // A subnormal `1/T` has lost the precision the quotient bound assumes: every candidate
    // that is not −inf or NaN is taken.
    let unbounded = inv_t < f32::MIN_POSITIVE;
    // Index 0 is the answer when nothing beats −inf, so it is every thread's starting point.
    let (mut best, mut best_i) = (f32::NEG_INFINITY, 0u32);
    // The wave's best candidate so far: a lane that takes the exact path stalls its whole
    // wave, and a new best is far rarer over the wave's entries than over one lane's.
    let mut wave_best = f32::NEG_INFINITY;
    let mut first = 0u32;
    while first < steps {
        let next = first + b.size();
        let next_start = step_start(p, split, steps, next + b.thread());
        let mut next_x = x;
        if next < steps {
            next_x = load_step(p, &logits, row, next_start, wide);
        }
        let (w, bound) = bound_step(b, p, &bounds, row, start, x, inv_t);
        let mut skip = STEP;
        if first == 0 {
            // The first step's highest bound: its exact candidate seeds this thread's best.
            // Its entry is selected, not branched to: one exact candidate per wave, whichever
            // entry each lane's is.
            let (mut top, mut top_k, mut top_x, mut top_w) = (f32::NEG_INFINITY, 0usize, 0.0, 0);
            let mut k = 0;
            while k < STEP {
                if bound[k] > top {
                    top = bound[k];
                    top_k = k;
                    top_x = x[k];
                    top_w = w[k];
                }
                k += 1;
            }
            if unbounded || top > f32::NEG_INFINITY {
                let c = top_x / p.temperature + gumbel_noise(top_w);
                // Not taken when −inf or NaN: the best stays a number.
                if c > best {
                    best = c;
                    best_i = start + top_k as u32;
                }
                skip = top_k;
            }
            wave_best = wave_max_of_numbers(b, best);
        }
        // Ties keep the lower index, so a bound equal to the best may still win.
        let mut threshold = best.max(wave_best);
        if unbounded {
            threshold = f32::NEG_INFINITY;
        }
        (best, best_i) =
            take_step(p, start, x, w, bound, skip, threshold, wave_best, best, best_i);
        // Every lane of the block runs the same steps.
        wave_best = wave_max_of_numbers(b, best);
        x = next_x;
        start = next_start;
        first = next;
    }
    let (value, winner) = b.argmax(best, best_i);
    if b.thread() == 0 {
        let at = row as usize * p.splits as usize + split as usize;
        vals.set(at, value);
        idxs.set(at, winner);
    }
}

#[cfg(test)]
mod tests {
    use super::{splits_for, splits_for_resident};

    /// One wave of the resident blocks where the row allows it, the rule's floor, the caps.
    #[test]
    fn splits_for_resident_fills_one_wave() {
        assert_eq!(splits_for_resident(64, 152_064, 792), 12);
        assert_eq!(splits_for_resident(1, 152_064, 792), 64);
        assert_eq!(splits_for_resident(8, 152_064, 792), 64);
        assert_eq!(splits_for_resident(3, 5003, 792), 5);
        assert_eq!(splits_for_resident(1000, 152_064, 792), 1);
        assert_eq!(splits_for_resident(1, 1000, 0), splits_for(1, 1000));
        assert_eq!(splits_for_resident(2, 152_064, 0), splits_for(2, 152_064));
    }
}
