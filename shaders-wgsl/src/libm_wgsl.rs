//! Precise f32 math that `libm::*` calls in kernel bodies translate to.
//!
//! WGSL's built-in `exp`, `log`, `sin`, `cos`, `sqrt` have loose error bounds (and `sin`/`cos`
//! are only accurate near zero), so these are written here in kiln's translatable subset — f32,
//! u32 and i32 arithmetic only, no f64, no division where it would cost accuracy — and run on
//! the host by this crate's tests against the `libm` crate, then translated like kernel code.
//! `sin`/`cos` reduce their argument exactly in integer arithmetic (Payne–Hanek style), so large
//! angles (RoPE positions × frequencies) keep their accuracy.
// The constants are written to the last digit on purpose: each names an exact f32 (or a split
// of one), and the subset reads literals, not `core` paths, inside `const` items.
#![allow(clippy::excessive_precision, clippy::approx_constant)]

/// 2/π as a binary fraction, 32 bits a word, most significant first (256 bits).
const TWO_OVER_PI: [u32; 9] = [
    0xa2f9_836e,
    0x4e44_1529,
    0xfc27_57d1,
    0xf534_ddc0,
    0xdb62_9599,
    0x3c43_9041,
    0xfe51_63ab,
    0xdebb_c561,
    0,
];

/// ln 2 split: the high part has trailing zeros so `k * LN2_HI` is exact for |k| < 512.
const LN2_HI: f32 = 0.693_145_751_953_125;
const LN2_LO: f32 = 1.428_606_8e-6;
const LOG2_E: f32 = 1.442_695;
const FRAC_PI_2: f32 = 1.570_796_4;
/// π/2 split: 9 significant bits (exact products with 15-bit factors), then the rest.
const PIO2_HI: f32 = 1.570_312_5;
const PIO2_LO: f32 = 4.838_267_9e-4;

/// 2^k for k in [-126, 127].
fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// `v · 2^k` for any k a finite result needs, without intermediate overflow.
fn scale(v: f32, k: i32) -> f32 {
    if k > 127 {
        return v * pow2(127) * pow2(k - 127);
    }
    if k < -126 {
        return v * pow2(k + 100) * pow2(-100);
    }
    v * pow2(k)
}

/// Nearest integer, ties away from zero.
fn round_i32(v: f32) -> i32 {
    if v >= 0.0 {
        (v + 0.5) as i32
    } else {
        (v - 0.5) as i32
    }
}

/// Square root, correctly rounded (bit-by-bit integer square root of the mantissa).
pub fn sqrtf(x: f32) -> f32 {
    let bits = x.to_bits();
    if (bits & 0x7fff_ffff) == 0 {
        return x;
    }
    if bits > 0x7f80_0000 && bits < 0x8000_0000 {
        return x;
    }
    if bits >= 0x8000_0000 {
        return f32::NAN;
    }
    if bits == 0x7f80_0000 {
        return x;
    }
    let mut m: i32 = (bits >> 23) as i32;
    let mut ix: u32 = bits & 0x007f_ffff;
    if m == 0 {
        m = 1;
        while (ix & 0x0080_0000) == 0 {
            ix <<= 1;
            m -= 1;
        }
    } else {
        ix |= 0x0080_0000;
    }
    m -= 127;
    if (m & 1) != 0 {
        ix += ix;
    }
    m >>= 1;
    ix += ix;
    let mut q: u32 = 0;
    let mut s: u32 = 0;
    let mut r: u32 = 0x0100_0000;
    while r != 0 {
        let t = s + r;
        if t <= ix {
            s = t + r;
            ix -= t;
            q += r;
        }
        ix += ix;
        r >>= 1;
    }
    // q carries one bit below the mantissa; a non-zero remainder breaks the (impossible) tie.
    if ix != 0 {
        q += q & 1;
    }
    let out = (q >> 1) + 0x3f00_0000;
    f32::from_bits(out.wrapping_add((m << 23) as u32))
}

/// e^r - 1 for |r| ≤ ln2/2 (Taylor to r^9).
fn expm1_small(r: f32) -> f32 {
    let p = 1.0 / 40320.0 + r * (1.0 / 362_880.0);
    let p = 1.0 / 5040.0 + r * p;
    let p = 1.0 / 720.0 + r * p;
    let p = 1.0 / 120.0 + r * p;
    let p = 1.0 / 24.0 + r * p;
    let p = 1.0 / 6.0 + r * p;
    let p = 0.5 + r * p;
    r + r * (r * p)
}

/// `x - k·ln2` with `k = round(x / ln2)`.
fn reduce_ln2(x: f32) -> (i32, f32) {
    let k = round_i32(x * LOG2_E);
    let kf = k as f32;
    (k, (x - kf * LN2_HI) - kf * LN2_LO)
}

