//! Independent references for the precise libm functions: 2^x correctly rounded to f32 (from
//! f64, settled in 124-bit fixed point when f64 lies near a rounding midpoint), and the exp2
//! tables recomputed from that fixed point.

#![allow(dead_code)]

/// Fractional bits of the fixed point (values below 16).
const F: u32 = 124;
const ONE: u128 = 1 << F;

/// a·b in the fixed point, truncated (a 256-bit product from 64-bit halves).
fn mul(a: u128, b: u128) -> u128 {
    let m = u64::MAX as u128;
    let (a1, a0, b1, b0) = (a >> 64, a & m, b >> 64, b & m);
    let (hh, m1, m2, ll) = (a1 * b1, a1 * b0, a0 * b1, a0 * b0);
    let mid = (m1 & m) + (m2 & m) + (ll >> 64);
    let lo = (ll & m) | ((mid & m) << 64);
    let hi = hh + (m1 >> 64) + (m2 >> 64) + (mid >> 64);
    (hi << (128 - F)) | (lo >> F)
}

/// ln 2 = Σ 1/(k·2^k), to about 2^-117.
pub fn ln2() -> u128 {
    (1..F).map(|k| (1u128 << (F - k)) / k as u128).sum()
}

/// e^t for 0 ≤ t < 8 by its Taylor series.
fn exp(t: u128) -> u128 {
    let (mut sum, mut term, mut n) = (ONE, ONE, 1u128);
    loop {
        term = mul(term, t) / n;
        if term == 0 {
            return sum;
        }
        sum += term;
        n += 1;
    }
}

/// `v·2^-124` rounded to the nearest f32 (ties to even), for normal results.
pub fn fx_to_f32(v: i128) -> f32 {
    if v == 0 {
        return 0.0;
    }
    let a = v.unsigned_abs();
    let msb = 127 - a.leading_zeros() as i32;
    let shift = msb - 23;
    let mut e = msb - F as i32;
    let (mut mant, rem, half) = if shift > 0 {
        (a >> shift, a & ((1 << shift) - 1), 1u128 << (shift - 1))
    } else {
        (a << -shift, 0, 1)
    };
    if rem > half || (rem == half && mant & 1 == 1) {
        mant += 1;
    }
    if mant == 1 << 24 {
        mant >>= 1;
        e += 1;
    }
    let f = f32::from_bits((((e + 127) as u32) << 23) | (mant as u32 & 0x7f_ffff));
    if v < 0 {
        -f
    } else {
        f
    }
}

/// The exp2 table of `libm_wgsl` from its definition: per j, T_j·2^63 as two words, C1_j and
/// C_rest_j as f32 bits.
pub fn exp2_table() -> Vec<u32> {
    let l = ln2();
    let mut out = Vec::new();
    for j in 0..64u128 {
        let t = exp(l / 64 * j);
        let t63 = (t + (1 << (F - 64))) >> (F - 63);
        let c = mul(t, l);
        let c1 = (c + (1 << (F - 9))) >> (F - 8);
        let rest = fx_to_f32(c as i128 - ((c1 as i128) << (F - 8)));
        out.extend([
            (t63 >> 32) as u32,
            t63 as u32,
            (c1 as f32 / 256.0).to_bits(),
            rest.to_bits(),
        ]);
    }
    out
}

/// ln2^n/n! for n = 1..=7 scaled by 2^(64, 66, 68, 70, 73, 76, 79), as (high, low) words.
pub fn exp2_poly() -> Vec<u32> {
    let l = ln2();
    let mut p = ONE;
    let mut out = Vec::new();
    for (n, scale) in (1..=7u128).zip([64u32, 66, 68, 70, 73, 76, 79]) {
        p = mul(p, l) / n;
        let v = (p + (1 << (F - scale - 1))) >> (F - scale);
        assert!(v < 1 << 64);
        out.extend([(v >> 32) as u32, v as u32]);
    }
    out
}

/// 2^x rounded to nearest even, from 124-bit fixed point (x with at most 124 fraction bits,
/// result normal or subnormal); panics if the value is too near a midpoint to settle.
fn exp2_fixed(x: f32) -> f32 {
    let xd = x as f64;
    let k = xd.floor();
    // f = x − floor(x) exactly in the fixed point (x's bits reach down to 2^-123 at least).
    let f = ((xd - k) * 2f64.powi(60)) as u128;
    assert_eq!(
        f as f64,
        (xd - k) * 2f64.powi(60),
        "x {x:e} has bits below 2^-60"
    );
    let y = exp(mul(f << (F - 60), ln2())); // 2^f·2^124, in [2^124, 2^125)
    let k = k as i32;
    // Keep 24 bits, fewer for a subnormal result.
    let drop = if k >= -126 {
        F - 23
    } else {
        (F as i32 - 23 + (-126 - k)) as u32
    };
    if drop >= 128 {
        return 0.0;
    }
    let mant = y >> drop;
    let rem = y & ((1u128 << drop) - 1);
    let half = 1u128 << (drop - 1);
    let margin = 1u128 << (drop - 80).min(drop - 1);
    assert!(
        rem.abs_diff(half) > margin,
        "2^{x:e} is too near a midpoint for the fixed-point reference"
    );
    let rounded = (mant + u128::from(rem > half)) as u32;
    if k >= -126 {
        f32::from_bits((((k + 126) as u32) << 23) + rounded)
    } else {
        f32::from_bits(rounded)
    }
}

/// 2^x correctly rounded to f32, for every x: f64's exp2 rounded, unless that lies within
/// 2^-45 (relative) of a rounding midpoint, then the fixed-point computation.
pub fn exp2_correct(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x >= 128.0 {
        return f32::INFINITY;
    }
    if x <= -150.0 {
        return 0.0;
    }
    let y = (x as f64).exp2();
    let c = y as f32;
    let up = f32::from_bits(c.to_bits() + 1) as f64;
    let down = if c.to_bits() == 0 {
        0.0
    } else {
        f32::from_bits(c.to_bits() - 1) as f64
    };
    let (c64, margin) = (c as f64, y * 2f64.powi(-45));
    let near = ((c64 + up) / 2.0 - y).abs() < margin || ((c64 + down) / 2.0 - y).abs() < margin;
    if near {
        exp2_fixed(x)
    } else {
        c
    }
}
