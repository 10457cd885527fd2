//! MLX's affine quantizer (spec §13) and its dequantization `w = scale·q + bias`.
//!
//! Per group: `α = max`, `β = min`, `s = max((α − β)/(2^bits − 1), 1e-7)`; the edge of larger
//! magnitude (`β` if `|β| > |α|`, else `α` with `s` negated) is snapped: `q0 = round(edge/s)`,
//! and if `q0 ≠ 0` then `s = edge/q0` and `bias = edge` (else `bias = 0`);
//! `q = clip(round((w − bias)/s), 0, 2^bits − 1)`.
//!
//! MLX has two implementations that differ in two details, so [`MlxQuantizer`] names both; both
//! do everything in f32 (MLX ≥ 0.23.2) and derive the codes from the unrounded f32 scale and
//! bias, rounding those to the scale dtype (nearest even) only when storing them.

use super::format::{encode_scale, read_code};
use super::{pack_codes, AffineFormat, AffineTensor, FormatError};

/// Which of MLX's affine quantizers to reproduce bit for bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum MlxQuantizer {
    /// Spec §13 as written, and MLX's CPU kernel (`mlx/backend/cpu/quantized.cpp`) and op-graph
    /// fallback: `α` is the group's maximum; `round` is `std::rint` (half to even).
    #[default]
    Cpu,
    /// MLX's Metal and CUDA `affine_quantize` kernels, which `mlx_lm.convert` runs on a GPU (so
    /// most published MLX checkpoints): the max reduction starts from 0, so `α = max(max w, 0)`;
    /// `round` is Metal's/CUDA's `round` (half away from zero).
    Gpu,
}

/// Quantizes a row-major `[n, k]` f32 matrix with §13's rule ([`MlxQuantizer::Cpu`]). Any
/// [`AffineFormat`] is accepted; MLX itself only quantizes to groups of 32, 64 and 128.
pub fn quantize(
    w: &[f32],
    n: usize,
    k: usize,
    format: AffineFormat,
) -> Result<AffineTensor, FormatError> {
    quantize_with(w, n, k, format, MlxQuantizer::Cpu)
}

/// Quantizes a row-major `[n, k]` f32 matrix as the named MLX quantizer does, bit for bit.
pub fn quantize_with(
    w: &[f32],
    n: usize,
    k: usize,
    format: AffineFormat,
    quantizer: MlxQuantizer,
) -> Result<AffineTensor, FormatError> {
    let groups = format.groups(k)?;
    format.packed_words(k)?;
    let elements = n
        .checked_mul(k)
        .ok_or(FormatError::Overflow { rows: n, cols: k })?;
    if w.len() != elements {
        return Err(FormatError::Length {
            what: "w",
            expected: elements,
            got: w.len(),
        });
    }
    if let Some((index, &value)) = w.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(FormatError::NonFinite { index, value });
    }
    let gs = format.group_size() as usize;
    let dtype = format.scale_dtype();
    let mut codes = vec![0u32; elements];
    let mut scales = Vec::with_capacity(n * groups * dtype.size());
    let mut biases = Vec::with_capacity(n * groups * dtype.size());
    for (group, out) in w.chunks_exact(gs).zip(codes.chunks_exact_mut(gs)) {
        // As MLX ≥ 0.23.2: f32 math, codes from the unrounded f32 scale and bias; only the stored
        // scale and bias are rounded (to nearest even) to the scale dtype, after the codes.
        let (scale, bias) = quantize_group(group, format.max_code(), quantizer, out);
        encode_scale(dtype, scale, &mut scales);
        encode_scale(dtype, bias, &mut biases);
    }
    // Rows are whole words, so the matrix's stream is its rows' streams end to end.
    let w_q = pack_codes(&codes, format.bits())?;
    AffineTensor::from_parts(format, n, k, w_q, scales, biases)
}