pub fn expf(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x > 88.722_84 {
        return f32::INFINITY;
    }
    if x < -103.972_09 {
        return 0.0;
    }
    let (k, r) = reduce_ln2(x);
    scale(1.0 + expm1_small(r), k)
}

pub fn expm1f(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x > 88.722_84 {
        return f32::INFINITY;
    }
    if x < -17.0 {
        return -1.0;
    }
    if x.abs() < 0.346_573_6 {
        return expm1_small(x);
    }
    let (k, r) = reduce_ln2(x);
    let em = expm1_small(r);
    if k >= 25 {
        return scale(1.0 + em, k) - 1.0;
    }
    let two = pow2(k);
    two * em + (two - 1.0)
}

/// ln(m) for m in [√½, √2] as (f, the rest): f − f²/2 + s·(f²/2 + R(s²)), s = f / (2 + f).
fn log_core(f: f32) -> f32 {
    let s = f / (2.0 + f);
    let z = s * s;
    let r = 2.0 / 9.0 + z * (2.0 / 11.0 + z * (2.0 / 13.0));
    let r = 2.0 / 7.0 + z * r;
    let r = 2.0 / 5.0 + z * r;
    let r = z * (2.0 / 3.0 + z * r);
    let hfsq = 0.5 * f * f;
    s * (hfsq + r) - hfsq
}

pub fn logf(x: f32) -> f32 {
    let bits = x.to_bits();
    if x.is_nan() {
        return x;
    }
    if (bits & 0x7fff_ffff) == 0 {
        return f32::NEG_INFINITY;
    }
    if bits >= 0x8000_0000 {
        return f32::NAN;
    }
    if bits == 0x7f80_0000 {
        return x;
    }
    let mut b = bits;
    let mut e: i32 = 0;
    if b < 0x0080_0000 {
        b = (x * 33_554_432.0).to_bits();
        e = -25;
    }
    e += ((b >> 23) as i32) - 127;
    let mut m = f32::from_bits((b & 0x007f_ffff) | 0x3f80_0000);
    if m > 1.414_213_5 {
        m *= 0.5;
        e += 1;
    }
    let f = m - 1.0;
    let ef = e as f32;
    (ef * LN2_LO + log_core(f)) + f + ef * LN2_HI
}

pub fn log1pf(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x < -1.0 {
        return f32::NAN;
    }
    if x == -1.0 {
        return f32::NEG_INFINITY;
    }
    if x.abs() < 0.000_244_140_63 {
        return x - 0.5 * x * x;
    }
    let u = 1.0 + x;
    if u == f32::INFINITY {
        return u;
    }
    // ln(1 + x) = ln(u) + (x − (u − 1)) / u corrects the rounding of u.
    logf(u) + (x - (u - 1.0)) / u
}

pub fn log2f(x: f32) -> f32 {
    logf(x) * LOG2_E
}

pub fn log10f(x: f32) -> f32 {
    logf(x) * 0.434_294_5
}

pub fn exp2f(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x >= 128.0 {
        return f32::INFINITY;
    }
    if x < -150.0 {
        return 0.0;
    }
    let k = round_i32(x);
    let r = x - (k as f32);
    scale(1.0 + expm1_small(r * LN2_HI + r * LN2_LO), k)
}

pub fn tanhf(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a > 9.0 {
        return 1.0f32.copysign(x);
    }
    if a < 0.000_244_140_63 {
        return x;
    }
    let t = expm1f(2.0 * a);
    (t / (t + 2.0)).copysign(x)
}

/// 32 bits of 2/π starting at bit `j` (bit 1 is the first after the binary point; bits at or
/// before the point are 0).
fn two_over_pi_bits(j: i32) -> u32 {
    let table = TWO_OVER_PI;
    let idx = j - 1;
    if idx <= -32 {
        return 0;
    }
    if idx < 0 {
        return table[0] >> ((-idx) as u32);
    }
    let q = (idx / 32) as u32;
    let r = (idx % 32) as u32;
    if q >= 8 {
        return 0;
    }
    if r == 0 {
        return table[q as usize];
    }
    (table[q as usize] << r) | (table[(q + 1) as usize] >> (32 - r))
}

