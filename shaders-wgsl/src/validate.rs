//! naga's check of a generated module: it parses, and validates with exactly the capabilities
//! it declares (what a wgpu device without those features would refuse at pipeline creation).

use crate::module::Module;
use naga::valid::{Capabilities, ValidationFlags, Validator};

/// Parses and validates `m` with naga; the error names the module and quotes naga's report.
pub fn validate(m: &Module) -> Result<(), String> {
    let label = m.file_name();
    let module = naga::front::wgsl::parse_str(&m.wgsl).map_err(|e| {
        format!(
            "{label}: naga does not parse it: {}",
            e.emit_to_string(&m.wgsl)
        )
    })?;
    let mut caps = Capabilities::empty();
    if m.uses_subgroups {
        caps |= Capabilities::SUBGROUP;
    }
    if m.uses_f16 {
        caps |= Capabilities::SHADER_FLOAT16;
    }
    Validator::new(ValidationFlags::all(), caps)
        .validate(&module)
        .map(|_| ())
        .map_err(|e| format!("{label}: naga refuses it: {}", e.emit_to_string(&m.wgsl)))
}
