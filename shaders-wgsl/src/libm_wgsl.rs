//! Precise f32 math that `libm::*` calls in kernel bodies translate to.
//!
//! WGSL's built-in `exp`, `log`, `sin`, `cos`, `sqrt` have loose error bounds (and `sin`/`cos`
//! are only accurate near zero), so these are written here in kiln's translatable subset — f32,
//! u32 and i32 arithmetic only, no f64, no division where it would cost accuracy — and run on
//! the host by this crate's tests against the `libm` crate, then translated like kernel code.
//! `sin`/`cos` reduce their argument exactly in integer arithmetic (Payne–Hanek style), so large
//! angles (RoPE positions × frequencies) keep their accuracy.
// The constants are written to the last digit on purpose: each names an exact f32 (or a split
// of one), and the subset reads literals, not `core` paths, inside `const` items. The subset has
// no ranges, so bounds are compared by hand.
#![allow(
    clippy::excessive_precision,
    clippy::approx_constant,
    clippy::manual_range_contains
)]

use crate::exact_wgsl::{add64, mul_hi64, mul_wide, shr64};
pub use crate::exact_wgsl::{div_ieee, div_rn, mul_rn};

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

/// Nearest integer, ties away from zero (the fraction is split off exactly, so 0.49999997 does
/// not round up the way `(v + 0.5) as i32` does).
fn round_i32(v: f32) -> i32 {
    let t = v as i32;
    let frac = v - t as f32;
    if frac >= 0.5 {
        t + 1
    } else if frac <= -0.5 {
        t - 1
    } else {
        t
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

/// ln 2 split as the `libm` crate's `expm1f` splits it (`0x3f317180`, `0x3717f7d1`): the high
/// part is a multiple of 2^-17, so `k·EXPM1_LN2_HI` is exact for |k| ≤ 128.
const EXPM1_LN2_HI: f32 = 6.931_381_225_6e-1;
const EXPM1_LN2_LO: f32 = 9.058_000_614_5e-6;
/// 1/ln 2 (`0x3fb8aa3b`).
const EXPM1_INV_LN2: f32 = 1.442_695_021_6;
/// The `libm` crate's rational approximation's coefficients (`-0x888868.0p-28`,
/// `0xcf3010.0p-33`).
const EXPM1_Q1: f32 = -3.333_321_213_7e-2;
const EXPM1_Q2: f32 = 1.580_717_042_1e-3;

/// e^x − 1, bit for bit the `libm` crate's `expm1f` (FreeBSD's `s_expm1f.c`), which every other
/// port calls: xIELU's negative branch (spec §10) subtracts x from it, so near the output's
/// zero crossings one ulp of expm1 is thousands of ulps of the result. Two steps differ in
/// form, not in value, so that a device compiler cannot change them: the rounding error of the
/// reduced argument (FreeBSD's `(hi − x) − lo`, which Mesa folds to 0) comes from integers
/// ([`sub_error`]), the one division is [`div_rn`] (a device's `/` may be off by 2.5 ulp), and
/// the inexact products are [`mul_rn`] (a driver may fuse a product into the add after it).
/// `tests/libm.rs` checks the identity with `libm::expm1f` (every f32 in its ignored test).
pub fn expm1f(x: f32) -> f32 {
    let bits = x.to_bits();
    let hx = bits & 0x7fff_ffff;
    let sign = bits >= 0x8000_0000;
    if hx >= 0x4195_b844 {
        // |x| ≥ 27·ln2: NaN, −1, or overflow past ln(f32::MAX)
        if hx > 0x7f80_0000 {
            return x;
        }
        if sign {
            return -1.0;
        }
        if hx > 0x42b1_7217 {
            return f32::INFINITY;
        }
    }
    let mut k: i32 = 0;
    let mut r = x;
    let mut c: f32 = 0.0;
    if hx > 0x3eb1_7218 {
        // |x| > ln2/2: x = k·ln2 + r − c, |r| ≤ ln2/2
        let mut hi = x - EXPM1_LN2_HI;
        let mut lo = EXPM1_LN2_LO;
        k = 1;
        if hx >= 0x3f85_1592 {
            let half: f32 = if sign { -0.5 } else { 0.5 };
            k = (mul_rn(EXPM1_INV_LN2, x) + half) as i32;
            let t = k as f32;
            // t·EXPM1_LN2_HI is exact (17 + 8 bits), so a fused form rounds the same.
            hi = x - t * EXPM1_LN2_HI;
            lo = mul_rn(t, EXPM1_LN2_LO);
        } else if sign {
            hi = x + EXPM1_LN2_HI;
            lo = -EXPM1_LN2_LO;
            k = -1;
        }
        r = hi - lo;
        c = sub_error(hi, lo, r);
    } else if hx < 0x3300_0000 {
        // |x| < 2^-25
        return x;
    }
    // Every inexact product is `mul_rn` (a product beside an add may be fused on a device);
    // the rest multiply by powers of two, exactly.
    let hfx = 0.5 * r;
    let hxs = mul_rn(r, hfx);
    let r1 = 1.0 + mul_rn(hxs, EXPM1_Q1 + mul_rn(hxs, EXPM1_Q2));
    let t = 3.0 - mul_rn(r1, hfx);
    let mut e = mul_rn(hxs, div_rn(r1 - t, 6.0 - mul_rn(r, t)));
    if k == 0 {
        return r - (mul_rn(r, e) - hxs);
    }
    e = mul_rn(r, e - c) - c;
    e -= hxs;
    if k == -1 {
        return 0.5 * (r - e) - 0.5;
    }
    if k == 1 {
        if r < -0.25 {
            return -2.0 * (e - (r + 0.5));
        }
        return 1.0 + 2.0 * (r - e);
    }
    // FreeBSD's `(r − e) + 1` is written `1 − (e − r)` (the same value: rounding is symmetric),
    // and `(r − (e + 2^-k)) + 1` likewise: Mesa moves a constant added to a sum to the inner
    // sum, `(a + b) + c` to `(a + c) + b`, which rounds differently.
    let twopk = f32::from_bits(((0x7f + k) as u32) << 23);
    if k < 0 || k > 56 {
        let y = 1.0 - (e - r);
        if k == 128 {
            // FreeBSD's y·2·2^127 − 1: y·2 < 2 is exact times 2^127, else it overflows (and a
            // compiler that folds 2·2^127 to inf cannot change it here).
            let y2 = y * 2.0;
            if y2 >= 2.0 {
                return f32::INFINITY;
            }
            return f32::from_bits(y2.to_bits() + 0x3f80_0000);
        }
        return y * twopk - 1.0;
    }
    let uf = f32::from_bits(((0x7f - k) as u32) << 23);
    if k < 23 {
        return (r - e + (1.0 - uf)) * twopk;
    }
    (1.0 - ((e + uf) - r)) * twopk
}

/// `(hi − lo) − r` exactly, for `r` = `hi − lo` rounded to f32, with `hi` a multiple of 2^-25
/// below 1/2 and `lo` a multiple of 2^-40 below 2^-9 in magnitude (expm1f's reduction): the
/// error is below 2^-26, so it is the difference of the two values times 2^40 modulo 2^32.
/// FreeBSD's `(hi − r) − lo` gives the same value on the host, but a device compiler may fold it
/// to 0 (Mesa does: `a − (a − b)` is `b`).
fn sub_error(hi: f32, lo: f32, r: f32) -> f32 {
    let h = (hi * 33_554_432.0) as i32;
    let l = (lo * 1_099_511_627_776.0) as i32;
    let exact = ((h as u32) << 15).wrapping_sub(l as u32);
    // r·2^40 modulo 2^32 (r is a multiple of 2^-40: hi − lo is, and rounding only coarsens).
    let rb = r.to_bits();
    let mut rounded: u32 = 0;
    if (rb & 0x7fff_ffff) != 0 {
        let m = (rb & 0x007f_ffff) | 0x0080_0000;
        let s = ((rb >> 23) & 0xff) as i32 - 110;
        if s >= 32 {
            rounded = 0;
        } else if s >= 0 {
            rounded = m << (s as u32);
        } else {
            rounded = m >> ((-s) as u32);
        }
        if rb >= 0x8000_0000 {
            rounded = (!rounded).wrapping_add(1);
        }
    }
    let err = exact.wrapping_sub(rounded) as i32;
    (err as f32) * 9.094_947_017_729_282e-13
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
        // Normalised in integers: a device that flushes subnormal operands (NVIDIA's Vulkan
        // does) would turn a rescaling multiply into 0.
        let shift = b.leading_zeros() - 8;
        b = ((b << shift) & 0x007f_ffff) | 0x0080_0000;
        e = -(shift as i32);
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

/// ln(1 + x). Where 1 + x lies in [√½, √2] this is logf's core at f = x itself (no rounding
/// of 1 + x at all); elsewhere x = x_hi + x_lo with x_hi on the grid of 1 + x (split in
/// integers), so u = 1 + x_hi is exact and ln(1 + x) = ln(u) + x_lo/u to 2^-46. A correction
/// computed as `(x − (u − 1))/u` from a rounded u is what libm does, but a device compiler
/// folds `(1 + x) − 1` to x (Mesa does) and the correction to 0: up to 2000 ulp lost near
/// x = 2^-12 on lavapipe.
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
    if x >= -0.292_893_23 && x <= 0.414_213_5 {
        return log_core(x) + x;
    }
    let u = 1.0 + x;
    if u == f32::INFINITY {
        return u;
    }
    let eu = ((u.to_bits() >> 23) & 0xff) as i32 - 127;
    if x <= -0.5 || eu >= 24 {
        // 1 + x is exact (Sterbenz), or x's rounding is far below ln(u)'s last place.
        return logf(u);
    }
    // x_hi: x truncated to multiples of ulp(u) = 2^(eu − 23) (|x|/ulp(u) < 2^25).
    let x_hi = ((x * pow2(23 - eu)) as i32) as f32 * pow2(eu - 23);
    let u_hi = 1.0 + x_hi;
    logf(u_hi) + (x - x_hi) / u_hi
}

pub fn log2f(x: f32) -> f32 {
    logf(x) * LOG2_E
}

pub fn log10f(x: f32) -> f32 {
    logf(x) * 0.434_294_5
}

/// 2^x, correctly rounded (round to nearest, ties to even) for every f32 x.
///
/// Device compilers may fuse `a * b + c` and may fold `(a + b) - a` to `b` (Mesa does, so a
/// compensated f32 sum loses its error term), so no step relies on an f32 rounding error.
/// Fast path: `x = k + j/64 + r`, `2^x = 2^k · T_j · 2^r`; `hi = T_j_hi + C1_j·r1` is exact by
/// construction (C1_j a multiple of 2^-8, r1 of 2^-15: the product and the sum are multiples of
/// 2^-23 below 2), the rest `lo` (|lo| < 2^-13) is plain f32 with an error under
/// `EXP2_FAST_ERR`·2^-40 in any evaluation order, and the rounding of `hi + lo` is decided in
/// integers. When `hi + lo` lies within that error of a rounding midpoint (about 1 call in 1100
/// with |x| ≥ 2^-26), or x < −125 (subnormal results), [`exp2_exact`] computes 2^x in 64-bit
/// integer fixed point, the same bits on every device. `tests/libm.rs` checks both paths
/// against a correctly rounded reference, every f32 in its ignored exhaustive test.
pub fn exp2f(x: f32) -> f32 {
    let bits = x.to_bits();
    let ax = bits & 0x7fff_ffff;
    if ax > 0x7f80_0000 {
        return x;
    }
    if bits < 0x8000_0000 && ax >= 0x4300_0000 {
        // x ≥ 128
        return f32::INFINITY;
    }
    if bits >= 0x8000_0000 && ax >= 0x4316_0000 {
        // x ≤ −150: below half the smallest subnormal (−150 itself ties to even, 0)
        return 0.0;
    }
    if ax < 0x3280_0000 {
        // |x| < 2^-26: 2^x is within 2^-26.5 of 1, nearer 1 than any rounding midpoint
        return 1.0;
    }
    if x < -125.0 {
        return exp2_exact(x);
    }
    let (k, hi, lo) = exp2_split(x);
    // hi·2^23 and lo·2^40 as integers; the result's last place is 2^-24 below 1, 2^-23 above.
    let h = (hi * 8_388_608.0) as i32;
    let l = (lo * 1_099_511_627_776.0) as i32;
    let q_fine = (l + 0x8000) >> 16;
    let m_fine = 2 * h + q_fine;
    if m_fine <= 0x0100_0000 {
        let rem = l - (q_fine << 16);
        if rem >= 0x8000 - EXP2_FAST_ERR || rem <= EXP2_FAST_ERR - 0x8000 {
            return exp2_exact(x);
        }
        if m_fine < 0x0100_0000 {
            return f32::from_bits((((k + 125) as u32) << 23) + m_fine as u32);
        }
    }
    let q = (l + 0x0001_0000) >> 17;
    let rem = l - (q << 17);
    if rem >= 0x0001_0000 - EXP2_FAST_ERR || rem <= EXP2_FAST_ERR - 0x0001_0000 {
        return exp2_exact(x);
    }
    f32::from_bits((((k + 126) as u32) << 23) + (h + q) as u32)
}

/// The fast path's parts for −125 ≤ x < 128, |x| ≥ 2^-26: `(k, hi, lo)` with 2^x ≈
/// 2^k·(hi + lo), hi a multiple of 2^-23 in [0.99, 2), |lo| < 2^-13.
pub fn exp2_split(x: f32) -> (i32, f32, f32) {
    // n = round(64x), r = x − n/64 with |r| ≤ 1/128, both exact.
    let n = round_i32(x * 64.0);
    let j = (n & 63) as usize;
    let r = x - (n as f32) * 0.015_625;
    let table = EXP2_TABLE;
    let (t1, t0) = (table[4 * j], table[4 * j + 1]);
    let c1 = f32::from_bits(table[4 * j + 2]);
    let c_rest = f32::from_bits(table[4 * j + 3]);
    // T_j's top 24 bits and the next 24 (T_j ∈ [1, 2) is t1·2^-31 + t0·2^-63).
    let t_hi = f32::from_bits(0x3f80_0000 | ((t1 >> 8) & 0x007f_ffff));
    let t_lo = ((((t1 & 0xff) << 16) | (t0 >> 16)) as f32) * 7.105_427_357_601_002e-15;
    // r1: r truncated to a multiple of 2^-15; r2 = r − r1, |r2| < 2^-15; both exact.
    let r1 = ((r * 32_768.0) as i32) as f32 * 3.051_757_812_5e-5;
    let r2 = r - r1;
    // T·2^r = T + T·ln2·r + T·(2^r − 1 − r·ln2), with T·ln2 = C1 + C_rest.
    let hi = t_hi + c1 * r1;
    let r_sq = r1 * r1 + r2 * (r + r1);
    let quad = (t_hi * (EXP2_K2 + r * (EXP2_K3 + r * EXP2_K4))) * r_sq;
    let lo = ((t_lo + c_rest * r1) + (c1 + c_rest) * r2) + quad;
    (n >> 6, hi, lo)
}

/// Bound of the fast path's error in `hi + lo`, in units of 2^-40: the terms' roundings sum to
/// under 31 as written and under 42 in any order of the three additions, fused products only
/// lower it; the measured worst over every f32 is 13.6 (tests/libm.rs).
pub const EXP2_FAST_ERR: i32 = 48;
/// (2^r − 1 − r·ln2) / r² ≈ K2 + K3·r + K4·r²: ln2²/2, ln2³/6, ln2⁴/24.
const EXP2_K2: f32 = 0.240_226_5;
const EXP2_K3: f32 = 0.055_504_11;
const EXP2_K4: f32 = 0.009_618_129;

/// Per j in 0..64: T_j = 2^(j/64) as T_j·2^63 (two words, nearest), C1_j = T_j·ln2 to the
/// nearest multiple of 2^-8 and C_rest_j = T_j·ln2 − C1_j to the nearest f32 (as f32 bits).
/// Generated and checked by tests/libm.rs from 124-bit fixed point.
pub const EXP2_TABLE: [u32; 256] = [
    0x80000000, 0x00000000, 0x3f310000, 0x3ae42ff0, 0x8164d1f3, 0xbc030773, 0x3f330000, 0x3ac180b1,
    0x82cd8698, 0xac2ba1d7, 0x3f350000, 0x3aa99752, 0x843a28c3, 0xacde4046, 0x3f370000, 0x3a9c91db,
    0x85aac367, 0xcc487b15, 0x3f390000, 0x3a9a8ea6, 0x871f6196, 0x9e8d1010, 0x3f3b0000, 0x3aa3ac65,
    0x88980e80, 0x92da8527, 0x3f3d0000, 0x3ab80a1d, 0x8a14d575, 0x496efd9a, 0x3f3f0000, 0x3ad7c72b,
    0x8b95c1e3, 0xea8bd6e7, 0x3f420000, 0xbafcfcbe, 0x8d1adf5b, 0x7e5ba9e6, 0x3f440000, 0xbac62191,
    0x8ea4398b, 0x45cd53c0, 0x3f460000, 0xba8386e9, 0x9031dc43, 0x1466b1dc, 0x3f480000, 0xb9d43017,
    0x91c3d373, 0xab11c336, 0x3f4a0000, 0x3995c0cd, 0x935a2b2f, 0x13e6e92c, 0x3f4c0000, 0x3a8c0f3a,
    0x94f4efa8, 0xfef70961, 0x3f4e0000, 0x3afef2e3, 0x96942d37, 0x20185a00, 0x3f510000, 0xba81c29f,
    0x9837f051, 0x8db8a96f, 0x3f530000, 0x38a11472, 0x99e04593, 0x20b7fa65, 0x3f550000, 0x3aa29187,
    0x9b8d39b9, 0xd54e5539, 0x3f580000, 0xbab81e8a, 0x9d3ed9a7, 0x2cffb751, 0x3f5a0000, 0xb83b66d0,
    0x9ef53260, 0x91a111ae, 0x3f5c0000, 0x3ab97f9c, 0xa0b0510f, 0xb9714fc2, 0x3f5f0000, 0xba73d325,
    0xa2704303, 0x0c496819, 0x3f610000, 0x3a401c42, 0xa43515ae, 0x09e6809e, 0x3f640000, 0xbab873fd,
    0xa5fed6a9, 0xb15138ea, 0x3f660000, 0x39f2d718, 0xa7cd93b4, 0xe965356a, 0x3f690000, 0xbac04e79,
    0xa9a15ab4, 0xea7c0ef8, 0x3f6b0000, 0x3a214b99, 0xab7a39b5, 0xa93ed337, 0x3f6e0000, 0xba904677,
    0xad583eea, 0x42a14ac6, 0x3f700000, 0x3a9d141b, 0xaf3b78ad, 0x690a4375, 0x3f730000, 0xb99c8ac6,
    0xb123f581, 0xd2ac2590, 0x3f760000, 0xbadcc2a1, 0xb311c412, 0xa9112489, 0x3f780000, 0x3a78b9f1,
    0xb504f333, 0xf9de6484, 0x3f7b0000, 0xb95cd643, 0xb6fd91e3, 0x28d17791, 0x3f7e0000, 0xbaa48054,
    0xb8fbaf47, 0x62fb9ee9, 0x3f800000, 0x3ae1d658, 0xbaff5ab2, 0x133e45fb, 0x3f818000, 0x3a6f276c,
    0xbd08a39f, 0x580c36bf, 0x3f830000, 0x3967159a, 0xbf1799b6, 0x7a731083, 0x3f848000, 0xb9b84524,
    0xc12c4cca, 0x66709456, 0x3f860000, 0xba5238bf, 0xc346ccda, 0x24976407, 0x3f878000, 0xba941236,
    0xc5672a11, 0x5506dadd, 0x3f890000, 0xbaaec5f8, 0xc78d74c8, 0xabb9b15d, 0x3f8a8000, 0xbab90a51,
    0xc9b9bd86, 0x6e2f27a3, 0x3f8c0000, 0xbab2b173, 0xcbec14fe, 0xf2727c5d, 0x3f8d8000, 0xba9b8d0b,
    0xce248c15, 0x1f8480e4, 0x3f8f0000, 0xba66dc91, 0xd06333da, 0xef2b2595, 0x3f908000, 0xb9e8975e,
    0xd2a81d91, 0xf12ae45a, 0x3f920000, 0x3903e103, 0xd4f35aab, 0xcfedfa1f, 0x3f938000, 0x3a594ff9,
    0xd744fcca, 0xd69d6af4, 0x3f950000, 0x3ada8ea2, 0xd99d15c2, 0x78afd7b6, 0x3f970000, 0xbaa59e84,
    0xdbfbb797, 0xdaf23755, 0x3f988000, 0xb91d6bf6, 0xde60f482, 0x5e0e9124, 0x3f9a0000, 0x3a909434,
    0xe0ccdeec, 0x2a94e111, 0x3f9c0000, 0xbab8a65e, 0xe33f8972, 0xbe8a5a51, 0x3f9d8000, 0x3906b348,
    0xe5b906e7, 0x7c8348a8, 0x3f9f0000, 0x3aed3eb5, 0xe8396a50, 0x3c4bdc68, 0x3fa10000, 0xb98ce2f4,
    0xeac0c6e7, 0xdd24392f, 0x3fa28000, 0x3adfa566, 0xed4f301e, 0xd9942b84, 0x3fa48000, 0xb89f0fda,
    0xefe4b99b, 0xdcdaf5cb, 0x3fa68000, 0xbadfc56b, 0xf281773c, 0x59ffb13a, 0x3fa80000, 0x3a3cbe62,
    0xf5257d15, 0x2486cc2c, 0x3faa0000, 0xba1e96f8, 0xf7d0df73, 0x0ad13bb9, 0x3fac0000, 0xbae88d29,
    0xfa83b2db, 0x722a033a, 0x3fad8000, 0x3a92d30f, 0xfd3e0c0c, 0xf486c175, 0x3faf8000, 0x398c3ac1,
];

/// ln2^n / n! for n = 1..=7, each ·2^(64, 66, 68, 70, 73, 76, 79) to the nearest integer, as
/// (high, low) words; the scales keep each Horner value below 2^64.
pub const EXP2_POLY: [u32; 14] = [
    0xb17217f7, 0xd1cf79ac, 0xf5fdeffc, 0x162c7543, 0xe35846b8, 0x2505fc5a, 0x9d955b7d, 0xd273b94e,
    0xaec3ff3c, 0x53398884, 0xa184897c, 0x363c3b7a, 0x7ff2ff16, 0x22c31a1b,
];

/// 2^x for 2^-26 ≤ |x|, −150 < x < 128, in integer arithmetic: x·2^55 exactly, k = floor(x),
/// f = x − k = j/64 + g; 2^g − 1 by Horner in 64-bit fixed point (error about 2^-67), times T_j
/// (error about 2^-62 in y = 2^f), rounded to nearest even at the result's last place (24 bits,
/// fewer when subnormal).
pub fn exp2_exact(x: f32) -> f32 {
    let bits = x.to_bits();
    let m = (bits & 0x007f_ffff) | 0x0080_0000;
    // |x|·2^55 = m·2^(e − 95), e the biased exponent (101..=134 here, so the shift is 6..=39).
    let sh = ((bits >> 23) & 0xff) - 95;
    let mut fx = if sh >= 32 {
        (m << (sh - 32), 0u32)
    } else {
        (m >> (32 - sh), m << sh)
    };
    if bits >= 0x8000_0000 {
        let lo = (!fx.1).wrapping_add(1);
        let carry: u32 = if lo == 0 { 1 } else { 0 };
        fx = ((!fx.0).wrapping_add(carry), lo);
    }
    // Two's complement x·2^55 (|x| < 150 < 2^8): floor(x) is its top 9 bits, f the 55 below.
    let k = (fx.0 as i32) >> 23;
    let j = ((fx.0 >> 17) & 63) as usize;
    // g ∈ [0, 2^-6) as g·2^70.
    let g = ((fx.0 & 0x0001_ffff) << 15 | (fx.1 >> 17), fx.1 << 15);
    let c = EXP2_POLY;
    let mut q = (c[12], c[13]);
    let mut n: usize = 6;
    while n > 0 {
        let shift: u32 = if n >= 4 { 9 } else { 8 };
        q = add64((c[2 * n - 2], c[2 * n - 1]), shr64(mul_hi64(g, q), shift));
        n -= 1;
    }
    // U = 2^g − 1 as U·2^70; y = T·(1 + U) as y·2^63 ∈ [2^63, 2^64).
    let u = mul_hi64(g, q);
    let table = EXP2_TABLE;
    let t = (table[4 * j], table[4 * j + 1]);
    let y = add64(t, shr64(mul_hi64(t, u), 6));
    // Keep 24 bits (y's top), or fewer for a subnormal result; round half to even.
    let drop: u32 = if k >= -126 { 40 } else { (-86 - k) as u32 };
    if drop >= 64 {
        // k = −150: y·2^k < 2^-149, and only y > 1 lies past the midpoint 2^-150.
        let above_half = y.0 > 0x8000_0000 || (y.0 == 0x8000_0000 && y.1 != 0);
        let smallest: u32 = if above_half { 1 } else { 0 };
        return f32::from_bits(smallest);
    }
    let mant = y.0 >> (drop - 32);
    let rem = y.0 & ((1u32 << (drop - 32)) - 1);
    let half = 1u32 << (drop - 33);
    let up = rem > half || (rem == half && (y.1 != 0 || (mant & 1) == 1));
    let carry: u32 = if up { 1 } else { 0 };
    let rounded = mant + carry;
    if k >= -126 {
        f32::from_bits((((k + 126) as u32) << 23) + rounded)
    } else {
        f32::from_bits(rounded)
    }
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
    // A device's `/` may be off by 2.5 ulp, and this quotient is the result.
    div_rn(t, t + 2.0).copysign(x)
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
