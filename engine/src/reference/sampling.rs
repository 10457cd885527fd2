//! What the sampler references share, written from the spec apart from kiln-math: Philox with
//! 64-bit products, the open-interval uniform and inverse CDFs in natural index order.

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

/// The uniform on (0, 1) of a Philox word: its top 23 bits, centred.
pub fn open_uniform(w: u32) -> f32 {
    ((w >> 9) as f32 + 0.5) / 8_388_608.0
}

/// The first index whose running weight exceeds `u · Σ w` (f32 sums in index order), or `None`
/// when rounding leaves the goal unreached; and `Σ w`.
pub fn inverse_cdf(weights: &[f32], u: f32) -> (Option<u32>, f32) {
    let mass = weights.iter().fold(0.0f32, |s, &w| s + w);
    // A mass that is not finite and positive draws nothing, as the kernels' inverse CDF.
    if !(mass > 0.0 && mass < f32::INFINITY) {
        return (None, mass);
    }
    let target = u * mass;
    let mut running = 0.0f32;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            running += w;
            if running > target {
                return (Some(i as u32), mass);
            }
        }
    }
    (None, mass)
}
