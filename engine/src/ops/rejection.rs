//! The filtered sampler (spec §6): one block per row sweeping the row every round, or the row
//! cut into sorted segments that a round asks by binary search (two launches), picked by the
//! vocabulary.

use super::kernel;
use crate::launch::Ran;
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::rejection_sample::{RejectionParams, FILTER_WORDS};
use kiln_math::kernels::rejection_sample_segmented::SegmentedParams;
use kiln_math::kernels::rejection_segments::{
    seg_len_for, RejectionSegmentsParams, MAX_SEGMENTS, MAX_SEG_LEN, STAT_WORDS,
};
use kiln_math::{DType, KernelId};

/// Vocabularies from which [`rejection_sample`] takes the segmented path: below it one block
/// sweeps a row in a few steps per thread.
pub const REJECTION_SEGMENTED_FROM: usize = 4096;

/// How [`rejection_sample_on`] runs: the token law is the same, the sums round in another
/// order (so a key gives the same token on both paths except near a boundary).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectionPath {
    /// `rejection_sample`: one block per row, every round sweeps the row.
    OneBlock,
    /// `rejection_segments` then `rejection_sample_segmented`, segments of `seg_len` entries
    /// (a power of two in 2 ..= 1024, at most 1024 segments per row).
    Segmented {
        /// Entries per segment.
        seg_len: usize,
    },
}

/// The segment length the segmented path cuts a `vocab`-entry row into: about one segment per
/// thread of the rounds' block (256), 64 ..= 1024 entries.
pub fn rejection_seg_len(vocab: usize) -> usize {
    seg_len_for(vocab)
}

/// The path [`rejection_sample`] takes on `dev` for a `vocab`-entry row: on a GPU segmented
/// from [`REJECTION_SEGMENTED_FROM`] entries up to the most its segments hold (2^20); one block
/// otherwise, and always on the host backends (a serial block sweeps a row faster than it
/// sorts its segments).
pub fn rejection_path(dev: &Device, vocab: usize) -> RejectionPath {
    let gpu = dev.gpu().is_some();
    if gpu && (REJECTION_SEGMENTED_FROM..=MAX_SEG_LEN * MAX_SEGMENTS).contains(&vocab) {
        RejectionPath::Segmented {
            seg_len: rejection_seg_len(vocab),
        }
    } else {
        RejectionPath::OneBlock
    }
}

/// Scratch bytes a call takes for `rows × vocab` on `path`, for [`Device::reserve_scratch`]:
/// the uploaded filters, then on the segmented path the segments' sums and stats.
pub fn rejection_scratch_bytes(rows: usize, vocab: usize, path: RejectionPath) -> usize {
    let filters = crate::scratch_bytes(&[(DType::F32, rows * FILTER_WORDS)]);
    match path {
        RejectionPath::OneBlock => filters,
        RejectionPath::Segmented { seg_len } => {
            let segments = rows * vocab.div_ceil(seg_len.max(1));
            filters
                + crate::scratch_bytes(&[
                    (DType::F32, segments * 3 * seg_len),
                    (DType::F32, segments * STAT_WORDS),
                    (DType::U32, segments * STAT_WORDS),
                ])
        }
    }
}

/// Truncation filters of [`rejection_sample`] for one row, evaluated jointly on its
/// untempered probabilities.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingFilters {
    /// Keep the k most probable tokens, ties kept; 0 (or the vocabulary size) is off.
    pub top_k: u32,
    /// Keep the descending prefix whose exclusive mass is ≤ `top_p`; in (0, 1], 1 is off.
    pub top_p: f32,
    /// Keep tokens with `p ≥ min_p · p_max`; in [0, 1), 0 is off.
    pub min_p: f32,
}

impl Default for SamplingFilters {
    fn default() -> Self {
        SamplingFilters {
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
        }
    }
}

