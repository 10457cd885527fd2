//! The PTX `cargo xtask kernels` builds from `shaders-cuda` — one module per kernel and target
//! cpu — embedded, and the port slot it gives.

use crate::port::{Port, PortLaunch, Slot};
use crate::Backend;
use kiln_math::KernelId;

/// Warp width the PTX is built for (`kiln_shaders_cuda::WARP`).
pub(crate) const PTX_WARP: u32 = 32;

/// One embedded PTX module: one kernel's entries for one target cpu, NUL-terminated.
pub(crate) struct PtxModule {
    pub kernel: &'static str,
    /// `sm_80`, `sm_90`.
    pub target: &'static str,
    pub text: &'static str,
}

/// Every embedded module (the table xtask writes beside them).
pub(crate) static PTX_MODULES: &[PtxModule] = include!("../../artifacts/cuda/modules.rs");

/// The target cpus built, newest first, with the lowest compute capability that runs each: a
/// device takes the first its compute capability reaches.
pub(crate) const PTX_TARGETS: &[(&str, (i32, i32))] = &[("sm_90", (9, 0)), ("sm_80", (8, 0))];

/// Loads this PTX file instead of the embedded module of the kernel whose entries it defines
/// (A/B runs of a kernel variant built from the same kernel list: the entries, params and
/// shared-memory sizes must match this build's).
pub(crate) const PTX_OVERRIDE_ENV: &str = "KILN_CUDA_PTX";

/// A PTX module read from `path`, NUL-terminated (kept for the process, as the embedded ones
/// are).
pub(crate) fn ptx_from_file(path: &std::ffi::OsStr) -> Result<&'static str, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{PTX_OVERRIDE_ENV}={}: {e}", path.to_string_lossy()))?;
    Ok(Box::leak(format!("{text}\0").into_boxed_str()))
}

/// The embedded module of `kernel` for `target`.
pub(crate) fn module(kernel: KernelId, target: &str) -> Option<&'static PtxModule> {
    PTX_MODULES
        .iter()
        .find(|m| m.kernel == kernel.name() && m.target == target)
}

/// Set to `0` to launch every kernel fully serialized after the one before it. Otherwise (the
/// default) the kernels of modules that wait for the previous grid launch while that grid still
/// runs (programmatic dependent launch, sm_90): on an H100 that saved ~0.25 µs per small
/// launch, 0.6% of a replayed Llama-3.1-8B decode step and 5.8% of an eager one
/// (docs/results/s34-h100-2026-12-07.md).
pub(crate) const PDL_ENV: &str = "KILN_CUDA_PDL";

/// What every entry of an sm_90 module built by `shaders-cuda` executes before touching memory:
/// it waits there for the stream's previous grid, so that grid may still be running when this
/// one is launched (programmatic dependent launch). A module without it (sm_80, or a
/// `KILN_CUDA_PTX` replacement built before it) is launched serialized.
pub(crate) const PDL_WAIT: &str = "griddepcontrol.wait";

/// Each entry of the PTX text: its name and its text up to the next entry.
fn entries(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.split(".visible .entry ")
        .skip(1)
        .map(|e| (e.split('(').next().unwrap_or(""), e))
}

/// Whether every entry of the PTX text waits for the previous grid ([`PDL_WAIT`] in each).
pub(crate) fn waits_for_prior_grid(text: &str) -> bool {
    let mut all = entries(text).peekable();
    all.peek().is_some() && all.all(|(_, body)| body.contains(PDL_WAIT))
}

/// Whether the PTX text defines the entry `symbol`.
pub(crate) fn has_entry(text: &str, symbol: &str) -> bool {
    text.contains(&format!(".visible .entry {symbol}("))
}

/// What the embedded PTX lacks of `kernel`: one line per target × entry missing.
fn missing_entries(kernel: KernelId) -> Vec<String> {
    let mut missing = Vec::new();
    for &(target, _) in PTX_TARGETS {
        let Some(m) = module(kernel, target) else {
            missing.push(format!(
                "the {target} PTX has no module for {}",
                kernel.name()
            ));
            continue;
        };
        for &dtype in kernel.dtypes() {
            if let Some(symbol) = kernel.symbol(dtype).filter(|s| !has_entry(m.text, s)) {
                missing.push(format!("the {target} PTX module has no entry {symbol}"));
            }
        }
    }
    missing
}

/// The cuda ports of `kernel`, one per dtype, when every target's module has every entry; else
/// absent with what is missing (the modules are built together from the list, so a missing
/// entry means they are stale).
pub(crate) fn slot(kernel: KernelId) -> Slot {
    let missing = missing_entries(kernel);
    if !missing.is_empty() {
        return Slot::Absent(format!(
            "{} (run `cargo xtask kernels`)",
            missing.join("; ")
        ));
    }
    let targets: Vec<&str> = PTX_TARGETS.iter().rev().map(|(t, _)| *t).collect();
    Slot::Present(
        kernel
            .dtypes()
            .iter()
            .filter_map(|&dtype| {
                Some(Port {
                    kernel,
                    dtype,
                    backend: Backend::Cuda,
                    wave: Some(PTX_WARP),
                    // One module per compute capability; the device picks its own at open.
                    target: None,
                    artifact: Some(format!("PTX {} (warp {PTX_WARP})", targets.join(" + "))),
                    launch: PortLaunch::Artifact {
                        symbol: kernel.symbol(dtype)?,
                    },
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_overlaps_only_when_every_entry_waits() {
        let wait = format!(".visible .entry a_f32(\n{{\n{PDL_WAIT};\nret;\n}}\n");
        let plain = ".visible .entry a_f16(\n{\nret;\n}\n";
        assert!(waits_for_prior_grid(&wait));
        assert!(waits_for_prior_grid(&format!("{wait}{wait}")));
        assert!(!waits_for_prior_grid(&format!("{wait}{plain}")));
        assert!(!waits_for_prior_grid(plain));
        assert!(!waits_for_prior_grid("// no entries"));
    }

    /// The sm_90 entries wait before any load or store that another grid can see (global or
    /// generic), so a grid launched during its predecessor reads nothing that predecessor
    /// writes, and writes nothing it reads, and none lets its dependents launch before its
    /// blocks exit; sm_80 has no such instruction and no such launch.
    #[test]
    fn every_sm90_entry_waits_for_the_prior_grid_before_touching_memory() {
        for m in PTX_MODULES {
            for (name, body) in entries(m.text) {
                let wait = body.find(PDL_WAIT);
                if m.target != "sm_90" {
                    assert!(wait.is_none(), "{}/{name}: has {PDL_WAIT}", m.target);
                    continue;
                }
                let wait = wait.unwrap_or_else(|| panic!("sm_90/{name}: no {PDL_WAIT}"));
                // Dependents launch as blocks exit: an early trigger slowed replayed graphs.
                assert!(
                    !body.contains("griddepcontrol.launch_dependents"),
                    "sm_90/{name}: triggers its dependents before it exits"
                );
                let first_access = body
                    .match_indices("\tld.")
                    .chain(body.match_indices("\tst."))
                    .chain(body.match_indices("\tatom."))
                    .chain(body.match_indices("\tred."))
                    .filter(|(i, s)| {
                        let space = &body[i + s.len()..];
                        !["param", "local", "shared"]
                            .iter()
                            .any(|p| space.starts_with(p))
                    })
                    .map(|(i, _)| i)
                    .min();
                if let Some(first) = first_access {
                    assert!(
                        wait < first,
                        "sm_90/{name}: a memory access precedes {PDL_WAIT}"
                    );
                }
            }
        }
    }
}