/// (hi, lo) of the 64-bit product of two u32.
fn mul_wide(a: u32, b: u32) -> (u32, u32) {
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

/// For finite |x| ≥ π/4: (quadrant mod 4, r) with x = quadrant·π/2 + r, |r| ≤ π/4, computed
/// from 96 bits of 2/π at the position x's exponent selects.
fn reduce_pio2(ax: f32) -> (u32, f32) {
    let bits = ax.to_bits();
    let m = (bits & 0x007f_ffff) | 0x0080_0000;
    // ax = m · 2^s; bits of 2/π above 2^(2−s) only add multiples of 4 quadrants.
    let s = ((bits >> 23) as i32) - 150;
    let p = s - 2;
    let w0 = two_over_pi_bits(p + 1);
    let w1 = two_over_pi_bits(p + 33);
    let w2 = two_over_pi_bits(p + 65);
    // The low 96 bits of m · (w0:w1:w2), in quadrants with the point after bit 94.
    let (h2, l2) = mul_wide(m, w2);
    let (h1, l1) = mul_wide(m, w1);
    let (_h0, l0) = mul_wide(m, w0);
    let r2 = l2;
    let r1 = h2.wrapping_add(l1);
    let carry: u32 = if r1 < l1 { 1 } else { 0 };
    let r0 = h1.wrapping_add(l0).wrapping_add(carry);
    let mut quadrant = r0 >> 30;
    // The fraction of a quadrant, 64 bits; at or past one half, round to the next quadrant.
    let mut fhi = (r0 << 2) | (r1 >> 30);
    let mut flo = (r1 << 2) | (r2 >> 30);
    let mut negative = false;
    if fhi >= 0x8000_0000 {
        quadrant += 1;
        negative = true;
        // 2^64 − f, the distance to the next quadrant.
        flo = (!flo).wrapping_add(1);
        fhi = if flo == 0 {
            (!fhi).wrapping_add(1)
        } else {
            !fhi
        };
    }
    // r = frac · π/2 with the top 15 bits of frac times a 9-bit π/2 exact, the rest small.
    let top = ((fhi >> 16) as f32) * 1.525_878_9e-5;
    let rest = ((fhi & 0xffff) as f32) * 2.328_306_4e-10 + (flo as f32) * 5.421_010_9e-20;
    let r = top * PIO2_HI + (top * PIO2_LO + rest * FRAC_PI_2);
    (quadrant & 3, if negative { -r } else { r })
}

fn sin_poly(r: f32) -> f32 {
    let z = r * r;
    let p = -1.0 / 5040.0 + z * (1.0 / 362_880.0);
    let p = 1.0 / 120.0 + z * p;
    let p = -1.0 / 6.0 + z * p;
    r + r * (z * p)
}

fn cos_poly(r: f32) -> f32 {
    let z = r * r;
    let p = 1.0 / 40320.0 + z * (-1.0 / 3_628_800.0);
    let p = -1.0 / 720.0 + z * p;
    let p = 1.0 / 24.0 + z * p;
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    w + (((1.0 - w) - hz) + z * (z * p))
}

/// (quadrant, r) for any finite x, including |x| < π/4 (quadrant 0).
fn reduce(x: f32) -> (u32, f32) {
    let ax = x.abs();
    if ax < 0.785_398_2 {
        return (0, ax);
    }
    reduce_pio2(ax)
}

pub fn sinf(x: f32) -> f32 {
    if !x.is_finite() {
        return f32::NAN;
    }
    let (q, r) = reduce(x);
    let v = match q {
        0 => sin_poly(r),
        1 => cos_poly(r),
        2 => -sin_poly(r),
        _ => -cos_poly(r),
    };
    if x.is_sign_negative() {
        -v
    } else {
        v
    }
}

pub fn cosf(x: f32) -> f32 {
    if !x.is_finite() {
        return f32::NAN;
    }
    let (q, r) = reduce(x);
    match q {
        0 => cos_poly(r),
        1 => -sin_poly(r),
        2 => -cos_poly(r),
        _ => sin_poly(r),
    }
}

pub fn fabsf(x: f32) -> f32 {
    x.abs()
}

pub fn copysignf(x: f32, y: f32) -> f32 {
    x.copysign(y)
}

pub fn fmaxf(x: f32, y: f32) -> f32 {
    x.max(y)
}

pub fn fminf(x: f32, y: f32) -> f32 {
    x.min(y)
}

/// Toward zero: values of magnitude ≥ 2^23 are already integers.
pub fn truncf(x: f32) -> f32 {
    let bits = x.to_bits();
    let e = ((bits >> 23) & 0xff) as i32 - 127;
    if e >= 23 {
        return x;
    }
    if e < 0 {
        return f32::from_bits(bits & 0x8000_0000);
    }
    let mask: u32 = 0x007f_ffff >> (e as u32);
    f32::from_bits(bits & !mask)
}

pub fn floorf(x: f32) -> f32 {
    let t = truncf(x);
    if t > x {
        t - 1.0
    } else {
        t
    }
}

pub fn ceilf(x: f32) -> f32 {
    let t = truncf(x);
    if t < x {
        t + 1.0
    } else {
        t
    }
}

/// Nearest, ties away from zero (C `roundf`).
pub fn roundf(x: f32) -> f32 {
    let t = truncf(x);
    let d = (x - t).abs();
    if d >= 0.5 {
        t + 1.0f32.copysign(x)
    } else {
        t
    }
}
