//! libm's functions bit for bit, for kernels held to the per-op chain of an unfused graph
//! (xIELU, spec §10). On GPUs every lane of a wave takes its own branch of libm's range
//! reduction one after another; here the branches' results are computed by every lane and one is
//! selected, so a wave runs one path. Elsewhere (the host backends and the WGSL translation,
//! whose prelude has its own bit-exact libm) the call is libm's.

/// `e^x − 1` for `x ≤ 0` (and NaN), the `libm` crate's `expm1f` bit for bit; some finite value
/// or NaN for `x > 0` (xIELU's negative branch reads it only where `x ≤ 0`).
#[inline(always)]
pub fn expm1f_nonpositive(x: f32) -> f32 {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    return expm1f_nonpositive_branchless(x);
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    return libm::expm1f(x);
}

/// ln 2 in two parts as FreeBSD's `s_expm1f.c` splits it: the high part's 17 significant bits
/// make `k·LN2_HI` exact for every reduction `k`.
const LN2_HI: f32 = f32::from_bits(0x3f31_7180);
const LN2_LO: f32 = f32::from_bits(0x3717_f7d1);
/// 1/ln 2.
const INV_LN2: f32 = f32::from_bits(0x3fb8_aa3b);
/// The rational approximation's coefficients, `-0x888868.0p-28` and `0xcf3010.0p-33`.
const Q1: f32 = -(0x0088_8868 as f32) / (1u32 << 28) as f32;
const Q2: f32 = 0x00cf_3010 as f32 / (1u64 << 33) as f32;

/// [`expm1f_nonpositive`] as one straight path: libm's steps for a negative argument, every
/// one of its results computed and the one libm returns selected, so a wave whose lanes fall in
/// different ranges runs one path. libm's reduction `x = k·ln2 + r − c` has three cases below
/// zero: `k = 0` for |x| ≤ ln2/2 (x unchanged, `c = 0`), `k = −1` below 1.5·ln2 (`x + LN2_HI`
/// and `−LN2_LO`), else `k` from `x/ln2`; all three are `hi = x − k·LN2_HI`, `lo = k·LN2_LO`
/// with those `k` (exact products), so one formula serves them. Same operations in the same
/// order as libm, so the same bits (this file's tests compare every f32 ≤ 0).
#[inline(always)]
pub fn expm1f_nonpositive_branchless(x: f32) -> f32 {
    let hx = x.to_bits() & 0x7fff_ffff;
    // `as` saturates (NaN → 0); the selects give `k` where libm's cases would.
    let mut k = (INV_LN2 * x - 0.5) as i32;
    if hx < 0x3f85_1592 {
        k = -1;
    }
    if hx <= 0x3eb1_7218 {
        k = 0;
    }
    let t = k as f32;
    let hi = x - t * LN2_HI;
    let lo = t * LN2_LO;
    let r = hi - lo;
    let c = (hi - r) - lo;

    let hfx = 0.5 * r;
    let hxs = r * hfx;
    let r1 = 1.0 + hxs * (Q1 + hxs * Q2);
    let t3 = 3.0 - r1 * hfx;
    let e0 = hxs * ((r1 - t3) / (6.0 - r * t3));
    let at_k0 = r - (r * e0 - hxs);
    let e = (r * (e0 - c) - c) - hxs;
    let at_km1 = 0.5 * (r - e) - 0.5;
    // 2^k from exponent bits (wrapping: a lane that selects another result must not trap).
    let twopk = f32::from_bits((0x7f_i32.wrapping_add(k) as u32) << 23);
    let at_far = (r - e + 1.0) * twopk - 1.0;

    let mut out = at_far;
    if k == -1 {
        out = at_km1;
    }
    if k == 0 {
        out = at_k0;
    }
    if hx < 0x3300_0000 {
        // |x| < 2^-25
        out = x;
    }
    if hx >= 0x4195_b844 {
        // x ≤ −27·ln2, and NaN
        out = -1.0;
    }
    if hx > 0x7f80_0000 {
        out = x;
    }
    out
}

