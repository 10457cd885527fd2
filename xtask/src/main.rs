//! `cargo xtask <command>`: project automation that is plain Rust, not shell.
//!
//! - `kernels [--check] [--wgsl-only]`: builds every device artifact the engine embeds (or
//!   checks that the committed ones are fresh, naming each stale kernel and file): the WGSL
//!   modules first (stable Rust, seconds), then one PTX module and one code object per kernel
//!   (nightly), with the per-entry register and local-memory table; `--wgsl-only` stops after
//!   the WGSL.
//! - `new-kernel <name>`: the skeleton of a new kernel in every file a kernel needs.
//! - `device-bundle`: release `kiln` and the test binaries in `./bundle/` with a `run.sh`, for a
//!   GPU machine that has no Rust.

mod artifacts;
mod bundle;
mod cuda;
mod hip;
mod new_kernel;
mod paths;
mod resources;
mod wgsl;

use std::path::Path;
use std::process::ExitCode;

/// `cargo xtask kernels`: the WGSL, then the PTX and the code objects and their resource table.
fn kernels(check: bool, wgsl_only: bool) -> Result<(), String> {
    wgsl::kernels(check).map_err(|e| format!("wgsl: {e}"))?;
    if wgsl_only {
        return Ok(());
    }
    let (mut files, mut rows) = cuda::build().map_err(|e| format!("cuda: {e}"))?;
    let (hip_files, hip_rows) = hip::build().map_err(|e| format!("hip: {e}"))?;
    files.extend(hip_files);
    rows.extend(hip_rows);
    let table = resources::table(&rows);
    print!("{table}");
    files.push(artifacts::Generated {
        path: resources::TABLE_FILE.into(),
        bytes: table.into_bytes(),
        kernel: None,
    });
    let root = paths::repo_root();
    artifacts::write_or_check(&root, &[cuda::OUT_DIR, hip::OUT_DIR], &files, check)?;
    let undeclared = resources::undeclared_local_memory(&rows);
    if !undeclared.is_empty() {
        return Err(format!(
            "local memory no kernel declared (keep the state in registers, or declare it with \
             its reason in shared-kernel-math/src/local_memory.rs):\n  {}",
            undeclared.join("\n  ")
        ));
    }
    println!(
        "kernels: {} files {}",
        files.len(),
        if check {
            "match the committed artifacts"
        } else {
            "written"
        }
    );
    Ok(())
}

/// The CUDA step alone, its PTX written under `dir` (`<cpu>/<kernel>.ptx`) instead of the
/// artifacts: a kernel variant for an A/B run through `KILN_CUDA_PTX`, the committed modules
/// untouched.
fn ptx_to(dir: &Path) -> Result<(), String> {
    let (files, _) = cuda::build().map_err(|e| format!("cuda: {e}"))?;
    let mut written = 0;
    for f in files.iter().filter(|f| f.kernel.is_some()) {
        let rel = f
            .path
            .strip_prefix(cuda::OUT_DIR)
            .map_err(|e| e.to_string())?;
        let to = dir.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&to, &f.bytes).map_err(|e| format!("{}: {e}", to.display()))?;
        written += 1;
    }
    println!(
        "kernels: {written} PTX modules written under {}",
        dir.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let result = match args.first().map(String::as_str) {
        Some("kernels") => match args.iter().position(|a| a == "--ptx-to") {
            Some(at) => match args.get(at + 1) {
                Some(dir) => ptx_to(Path::new(dir)).map_err(|e| format!("kernels: {e}")),
                None => Err("usage: cargo xtask kernels --ptx-to <dir>".into()),
            },
            None => {
                kernels(flag("--check"), flag("--wgsl-only")).map_err(|e| format!("kernels: {e}"))
            }
        },
        Some("new-kernel") => match args.get(1) {
            Some(name) => new_kernel::new_kernel(name).map_err(|e| format!("new-kernel: {e}")),
            None => Err("usage: cargo xtask new-kernel <name>".into()),
        },
        Some("device-bundle") => bundle::device_bundle().map_err(|e| format!("device-bundle: {e}")),
        _ => Err(
            "usage: cargo xtask kernels [--check] [--wgsl-only | --ptx-to <dir>] | cargo xtask \
                  new-kernel <name> | cargo xtask device-bundle"
                .into(),
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
