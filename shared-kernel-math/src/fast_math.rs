//! f32 operations GPUs do in one instruction, for kernels whose tolerance allows it: `2^x`
//! accurate to a few ulp (no f64 inside) and the fused multiply-add; and `ln(1 + x)` on `[0, 1]`
//! as a short polynomial in those fused multiply-adds. Also the square root, which is exact
//! everywhere but only the GPUs' instruction is cheap.
//!
//! GPUs use their instructions (`ex2.approx`/`fma.rn` on nvptx, `v_exp_f32`/`v_fma_f32` on
//! amdgpu; the exp2 instructions are within 2 ulp); every other target (the host backends and
//! the WGSL translation) computes [`exp2_poly`] and `a * b + c`.

/// `2^x`: `0` below `2^-126` and for `-inf`, `+inf` from 128, NaN for NaN.
#[inline(always)]
pub fn exp2_approx(x: f32) -> f32 {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    return core::intrinsics::exp2f32(x);
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    return exp2_poly(x);
}

/// `√x` correctly rounded, as IEEE asks: the hardware's on GPUs (`sqrt.rn.f32` on nvptx, LLVM's
/// correctly rounded expansion on amdgpu), libm's elsewhere; the same bits on every target.
/// libm's on a GPU is a table in global memory and ~50 integer steps: a memory round trip
/// inside a norm's critical path.
#[inline(always)]
pub fn sqrt_rn(x: f32) -> f32 {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    return core::intrinsics::sqrtf32(x);
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    return libm::sqrtf(x);
}

/// `a * b + c`, fused (one rounding) on GPUs, two roundings elsewhere: Rust never contracts a
/// multiply and an add, and nvptx keeps `mul.rn` + `add.rn` apart, so hot loops ask for it.
#[inline(always)]
pub fn mul_add(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    return core::intrinsics::fmaf32(a, b, c);
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    return a * b + c;
}

/// `2^x` in f32 arithmetic only: `x = n + f` with `n` the nearest integer and `|f| ≤ 1/2`,
/// `2^f` by its Taylor series to degree 7 (truncation below 6e-9 relative), scaled by `2^n`
/// built from its exponent bits.
#[inline(always)]
pub fn exp2_poly(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x < -126.0 {
        return 0.0;
    }
    if x >= 128.0 {
        return f32::INFINITY;
    }
    // The nearest integer through floor, not `(x + 1.5·2^23) − 1.5·2^23`: device compilers
    // (NVIDIA's Vulkan driver) fold that pair to `x`, which left n fractional and f = 0
    // (paged attention off by up to 40% through wgpu on the H200).
    let n = libm::floorf(x + 0.5);
    let f = x - n;
    // ln(2)^k / k!, k = 7 down to 1.
    let mut p = 1.5252734e-5f32;
    p = p * f + 1.540353e-4;
    p = p * f + 1.3333558e-3;
    p = p * f + 9.618129e-3;
    p = p * f + 5.550411e-2;
    p = p * f + 0.2402265;
    p = p * f + core::f32::consts::LN_2;
    p = p * f + 1.0;
    // 2^n from its exponent bits; n = 128 (x in [127.5, 128)) as 2^127 · 2.
    let top = n > 127.0;
    let e = if top { 127 } else { n as i32 };
    let r = p * f32::from_bits(((e + 127) as u32) << 23);
    if top {
        r * 2.0
    } else {
        r
    }
}

/// `ln(1 + x)` for `x` in `[0, 1]` (softplus's `log1p(e^−|z|)`), within 2 ulp relative: `x·q(x)`
/// with `q` the degree-9 Chebyshev interpolant of `ln(1 + x)/x`, by Horner's rule in fused
/// multiply-adds. No division and no branch, unlike libm's `log1pf` (two IEEE divisions): a
/// kernel's per-block prologue stays a short dependency chain.
#[inline(always)]
pub fn ln_1p_unit(x: f32) -> f32 {
    let mut q = -0.003_176_057;
    q = mul_add(q, x, 0.019_542_526);
    q = mul_add(q, x, -0.056_373_61);
    q = mul_add(q, x, 0.105_436_236);
    q = mul_add(q, x, -0.152_696_67);
    q = mul_add(q, x, 0.196_632_74);
    q = mul_add(q, x, -0.249_516_16);
    q = mul_add(q, x, 0.333_297_1);
    q = mul_add(q, x, -0.499_998_93);
    q = mul_add(q, x, 1.0);
    x * q
}

#[cfg(test)]
mod tests {
    use super::{exp2_poly, ln_1p_unit};

    /// Relative error against f64 over the whole domain, from the subnormals up.
    #[test]
    fn ln_1p_unit_is_within_two_ulp() {
        let mut worst = 0.0f64;
        let mut x = 1e-30f32;
        while x <= 1.0 {
            let want = (x as f64).ln_1p();
            let rel = ((ln_1p_unit(x) as f64 - want) / want).abs();
            worst = worst.max(rel);
            x = if x < 1e-3 { x * 1.01 } else { x + 1.7e-5 };
        }
        assert!(
            worst < 2.0 * f32::EPSILON as f64,
            "worst relative error {worst:e}"
        );
        assert_eq!(ln_1p_unit(0.0), 0.0);
    }

    /// Relative error against f64 over the softmax range and the ends of the domain.
    #[test]
    fn exp2_poly_is_within_a_few_ulp() {
        let mut worst = 0.0f64;
        let mut x = -126.0f32;
        while x < 128.0 {
            let want = (x as f64).exp2();
            let got = exp2_poly(x) as f64;
            let rel = ((got - want) / want).abs();
            worst = worst.max(rel);
            x += 0.001_3;
        }
        assert!(
            worst < 4.0 * f32::EPSILON as f64,
            "worst relative error {worst:e}"
        );
        assert_eq!(exp2_poly(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp2_poly(-200.0), 0.0);
        assert_eq!(exp2_poly(0.0), 1.0);
        assert_eq!(exp2_poly(1.0), 2.0);
        assert_eq!(exp2_poly(-3.0), 0.125);
        assert_eq!(exp2_poly(128.0), f32::INFINITY);
        assert!(exp2_poly(f32::NAN).is_nan());
    }
}
