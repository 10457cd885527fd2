//! Gumbel-max sampling from the spec's definition (§5): the Philox stream per (row, element),
//! the open-interval uniform, `c_i = f32(logit_i) / T − ln(−ln u_i)` in f32, and per split (the
//! chunks of 1024 entries `s, s + S, …`) the first maximum, (−inf, 0) when none is above −inf.

use super::sampling::{open_uniform, philox};
use kiln_math::kernels::gumbel_max_sample::{GumbelParams, CHUNK};
use kiln_math::Element;

/// The uniform on (0, 1) of element `i` of `row`: word `i mod 4` of its Philox call.
pub fn uniform(key: [u32; 2], row: u32, i: u32) -> f32 {
    open_uniform(philox([i / 4, 0, row, 0], key)[(i % 4) as usize])
}

/// The unfused chain of [`gumbel_max_sample`](kiln_math::kernels::gumbel_max_sample::gumbel_max_sample): its params and
/// buffers, in list order, as host slices.
pub fn gumbel_max_sample<T: Element>(
    p: &GumbelParams,
    logits: &[T],
    vals: &mut [f32],
    idxs: &mut [u32],
) {
    let vocab = p.vocab as usize;
    let splits = p.splits as usize;
    let key = [p.key0, p.key1];
    for (r, row) in logits.chunks(vocab).enumerate() {
        let mut best = vec![(f32::NEG_INFINITY, 0u32); splits];
        for (i, l) in row.iter().enumerate() {
            let u = uniform(key, r as u32, i as u32);
            let c = l.to_f32() / p.temperature - libm::logf(-libm::logf(u));
            let b = &mut best[(i / CHUNK) % splits];
            if c > b.0 {
                *b = (c, i as u32);
            }
        }
        for (s, (v, i)) in best.into_iter().enumerate() {
            vals[r * splits + s] = v;
            idxs[r * splits + s] = i;
        }
    }
}
