//! The `rocm` backend: the code objects `shaders-hip` builds (one per target cpu, committed under
//! `engine/artifacts/hip/<arch>/`), loaded through the HIP runtime when one is present.
//!
//! The device's arch picks the code object; a device whose wavefront width differs from the
//! artifact's is refused with `WaveMismatch` by `select_port`. Launches pass the kernarg bytes as
//! one buffer laid out by [`kernarg_layout`], the layout the static test checks against every
//! code object's metadata.

pub(crate) mod artifacts;
mod device;
pub mod hip;

pub use artifacts::{kernarg_layout, Artifact, KernargLayout, ARTIFACTS};

use crate::port::{Port, PortLaunch, Slot};
use crate::Backend;
use kiln_math::KernelId;

pub(crate) use device::open;

/// One line saying what a port runs.
fn describe(a: &Artifact) -> String {
    format!(
        "{} code object V{} (wave{})",
        a.arch, a.code_object_version, a.wave
    )
}

/// Whether a code object defines `symbol`: its string table holds the name NUL-delimited.
pub(crate) fn has_entry(a: &Artifact, symbol: &str) -> bool {
    let name = [&[0u8][..], symbol.as_bytes(), &[0u8][..]].concat();
    a.bytes.windows(name.len()).any(|w| w == name)
}

/// The rocm ports of one kernel: every embedded code object × every dtype whose entry that code
/// object defines (a stale or partial build is `NoPort` with the reason, never a failed load).
pub(crate) fn slot(kernel: KernelId) -> Slot {
    if ARTIFACTS.is_empty() {
        return Slot::Absent("no code objects embedded".into());
    }
    let ports: Vec<Port> = ARTIFACTS
        .iter()
        .flat_map(|a| {
            kernel.dtypes().iter().filter_map(move |&dtype| {
                let symbol = kernel.symbol(dtype)?;
                has_entry(a, symbol).then(|| Port {
                    kernel,
                    dtype,
                    backend: Backend::Rocm,
                    wave: Some(a.wave),
                    target: Some(a.arch),
                    artifact: Some(describe(a)),
                    launch: PortLaunch::Artifact { symbol },
                })
            })
        })
        .collect();
    if ports.is_empty() {
        return Slot::Absent(
            "the embedded code objects have no entry for this kernel (run `cargo xtask kernels`)"
                .into(),
        );
    }
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
