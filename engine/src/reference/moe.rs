//! The MoE experts, unfused: every selected expert's rows dequantized as spec §13 writes them
//! (scale and bias widened exactly from their stored dtype), the dot products and activations
//! in f64, each stored tensor (`act_g`, `partial`: f32; `out`: `T`) rounded once. Shared by the
//! `moe_gateup_<b>bit`, `moe_fc1_relu2_<b>bit` and `moe_down_<b>bit` references; an expert id
//! ≥ E gives zeros, the kernels' documented answer.

use super::qlinear::packed_scale;
use crate::quant::unpack_code;
use kiln_math::kernels::moe_experts::{MoeParams, ACT_GEGLU};
use kiln_math::Element;

/// A stacked projection's packed codes, scales and biases with their format (groups of
/// `group_size` values, scales and biases of the `scale_dtype` code, `bits` per code), read
/// row by row. Shared with `gather_qmm`'s reference.
#[derive(Clone, Copy)]
pub struct AffineRows<'a> {
    group_size: u32,
    scale_dtype: u32,
    bits: u32,
    w_q: &'a [u32],
    scales: &'a [u32],
    biases: &'a [u32],
}

impl<'a> AffineRows<'a> {
    /// The projection `(w_q, scales, biases)` (every row of `w_q` one LSB-first bit stream).
    pub fn new(
        group_size: u32,
        scale_dtype: u32,
        bits: u32,
        (w_q, scales, biases): (&'a [u32], &'a [u32], &'a [u32]),
    ) -> AffineRows<'a> {
        AffineRows {
            group_size,
            scale_dtype,
            bits,
            w_q,
            scales,
            biases,
        }
    }

    /// Row `row` (of `cols` columns), dequantized: `scale·q + bias` per element.
    pub fn row(&self, row: usize, cols: usize) -> Vec<f64> {
        let gs = self.group_size as usize;
        let words_per_row = cols * self.bits as usize / 32;
        let words = &self.w_q[row * words_per_row..(row + 1) * words_per_row];
        (0..cols)
            .map(|i| {
                let e = row * (cols / gs) + i / gs;
                let q = unpack_code(words, self.bits, i).expect("the row holds its codes") as f64;
                packed_scale(self.scales, self.scale_dtype, e) * q
                    + packed_scale(self.biases, self.scale_dtype, e)
            })
            .collect()
    }
}

/// `v` widened to f64.
pub fn widened<T: Element>(v: &[T]) -> Vec<f64> {
    v.iter().map(|v| v.to_f32() as f64).collect()
}

/// The expert of slot `s`, if it is in range.
fn expert(p: &MoeParams, indices: &[u32], s: usize) -> Option<usize> {
    let e = indices[s] as usize;
    (e < p.experts as usize).then_some(e)
}

/// `Σ a·b` in f64.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `silu(g)·u`, `gelu_tanh(g)·u` (spec §7.1's constants) or, without `up`, `max(g, 0)²`
/// (NaN for a non-finite `g`).
pub fn activation(act: u32, g: f64, u: Option<f64>) -> f64 {
    match u {
        // Non-finite `g` (NaN, ±inf) gives NaN, as the kernels document.
        None if !g.is_finite() => f64::NAN,
        None => g.max(0.0).powi(2),
        Some(u) if act == ACT_GEGLU => {
            0.5 * g * (1.0 + (0.797_884_56 * (g + 0.044_715 * g * g * g)).tanh()) * u
        }
        Some(u) => g / (1.0 + (-g).exp()) * u,
    }
}

/// `act_g [T, K, Dff]` of gate (and up, when given) over `x [T, Din]`.
#[allow(clippy::too_many_arguments)]
pub fn up<T: Element>(
    p: &MoeParams,
    bits: u32,
    x: &[T],
    indices: &[u32],
    gate: (&[u32], &[u32], &[u32]),
    up: Option<(&[u32], &[u32], &[u32])>,
    act_g: &mut [f32],
) {
    let (k, din, dff) = (p.k as usize, p.din as usize, p.dff as usize);
    let rows = |buffers| AffineRows::new(p.group_size, p.scale_dtype, bits, buffers);
    let gate = rows(gate);
    let up = up.map(rows);
    for s in 0..p.tokens as usize * k {
        let xs = widened(&x[s / k * din..(s / k + 1) * din]);
        for f in 0..dff {
            act_g[s * dff + f] = match expert(p, indices, s) {
                None => 0.0,
                Some(e) => {
                    let g = dot(&xs, &gate.row(e * dff + f, din));
                    let u = up.map(|u| dot(&xs, &u.row(e * dff + f, din)));
                    activation(p.act, g, u) as f32
                }
            };
        }
    }
}

/// `partial [T, K, Din] = scores[t, k]·(down_e · act_g[t, k, :])`.
#[allow(clippy::too_many_arguments)]
pub fn down<T: Element>(
    p: &MoeParams,
    bits: u32,
    indices: &[u32],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    act_g: &[T],
    scores: &[T],
    partial: &mut [T],
) {
    let (k, din, dff) = (p.k as usize, p.din as usize, p.dff as usize);
    let down = AffineRows::new(p.group_size, p.scale_dtype, bits, (w_q, scales, biases));
    for s in 0..p.tokens as usize * k {
        let a = widened(&act_g[s * dff..(s + 1) * dff]);
        for h in 0..din {
            let v = match expert(p, indices, s) {
                None => 0.0,
                Some(e) => {
                    let d = dot(&a, &down.row(e * din + h, dff));
                    scores[s].to_f32() as f64 * d
                }
            };
            partial[s * din + h] = T::from_f32(v as f32);
        }
    }
}

/// `out [T, Din] = rnd_T(Σ_k scores[t, k]·(down_e · act_g[t, k, :]))`: [`down`]'s products
/// summed over the slots in f64 and rounded once (an unknown expert's slot adds nothing).
#[allow(clippy::too_many_arguments)]
pub fn down_sum<T: Element>(
    p: &MoeParams,
    bits: u32,
    indices: &[u32],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    act_g: &[f32],
    scores: &[f32],
    out: &mut [T],
) {
    let (k, din, dff) = (p.k as usize, p.din as usize, p.dff as usize);
    let down = AffineRows::new(p.group_size, p.scale_dtype, bits, (w_q, scales, biases));
    for (t, row) in out.chunks_mut(din).enumerate().take(p.tokens as usize) {
        let mut sums = vec![0.0f64; din];
        for s in t * k..(t + 1) * k {
            let Some(e) = expert(p, indices, s) else {
                continue;
            };
            let a: Vec<f64> = act_g[s * dff..(s + 1) * dff]
                .iter()
                .map(|&v| v as f64)
                .collect();
            for (h, sum) in sums.iter_mut().enumerate() {
                *sum += scores[s] as f64 * dot(&a, &down.row(e * din + h, dff));
            }
        }
        for (o, sum) in row.iter_mut().zip(sums) {
            *o = T::from_f32(sum as f32);
        }
    }
}