/// One group: writes its codes and returns the f32 `(scale, bias)` before dtype rounding.
fn quantize_group(
    group: &[f32],
    max_code: u32,
    quantizer: MlxQuantizer,
    codes: &mut [u32],
) -> (f32, f32) {
    let n_bins = max_code as f32;
    let round: fn(f32) -> f32 = match quantizer {
        MlxQuantizer::Cpu => f32::round_ties_even,
        MlxQuantizer::Gpu => f32::round,
    };
    let alpha_start = match quantizer {
        MlxQuantizer::Cpu => f32::NEG_INFINITY,
        MlxQuantizer::Gpu => 0.0,
    };
    let alpha = group.iter().fold(alpha_start, |a, &v| a.max(v));
    let beta = group.iter().fold(f32::INFINITY, |b, &v| b.min(v));
    let range_scale = ((alpha - beta) / n_bins).max(1e-7);
    let (edge, mut scale) = if beta.abs() > alpha.abs() {
        (beta, range_scale)
    } else {
        (alpha, -range_scale)
    };
    let q0 = round(edge / scale);
    let bias = if q0 != 0.0 {
        scale = edge / q0;
        edge
    } else {
        0.0
    };
    for (code, &v) in codes.iter_mut().zip(group) {
        // Division, not a reciprocal multiply, as MLX does; the cast saturates NaN-free values.
        *code = round((v - bias) / scale).clamp(0.0, n_bins) as u32;
    }
    (scale, bias)
}

