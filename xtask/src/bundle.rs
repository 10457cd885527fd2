//! `cargo xtask device-bundle`: the release `kiln` binary and the release test binaries in
//! `./bundle/`, debug info stripped, with a `run.sh` that runs them on a GPU machine that has
//! the driver but no Rust (`cd bundle && ./run.sh OUT_DIR`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the device run does; its outputs go to the directory given as `$1`.
const RUN_SH: &str = r#"#!/bin/sh
# Runs kiln on this machine's GPU: devices, the test binaries (parity on every backend, cuda
# required), then the cuda benchmark. Usage: ./run.sh OUT_DIR
out="${1:-out}"
mkdir -p "$out"
cd "$(dirname "$0")"
(nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv) > "$out/nvidia-smi.txt" 2>&1
./kiln devices 2>&1 | tee "$out/devices.txt"
status=0
for t in tests/*; do
    name=$(basename "$t")
    # These run cargo (shaders-hip with +nightly; cargo tree and package on the checkout):
    # nothing to run where Rust is absent.
    case "$name" in hip_wave_gate*|packaging*) echo "test $name: skipped (needs a Rust toolchain)"; continue;; esac
    echo "=== $name" >> "$out/tests.txt"
    KILN_REQUIRE_BACKENDS=cuda "./$t" --nocapture --test-threads 1 > "$out/test.log" 2>&1
    rc=$?
    cat "$out/test.log" >> "$out/tests.txt"
    echo "test $name: rc=$rc ($(grep -h '^test result' "$out/test.log" | tr '\n' ' '))"
    [ $rc -eq 0 ] || status=1
done
rm -f "$out/test.log"
./kiln bench --backend cuda --csv "$out/bench-cuda.csv" 2>&1 | tee "$out/bench-cuda.txt"
./kiln bench --backend cuda --json > "$out/bench-cuda.json" 2>&1
./kiln bench --backend cuda --paged > "$out/bench-paged-cuda.csv" 2>&1
./kiln-embed-example cuda --replays 100 2>&1 | tee "$out/embed-cuda.txt"
exit $status
"#;

pub fn device_bundle() -> Result<(), String> {
    let root = crate::paths::repo_root();
    let bundle = root.join("bundle");
    let _ = fs::remove_dir_all(&bundle);
    fs::create_dir_all(bundle.join("tests")).map_err(|e| e.to_string())?;

    let kiln = cargo_executables(&root, &["build", "--release", "-p", "kiln-cli"])?
        .into_iter()
        .find(|(name, _)| name == "kiln")
        .ok_or("cargo built no `kiln` binary")?;
    copy_stripped(&kiln.1, &bundle.join("kiln"))?;
    // The embedding example: an engine's decode step on its own stream, captured into a graph.
    let example = cargo_executables(&root, &["build", "--release", "-p", "kiln-embed-example"])?
        .into_iter()
        .find(|(name, _)| name == "kiln_embed_example")
        .ok_or("cargo built no `kiln-embed-example` binary")?;
    copy_stripped(&example.1, &bundle.join("kiln-embed-example"))?;

    let tests = cargo_executables(
        &root,
        &[
            "test",
            "--release",
            "--no-run",
            "-p",
            "kiln-tests",
            "-p",
            "kiln",
            "-p",
            "kiln-embed-example",
        ],
    )?;
    for (name, path) in &tests {
        copy_stripped(path, &bundle.join("tests").join(name))?;
    }
    let run_sh = bundle.join("run.sh");
    fs::write(&run_sh, RUN_SH).map_err(|e| e.to_string())?;
    set_executable(&run_sh)?;
    println!(
        "bundle: kiln and {} test binaries in {} (run: cd bundle && ./run.sh OUT_DIR)",
        tests.len(),
        bundle.display()
    );
    Ok(())
}

/// Runs cargo with JSON messages; returns (target name, executable) of every binary it built.
fn cargo_executables(root: &Path, args: &[&str]) -> Result<Vec<(String, PathBuf)>, String> {
    let out = Command::new(env!("CARGO"))
        .current_dir(root)
        .args(args)
        .args(["--message-format", "json-render-diagnostics"])
        .output()
        .map_err(|e| format!("cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo {} failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut exes = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let (Some(exe), Some(name)) =
            (msg["executable"].as_str(), msg["target"]["name"].as_str())
        {
            // A crate's unit tests are named after the crate, its test files after the file.
            exes.push((name.replace('-', "_"), PathBuf::from(exe)));
        }
    }
    exes.sort();
    exes.dedup_by(|a, b| a.0 == b.0);
    Ok(exes)
}

/// Copies `from` to `to` without debug info (`strip`), or as is where `strip` is missing.
fn copy_stripped(from: &Path, to: &Path) -> Result<(), String> {
    let stripped = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(to)
        .arg(from)
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        fs::copy(from, to).map_err(|e| format!("{}: {e}", from.display()))?;
    }
    Ok(())
}

fn set_executable(p: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(p, fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())?;
    }
    let _ = p;
    Ok(())
}
