//! The WGSL modules the engine embeds (`engine/artifacts/wgsl/`, written by `cargo xtask
//! kernels` and committed), the `KILN_WGSL_DIR` override of their text, the facts the
//! engine shares with them (scratch, block and fault sizes) and the lookup of the module a
//! kernel × dtype runs on a device's variant (subgroups, f16 storage).

use super::errors::other;
use crate::DeviceError;
use kiln_math::{DType, KernelId};

/// One generated module (an entry of `artifacts/wgsl/modules.rs`, written by `cargo xtask
/// kernels` through `kiln_shaders_wgsl::engine_artifacts`).
#[derive(Debug)]
pub(super) struct WgslModule {
    pub kernel: &'static str,
    pub dtype: &'static str,
    pub subgroups: bool,
    pub f16_storage: bool,
    pub uses_shared: bool,
    pub uses_f16: bool,
    /// The module's file name (`kiln_shaders_wgsl::Module::file_name`).
    pub file: &'static str,
    pub source: &'static str,
}

pub(super) static MODULES: &[WgslModule] = include!("../../artifacts/wgsl/modules.rs");

/// A folder of WGSL files (named as `cargo run -p kiln-shaders-wgsl --example dump` names them)
/// that replace the embedded modules they name: A/B runs of hand-edited or rebuilt modules
/// without rebuilding the engine. Bindings, params and overrides must match this build's.
const WGSL_OVERRIDE_ENV: &str = "KILN_WGSL_DIR";

/// The WGSL of `m`: the file of its name in `$KILN_WGSL_DIR` where that exists, else the
/// embedded module.
pub(super) fn module_source(m: &WgslModule) -> Result<std::borrow::Cow<'static, str>, DeviceError> {
    let Some(dir) = std::env::var_os(WGSL_OVERRIDE_ENV) else {
        return Ok(m.source.into());
    };
    let path = std::path::Path::new(&dir).join(m.file);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text.into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(m.source.into()),
        Err(e) => Err(other(format!(
            "{WGSL_OVERRIDE_ENV}: {}: {e}",
            path.display()
        ))),
    }
}

/// Bytes of the modules' `kiln_scratch` array (the prelude's `KILN_SCRATCH_WORDS`).
pub(super) const KILN_SCRATCH_BYTES: usize = 512 * 4;

pub(super) fn kiln_shaders_wgsl_max_block() -> u32 {
    // The modules' exchange array and scratch are sized for this block (kiln-shaders-wgsl).
    1024
}

pub(super) fn kiln_shaders_wgsl_fault_words() -> usize {
    // Matches kiln_shaders_wgsl::FAULT_WORDS: flag, block x/y/z, buffer, index.
    6
}

/// The module of `kernel` × `dtype` for an adapter with (or without) subgroups and SHADER_F16.
pub(super) fn module_for(
    kernel: KernelId,
    dtype: DType,
    subgroups: bool,
    f16: bool,
) -> Option<&'static WgslModule> {
    let has_fixed_f16 = kernel
        .buffers()
        .iter()
        .any(|b| b.elem == kiln_math::Elem::Fixed(DType::F16));
    let f16_storage = f16 && (dtype == DType::F16 || has_fixed_f16);
    MODULES.iter().find(|m| {
        m.kernel == kernel.name()
            && m.dtype == dtype.name()
            && m.subgroups == subgroups
            && m.f16_storage == f16_storage
            && (!m.uses_f16 || f16)
    })
}
