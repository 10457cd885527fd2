//! Token embedding over an MLX affine table, unfused: each gathered weight dequantized as spec
//! §13 writes it, `ŵ[r, i] = scale[r, g]·q[r, i] + bias[r, g]` in f64 (scale and bias widened
//! exactly from their stored dtype), then rounded to `T` once; an id outside the table (≥ V)
//! gives a row of zeros, the kernel's documented answer.

use super::qlinear::packed_scale;
use crate::quant::unpack_code;
use kiln_math::kernels::embedding_affine::EmbeddingAffineParams;
use kiln_math::Element;

/// The unfused chain of
/// [`embedding_affine`](kiln_math::kernels::embedding_affine::embedding_affine): its params
/// and buffers, in list order, as host slices.
pub fn embedding_affine<T: Element>(
    p: &EmbeddingAffineParams,
    ids: &[u32],
    w_q: &[u32],
    scales: &[u32],
    biases: &[u32],
    out: &mut [T],
) {
    let (d, v, gs) = (p.d as usize, p.v as usize, p.group_size as usize);
    let words_per_row = d * p.bits as usize / 32;
    for (row, &id) in out.chunks_mut(d).zip(ids) {
        let r = id as usize;
        if r >= v {
            row.fill(T::from_f32(0.0));
            continue;
        }
        let words = &w_q[r * words_per_row..(r + 1) * words_per_row];
        for (i, o) in row.iter_mut().enumerate() {
            let e = r * (d / gs) + i / gs;
            let q = unpack_code(words, p.bits, i).expect("the row holds D codes") as f64;
            let w = packed_scale(scales, p.scale_dtype, e) * q
                + packed_scale(biases, p.scale_dtype, e);
            *o = T::from_f32(w as f32);
        }
    }
}
