//! Exact f32 arithmetic in integers for the WGSL prelude: products and quotients correctly
//! rounded whatever the device's `*` and `/` do (a Vulkan `/` may be 2.5 ulp off, and a driver
//! may fuse a product into the add after it), and the 64-bit helpers the integer paths of
//! `libm_wgsl` use. Translated like kernel code; `Block::div_exact` becomes [`div_ieee`].

/// The mantissa (with its leading bit at 2^23) and unbiased-plus-127 exponent of a finite,
/// non-zero f32, subnormals normalized (their exponent goes below 1).
pub(crate) fn unpack(bits: u32) -> (u32, i32) {
    let e = ((bits >> 23) & 0xff) as i32;
    let f = bits & 0x007f_ffff;
    if e != 0 {
        return (f | 0x0080_0000, e);
    }
    let shift = f.leading_zeros() - 8;
    (f << shift, 1 - shift as i32)
}

/// The 64-bit value `p` (high, low words) shifted right by `s` (1..=63), rounded to nearest,
/// ties to even; the result must fit in 32 bits.
pub(crate) fn shift_rn(p: (u32, u32), s: u32) -> u32 {
    let (hi, lo) = p;
    // q: the kept bits; then the first dropped bit and whether any below it is set.
    let mut q = hi;
    let mut half_bit = lo >> 31;
    let mut below = (lo & 0x7fff_ffff) != 0;
    if s < 32 {
        q = (hi << (32 - s)) | (lo >> s);
        half_bit = (lo >> (s - 1)) & 1;
        below = (lo & ((1u32 << (s - 1)) - 1)) != 0;
    } else if s > 32 {
        let t = s - 32;
        q = hi >> t;
        half_bit = (hi >> (t - 1)) & 1;
        below = (hi & ((1u32 << (t - 1)) - 1)) != 0 || lo != 0;
    }
    if half_bit == 1 && (below || (q & 1) == 1) {
        q += 1;
    }
    q
}

/// `a · b` correctly rounded (nearest, ties to even) in integer arithmetic, for finite `a`, `b`
/// with a finite product (subnormals and zeros included). A product computed in f32 may be
/// fused into the add that reads it (WGSL lets a driver contract `a·b + c` into one fma, and
/// NVIDIA's does); one computed in integers cannot be. Public for the tests.
pub fn mul_rn(a: f32, b: f32) -> f32 {
    let (ab, bb) = (a.to_bits(), b.to_bits());
    let sign = (ab ^ bb) & 0x8000_0000;
    if (ab & 0x7fff_ffff) == 0 || (bb & 0x7fff_ffff) == 0 {
        return f32::from_bits(sign);
    }
    let (ma, ea) = unpack(ab);
    let (mb, eb) = unpack(bb);
    // ma·mb in [2^46, 2^48): the result's 24 bits start at bit 47 or 46.
    let p = mul_wide(ma, mb);
    let mut e = ea + eb - 127;
    let mut s: u32 = 23;
    if p.0 >= 0x8000 {
        s = 24;
        e += 1;
    }
    if e >= 1 {
        // A carry to 2^24 moves into the exponent by the addition.
        let q = shift_rn(p, s);
        return f32::from_bits(sign | (((e as u32) << 23) + q - 0x0080_0000));
    }
    // Subnormal: 1 − e more bits go; a carry to 2^23 is the smallest normal, as bits.
    let extra = (1 - e) as u32;
    if s + extra > 63 {
        return f32::from_bits(sign);
    }
    f32::from_bits(sign | shift_rn(p, s + extra))
}

/// 24 quotient bits of `rem / mb` (`mb ≤ rem < 2·mb`, 24-bit `mb`), and twice the remainder.
fn long_divide(mut rem: u32, mb: u32) -> (u32, u32) {
    let mut q: u32 = 0;
    let mut i: u32 = 0;
    while i < 24 {
        q <<= 1;
        if rem >= mb {
            rem -= mb;
            q |= 1;
        }
        rem <<= 1;
        i += 1;
    }
    (q, rem)
}

/// `a / b` correctly rounded (nearest, ties to even) by integer long division, for finite
/// normal `b` and `a` (or `a = ±0`) whose quotient is normal: the same bits on every device,
/// whatever its `/` (Vulkan allows 2.5 ulp). Public for the tests.
pub fn div_rn(a: f32, b: f32) -> f32 {
    let (ab, bb) = (a.to_bits(), b.to_bits());
    let sign = (ab ^ bb) & 0x8000_0000;
    if (ab & 0x7fff_ffff) == 0 {
        return f32::from_bits(sign);
    }
    let ma = (ab & 0x007f_ffff) | 0x0080_0000;
    let mb = (bb & 0x007f_ffff) | 0x0080_0000;
    let mut e = ((ab >> 23) & 0xff) as i32 - ((bb >> 23) & 0xff) as i32 + 127;
    // rem / mb in [1, 2): the quotient's leading bit is 1.
    let mut rem = ma;
    if ma < mb {
        rem = ma << 1;
        e -= 1;
    }
    let (mut q, rem) = long_divide(rem, mb);
    // rem is twice the remainder: above mb is past the half, equal is a tie.
    if rem > mb || (rem == mb && (q & 1) == 1) {
        q += 1;
    }
    // q in [2^23, 2^24]; 2^24 carries into the exponent.
    f32::from_bits(sign | ((((e as u32) << 23) + q) - 0x0080_0000))
}