/// f32 ulps either side of a quick `expm1` value inside which [`expm1_rounded_pair`] asks libm:
/// four times the quick value's worst distance from libm's, 1 ulp (this file's tests).
const NEAR: u32 = 4;

/// `[T::from_f32(libm::expm1f(c₀)), T::from_f32(libm::expm1f(c₁))]` for `c ≤ 0` (and NaN), the
/// same bits. A degree-7 polynomial after reduction by ln 2 lands within a few f32 ulps of
/// libm's value, so both round to the same 16-bit `T` unless that value is within 4 ulps
/// of a rounding midpoint of `T` (the f32 bits `T` drops are near half their range); only there,
/// about one value in a thousand for f16, are libm's own steps run. For f32 every value is.
/// (A result too small to be normal in f16 is within 2^-29 of `c`, itself a value of `T`: both
/// round to `c`, whatever the dropped bits.)
#[inline(always)]
pub fn expm1_rounded_pair<T: crate::Element>(c: [f32; 2]) -> [T; 2] {
    let quick = [expm1_quick(c[0]), expm1_quick(c[1])];
    let mut out = T::from_f32_pair(quick[0], quick[1]);
    // The f32 bits below T's mantissa, and their midpoint.
    let (dropped, midpoint) = if crate::is_bf16::<T>() {
        (0xffff, 0x8000)
    } else {
        (0x1fff, 0x1000)
    };
    let mut i = 0;
    while i < 2 {
        let from_midpoint = (quick[i].to_bits() & dropped).wrapping_sub(midpoint - NEAR);
        if !crate::is_16bit::<T>() || from_midpoint <= 2 * NEAR {
            out[i] = T::from_f32(expm1f_nonpositive(c[i]));
        }
        i += 1;
    }
    out
}

/// log2(e), as a literal: WGSL cannot take `f32::consts::LOG2_E` (a bit cast) as a constant.
#[allow(clippy::approx_constant)]
const LOG2E: f32 = 1.442_695;
/// 1.5·2^23: added to a value below 2^22 in magnitude, it leaves that value rounded to an integer
/// in the low mantissa bits.
const ROUNDER: f32 = 12_582_912.0;
/// ln 2's high part with 9 trailing zero bits (`n·LN2_HI_Q` exact for |n| < 2^9) and the rest.
const LN2_HI_Q: f32 = 0.693_145_75;
const LN2_LO_Q: f32 = 1.428_606_8e-6;

