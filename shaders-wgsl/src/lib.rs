//! kiln's WGSL port: a translator from `kiln-math`'s Rust (the subset in README.md) to one WGSL
//! module per kernel × dtype × device variant.
//!
//! The kernel list is kiln-math's own `KernelId` (names, dtypes, buffers, params fields). The
//! translator reads kiln-math's sources for each kernel body and every function it calls, the
//! `Block` trait's provided collectives (`block.rs`) and the element conversions (`element.rs`).
//! Only the `Block` primitives, the views and `libm` map to hand-written WGSL (`prelude.rs`), so
//! collectives and kernels added later translate for free.
//!
//! Each module is specialised at pipeline creation by three override constants:
//! `KILN_BLOCK` (threads per workgroup), `KILN_WAVE` (the wave the kernel sees: the subgroup
//! size with subgroups, any power of two without) and `KILN_SHARED_WORDS` (kernel shared
//! memory). Bindings (group 0): the kernel's buffers in list order, then `kiln_meta` (params
//! words, then `(element offset, length)` per buffer, then the grid), then `kiln_fault` (the
//! first out-of-bounds access: flag, block x/y/z, buffer, index).

mod artifacts;
mod bindings;
mod error;
mod exact_wgsl;
mod kernels;
pub mod libm_wgsl;
mod module;
mod prelude;
mod sources;
mod translate;
#[cfg(feature = "naga")]
mod validate;
mod variant;

pub use artifacts::{engine_artifacts, stale_artifacts, write_artifacts, ARTIFACT_DIR, TABLE_FILE};
pub use bindings::{meta_binding, meta_buffer_word, meta_grid_word, FAULT_WORDS, MAX_BLOCK};
pub use error::Error;
pub use kernels::{kernels, KernelSpec};
pub use module::Module;
pub use sources::{SourceFile, Sources, KILN_MATH_SRC, LIBM_PATH};
#[cfg(feature = "naga")]
pub use validate::validate;
pub use variant::{variant_for, Variant};

use kiln_math::DType;

/// Translates one kernel × dtype × variant.
pub fn translate(
    src: &Sources,
    kernel: &KernelSpec,
    dtype: DType,
    variant: Variant,
) -> Result<Module, Error> {
    translate::module(src, kernel, dtype, variant)
}

/// Every module of every kernel in the list: each dtype, each variant (f32 and bf16 modules do
/// not depend on `f16_storage`, so only its `false` variant is generated for them).
pub fn generate_all(src: &Sources) -> Result<Vec<Module>, Error> {
    let mut out = Vec::new();
    for k in kernels() {
        for &dt in k.dtypes {
            for v in Variant::ALL {
                if dt != DType::F16 && v.f16_storage && !k.has_fixed_f16() {
                    continue;
                }
                out.push(translate(src, &k, dt, v)?);
            }
        }
    }
    Ok(out)
}