/// Rust's `a / b`, IEEE in every case without the device's `/` (NVIDIA's Vulkan `/` is a
/// product with a reciprocal that flushes: `inf / f32::MAX` came out NaN, quotients near the
/// range's ends an ulp off): NaNs, infinities and zeros by the IEEE table, every other quotient
/// by integer long division of the (subnormals normalized) mantissas, rounded to nearest even
/// at the result's last place, subnormal results included. `Block::div_exact` translates to
/// this.
pub fn div_ieee(a: f32, b: f32) -> f32 {
    let (ab, bb) = (a.to_bits(), b.to_bits());
    let sign = (ab ^ bb) & 0x8000_0000;
    let (aa, ba) = (ab & 0x7fff_ffff, bb & 0x7fff_ffff);
    let inf = 0x7f80_0000u32;
    if aa > inf || ba > inf || (aa == inf && ba == inf) || (aa == 0 && ba == 0) {
        return f32::NAN;
    }
    if aa == inf || ba == 0 {
        return f32::from_bits(sign | inf);
    }
    if ba == inf || aa == 0 {
        return f32::from_bits(sign);
    }
    let (ma, ea) = unpack(aa);
    let (mb, eb) = unpack(ba);
    let mut e = ea - eb + 127;
    // rem / mb in [1, 2): the quotient's leading bit is 1.
    let mut rem = ma;
    if ma < mb {
        rem = ma << 1;
        e -= 1;
    }
    if e >= 255 {
        return f32::from_bits(sign | inf);
    }
    // 24 quotient bits below 25 − e more would all be dropped: the result rounds to zero.
    if e < -24 {
        return f32::from_bits(sign);
    }
    let (mut q, rem) = long_divide(rem, mb);
    if e >= 1 {
        // rem is twice the remainder: above mb is past the half, equal is a tie.
        if rem > mb || (rem == mb && (q & 1) == 1) {
            q += 1;
        }
        // q in [2^23, 2^24]; 2^24 carries into the exponent (to infinity from 254).
        return f32::from_bits(sign | ((((e as u32) << 23) + q) - 0x0080_0000));
    }
    // Subnormal: 1 − e (1..=25) more bits go; the remainder is below all of them.
    let drop = (1 - e) as u32;
    let kept = if drop < 32 { q >> drop } else { 0 };
    let dropped = q - (kept << drop);
    let half = 1u32 << (drop - 1);
    let up = dropped > half || (dropped == half && (rem != 0 || (kept & 1) == 1));
    // A carry to 2^23 is the smallest normal, as bits.
    f32::from_bits(sign | (kept + if up { 1 } else { 0 }))
}

/// a + b, 64-bit values as (high, low) words (wrapping).
pub(crate) fn add64(a: (u32, u32), b: (u32, u32)) -> (u32, u32) {
    let lo = a.1.wrapping_add(b.1);
    let carry: u32 = if lo < a.1 { 1 } else { 0 };
    (a.0.wrapping_add(b.0).wrapping_add(carry), lo)
}

/// a >> s for s in 1..=31.
pub(crate) fn shr64(a: (u32, u32), s: u32) -> (u32, u32) {
    (a.0 >> s, (a.1 >> s) | (a.0 << (32 - s)))
}

/// The high 64 bits of a·b, 0 to 3 units low (the low partial products' carries are dropped).
pub(crate) fn mul_hi64(a: (u32, u32), b: (u32, u32)) -> (u32, u32) {
    let high = mul_wide(a.0, b.0);
    let (m1, _) = mul_wide(a.0, b.1);
    let (m2, _) = mul_wide(a.1, b.0);
    add64(add64(high, (0, m1)), (0, m2))
}

/// (hi, lo) of the 64-bit product of two u32.
pub(crate) fn mul_wide(a: u32, b: u32) -> (u32, u32) {
    let (ah, al) = (a >> 16, a & 0xffff);
    let (bh, bl) = (b >> 16, b & 0xffff);
    let ll = al * bl;
    let lh = al * bh;
    let hl = ah * bl;
    let hh = ah * bh;
    let mid = (ll >> 16) + (lh & 0xffff) + (hl & 0xffff);
    let lo = (ll & 0xffff) | (mid << 16);
    let hi = hh + (lh >> 16) + (hl >> 16) + (mid >> 16);
    (hi, lo)
}
