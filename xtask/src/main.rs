//! `cargo xtask <command>`: project automation that is plain Rust, not shell.
//!
//! - `kernels [--check]`: builds every device artifact the engine embeds (or checks that the
//!   committed ones are fresh).
//! - `device-bundle`: release `kiln` and the test binaries in `./bundle/` with a `run.sh`, for a
//!   GPU machine that has no Rust.

mod bundle;
mod cuda;
mod hip;
mod paths;

use std::process::ExitCode;

/// One device crate's build: `check` rebuilds into a temporary directory and compares.
type KernelStep = fn(check: bool) -> Result<(), String>;

/// The build steps of `cargo xtask kernels`, one per device crate.
const KERNEL_STEPS: &[(&str, KernelStep)] = &[("cuda", cuda::kernels), ("hip", hip::kernels)];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("kernels") => {
            let check = args.iter().any(|a| a == "--check");
            KERNEL_STEPS.iter().try_for_each(|(name, step)| {
                step(check).map_err(|e| format!("kernels: {name}: {e}"))
            })
        }
        Some("device-bundle") => bundle::device_bundle().map_err(|e| format!("device-bundle: {e}")),
        _ => Err("usage: cargo xtask kernels [--check] | cargo xtask device-bundle".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {e}");
            ExitCode::FAILURE
        }
    }
}
