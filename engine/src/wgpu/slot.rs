//! The wgpu port slot: which kernels × dtypes have a WGSL port in this build.

use super::modules::MODULES;
use crate::port::{Port, PortLaunch, Slot};
use crate::Backend;
use kiln_math::KernelId;

/// Kernels whose WGSL port is held back, and why (`kiln ports` shows the reason; the ops take
/// the fallback there). None at present: RoPE's was until the prelude's exp2f became correctly
/// rounded, xIELU's until module consts resolved per file.
const HELD_BACK: &[(KernelId, &str)] = &[];

/// The wgpu port slot of a kernel: a port per dtype with a module for this variant set.
pub(crate) fn slot(id: KernelId) -> Slot {
    if let Some((_, why)) = HELD_BACK.iter().find(|(k, _)| *k == id) {
        return Slot::Absent((*why).into());
    }
    let ports: Vec<Port> = id
        .dtypes()
        .iter()
        .filter(|dt| {
            MODULES
                .iter()
                .any(|m| m.kernel == id.name() && m.dtype == dt.name())
        })
        .map(|&dt| Port {
            kernel: id,
            dtype: dt,
            backend: Backend::Wgpu,
            wave: None,
            target: None,
            artifact: Some("WGSL generated at build time (the adapter's subgroup size)".into()),
            launch: PortLaunch::Artifact {
                symbol: id.symbol(dt).expect("a listed dtype has a symbol"),
            },
        })
        .collect();
    if ports.is_empty() {
        Slot::Absent("no WGSL module was generated for this kernel".into())
    } else {
        Slot::Present(ports)
    }
}
