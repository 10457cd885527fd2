//! The PTX `cargo xtask kernels` builds from `shaders-cuda`, embedded, and the port slot it gives.

use crate::port::{Port, PortLaunch, Slot};
use crate::Backend;
use kiln_math::KernelId;

/// Warp width the PTX is built for (`kiln_shaders_cuda::WARP`).
pub(crate) const PTX_WARP: u32 = 32;

/// One embedded PTX module: the compute capability it targets and its NUL-terminated text.
pub(crate) struct Ptx {
    pub name: &'static str,
    /// Lowest compute capability (major, minor) that runs it.
    pub min_cc: (i32, i32),
    pub text: &'static str,
}

/// Newest first: a device takes the first module its compute capability reaches.
pub(crate) static PTX: &[Ptx] = &[
    Ptx {
        name: "kiln_sm90.ptx",
        min_cc: (9, 0),
        text: concat!(include_str!("../../artifacts/cuda/kiln_sm90.ptx"), "\0"),
    },
    Ptx {
        name: "kiln_sm80.ptx",
        min_cc: (8, 0),
        text: concat!(include_str!("../../artifacts/cuda/kiln_sm80.ptx"), "\0"),
    },
];

/// Loads this PTX file instead of the embedded module (A/B runs of kernel variants built from
/// the same kernel list: the entries, params and shared-memory sizes must match this build's).
pub(crate) const PTX_OVERRIDE_ENV: &str = "KILN_CUDA_PTX";

/// A PTX module read from `path` (kept for the process, as the embedded ones are).
pub(crate) fn ptx_from_file(path: &std::ffi::OsStr) -> Result<&'static Ptx, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{PTX_OVERRIDE_ENV}={}: {e}", path.to_string_lossy()))?;
    let name: &'static str = Box::leak(path.to_string_lossy().into_owned().into_boxed_str());
    let text: &'static str = Box::leak(format!("{text}\0").into_boxed_str());
    Ok(Box::leak(Box::new(Ptx {
        name,
        min_cc: (0, 0),
        text,
    })))
}

fn has_entry(ptx: &Ptx, symbol: &str) -> bool {
    ptx.text.contains(&format!(".visible .entry {symbol}("))
}

/// The cuda ports of `kernel`: one per dtype whose entry every embedded PTX module has.
pub(crate) fn slot(kernel: KernelId) -> Slot {
    let ports: Vec<Port> = kernel
        .dtypes()
        .iter()
        .filter_map(|&dtype| {
            let symbol = kernel.symbol(dtype)?;
            PTX.iter().all(|p| has_entry(p, symbol)).then_some(Port {
                kernel,
                dtype,
                backend: Backend::Cuda,
                wave: Some(PTX_WARP),
                // One PTX module per compute capability; the device picks its own at open.
                target: None,
                artifact: Some(format!("PTX sm_80 + sm_90 (warp {PTX_WARP})")),
                launch: PortLaunch::Artifact { symbol },
            })
        })
        .collect();
    if ports.is_empty() {
        Slot::Absent(
            "the embedded PTX has no entry for this kernel (run `cargo xtask kernels`)".into(),
        )
    } else {
        Slot::Present(ports)
    }
}
