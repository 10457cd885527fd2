//! One MoE layer on the host for the expert tests (`moe.rs`, `gather_qmm.rs`, `moe_block.rs`): stacked
//! projections quantized from seeded weights, a routing, and spec §7.9's all-f32 dense
//! reference, written here from the spec.

use kiln::math::Element;
use kiln::ops::MoeActivation;
use kiln::quant::{dequantize, quantize, AffineFormat, AffineTensor};
use kiln::DType;

/// One MoE layer on the host: the stacked projections as `[E·R, C]` matrices.
pub struct Layer {
    /// Experts stacked (E).
    pub experts: usize,
    /// Model width.
    pub din: usize,
    /// Expert FFN width.
    pub dff: usize,
    /// The experts' activation.
    pub activation: MoeActivation,
    /// Gate (or fc1) as `[E·Dff, Din]`.
    pub first: AffineTensor,
    /// Up as `[E·Dff, Din]`, for the gated activations.
    pub up: Option<AffineTensor>,
    /// Down as `[E·Din, Dff]`.
    pub down: AffineTensor,
}

/// `len` roughly normal values (a sum of four uniforms, unit variance) from `state`.
pub fn weights(state: &mut u64, len: usize) -> Vec<f32> {
    let mut next = || {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..len)
        .map(|_| (next() + next() + next() + next() - 2.0) * 3f32.sqrt())
        .collect()
}

#[allow(clippy::too_many_arguments)]
/// A layer of `experts` experts `din → dff → din` (`first_bits` for gate/up or fc1,
/// `down_bits` for down), quantized at group size `gs` with scales in `scale_dtype`, from
/// the seed `s`.
pub fn layer(
    s: u64,
    experts: usize,
    din: usize,
    dff: usize,
    activation: MoeActivation,
    first_bits: u32,
    down_bits: u32,
    gs: u32,
    scale_dtype: DType,
) -> Layer {
    let mut state = s;
    let fmt = |bits| AffineFormat::new(bits, gs, scale_dtype).unwrap();
    let mut matrix = |rows: usize, cols: usize, bits: u32| {
        quantize(&weights(&mut state, rows * cols), rows, cols, fmt(bits)).unwrap()
    };
    let first = matrix(experts * dff, din, first_bits);
    let up = (activation != MoeActivation::Relu2).then(|| matrix(experts * dff, din, first_bits));
    let down = matrix(experts * din, dff, down_bits);
    Layer {
        experts,
        din,
        dff,
        activation,
        first,
        up,
        down,
    }
}

/// The all-f32 dense chain of spec §7.9 for `x [T, Din]` (f32 values), rounded to bf16 once.
pub fn dense_reference(l: &Layer, x: &[f32], ids: &[u32], scores: &[f32]) -> Vec<f32> {
    let out = dense_reference_f32(l, x, ids, scores);
    out.iter().map(|&v| bf16(v)).collect()
}

/// [`dense_reference`] before its rounding: the f32 score-weighted K-sum.
#[allow(clippy::excessive_precision)] // spec §7.1's constant as written
pub fn dense_reference_f32(l: &Layer, x: &[f32], ids: &[u32], scores: &[f32]) -> Vec<f32> {
    let (din, dff) = (l.din, l.dff);
    let first = dequantize(&l.first);
    let up = l.up.as_ref().map(dequantize);
    let down = dequantize(&l.down);
    let tokens = x.len() / din;
    let k = ids.len() / tokens;
    let dot = |w: &[f32], v: &[f32]| w.iter().zip(v).map(|(a, b)| a * b).sum::<f32>();
    let mut out = vec![0f32; tokens * din];
    for t in 0..tokens {
        let xt = &x[t * din..(t + 1) * din];
        for s in 0..k {
            let e = ids[t * k + s] as usize;
            let act: Vec<f32> = (0..dff)
                .map(|f| {
                    let row = (e * dff + f) * din;
                    let g = dot(&first[row..row + din], xt);
                    match (&up, l.activation) {
                        (Some(u), MoeActivation::GeGlu) => {
                            let inner = 0.797_884_56 * (g + 0.044_715 * g * g * g);
                            0.5 * g * (1.0 + inner.tanh()) * dot(&u[row..row + din], xt)
                        }
                        (Some(u), _) => g / (1.0 + (-g).exp()) * dot(&u[row..row + din], xt),
                        (None, _) => g.max(0.0).powi(2),
                    }
                })
                .collect();
            for h in 0..din {
                let row = (e * din + h) * dff;
                out[t * din + h] += scores[t * k + s] * dot(&down[row..row + dff], &act);
            }
        }
    }
    out
}

