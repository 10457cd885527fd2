//! The CUDA step of `cargo xtask kernels`: builds `shaders-cuda` for nvptx64 with nightly and
//! links its bitcode into one PTX file per target cpu, written to `engine/artifacts/cuda/`.
//!
//! rustc's nvptx linker (`llvm-bitcode-linker`) cannot be installed here, so the crate is built
//! as an rlib and the link is done below with the nightly `llvm-tools`: extract the bitcode of
//! every rlib cargo reports → `llvm-link` → `opt` internalize + globaldce keeping the entries →
//! `opt` O3 → `llc`. Any unresolved `.extern .func` or missing entry fails the step.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Target cpus built, and the file each PTX goes to (the engine embeds these names).
pub const TARGETS: &[(&str, &str)] = &[("sm_80", "kiln_sm80.ptx"), ("sm_90", "kiln_sm90.ptx")];

/// LLVM's full-unroll budget for the nvptx build (default 300 at O3). Kernel bodies index small
/// fixed-size arrays inside loops with constant bounds (per-lane registers: the paged decode's
/// per-head accumulators, chunked loads); a loop left rolled turns its arrays into `.local`
/// memory, so the budget is raised until those loops unroll (4000: xIELU's eight-element chunk
/// loop, whose body holds a whole `expm1f`; at 1200 it stayed rolled and went through `.local`).
const UNROLL_THRESHOLD: u32 = 4000;

/// Where the PTX is committed, relative to the repository root.
pub const OUT_DIR: &str = "engine/artifacts/cuda";

/// The entry symbols the PTX must export: `<kernel>_<dtype>` for every kernel × dtype.
pub fn entry_symbols() -> Vec<String> {
    let mut out = Vec::new();
    for &k in kiln_math::KernelId::ALL {
        for d in k.dtypes() {
            out.push(
                k.symbol(*d)
                    .expect("a listed dtype has a symbol")
                    .to_string(),
            );
        }
    }
    out
}

