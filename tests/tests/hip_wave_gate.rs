//! The compile-time wave gate of the amdgcn port: a kernel that declares itself wave32-only
//! (`shaders-hip`'s `wave32-probe` feature, outside the real kernel list) must fail to build for
//! gfx942, whose wavefront build.rs derives as 64, with the gate's message and nothing else.
//!
//! Needs nightly rustc with rust-src (`rustup toolchain install nightly --component rust-src`).
//! A `cargo check` suffices: the gates are consts, evaluated before code generation.

use std::path::Path;
use std::process::Command;

#[test]
fn a_wave32_only_kernel_does_not_build_for_gfx942() {
    // `cargo test` sets the manifest dir at run time too; prefer it (shared target dirs).
    let manifest =
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or(env!("CARGO_MANIFEST_DIR").into());
    let shaders = Path::new(&manifest).join("../shaders-hip");
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hip-wave-gate");
    let mut cmd = Command::new("cargo");
    cmd.current_dir(&shaders)
        .args([
            "+nightly",
            "-Z",
            "build-std=core",
            "check",
            "--release",
            "--locked",
        ])
        .args([
            "--target",
            "amdgcn-amd-amdhsa",
            "--features",
            "wave32-probe",
        ])
        .env("CARGO_TARGET_DIR", &target_dir)
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-cpu=gfx942")
        .env("CARGO_TERM_COLOR", "never");
    for var in [
        "RUSTFLAGS",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd.output().expect("run cargo +nightly");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("toolchain 'nightly'") && !stderr.contains("rust-src"),
        "this test needs nightly with rust-src (rustup toolchain install nightly --component rust-src):\n{stderr}"
    );
    assert!(
        !out.status.success(),
        "the wave32-only probe built for gfx942:\n{stderr}"
    );
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
    eprintln!("{}", errors.join("\n"));
    let gate =
        "error[E0080]: evaluation panicked: kiln-shaders-hip: kernel `wave32_probe` declares \
                (KernelDef::WAVES) a wave width that excludes this target's wave64";
    assert!(
        errors.first().is_some_and(|e| e.starts_with(gate)),
        "the build failed, but not at the wave gate:\n{stderr}"
    );
    // One gate error, then cargo's summary: the real kernels passed their gates for gfx942.
    assert_eq!(errors.len(), 2, "other errors besides the gate:\n{stderr}");
    assert!(errors[1].starts_with("error: could not compile `kiln-shaders-hip`"));
}
