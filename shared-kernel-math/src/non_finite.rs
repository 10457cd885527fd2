//! The two operations kernels use to keep the NaN/Inf contract (docs/non-finite.md): a
//! non-finite value made NaN, and a maximum that keeps a NaN instead of dropping it.

/// `x` when finite, else NaN: an attention score or output that is ±Inf becomes NaN, so every
/// arm answers NaN whatever order its arithmetic met the infinity in.
#[inline(always)]
pub fn nan_unless_finite(x: f32) -> f32 {
    if x.is_finite() {
        x
    } else {
        f32::NAN
    }
}

/// Whether `x` is `-inf`, by its bits: WGSL lets a shader compiler assume no NaN, so a
/// comparison such as `x != -inf` is false for a NaN `x` on some (lavapipe); bit tests are exact.
#[inline(always)]
pub fn is_neg_infinity(x: f32) -> bool {
    x.is_infinite() && x.is_sign_negative()
}

/// The larger of `a` and `b`, NaN when either is NaN (`f32::max` and `>` both drop a NaN, which
/// let a running maximum forget a poisoned score).
#[inline(always)]
pub fn max_keeping_nan(a: f32, b: f32) -> f32 {
    if a > b || a.is_nan() {
        a
    } else {
        b
    }
}