/// Builds (or, with `check`, rebuilds into a temporary directory and compares) the PTX.
pub fn kernels(check: bool) -> Result<(), String> {
    let root = crate::paths::repo_root();
    let started = std::time::Instant::now();
    let tools = llvm_tools()?;
    let scratch = crate::paths::TempDir::new("kiln-cuda")?;
    let out_dir = if check {
        scratch.path().join("out")
    } else {
        root.join(OUT_DIR)
    };
    fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let symbols = entry_symbols();
    for (cpu, file) in TARGETS {
        let rlibs = build_rlibs(&root, cpu)?;
        let work = scratch.path().join(cpu);
        fs::create_dir_all(&work).map_err(|e| e.to_string())?;
        let ptx = link(&tools, &rlibs, &symbols, cpu, &work)?;
        fs::write(out_dir.join(file), &ptx).map_err(|e| format!("{file}: {e}"))?;
    }
    if check {
        for (_, file) in TARGETS {
            let fresh = fs::read(out_dir.join(file)).map_err(|e| e.to_string())?;
            let committed_path = root.join(OUT_DIR).join(file);
            let committed = fs::read(&committed_path).unwrap_or_default();
            if fresh != committed {
                return Err(format!(
                    "{} is stale or missing: run `cargo xtask kernels` and commit it",
                    committed_path.display()
                ));
            }
        }
    }
    println!(
        "cuda: {} entries × {} targets {} in {:.1} s",
        symbols.len(),
        TARGETS.len(),
        if check {
            "match the committed PTX"
        } else {
            "written"
        },
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The nightly toolchain's LLVM tools directory (`rustup component add llvm-tools`).
fn llvm_tools() -> Result<PathBuf, String> {
    let sysroot = run_capture(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))?;
    let host = run_capture(Command::new("rustc").args(["+nightly", "-vV"]))?;
    let host = host
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .ok_or("rustc -vV printed no host")?;
    let dir = Path::new(sysroot.trim())
        .join("lib/rustlib")
        .join(host)
        .join("bin");
    for t in ["llvm-link", "opt", "llc", "llvm-ar"] {
        if !dir.join(t).exists() {
            return Err(format!(
                "{} missing: rustup component add llvm-tools rust-src --toolchain nightly",
                dir.join(t).display()
            ));
        }
    }
    Ok(dir)
}

/// Builds the crate for `cpu` and returns every rlib cargo produced for it, sorted by file
/// name so the link order (and so the PTX) does not depend on build scheduling.
fn build_rlibs(root: &Path, cpu: &str) -> Result<Vec<PathBuf>, String> {
    // One target dir per cpu keeps both builds cached, beside the host build's.
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let target_dir = base.join(format!("kiln-cuda-{cpu}"));
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root.join("shaders-cuda"))
        .args(["+nightly", "build", "--release", "--locked"])
        .args(["--message-format", "json-render-diagnostics"])
        .arg("--target-dir")
        .arg(&target_dir)
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            // The unroll budget applies at the link-time O3 only: given to rustc too, the crate-level
            // pass unrolls the f16 add-RMSNorm chunk loop partially and the link cannot finish it
            // (128 bytes of local memory per thread again).
            format!("-Ctarget-cpu={cpu}"),
        );
    // The outer `cargo xtask` sets these for the stable host build; they must not leak in.
    for v in [
        "RUSTFLAGS",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTDOC",
        "RUSTUP_TOOLCHAIN",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
    ] {
        cmd.env_remove(v);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cargo +nightly: {e} (is the nightly toolchain installed?)"))?;
    if !out.status.success() {
        return Err(format!(
            "building shaders-cuda for {cpu} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut rlibs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        for f in msg["filenames"].as_array().into_iter().flatten() {
            if let Some(f) = f.as_str().filter(|f| f.ends_with(".rlib")) {
                rlibs.push(PathBuf::from(f));
            }
        }
    }
    rlibs.sort_by_key(|p| p.file_name().map(|n| n.to_owned()));
    if !rlibs
        .iter()
        .any(|p| p.to_string_lossy().contains("kiln_shaders_cuda"))
    {
        return Err("cargo reported no kiln_shaders_cuda rlib".into());
    }
    Ok(rlibs)
}

/// Links the rlibs' bitcode into PTX for `cpu`, keeping only `symbols` visible.
fn link(
    tools: &Path,
    rlibs: &[PathBuf],
    symbols: &[String],
    cpu: &str,
    work: &Path,
) -> Result<Vec<u8>, String> {
    let mut bitcode = Vec::new();
    for (n, rlib) in rlibs.iter().enumerate() {
        let dir = work.join(format!("ar{n}"));
        fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        run(Command::new(tools.join("llvm-ar"))
            .current_dir(&dir)
            .arg("x")
            .arg(rlib))?;
        let mut members: Vec<PathBuf> = fs::read_dir(&dir)
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_bitcode(p))
            .collect();
        members.sort();
        bitcode.extend(members);
    }
    let linked = work.join("linked.bc");
    run(Command::new(tools.join("llvm-link"))
        .args(&bitcode)
        .arg("-o")
        .arg(&linked))?;
    let internal = work.join("internal.bc");
    run(Command::new(tools.join("opt"))
        .arg(&linked)
        .arg("-o")
        .arg(&internal)
        .arg("-passes=internalize,globaldce")
        .arg(format!(
            "-internalize-public-api-list={}",
            symbols.join(",")
        )))?;
    let optimized = work.join("opt.bc");
    run(Command::new(tools.join("opt"))
        .arg(&internal)
        .arg("-o")
        .arg(&optimized)
        // `strip` drops the names of internal functions: their mangled names carry a crate hash
        // that cargo derives from the checkout's path, so a clone elsewhere would differ.
        .arg("-passes=default<O3>,strip")
        .arg(format!("-unroll-threshold={UNROLL_THRESHOLD}")))?;
    let ptx_path = work.join("out.ptx");
    run(Command::new(tools.join("llc"))
        .arg(&optimized)
        .arg("-o")
        .arg(&ptx_path)
        .args(["-march=nvptx64", "-O3"])
        .arg(format!("-mcpu={cpu}")))?;
    let ptx = fs::read_to_string(&ptx_path).map_err(|e| e.to_string())?;
    for s in symbols {
        if !ptx.contains(&format!(".visible .entry {s}(")) {
            return Err(format!("{cpu}: entry {s} missing from the PTX"));
        }
    }
    let unresolved: Vec<&str> = ptx
        .lines()
        .filter(|l| l.trim_start().starts_with(".extern .func"))
        .collect();
    if !unresolved.is_empty() {
        return Err(format!(
            "{cpu}: unresolved functions in the PTX (a kernel calls something that is not in \
             core, libm or kiln-math):\n{}",
            unresolved.join("\n")
        ));
    }
    Ok(ptx.into_bytes())
}

fn is_bitcode(p: &Path) -> bool {
    let mut magic = [0u8; 4];
    fs::File::open(p)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && magic == [0x42, 0x43, 0xc0, 0xde]
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{:?} failed:\n{}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn run_capture(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!(
            "{:?} failed: {}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
