//! What the translator produces: one WGSL module and the features it needs.

use crate::variant::Variant;

/// One generated module.
#[derive(Clone, Debug)]
pub struct Module {
    pub kernel: String,
    /// `f32`, `f16` or `bf16`.
    pub dtype: String,
    pub variant: Variant,
    pub wgsl: String,
    /// Which WGSL features the module needs (for naga's capabilities and wgpu's features).
    pub uses_f16: bool,
    pub uses_subgroups: bool,
    /// Whether the body calls `Block::shared` (the engine sizes `KILN_SHARED_WORDS`).
    pub uses_shared: bool,
}

impl Module {
    /// `<kernel>_<dtype>_<variant>.wgsl`: the name the engine embeds it under, the dump example
    /// writes it as, and `KILN_WGSL_DIR` replaces it by.
    pub fn file_name(&self) -> String {
        format!("{}_{}_{}.wgsl", self.kernel, self.dtype, self.variant.tag())
    }
}
