//! Simple host ops the reference chains compose.

use kiln_math::Element;

/// `out[i] = rnd_T(a[i] + b[i])`.
pub fn add<T: Element>(a: &[T], b: &[T]) -> Vec<T> {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| T::from_f32((x.to_f32() as f64 + y.to_f32() as f64) as f32))
        .collect()
}

/// The gain an RMSNorm applies: `w`, or `rnd_T(bias + w)` folded in the weight's own dtype.
pub fn norm_gain<T: Element>(weight: &[T], bias: f32) -> Vec<f64> {
    weight
        .iter()
        .map(|&w| {
            if bias == 0.0 {
                w.to_f32() as f64
            } else {
                T::from_f32(bias + w.to_f32()).to_f32() as f64
            }
        })
        .collect()
}

/// RMSNorm over rows of `gain.len()`: `rnd_T(gain · rnd_T(x / sqrt(mean(x²) + eps)))`.
pub fn rms_norm<T: Element>(x: &[T], gain: &[f64], eps: f32, out: &mut [T]) {
    let dim = gain.len();
    assert!(dim > 0 && x.len().is_multiple_of(dim) && out.len() == x.len());
    for (row, orow) in x.chunks(dim).zip(out.chunks_mut(dim)) {
        let ms = row.iter().map(|v| (v.to_f32() as f64).powi(2)).sum::<f64>() / dim as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        for ((o, &v), &g) in orow.iter_mut().zip(row).zip(gain) {
            let scaled = T::from_f32((v.to_f32() as f64 * inv) as f32).to_f32() as f64;
            *o = T::from_f32((g * scaled) as f32);
        }
    }
}
