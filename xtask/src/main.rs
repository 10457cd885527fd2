//! `cargo xtask <command>`: project automation that is plain Rust, not shell.
//!
//! - `kernels [--check] [--wgsl-only]`: builds every device artifact the engine embeds (or
//!   checks that the committed ones are fresh): the WGSL modules first (stable Rust, seconds),
//!   then the PTX and the code objects (nightly); `--wgsl-only` stops after the WGSL.
//! - `device-bundle`: release `kiln` and the test binaries in `./bundle/` with a `run.sh`, for a
//!   GPU machine that has no Rust.

mod bundle;
mod cuda;
mod hip;
mod paths;
mod wgsl;

use std::process::ExitCode;

/// One device crate's build: `check` rebuilds into a temporary directory and compares.
type KernelStep = fn(check: bool) -> Result<(), String>;

/// The build steps of `cargo xtask kernels`, one per backend's artifacts; the WGSL (the only
/// step on stable Rust, and the cheapest) first.
const KERNEL_STEPS: &[(&str, KernelStep)] = &[
    ("wgsl", wgsl::kernels),
    ("cuda", cuda::kernels),
    ("hip", hip::kernels),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("kernels") => {
            let check = args.iter().any(|a| a == "--check");
            let steps = if args.iter().any(|a| a == "--wgsl-only") {
                &KERNEL_STEPS[..1]
            } else {
                KERNEL_STEPS
            };
            steps.iter().try_for_each(|(name, step)| {
                step(check).map_err(|e| format!("kernels: {name}: {e}"))
            })
        }
        Some("device-bundle") => bundle::device_bundle().map_err(|e| format!("device-bundle: {e}")),
        _ => Err(
            "usage: cargo xtask kernels [--check] [--wgsl-only] | cargo xtask device-bundle".into(),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {e}");
            ExitCode::FAILURE
        }
    }
}
