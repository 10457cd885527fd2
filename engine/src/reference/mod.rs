//! The reference chains: each fused kernel as a composition of simple host ops, written from
//! the spec and independently of the fused bodies. They are the fallback when a device has no
//! port, and the parity harness's oracle; [`cases`] (feature `harness`) declares each kernel's
//! parity and bench cases.
//!
//! Intermediate values are computed in f64 and rounded to `T` exactly where the unfused chain
//! stores a tensor.

/// One reference module per kernel of the list, named after it.
macro_rules! reference_modules {
    ($( $name:ident : $id:ident $dtypes:tt $buffers:tt ; )*) => {
        $( pub mod $name; )*
    };
}
kiln_math::for_each_kernel!(reference_modules);

#[cfg(feature = "harness")]
pub mod cases;
pub mod gather_qmm;
pub mod moe;
pub mod primitives;
pub mod qlinear;
pub mod sampling;
