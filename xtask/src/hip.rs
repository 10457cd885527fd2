//! The amdgcn step: builds `shaders-hip` once per target cpu with nightly rustc and writes the
//! code objects the engine embeds to `engine/artifacts/hip/<arch>/kiln.hsaco` (or, with `--check`,
//! fails when a committed one differs from a fresh build).
//!
//! Code object version: V5 (`--amdhsa-code-object-version=5`), not LLVM 22's default V6. Every
//! ROCm runtime since 5.x loads V5, so it loads wherever gfx942 or gfx1151 runs at all; V6 only
//! adds generic targets, which kiln does not use, and older runtimes reject it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Target cpu and the wavefront width build.rs derives for it.
pub const ARCHES: &[(&str, u32)] = &[("gfx1151", 32), ("gfx942", 64)];

pub const CODE_OBJECT_VERSION: u32 = 5;

pub fn kernels(check: bool) -> Result<(), String> {
    let root = workspace_root();
    let mut stale = Vec::new();
    for &(arch, wave) in ARCHES {
        let built = build(&root, arch)?;
        let dest = root
            .join("engine/artifacts/hip")
            .join(arch)
            .join("kiln.hsaco");
        let fresh = std::fs::read(&built).map_err(|e| format!("{}: {e}", built.display()))?;
        if check {
            match std::fs::read(&dest) {
                Ok(old) if old == fresh => {}
                _ => stale.push(dest.display().to_string()),
            }
        } else {
            std::fs::create_dir_all(dest.parent().expect("has a parent"))
                .map_err(|e| format!("{}: {e}", dest.display()))?;
            std::fs::write(&dest, &fresh).map_err(|e| format!("{}: {e}", dest.display()))?;
        }
        println!(
            "hip: {arch} (wave{wave}, code object V{CODE_OBJECT_VERSION}) {} bytes -> {}",
            fresh.len(),
            dest.strip_prefix(&root).unwrap_or(&dest).display()
        );
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "stale code objects (run `cargo xtask kernels`): {}",
            stale.join(", ")
        ))
    }
}

fn workspace_root() -> PathBuf {
    // `cargo run` sets it at run time; the compile-time path can be stale when checkouts share
    // a target dir.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

/// The nightly build of `shaders-hip` for one target cpu; returns the code object's path.
fn build(root: &Path, arch: &str) -> Result<PathBuf, String> {
    let target_root = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    // One target dir per cpu: the rustflags differ, so core is rebuilt per cpu anyway.
    let target_dir = target_root.join(format!("hip-{arch}"));
    let flags = [
        format!("-Ctarget-cpu={arch}"),
        format!("-Cllvm-args=--amdhsa-code-object-version={CODE_OBJECT_VERSION}"),
    ]
    .join("\x1f");
    let status = nightly_cargo(&root.join("shaders-hip"))
        .args(["build", "--release", "--locked"])
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("CARGO_ENCODED_RUSTFLAGS", flags)
        .status()
        .map_err(|e| format!("cannot run cargo +nightly: {e}"))?;
    if !status.success() {
        return Err(format!(
            "the {arch} build failed ({status}); it needs `rustup toolchain install nightly \
             --component rust-src`"
        ));
    }
    Ok(target_dir.join("amdgcn-amd-amdhsa/release/kiln_shaders_hip.elf"))
}

/// `cargo +nightly -Z build-std=core --target amdgcn-amd-amdhsa` in `dir`, with the variables
/// the outer stable cargo set removed so they cannot leak into the nightly build.
pub fn nightly_cargo(dir: &Path) -> Command {
    let mut c = Command::new("cargo");
    c.current_dir(dir).arg("+nightly").args([
        "-Z",
        "build-std=core",
        "--config",
        "build.target=\"amdgcn-amd-amdhsa\"",
    ]);
    for var in [
        "RUSTFLAGS",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "CARGO_BUILD_TARGET",
        "CARGO_ENCODED_RUSTFLAGS",
    ] {
        c.env_remove(var);
    }
    c
}
