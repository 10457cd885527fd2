//! The parity cases of `rejection_segments` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use crate::Backend;
use kiln_math::DType;

/// The running sums round in another order off the cpu (f32 sums of up to 1024 terms: the
/// f32 budget of spec §0.2); the sorted entries, maxima, indices and counts do not round.
const SUMS: Check = Check::ExactOn {
    exact_on: &[Backend::Cpu],
    nrms: 1e-5,
    nmax: 1e-4,
};

/// The parity cases of `rejection_segments` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(_dtype: DType) -> Vec<Case> {
    // (rows, vocab, seg_len): several segments with a short last one, one segment shorter than
    // seg_len, segments of 2, a full 1024.
    let mut v = sized(
        &[(3, 200, 16), (2, 1000, 64), (4, 130, 256), (2, 77, 2), (1, 3000, 1024)],
        Fill::Uniform { lo: -0.25, hi: 1.0 },
        "uniform with non-positive entries",
        true,
    );
    // Nine levels, zeros and negatives among them: ties everywhere.
    let (rows, vocab) = (2, 300);
    let levels = (0..rows * vocab)
        .map(|k| ((k * 37 + k / 7) % 9) as f64 / 8.0 - 0.25)
        .collect::<Vec<f64>>();
    v.extend(sized(
        &[(rows, vocab, 32)],
        Fill::Values(levels),
        "ties",
        true,
    ));
    v
}

/// Cases of `(rows, vocab, seg_len)` with `probs` drawn by `fill`, `probs_draw` uniform.
pub fn sized(shapes: &[(usize, usize, usize)], fill: Fill, what: &str, on_sim: bool) -> Vec<Case> {
    shapes
        .iter()
        .map(|&(rows, vocab, len)| {
            let segments = vocab.div_ceil(len);
            Case {
                label: format!("{rows}x{vocab} seg {len} {what}"),
                shapes: vec![
                    vec![rows, vocab],
                    vec![rows, vocab],
                    vec![rows, segments, 3, len],
                    vec![rows, segments, 2],
                    vec![rows, segments, 2],
                ],
                params: vec![("seg_len", len.to_string())],
                fill: vec![
                    fill.clone(),
                    Fill::Uniform { lo: 0.0, hi: 1.0 },
                    Fill::Output,
                    Fill::Output,
                    Fill::Output,
                ],
                checks: vec![Check::None, Check::None, SUMS, SUMS, Check::Exact],
                on_sim,
            }
        })
        .collect()
}

/// The parity shapes, then Llama 3's vocabulary (128256) at batch 1, 8 and 64 in the segments
/// `ops::rejection_sample` cuts it into.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut v = cases(dtype);
    let len = kiln_math::kernels::rejection_segments::seg_len_for(128_256);
    let model = [1, 8, 64].map(|rows| (rows, 128_256, len));
    v.extend(sized(
        &model,
        Fill::Uniform { lo: 0.0, hi: 1.0 },
        "uniform",
        false,
    ));
    v
}
