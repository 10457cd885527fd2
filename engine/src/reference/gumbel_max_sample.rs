//! Gumbel-max sampling from the spec's definition (§5): the Philox stream per (row, element),
//! the open-interval uniform, `c_i = f32(logit_i) / T − ln(−ln u_i)` in f32, first maximum.

use crate::parity::{Case, Check, Fill};
use kiln_math::kernels::gumbel_max_sample::GumbelParams;
use kiln_math::{DType, Element};

/// Philox-4x32-10 with 64-bit products (written apart from kiln-math's 16-bit-limb version).
pub fn philox(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let [mut c0, mut c1, mut c2, mut c3] = counter;
    let [mut k0, mut k1] = key;
    for _ in 0..10 {
        let p0 = 0xD251_1F53u64 * c0 as u64;
        let p1 = 0xCD9E_8D57u64 * c2 as u64;
        (c0, c1, c2, c3) = (
            (p1 >> 32) as u32 ^ c1 ^ k0,
            p1 as u32,
            (p0 >> 32) as u32 ^ c3 ^ k1,
            p0 as u32,
        );
        k0 = k0.wrapping_add(0x9E37_79B9);
        k1 = k1.wrapping_add(0xBB67_AE85);
    }
    [c0, c1, c2, c3]
}

/// The uniform on (0, 1) of element `i` of `row`: 23 bits of its Philox word, centred.
pub fn uniform(key: [u32; 2], row: u32, i: u32) -> f32 {
    let w = philox([i / 4, 0, row, 0], key)[(i % 4) as usize];
    ((w >> 9) as f32 + 0.5) / 8_388_608.0
}

pub fn gumbel_max_sample<T: Element>(p: &GumbelParams, logits: &[T], index: &mut [u32]) {
    let vocab = p.vocab as usize;
    let key = [p.key0, p.key1];
    for (r, (row, out)) in logits.chunks(vocab).zip(index.iter_mut()).enumerate() {
        let mut best: Option<(f32, u32)> = None;
        for (i, l) in row.iter().enumerate() {
            let u = uniform(key, r as u32, i as u32);
            let c = l.to_f32() / p.temperature - libm::logf(-libm::logf(u));
            if c > best.map_or(f32::NEG_INFINITY, |b| b.0) {
                best = Some((c, i as u32));
            }
        }
        *out = best.map_or(0, |b| b.1);
    }
}

pub fn cases(_dtype: DType) -> Vec<Case> {
    // (rows, vocab, temperature, key)
    let shapes = [
        (8, 1000, "1.0", (1, 2)),
        (3, 5003, "0.7", (0xdead_beef_u32, 7)),
        (5, 17, "1.5", (42, 0)),
        (1, 32768, "0.8", (123_456_789, 987_654_321)),
    ];
    shapes
        .iter()
        .map(|&(rows, vocab, t, (k0, k1))| Case {
            label: format!("{rows}x{vocab} T{t}"),
            shapes: vec![vec![rows, vocab], vec![rows]],
            params: vec![
                ("temperature", t.into()),
                ("key0", format!("{k0}")),
                ("key1", format!("{k1}")),
            ],
            fill: vec![Fill::normal(0.0, 3.0), Fill::Output],
            checks: vec![Check::None, Check::Exact],
        })
        .collect()
}

/// Benchmarked at its parity shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    cases(dtype)
}
