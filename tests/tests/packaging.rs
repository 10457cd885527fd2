//! What an engine builds and what is published: each backend's Cargo feature brings its
//! dependencies and nothing else (`cargo tree` on the lockfile, offline), and the publishable
//! crates' packages hold the artifacts the engine embeds and the license texts.
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

/// The files `cargo package` puts in a crate's package.
fn package_list(krate: &str) -> Vec<String> {
    cargo(&[
        "package",
        "--list",
        "-p",
        krate,
        "--offline",
        "--locked",
        "--allow-dirty",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// Every file under `dir`, relative to `base`, with `/` separators.
fn files_under(base: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(base, &path, out);
        } else {
            let rel = path.strip_prefix(base).unwrap();
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

const PUBLISHED: &[(&str, &str)] = &[("kiln-math", "shared-kernel-math"), ("kiln", "engine")];

#[test]
fn the_engine_package_holds_every_artifact_it_embeds() {
    let engine = workspace_root().join("engine");
    let mut artifacts = Vec::new();
    files_under(&engine, &engine.join("artifacts"), &mut artifacts);
    for backend in ["cuda", "hip", "wgsl"] {
        let prefix = format!("artifacts/{backend}/");
        assert!(
            artifacts.iter().any(|a| a.starts_with(&prefix)),
            "no {prefix} in {artifacts:?}"
        );
    }
    let list = package_list("kiln");
    let missing: Vec<&String> = artifacts.iter().filter(|a| !list.contains(a)).collect();
    assert!(missing.is_empty(), "not packaged: {missing:?}");
    // Nothing is generated while building from the package.
    assert!(!list.contains(&"build.rs".to_string()), "{list:?}");
}

#[test]
fn each_published_package_has_its_readme_and_both_licenses() {
    for (krate, _) in PUBLISHED {
        let list = package_list(krate);
        for f in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
            assert!(list.iter().any(|l| l == f), "{krate}: no {f} in {list:?}");
        }
    }
}

#[test]
fn the_license_copies_are_the_roots() {
    let root = workspace_root();
    for (krate, dir) in PUBLISHED {
        for f in ["LICENSE-MIT", "LICENSE-APACHE"] {
            let top = std::fs::read(root.join(f)).unwrap();
            let copy = std::fs::read(root.join(dir).join(f)).unwrap();
            assert!(top == copy, "{krate}: {dir}/{f} differs from {f}");
        }
    }
}
