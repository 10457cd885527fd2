//! The parity harness's side of the references: each kernel's parity cases (`cases`) and the
//! shapes `kiln bench` times it at (`bench_cases`: model shapes, or its parity cases when it has
//! none), in one module per kernel of the list, named after it.

use crate::case::Check;
use crate::Backend;
use kiln_math::DType;

/// One cases module per kernel of the list, named after it.
macro_rules! cases_modules {
    ($( $name:ident : $id:ident $dtypes:tt $buffers:tt ; )*) => {
        $( pub mod $name; )*
    };
}
kiln_math::for_each_kernel!(cases_modules);

pub mod gather_qmm;
pub mod moe;
pub mod paged_cases;
pub mod qlinear;

/// Sampled tokens: exact on the cpu (serial sums in index order, as the references sum).
/// Elsewhere the sums round in another order, which moves a draw only when it lands within
/// rounding of a CDF or top-p boundary: most rows must still agree (the distribution tests in
/// `samplers.rs` and `rejection.rs` cover the law).
fn sampled_tokens() -> Check {
    Check::Agree {
        exact_on: &[Backend::Cpu],
        min_frac: 0.75,
    }
}

/// The checks of a sampler's buffers: `inputs` unchecked, then `outputs` of sampled tokens.
pub fn sampler_checks(inputs: usize, outputs: usize) -> Vec<Check> {
    let mut checks = vec![Check::None; inputs];
    checks.resize(inputs + outputs, sampled_tokens());
    checks
}

/// The linear-layer budgets of spec §0.2 (f32 accumulation against an f64 reference, then one
/// rounding to the dtype): f32 `1e-5 / 1e-4`, f16 `2e-3 / 1.2e-2`, bf16 `1.6e-2 / 7e-2`.
pub fn linear_tolerance(dtype: DType) -> Check {
    let (nrms, nmax) = match dtype {
        DType::F32 => (1e-5, 1e-4),
        DType::F16 => (2e-3, 1.2e-2),
        _ => (1.6e-2, 7e-2),
    };
    Check::Tolerance { nrms, nmax }
}