/// Dequantizes to a row-major `[rows, cols]` f32 matrix: `w = scale·q + bias`, a rounded f32
/// product then a rounded f32 sum (no fused multiply-add), scale and bias widened from their
/// stored dtype.
pub fn dequantize(t: &AffineTensor) -> Vec<f32> {
    let (rows, cols) = (t.rows(), t.cols());
    let format = t.format();
    let gs = format.group_size() as usize;
    let groups = t.groups_per_row();
    let words_per_row = t.w_q().len().checked_div(rows).unwrap_or(0);
    let mut out = Vec::with_capacity(rows * cols);
    for row in 0..rows {
        let words = &t.w_q()[row * words_per_row..(row + 1) * words_per_row];
        for group in 0..groups {
            // In range by construction: from_parts checked the buffers against the shape.
            let scale = t.scale(row, group).unwrap_or(f32::NAN);
            let bias = t.bias(row, group).unwrap_or(f32::NAN);
            for col in group * gs..(group + 1) * gs {
                let q = read_code(words, format.bits(), col) as f32;
                out.push(scale * q + bias);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_math::DType;

    /// Quantizes one 16-element group at 4 bits with f32 scales.
    fn one_group(values: [f32; 16], quantizer: MlxQuantizer) -> (Vec<u32>, f32, f32) {
        let f = AffineFormat::new(4, 16, DType::F32).unwrap();
        let t = quantize_with(&values, 1, 16, f, quantizer).unwrap();
        let codes = (0..16).map(|c| t.code(0, c).unwrap()).collect();
        (codes, t.scale(0, 0).unwrap(), t.bias(0, 0).unwrap())
    }

    fn spread(first: [f32; 4]) -> [f32; 16] {
        let mut g = [0.0; 16];
        for (i, v) in g.iter_mut().enumerate() {
            *v = first[i % 4];
        }
        g
    }

    #[test]
    fn min_edge_wins_when_it_is_larger_in_magnitude() {
        // α = 1.5, β = −3: s = 4.5/15 = 0.3; |β| > |α| so edge = β = −3, q0 = round(−3/0.3) =
        // −10, s = −3/−10 = 0.3, bias = −3; q = (w + 3)/0.3: −3 → 0, −1.5 → 5, 0 → 10, 1.5 → 15.
        let (codes, scale, bias) = one_group(spread([-3.0, -1.5, 0.0, 1.5]), MlxQuantizer::Cpu);
        assert_eq!(scale, 0.3);
        assert_eq!(bias, -3.0);
        assert_eq!(codes[..4], [0, 5, 10, 15]);
    }

    #[test]
    fn max_edge_wins_otherwise_and_the_scale_is_negative() {
        // α = 2, β = −1: s = 3/15 = 0.2; |β| ≤ |α| so edge = α = 2 and s = −0.2, q0 =
        // round(2/−0.2) = −10, s = 2/−10 = −0.2, bias = 2; q = (w − 2)/−0.2: 2 → 0, 1 → 5,
        // 0 → 10, −1 → 15.
        let (codes, scale, bias) = one_group(spread([2.0, 1.0, 0.0, -1.0]), MlxQuantizer::Cpu);
        assert_eq!(scale, -0.2);
        assert_eq!(bias, 2.0);
        assert_eq!(codes[..4], [0, 5, 10, 15]);
    }

    #[test]
    fn a_constant_group_snaps_to_its_value() {
        // α = β = 0.5: s = max(0, 1e-7) = 1e-7, edge = α (|β| = |α|), s = −1e-7; q0 =
        // round(0.5/−1e-7) = −5e6, s = 0.5/−5e6, bias = 0.5; every q = round(0/s) = 0, so the
        // group dequantizes to 0.5 exactly.
        let (codes, scale, bias) = one_group([0.5; 16], MlxQuantizer::Cpu);
        assert_eq!(scale, 0.5 / -5.0e6);
        assert_eq!(bias, 0.5);
        assert!(codes.iter().all(|&c| c == 0));
    }

    #[test]
    fn q0_zero_keeps_the_epsilon_scale_and_a_zero_bias() {
        // All zeros: α = β = 0, s = −1e-7, q0 = round(0) = 0, so s stays −1e-7 and bias = 0.
        let (codes, scale, bias) = one_group([0.0; 16], MlxQuantizer::Cpu);
        assert_eq!((scale, bias), (-1e-7, 0.0));
        assert!(codes.iter().all(|&c| c == 0));
        // {0, 2e-8}: s = max(2e-8/15, 1e-7) = 1e-7, edge = α = 2e-8, q0 = round(−0.2) = 0:
        // bias 0, s = −1e-7, and 2e-8 → round(−0.2) = 0, lost as MLX loses it.
        let (codes, scale, bias) = one_group(spread([0.0, 2e-8, 0.0, 2e-8]), MlxQuantizer::Cpu);
        assert_eq!((scale, bias), (-1e-7, 0.0));
        assert!(codes.iter().all(|&c| c == 0));
    }

    #[test]
    fn cpu_rounds_ties_to_even_and_gpu_away_from_zero() {
        // α = 15, β = 0: s = 1, edge = α, s = −1, q0 = −15, s = −1, bias = 15; q = 15 − w, so
        // w = 2.5 gives the tie 12.5: 12 on the CPU path, 13 on the GPU path.
        let g = spread([15.0, 0.0, 2.5, 3.5]);
        let (cpu, ..) = one_group(g, MlxQuantizer::Cpu);
        let (gpu, ..) = one_group(g, MlxQuantizer::Gpu);
        assert_eq!(cpu[..4], [0, 15, 12, 12]);
        assert_eq!(gpu[..4], [0, 15, 13, 12]);
    }

    #[test]
    fn gpu_max_starts_from_zero_for_an_all_negative_group() {
        // β = −3, α = −1 (CPU) or 0 (GPU): s = 2/15 or 3/15; the edge is β either way.
        let g = spread([-3.0, -2.0, -1.0, -1.5]);
        let (_, cpu_scale, cpu_bias) = one_group(g, MlxQuantizer::Cpu);
        let (_, gpu_scale, gpu_bias) = one_group(g, MlxQuantizer::Gpu);
        assert_eq!((cpu_bias, gpu_bias), (-3.0, -3.0));
        // CPU: q0 = round(−3/(2/15)) = round(−22.4999…) = −22, s = −3/−22.
        assert_eq!(cpu_scale, -3.0 / -22.0);
        // GPU: s = 0.2, q0 = −15, s = 0.2.
        assert_eq!(gpu_scale, -3.0 / -15.0);
    }

    #[test]
    fn codes_come_from_the_f32_scale_before_it_is_rounded_to_the_dtype() {
        let w: Vec<f32> = (0..32).map(|i| (i as f32 * 0.37).sin()).collect();
        let f32s = quantize(&w, 1, 32, AffineFormat::new(4, 32, DType::F32).unwrap()).unwrap();
        let bf16s = quantize(&w, 1, 32, AffineFormat::new(4, 32, DType::Bf16).unwrap()).unwrap();
        assert_eq!(f32s.w_q(), bf16s.w_q());
        let s = f32s.scale(0, 0).unwrap();
        assert_eq!(
            bf16s.scale(0, 0).unwrap(),
            f32::from_bits((kiln_math::f32_to_bf16_bits(s) as u32) << 16)
        );
    }

    #[test]
    fn quantize_refuses_bad_input() {
        let f = AffineFormat::new(4, 32, DType::F16).unwrap();
        assert!(matches!(
            quantize(&[0.0; 32], 2, 32, f),
            Err(FormatError::Length { .. })
        ));
        assert!(matches!(
            quantize(&[0.0; 48], 1, 48, f),
            Err(FormatError::PartialGroup { .. })
        ));
        let mut w = [0.0; 32];
        w[5] = f32::NAN;
        assert!(matches!(
            quantize(&w, 1, 32, f),
            Err(FormatError::NonFinite { index: 5, .. })
        ));
        assert!(matches!(
            quantize(&[], usize::MAX, 64, f),
            Err(FormatError::Overflow { .. })
        ));
    }

    /// A small deterministic generator (xorshift64*), seeded per case.
    fn uniform(seed: u64, len: usize) -> Vec<f32> {
        let mut s = seed.max(1);
        (0..len)
            .map(|_| {
                s ^= s >> 12;
                s ^= s << 25;
                s ^= s >> 27;
                let u = (s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 / (1u64 << 24) as f32;
                2.0 * u - 1.0
            })
            .collect()
    }

    /// Unit roundoff of a scale dtype.
    fn roundoff(dtype: DType) -> f32 {
        match dtype {
            DType::F16 => 2f32.powi(-11),
            DType::Bf16 => 2f32.powi(-8),
            _ => 2f32.powi(-24),
        }
    }

    #[test]
    fn round_trips_for_every_bits_group_size_and_scale_dtype() {
        let (n, k) = (3, 256);
        for (case, (bits, gs, dtype)) in super::super::format::SUPPORTED_BITS
            .iter()
            .flat_map(|&b| {
                super::super::format::SUPPORTED_GROUP_SIZES
                    .iter()
                    .flat_map(move |&g| [DType::F32, DType::F16, DType::Bf16].map(|d| (b, g, d)))
            })
            .enumerate()
        {
            let seed = 0x5eed_0000 + case as u64;
            let w: Vec<f32> = uniform(seed, n * k).iter().map(|v| v * 3.0).collect();
            let f = AffineFormat::new(bits, gs, dtype).unwrap();
            for quantizer in [MlxQuantizer::Cpu, MlxQuantizer::Gpu] {
                let t = quantize_with(&w, n, k, f, quantizer).unwrap();
                assert_eq!(t.w_q().len(), n * k * bits as usize / 32);
                let back = dequantize(&t);
                let u = roundoff(dtype);
                for (i, (&a, &b)) in w.iter().zip(&back).enumerate() {
                    let (row, group) = (i / k, (i % k) / gs as usize);
                    let s = t.scale(row, group).unwrap().abs();
                    let bias = t.bias(row, group).unwrap().abs();
                    // One step (snapping can shrink the range by up to a step, so the far edge
                    // clips by that much), plus what rounding scale and bias to the dtype moves.
                    let bound = s * (1.0 + f.max_code() as f32 * u) * (1.0 + 1e-5) + bias * u;
                    assert!(
                        (a - b).abs() <= bound + 1e-6,
                        "seed {seed:#x} bits {bits} gs {gs} {dtype:?} {quantizer:?} element {i}: \
                         {a} came back as {b} (bound {bound})"
                    );
                }
            }
        }
    }

    #[test]
    fn dequantize_is_scale_times_code_plus_bias() {
        let f = AffineFormat::new(8, 32, DType::F16).unwrap();
        let w: Vec<f32> = uniform(7, 64);
        let t = quantize(&w, 2, 32, f).unwrap();
        let back = dequantize(&t);
        for (i, &v) in back.iter().enumerate() {
            let (row, col) = (i / 32, i % 32);
            let q = t.code(row, col).unwrap() as f32;
            assert_eq!(v, t.scale(row, 0).unwrap() * q + t.bias(row, 0).unwrap());
        }
    }
}
