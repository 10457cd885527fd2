//! The 64-bit product of two words as two words: a leaf under both `Block` (its `mul_wide`)
//! and the Philox rounds of `random`.

/// `(hi, lo)`: the high and low 32-bit words of the 64-bit product `a · b`, from 16-bit limbs.
#[inline(always)]
pub fn mulhilo32(a: u32, b: u32) -> (u32, u32) {
    let (a0, a1) = (a & 0xffff, a >> 16);
    let (b0, b1) = (b & 0xffff, b >> 16);
    let low = a0 * b0;
    let cross0 = a0 * b1;
    let cross1 = a1 * b0;
    // The three terms landing on bits 16..48; their sum stays below 3 · 2^16.
    let middle = (low >> 16) + (cross0 & 0xffff) + (cross1 & 0xffff);
    let lo = (middle << 16) | (low & 0xffff);
    let hi = a1 * b1 + (cross0 >> 16) + (cross1 >> 16) + (middle >> 16);
    (hi, lo)
}

/// `(hi, lo)` of `a · b` through a 64-bit product: the host and GPU ports' `Block::mul_wide`.
#[inline(always)]
pub fn mul_wide_u64(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    ((p >> 32) as u32, p as u32)
}