/// `v` rounded to bf16 (nearest, ties to even).
pub fn bf16(v: f32) -> f32 {
    kiln::math::Bf16::from_f32(v).to_f32()
}

/// How close (relative) to the midpoint of two bf16 values an f32 reference may lie for either
/// of them to be its rounding: far above the f32 chains' accumulation-order differences, far
/// below a bf16 half-step (2^-9).
const TIE_SLACK: f64 = 1.0 / (1 << 14) as f64;

/// `raw` (the f32 reference) rounded to bf16 once, element by element, except where it lies
/// within [`TIE_SLACK`] of a rounding boundary and `got` holds the other neighbour: there the
/// direction is the f32 summation order's, so both are the reference's rounding. Far from a
/// boundary this is [`bf16`] — one flip at a tie must not cost a small tensor spec §7.9's nrms.
pub fn rounded_like(raw: &[f32], got: &[f32]) -> Vec<f32> {
    raw.iter()
        .zip(got)
        .map(|(&r, &g)| {
            let nearest = bf16(r);
            if !r.is_finite() {
                return nearest;
            }
            // The bf16 values around `r`: toward zero and one step away (same sign).
            let toward = f32::from_bits(r.to_bits() & 0xffff_0000);
            let away = f32::from_bits((r.to_bits() & 0xffff_0000) + 0x1_0000);
            let mid = (toward as f64 + away as f64) / 2.0;
            let near_tie = (r as f64 - mid).abs() <= TIE_SLACK * (r as f64).abs();
            if near_tie && (g == toward || g == away) {
                g
            } else {
                nearest
            }
        })
        .collect()
}

/// `nrms` and `nmax` of spec §0.2.
pub fn deviation(got: &[f32], want: &[f32]) -> (f64, f64) {
    let g: Vec<f64> = got.iter().map(|&v| v as f64).collect();
    let w: Vec<f64> = want.iter().map(|&v| v as f64).collect();
    kiln::parity::normalized_deviation(&g, &w)
}

/// Routing of `tokens` tokens to `k` distinct experts each, and normalized scores.
pub fn routing(state: &mut u64, tokens: usize, k: usize, experts: usize) -> (Vec<u32>, Vec<f32>) {
    let mut ids = Vec::new();
    let mut scores = Vec::new();
    for t in 0..tokens {
        let start = (t * 5 + *state as usize % experts) % experts;
        let mine: Vec<u32> = (0..k).map(|i| ((start + i * 3) % experts) as u32).collect();
        let raw: Vec<f32> = weights(state, k).iter().map(|w| w.abs() + 0.1).collect();
        let sum: f32 = raw.iter().sum();
        ids.extend(&mine);
        scores.extend(raw.iter().map(|r| r / sum));
    }
    (ids, scores)
}

/// The bits of each value, for bitwise comparisons.
pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_rounding_counts_only_at_a_tie() {
        // 714 lies halfway between the bf16 values 712 and 716.
        assert_eq!(rounded_like(&[714.0], &[716.0]), [716.0]);
        assert_eq!(rounded_like(&[714.0], &[712.0]), [712.0]);
        assert_eq!(rounded_like(&[-714.0], &[-716.0]), [-716.0]);
        // Off the tie the nearest bf16 value is the only rounding.
        assert_eq!(rounded_like(&[713.0], &[716.0]), [712.0]);
        assert_eq!(rounded_like(&[715.5], &[712.0]), [716.0]);
        // A value other than the two neighbours never stands in.
        assert_eq!(rounded_like(&[714.0], &[720.0]), [712.0]);
        assert!(rounded_like(&[f32::NAN], &[1.0])[0].is_nan());
    }
}
