//! Quantized linear layer, unfused: every weight dequantized as spec §13 writes it,
//! `ŵ[n, k] = scale[n, g]·q[n, k] + bias_g[n, g]` (scale and bias widened exactly from their
//! stored dtype), then `y[m, n] = rnd_T(Σ_k x[m, k]·ŵ[n, k] + bias[n])` in f64, rounded once.
//! With `act` 1 the rows are gate and up rows interleaved and the chain goes on as
//! `fused_silu_mul`'s reference over the two stored outputs. Shared by the `qlinear_<b>bit`
//! references.

use crate::quant::unpack_code;
use kiln_math::kernels::qlinear::{QLinearParams, ACT_SILU_MUL, SCALE_BF16, SCALE_F16, SCALE_F32};
use kiln_math::{Bf16, Element, F16};

/// Value `e` of packed scale or bias words of dtype `code` (16-bit values two per word).
pub fn packed_scale(words: &[u32], code: u32, e: usize) -> f64 {
    match code {
        SCALE_F32 => f32::from_bits(words[e]) as f64,
        SCALE_F16 | SCALE_BF16 => {
            let half = (words[e / 2] >> (16 * (e % 2))) as u16;
            if code == SCALE_F16 {
                F16(half).to_f32() as f64
            } else {
                Bf16(half).to_f32() as f64
            }
        }
        _ => f64::NAN,
    }
}

/// The unfused chain at `bits` bits per code, over host slices in list order.
#[allow(clippy::too_many_arguments)]
pub fn qlinear<T: Element>(
    p: &QLinearParams,
    bits: u32,
    x: &[T],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    bias: &[T],
    y: &mut [T],
) {
    let (m, k, n) = (p.m as usize, p.k as usize, p.n as usize);
    let gs = p.group_size as usize;
    let words_per_row = k * bits as usize / 32;
    let mut row = vec![0f64; k];
    let mut out = vec![T::from_f32(0.0); m * n];
    for c in 0..n {
        let words = &w_q[c * words_per_row..(c + 1) * words_per_row];
        for (i, w) in row.iter_mut().enumerate() {
            let e = c * (k / gs) + i / gs;
            let q = unpack_code(words, bits, i).expect("the row holds K codes") as f64;
            *w =
                packed_scale(scales, p.scale_dtype, e) * q + packed_scale(biases, p.scale_dtype, e);
        }
        for r in 0..m {
            let dot: f64 = x[r * k..(r + 1) * k]
                .iter()
                .zip(&row)
                .map(|(a, w)| a.to_f32() as f64 * w)
                .sum();
            let b = if p.has_bias != 0 {
                bias[c].to_f32() as f64
            } else {
                0.0
            };
            out[r * n + c] = T::from_f32((dot + b) as f32);
        }
    }
    if p.act == ACT_SILU_MUL {
        // The unfused pair: gate and up stored in T, then silu·mul of the stored values.
        for r in 0..m {
            for j in 0..n / 2 {
                let g = out[r * n + 2 * j].to_f32() as f64;
                let u = out[r * n + 2 * j + 1].to_f32() as f64;
                y[r * (n / 2) + j] = T::from_f32((g / (1.0 + (-g).exp()) * u) as f32);
            }
        }
    } else {
        y.copy_from_slice(&out);
    }
}
