//! `cargo xtask <command>`: project automation that is plain Rust, not shell.
//!
//! - `kernels [--check]`: builds every device artifact the engine embeds (or checks that the
//!   committed ones are fresh).
//! - `device-bundle`: release `kiln` and the test binaries in `./bundle/` with a `run.sh`, for a
//!   GPU machine that has no Rust.

mod bundle;
mod cuda;
mod hip;

use std::path::{Path, PathBuf};
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

/// The repository root (the parent of this crate).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the repository")
        .to_path_buf()
}

/// A directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(prefix: &str) -> Result<TempDir, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(TempDir(p))
    }
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