impl SamplingFilters {
    /// Why these filters are refused for a `vocab`-token row, if they are.
    pub fn check(&self, vocab: usize) -> Result<(), String> {
        if self.top_k as usize > vocab {
            return Err(format!(
                "top_k is {}, must be at most the vocabulary ({vocab}); 0 is off",
                self.top_k
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!(
                "top_p is {}, must be in (0, 1]; 1 is off",
                self.top_p
            ));
        }
        if !(self.min_p >= 0.0 && self.min_p < 1.0) {
            return Err(format!(
                "min_p is {}, must be in [0, 1); 0 is off",
                self.min_p
            ));
        }
        Ok(())
    }

    /// The row of the kernel's `filters` buffer: top_k, top_p, min_p as f32 (exact: a checked
    /// top_k is at most the vocabulary, which is below 2^24).
    pub fn words(&self) -> [f32; FILTER_WORDS] {
        [self.top_k as f32, self.top_p, self.min_p]
    }
}

/// Sorting-free top-k / top-p / min-p sampling (spec §6): one token per row, distributed as
/// `probs_draw` truncated to the support the row's filters keep on `probs`, renormalised.
///
/// Shapes: `probs [B, V]` (softmax of the untempered logits), `probs_draw [B, V]` (softmax of
/// logits / T; the same tensor when T = 1), f32; `filters` one per row (rows may differ; each
/// is checked here and uploaded as the kernel's `filters [B, 3]`); outputs u32 `ids [B]`,
/// `accepted [B]` (1 when the row converged within 32 rounds; 0 rows carry their argmax) and
/// `rounds [B]`. `key` is the Philox key, fresh per call. A row without positive mass yields
/// its argmax (index 0 if none). The path is [`rejection_path`]'s for the device and vocabulary.
#[allow(clippy::too_many_arguments)] // one tensor per buffer, plus filters and key
pub fn rejection_sample(
    dev: &Device,
    probs: &Tensor,
    probs_draw: &Tensor,
    filters: &[SamplingFilters],
    key: [u32; 2],
    ids: &mut Tensor,
    accepted: &mut Tensor,
    rounds: &mut Tensor,
) -> Result<Ran, PortError> {
    let path = match *probs.shape() {
        [_, vocab] => rejection_path(dev, vocab),
        _ => RejectionPath::OneBlock,
    };
    rejection_sample_on(
        dev, probs, probs_draw, filters, key, path, ids, accepted, rounds,
    )
}

/// [`rejection_sample`] on the given path (both draw from the same law; tests and benchmarks
/// compare them). A segmented path whose `seg_len` or segment count is out of range is refused.
#[allow(clippy::too_many_arguments)] // one tensor per buffer, plus filters, key and path
pub fn rejection_sample_on(
    dev: &Device,
    probs: &Tensor,
    probs_draw: &Tensor,
    filters: &[SamplingFilters],
    key: [u32; 2],
    path: RejectionPath,
    ids: &mut Tensor,
    accepted: &mut Tensor,
    rounds: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = KernelId::RejectionSample;
    let (rows, vocab) = rows_and_vocab(probs)?;
    if filters.len() != rows {
        return Err(PortError::invalid(
            kernel,
            format!("{} filter rows given for {rows} rows", filters.len()),
        ));
    }
    for (r, f) in filters.iter().enumerate() {
        f.check(vocab)
            .map_err(|e| PortError::invalid(kernel, format!("filters row {r}: {e}")))?;
    }
    check_path(vocab, path)?;
    let words: Vec<f32> = filters.iter().flat_map(SamplingFilters::words).collect();
    let mut scratch = dev.scratch(rejection_scratch_bytes(rows, vocab, path))?;
    let filters = scratch.upload(&words)?.reshape(&[rows, FILTER_WORDS])?;
    let segments = segment_tensors(&mut scratch, rows, vocab, path)?;
    launch(
        dev, probs, probs_draw, &filters, key, segments, ids, accepted, rounds,
    )
}

/// [`rejection_sample_on`] with the filters already on the device, `[rows, 3]` f32 rows of
/// [`SamplingFilters::words`]: nothing is uploaded, so a recorded step (a CUDA graph) can hold
/// it. The kernels apply spec §6.1's activation rules to whatever the rows hold (a NaN or
/// out-of-range value activates nothing); [`SamplingFilters::check`] is the caller's.
#[allow(clippy::too_many_arguments)] // one tensor per buffer, plus key and path
pub fn rejection_sample_words(
    dev: &Device,
    probs: &Tensor,
    probs_draw: &Tensor,
    filters: &Tensor,
    key: [u32; 2],
    path: RejectionPath,
    ids: &mut Tensor,
    accepted: &mut Tensor,
    rounds: &mut Tensor,
) -> Result<Ran, PortError> {
    let (rows, vocab) = rows_and_vocab(probs)?;
    check_path(vocab, path)?;
    let mut scratch = dev.scratch(rejection_scratch_bytes(rows, vocab, path))?;
    let segments = segment_tensors(&mut scratch, rows, vocab, path)?;
    launch(
        dev, probs, probs_draw, filters, key, segments, ids, accepted, rounds,
    )
}

fn rows_and_vocab(probs: &Tensor) -> Result<(usize, usize), PortError> {
    match *probs.shape() {
        [rows, vocab] => Ok((rows, vocab)),
        _ => Err(PortError::invalid(
            KernelId::RejectionSample,
            "probs must be [rows, vocab]",
        )),
    }
}

/// Refuses a segmented path whose `seg_len` is not a power of two in 2 ..= 1024 or that cuts a
/// row into more than 1024 segments.
fn check_path(vocab: usize, path: RejectionPath) -> Result<(), PortError> {
    let RejectionPath::Segmented { seg_len } = path else {
        return Ok(());
    };
    let kernel = KernelId::RejectionSegments;
    if !(seg_len.is_power_of_two() && (2..=MAX_SEG_LEN).contains(&seg_len)) {
        return Err(PortError::invalid(
            kernel,
            format!("seg_len is {seg_len}, must be a power of two in 2..={MAX_SEG_LEN}"),
        ));
    }
    let segments = vocab.div_ceil(seg_len);
    if segments > MAX_SEGMENTS {
        return Err(PortError::invalid(
            kernel,
            format!(
                "{segments} segments of {seg_len} for a vocabulary of {vocab}; at most {MAX_SEGMENTS}"
            ),
        ));
    }
    Ok(())
}

/// The segmented path's `seg`, `seg_stats` and `seg_index`, carved from `scratch` (none for one
/// block), with the segment length.
fn segment_tensors(
    scratch: &mut crate::scratch::Scratch<'_>,
    rows: usize,
    vocab: usize,
    path: RejectionPath,
) -> Result<Option<(usize, [Tensor; 3])>, PortError> {
    let RejectionPath::Segmented { seg_len } = path else {
        return Ok(None);
    };
    let segments = vocab.div_ceil(seg_len);
    Ok(Some((
        seg_len,
        [
            scratch.tensor(DType::F32, &[rows, segments, 3, seg_len])?,
            scratch.tensor(DType::F32, &[rows, segments, STAT_WORDS])?,
            scratch.tensor(DType::U32, &[rows, segments, STAT_WORDS])?,
        ],
    )))
}

/// The launches of one call: one block per row, or the segments then the rounds.
#[allow(clippy::too_many_arguments)] // one tensor per buffer, plus key and segments
fn launch(
    dev: &Device,
    probs: &Tensor,
    probs_draw: &Tensor,
    filters: &Tensor,
    key: [u32; 2],
    segments: Option<(usize, [Tensor; 3])>,
    ids: &mut Tensor,
    accepted: &mut Tensor,
    rounds: &mut Tensor,
) -> Result<Ran, PortError> {
    let Some((seg_len, [mut seg, mut stats, mut index])) = segments else {
        let p = RejectionParams {
            key0: key[0],
            key1: key[1],
            ..Default::default()
        };
        return kernel::rejection_sample(
            dev, &p, probs, probs_draw, filters, ids, accepted, rounds,
        );
    };
    let cut = RejectionSegmentsParams {
        seg_len: seg_len as u32,
        ..Default::default()
    };
    let first = kernel::rejection_segments(
        dev, &cut, probs, probs_draw, &mut seg, &mut stats, &mut index,
    )?;
    let p = SegmentedParams {
        seg_len: seg_len as u32,
        key0: key[0],
        key1: key[1],
        ..Default::default()
    };
    let second = kernel::rejection_sample_segmented(
        dev, &p, probs, probs_draw, filters, &seg, &stats, &index, ids, accepted, rounds,
    )?;
    // Report the fallback if either step took it.
    Ok(if first.is_fallback() { first } else { second })
}
