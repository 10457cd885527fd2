//! The `half` crate's `f16` and `bf16` as buffer scalars (the `half` feature): an engine that
//! holds its weights and activations in them hands them to kiln, and reads results into them,
//! without a copy through [`F16`] / [`Bf16`]. The bits are the same.

use crate::{Bf16, DType, Scalar, F16};

// SAFETY: `half::f16` and `half::bf16` are `#[repr(transparent)]` over their `u16` bits: plain
// data of 2 bytes, no padding, every bit pattern a value (NaNs included).
unsafe impl Scalar for half::f16 {
    const DTYPE: DType = DType::F16;
}
// SAFETY: as above.
unsafe impl Scalar for half::bf16 {
    const DTYPE: DType = DType::Bf16;
}

impl From<half::f16> for F16 {
    fn from(v: half::f16) -> F16 {
        F16(v.to_bits())
    }
}

impl From<F16> for half::f16 {
    fn from(v: F16) -> half::f16 {
        half::f16::from_bits(v.0)
    }
}

impl From<half::bf16> for Bf16 {
    fn from(v: half::bf16) -> Bf16 {
        Bf16(v.to_bits())
    }
}

impl From<Bf16> for half::bf16 {
    fn from(v: Bf16) -> half::bf16 {
        half::bf16::from_bits(v.0)
    }
}
