//! The `rocm` backend: the code objects `shaders-hip` builds (one per kernel and target cpu,
//! committed under `engine/artifacts/hip/<arch>/`), loaded through the HIP runtime when one is present.
//!
//! The device's arch picks the code object; a device whose wavefront width differs from the
//! artifact's is refused with `WaveMismatch` by `select_port`. Launches pass the kernarg bytes as
//! one buffer laid out by [`kernarg_layout`], the layout the static test checks against every
//! code object's metadata.

pub(crate) mod artifacts;
mod device;
pub mod hip;

pub use artifacts::{kernarg_layout, Artifact, CodeObject, KernargLayout, ARTIFACTS, CODE_OBJECTS};

use crate::port::{Port, PortLaunch, Slot};
use crate::Backend;
use kiln_math::KernelId;

pub(crate) use artifacts::has_entry;
pub(crate) use device::open;

/// One line saying what a port runs.
fn describe(a: &Artifact) -> String {
    format!(
        "{} code object V{} (wave{})",
        a.arch, a.code_object_version, a.wave
    )
}

/// What the code objects `code_object` gives per arch lack of `kernel`: one line per arch ×
/// entry missing (the embedded ones: `Artifact::code_object`; tests pass stale stand-ins).
pub(crate) fn missing_entries_in(
    kernel: KernelId,
    arches: &[Artifact],
    code_object: impl Fn(&Artifact) -> Option<&'static CodeObject>,
) -> Vec<String> {
    let mut missing = Vec::new();
    for a in arches {
        let Some(c) = code_object(a) else {
            missing.push(format!("no {} code object holds {}", a.arch, kernel.name()));
            continue;
        };
        for &dtype in kernel.dtypes() {
            if let Some(symbol) = kernel.symbol(dtype).filter(|s| !has_entry(c, s)) {
                missing.push(format!("the {} code object has no entry {symbol}", a.arch));
            }
        }
    }
    missing
}

/// The rocm ports of one kernel: every embedded arch × every dtype, when each arch's code object
/// defines every entry; else absent with what is missing (the code objects are built together
/// from the list, so a missing entry means they are stale: `NoPort` with the reason, never a
/// failed load).
pub(crate) fn slot(kernel: KernelId) -> Slot {
    if ARTIFACTS.is_empty() {
        return Slot::Absent("no code objects embedded".into());
    }
    slot_from(
        kernel,
        missing_entries_in(kernel, ARTIFACTS, |a| a.code_object(kernel)),
    )
}

/// The slot of `kernel` given what its code objects lack.
pub(crate) fn slot_from(kernel: KernelId, missing: Vec<String>) -> Slot {
    if !missing.is_empty() {
        return Slot::Absent(format!(
            "{} (run `cargo xtask kernels`)",
            missing.join("; ")
        ));
    }
    let ports: Vec<Port> = ARTIFACTS
        .iter()
        .flat_map(|a| {
            kernel.dtypes().iter().filter_map(move |&dtype| {
                Some(Port {
                    kernel,
                    dtype,
                    backend: Backend::Rocm,
                    wave: Some(a.wave),
                    target: Some(a.arch),
                    artifact: Some(describe(a)),
                    launch: PortLaunch::Artifact {
                        symbol: kernel.symbol(dtype)?,
                    },
                })
            })
        })
        .collect();
    Slot::Present(ports)
}

/// Milliseconds the last launch on a rocm device took on the GPU (HIP events around it).
pub fn last_launch_ms(dev: &crate::Device) -> Option<f32> {
    match dev.kind() {
        crate::DeviceKind::Gpu(g) => g
            .as_any()
            .downcast_ref::<device::RocmDevice>()
            .and_then(device::RocmDevice::last_launch_ms),
        _ => None,
    }
}
