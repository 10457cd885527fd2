//! Token embedding, dense, unfused: `out[b, :] = table[ids[b], :]`, the stored `T` values
//! copied; an id outside the table (≥ V) gives a row of zeros, the kernel's documented answer.

use kiln_math::kernels::embedding::EmbeddingParams;
use kiln_math::Element;

/// The unfused chain of [`embedding`](kiln_math::kernels::embedding::embedding): its params
/// and buffers, in list order, as host slices.
pub fn embedding<T: Element>(p: &EmbeddingParams, ids: &[u32], table: &[T], out: &mut [T]) {
    let (d, v) = (p.d as usize, p.v as usize);
    for (row, &id) in out.chunks_mut(d).zip(ids) {
        let id = id as usize;
        if id < v {
            row.copy_from_slice(&table[id * d..(id + 1) * d]);
        } else {
            row.fill(T::from_f32(0.0));
        }
    }
}
