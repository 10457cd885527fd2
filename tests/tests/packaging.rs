//! What an engine builds: each backend's Cargo feature brings its dependencies and nothing else
//! (`cargo tree` on the lockfile, offline).
//!
//! Runs the `cargo` that runs the tests on this checkout; `xtask device-bundle`'s run.sh skips
//! it on machines without Rust.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

fn cargo(args: &[&str]) -> String {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let out = Command::new(&cargo)
        .current_dir(workspace_root())
        .args(args)
        // The outer `cargo test`'s toolchain override must not pick another one for this cargo.
        .env_remove("RUSTUP_TOOLCHAIN")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", Path::new(&cargo).display()));
    assert!(
        out.status.success(),
        "cargo {} failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("cargo prints UTF-8")
}

/// The crate names `kiln` compiles for its target with these features (`None`: the defaults).
fn normal_dependencies(features: Option<&str>) -> Vec<String> {
    let mut args = vec!["tree", "-p", "kiln", "-e", "normal", "--prefix", "none"];
    args.extend(["--format", "{lib}", "--offline", "--locked"]);
    if let Some(f) = features {
        args.extend(["--no-default-features", "--features", f]);
    }
    let mut names: Vec<String> = cargo(&args)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Checks that a build with `features` compiles each of `present` and none of `absent`.
fn assert_deps(features: Option<&str>, present: &[&str], absent: &[&str]) {
    let deps = normal_dependencies(features);
    let has = |name: &&str| deps.iter().any(|d| d == name);
    let missing: Vec<&str> = present.iter().copied().filter(|p| !has(p)).collect();
    let pulled: Vec<&str> = absent.iter().copied().filter(has).collect();
    assert!(
        missing.is_empty() && pulled.is_empty(),
        "kiln with features {features:?}: missing {missing:?}, compiled but should not be \
         {pulled:?}; all: {deps:?}"
    );
}

#[test]
fn the_defaults_build_every_backend() {
    assert_deps(
        None,
        &["kiln_math", "wgpu", "naga", "cudarc", "libloading"],
        &[],
    );
}

#[test]
fn cuda_alone_compiles_neither_wgpu_nor_naga() {
    assert_deps(Some("cuda"), &["kiln_math", "cudarc"], &["wgpu", "naga"]);
}

#[test]
fn rocm_alone_compiles_only_its_loader() {
    assert_deps(
        Some("rocm"),
        &["kiln_math", "libloading"],
        &["wgpu", "naga", "cudarc"],
    );
}

#[test]
fn wgpu_alone_compiles_no_cuda_binding() {
    assert_deps(Some("wgpu"), &["kiln_math", "wgpu", "naga"], &["cudarc"]);
}

#[test]
fn no_backend_feature_compiles_no_gpu_dependency() {
    // `--features ""`: the host backends (cpu, sim) only.
    assert_deps(
        Some(""),
        &["kiln_math"],
        &["wgpu", "naga", "cudarc", "libloading"],
    );
}

