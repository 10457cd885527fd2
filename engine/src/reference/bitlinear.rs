//! BitNet b1.58's ternary linear layer, unfused (spec §2): the packed bytes unpacked to the
//! dense `{−1, 0, +1}` matrix `W [out, in]`, `x·Wᵀ` in f64 over the `T` inputs, times
//! `s' = s` or `1/s` (in f32, from the `T` scale), rounded to `T` once.

use kiln_math::kernels::bitlinear::BitLinearParams;
use kiln_math::Element;

/// The dense `W [out, in]` of packed bytes `[out/4, in]`: byte `P[r, c]` holds four 2-bit codes
/// LSB first, code `j` for row `r + j·out/4`, each weight `code − 1`.
pub fn unpack_ternary(bytes: &[u8], out: usize, in_features: usize) -> Vec<i8> {
    let quarter = out / 4;
    let mut w = vec![0i8; out * in_features];
    for r in 0..quarter {
        for c in 0..in_features {
            let byte = bytes[r * in_features + c];
            for j in 0..4 {
                let code = (byte >> (2 * j)) & 3;
                w[(r + j * quarter) * in_features + c] = code as i8 - 1;
            }
        }
    }
    w
}

/// The unfused chain of [`bitlinear`](kiln_math::kernels::bitlinear::bitlinear): its params
/// and buffers, in list order, as host slices (`packed_weights` the checkpoint's bytes as
/// little-endian words).
pub fn bitlinear<T: Element>(
    p: &BitLinearParams,
    x: &[T],
    packed_weights: &[u32],
    weight_scale: &[T],
    y: &mut [T],
) {
    let (rows, k, n) = (
        p.rows as usize,
        p.in_features as usize,
        p.out_features as usize,
    );
    let bytes: Vec<u8> = packed_weights.iter().flat_map(|w| w.to_le_bytes()).collect();
    let w = unpack_ternary(&bytes, n, k);
    let s = weight_scale[0].to_f32();
    let scale = if p.invert_weight_scales != 0 {
        1.0 / s
    } else {
        s
    };
    for b in 0..rows {
        let xr = &x[b * k..(b + 1) * k];
        for o in 0..n {
            let dot: f64 = xr
                .iter()
                .zip(&w[o * k..(o + 1) * k])
                .map(|(a, &wv)| a.to_f32() as f64 * wv as f64)
                .sum();
            y[b * n + o] = T::from_f32((dot * scale as f64) as f32);
        }
    }
}