/// `e^x − 1` for `x ≤ 0`, within a few f32 ulps of libm's (checked over every f16 and bf16
/// value): `x = n·ln2 + r`, |r| ≤ ln2/2, `e^x − 1 = 2^n·expm1(r) + (2^n − 1)` with `expm1(r)`
/// by its Taylor series to degree 7 (truncation below 2^-26 of the result). Below −30 it is −1;
/// below 2^-25 in magnitude `x` itself, as libm.
#[inline(always)]
fn expm1_quick(x: f32) -> f32 {
    let x = if x < -30.0 { -30.0 } else { x };
    let shifted = crate::mul_add(x, LOG2E, ROUNDER);
    // n is the low mantissa bits of `shifted` (two's complement around 2^22); as a float it is
    // converted from them, never `shifted − ROUNDER`, which a device compiler may fold away.
    let n_int = shifted.to_bits().wrapping_sub(ROUNDER.to_bits()) as i32;
    let n = n_int as f32;
    let r = crate::mul_add(n, -LN2_HI_Q, x);
    let r = crate::mul_add(n, -LN2_LO_Q, r);
    let mut p = 1.0 / 5040.0;
    p = crate::mul_add(p, r, 1.0 / 720.0);
    p = crate::mul_add(p, r, 1.0 / 120.0);
    p = crate::mul_add(p, r, 1.0 / 24.0);
    p = crate::mul_add(p, r, 1.0 / 6.0);
    p = crate::mul_add(p, r, 0.5);
    let em1_r = crate::mul_add(p * r, r, r);
    let two_n = f32::from_bits((127_i32.wrapping_add(n_int) as u32) << 23);
    let out = crate::mul_add(two_n, em1_r, two_n - 1.0);
    // libm's own answer below 2^-25 (the sign of −0 included).
    if (x.to_bits() & 0x7fff_ffff) < 0x3300_0000 {
        x
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{expm1_quick, expm1_rounded_pair, expm1f_nonpositive_branchless, NEAR};
    use crate::{Bf16, Element, F16};

    /// `expm1f_nonpositive_branchless(x)` against `libm::expm1f(x)` for `x ≤ 0`, bit for bit
    /// (NaN payloads included).
    fn check(x: f32) {
        let (got, want) = (expm1f_nonpositive_branchless(x), libm::expm1f(x));
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "expm1f_nonpositive_branchless({x:e} = {:#010x}) = {got:e}, libm {want:e}",
            x.to_bits()
        );
    }

    /// Every f32 ≤ 0 whose bits are a multiple of a prime stride, 4096 values either side of each
    /// of libm's range thresholds, NaNs of both signs, and every negative f16 and bf16.
    #[test]
    fn expm1f_nonpositive_branchless_is_libm_bit_for_bit() {
        for bits in (0x8000_0000..=u32::MAX).step_by(997) {
            check(f32::from_bits(bits));
        }
        for t in [
            0x3300_0000u32,
            0x3eb1_7218,
            0x3f85_1592,
            0x4195_b844,
            0x7f80_0000,
        ] {
            for bits in t - 4096..=t + 4096 {
                check(f32::from_bits(bits | 0x8000_0000));
            }
        }
        for nan in [0x7fc0_0000u32, 0x7f80_0001, 0x7fff_ffff] {
            check(f32::from_bits(nan));
            check(f32::from_bits(nan | 0x8000_0000));
        }
        for h in 0x8000..=u16::MAX {
            check(crate::f16_bits_to_f32_soft(h));
            check(f32::from_bits((h as u32) << 16));
        }
    }

    /// Every f32 ≤ 0: `cargo test --release -p kiln-math exact_math -- --ignored`.
    #[test]
    #[ignore]
    fn expm1f_nonpositive_branchless_is_libm_for_every_negative_f32() {
        for bits in 0x8000_0000..=u32::MAX {
            check(f32::from_bits(bits));
        }
    }

    /// Every non-positive value of `T` (and −0, −inf, NaN): the rounded pair is libm's rounded,
    /// and the quick value is within a quarter of [`NEAR`] of libm's wherever libm's is finite
    /// and not −1 (so a fused evaluation on a GPU, a rounding or two away, stays inside it).
    fn rounded_pair_is_libm_rounded<T: Element>(values: impl Iterator<Item = T>) {
        let mut worst = 0u32;
        for v in values {
            let c = v.to_f32();
            let want = T::from_f32(libm::expm1f(c));
            let got = expm1_rounded_pair::<T>([c, c]);
            assert!(
                got[0].to_bits32() == want.to_bits32() && got[1].to_bits32() == want.to_bits32(),
                "expm1_rounded_pair({c:e}) = {:#x}, libm rounded {:#x}",
                got[0].to_bits32(),
                want.to_bits32()
            );
            let (q, l) = (expm1_quick(c), libm::expm1f(c));
            if l.is_finite() && l != -1.0 && l != 0.0 {
                worst = worst.max(q.to_bits().abs_diff(l.to_bits()));
            }
        }
        assert!(worst <= NEAR / 4, "quick expm1 is {worst} ulp from libm's");
    }

    #[test]
    fn expm1_rounded_pair_is_libm_rounded_for_every_16_bit_value() {
        rounded_pair_is_libm_rounded((0x8000..=u16::MAX).map(F16));
        rounded_pair_is_libm_rounded((0x8000..=u16::MAX).map(Bf16));
        rounded_pair_is_libm_rounded([0.0f32, -0.0].into_iter().map(F16::from_f32));
        // f32 asks libm for every value: the same bits, on a sample.
        rounded_pair_is_libm_rounded((0x8000_0000..=u32::MAX).step_by(65_537).map(f32::from_bits));
    }
}
