//! Counter-based randomness for the samplers: Philox-4x32-10 (spec §5) in 32-bit arithmetic.
//!
//! Every word is a pure function of (counter, key), so a draw does not depend on launch
//! geometry. Only u32 arithmetic is used: WGSL has no 64-bit integers.

pub use crate::wide_mul::{mul_wide_u64, mulhilo32};

/// Philox-4x32 round multipliers and Weyl key increments (Random123).
const PHILOX_M0: u32 = 0xD251_1F53;
const PHILOX_M1: u32 = 0xCD9E_8D57;
const PHILOX_W0: u32 = 0x9E37_79B9;
const PHILOX_W1: u32 = 0xBB67_AE85;

/// Philox-4x32-10: four random words from a 128-bit counter and a 64-bit key, on the host
/// (the kernels call [`philox4x32_10_on`], whose products are the port's wide multiply).
#[inline(always)]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    philox_rounds(counter, key, mulhilo32)
}

/// [`philox4x32_10`] with [`Block::mul_wide`](crate::Block::mul_wide) for its products.
#[inline(always)]
pub fn philox4x32_10_on<B: crate::Block>(b: &B, counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    philox_rounds(counter, key, |x, y| b.mul_wide(x, y))
}

/// Philox-4x32's ten rounds with `mul(a, b)` giving the `(hi, lo)` words of each product.
#[inline(always)]
fn philox_rounds(
    counter: [u32; 4],
    key: [u32; 2],
    mul: impl Fn(u32, u32) -> (u32, u32),
) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    let mut round = 0;
    while round < 10 {
        let (hi0, lo0) = mul(PHILOX_M0, c[0]);
        let (hi1, lo1) = mul(PHILOX_M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
        k = [k[0].wrapping_add(PHILOX_W0), k[1].wrapping_add(PHILOX_W1)];
        round += 1;
    }
    c
}

/// A uniform on the open interval (0, 1) from the top 23 bits of a word: never 0, never 1
/// (24 bits could round to 1.0 and give infinite Gumbel noise).
#[inline(always)]
pub fn uniform_open(word: u32) -> f32 {
    ((word >> 9) as f32 + 0.5) * (1.0 / 8_388_608.0)
}

/// Standard Gumbel noise `−ln(−ln u)` from a random word.
#[inline(always)]
pub fn gumbel_noise(word: u32) -> f32 {
    -libm::logf(-libm::logf(uniform_open(word)))
}
