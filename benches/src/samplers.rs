//! `kiln bench --samplers`: the sampling ops as a caller sees them (every launch of a call,
//! calls back to back over rotated inputs): the filtered sampler on both of its paths and Gumbel-max, at the
//! vocabularies of Llama 3 (128256) and Qwen2 (152064), batch 1, 8 and 64. Rows are the
//! softmax of normal logits (σ 2); the filtered sampler keeps top-p 0.9 — what torch's
//! sort-based peer in `torch_peers.py --only sample` computes.

use kiln::ops::{self, RejectionPath, SamplingFilters};
use kiln::rng::Rng;
use kiln::timing::{time_recorded, Issue};
use kiln::{DType, Device, PortError, Tensor};

/// The vocabularies and batches timed.
pub const VOCABS: [usize; 2] = [128_256, 152_064];
/// Rows per call.
pub const BATCHES: [usize; 3] = [1, 8, 64];

/// One timed sampler call.
#[derive(Clone, Debug)]
pub struct SamplerRow {
    /// `rejection` or `gumbel`.
    pub sampler: &'static str,
    /// `one-block`, `segmented/<seg_len>` or `split/<S>`.
    pub path: String,
    pub rows: usize,
    pub vocab: usize,
    /// Input sets rotated over, one call each per timed pass.
    pub copies: usize,
    /// Median device time of one call (all its launches).
    pub median_us: f64,
    pub issue: &'static str,
}

impl SamplerRow {
    /// The CSV header of [`SamplerRow::csv`].
    pub const CSV_HEADER: &'static str = "sampler,path,rows,vocab,copies,median_us,issue";

    /// The row as CSV.
    pub fn csv(&self) -> String {
        format!(
            "{},{},{},{},{},{:.2},{}",
            self.sampler, self.path, self.rows, self.vocab, self.copies, self.median_us, self.issue
        )
    }
}

/// Softmax of σ-2 normal logits, `rows × vocab`, as f32.
fn softmax_rows(rows: usize, vocab: usize, rng: &mut Rng) -> (Vec<f32>, Vec<f32>) {
    let mut logits = Vec::with_capacity(rows * vocab);
    let mut probs = Vec::with_capacity(rows * vocab);
    for _ in 0..rows {
        let row: Vec<f64> = (0..vocab).map(|_| rng.normal() * 2.0).collect();
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|l| (l - m).exp()).collect();
        let s: f64 = e.iter().sum();
        probs.extend(e.iter().map(|v| (v / s) as f32));
        logits.extend(row.iter().map(|&l| l as f32));
    }
    (logits, probs)
}

/// Times every sampler path at every vocabulary and batch; rows go to `on_row` as measured.
/// A timed pass calls the op once per rotated input set, back to back, and a row is the device
/// time per call (on CUDA one graph replay of the whole pass, as the peers replay theirs).
pub fn run_samplers(
    dev: &Device,
    runs: usize,
    issue: Issue,
    mut on_row: impl FnMut(&SamplerRow),
) -> Result<Vec<SamplerRow>, PortError> {
    let mut out = Vec::new();
    let mut emit = |row: SamplerRow| {
        on_row(&row);
        out.push(row);
    };
    for vocab in VOCABS {
        for rows in BATCHES {
            let mut rng = Rng::new(0x05a3_b1e5 ^ (vocab * rows) as u64);
            let (logits, probs) = softmax_rows(rows, vocab, &mut rng);
            let copies = crate::rotation_copies(dev, rows * vocab * 4, 256);
            let pts = (0..copies)
                .map(|_| Tensor::from_f32(dev, DType::F32, &[rows, vocab], &probs))
                .collect::<Result<Vec<_>, _>>()?;
            let lts = (0..copies)
                .map(|_| Tensor::from_f32(dev, DType::F32, &[rows, vocab], &logits))
                .collect::<Result<Vec<_>, _>>()?;
            let mut ids = Tensor::zeros(dev, DType::U32, &[rows])?;
            let mut accepted = Tensor::zeros(dev, DType::U32, &[rows])?;
            let mut used = Tensor::zeros(dev, DType::U32, &[rows])?;
            let top_p = SamplingFilters {
                top_p: 0.9,
                ..Default::default()
            };
            let words: Vec<f32> = (0..rows).flat_map(|_| top_p.words()).collect();
            let filters = Tensor::from_f32(dev, DType::F32, &[rows, 3], &words)?;
            let segmented = RejectionPath::Segmented {
                seg_len: ops::rejection_seg_len(vocab),
            };
            for path in [RejectionPath::OneBlock, segmented] {
                dev.reserve_scratch(ops::rejection_scratch_bytes(rows, vocab, path))?;
                let t = time_recorded(dev, runs, copies, issue, || {
                    for pt in &pts {
                        ops::rejection_sample_words(
                            dev,
                            pt,
                            pt,
                            &filters,
                            [1, 2],
                            path,
                            &mut ids,
                            &mut accepted,
                            &mut used,
                        )?;
                    }
                    Ok(())
                })?;
                emit(SamplerRow {
                    sampler: "rejection",
                    path: match path {
                        RejectionPath::OneBlock => "one-block".into(),
                        RejectionPath::Segmented { seg_len } => format!("segmented/{seg_len}"),
                    },
                    rows,
                    vocab,
                    copies,
                    median_us: crate::median(t) * 1e6,
                    issue: issue.on(dev).name(),
                });
            }
            let splits = ops::gumbel_splits_on(dev, DType::F32, rows, vocab);
            dev.reserve_scratch(ops::gumbel_scratch_bytes(rows, splits))?;
            let t = time_recorded(dev, runs, copies, issue, || {
                for lt in &lts {
                    ops::gumbel_max_sample(dev, lt, [1, 2], 1.0, &mut ids)?;
                }
                Ok(())
            })?;
            emit(SamplerRow {
                sampler: "gumbel",
                path: format!("split/{splits}"),
                rows,
                vocab,
                copies,
                median_us: crate::median(t) * 1e6,
                issue: issue.on(dev).name(),
            });
        }
    }
    Ok(out)
}
