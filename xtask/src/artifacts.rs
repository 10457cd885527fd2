//! Generated files under `engine/artifacts/`: written by `cargo xtask kernels`, or compared with
//! the committed ones by `--check`, which names the kernel (and file) each stale one belongs to.

use std::path::{Path, PathBuf};

/// One generated file.
pub struct Generated {
    /// Relative to the repository root.
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    /// The kernel whose entries it holds; `None` for a table over every kernel.
    pub kernel: Option<&'static str>,
}

/// Writes `files` (removing any other file under `dirs`), or with `check` lists every file that
/// differs, is missing or is no longer generated, and fails when any does.
pub fn write_or_check(
    root: &Path,
    dirs: &[&str],
    files: &[Generated],
    check: bool,
) -> Result<(), String> {
    let err = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let mut stale = Vec::new();
    for f in files {
        let path = root.join(&f.path);
        let owner = f.kernel.map_or(String::new(), |k| format!("kernel {k}: "));
        if check {
            match std::fs::read(&path) {
                Ok(old) if old == f.bytes => {}
                Ok(_) => stale.push(format!("{owner}{} differs", f.path.display())),
                Err(_) => stale.push(format!("{owner}{} missing", f.path.display())),
            }
        } else {
            let dir = path.parent().expect("generated files live in a directory");
            std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
            std::fs::write(&path, &f.bytes).map_err(|e| err(&path, e))?;
        }
    }
    for dir in dirs {
        for path in files_under(&root.join(dir))? {
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            if files.iter().any(|f| f.path == rel) {
                continue;
            }
            if check {
                stale.push(format!("{} is not generated any more", rel.display()));
            } else {
                std::fs::remove_file(&path).map_err(|e| err(&path, e))?;
            }
        }
    }
    if stale.is_empty() {
        Ok(())
    } else {
        stale.sort();
        Err(format!(
            "stale artifacts (run `cargo xtask kernels` and commit them):\n  {}",
            stale.join("\n  ")
        ))
    }
}

/// Every file below `dir` (none when it does not exist), sorted.
fn files_under(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.is_dir() {
            out.extend(files_under(&path)?);
        } else {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// The entry symbols of `kernel`: `<kernel>_<dtype>` for each of its dtypes.
pub fn entry_symbols(kernel: kiln_math::KernelId) -> Vec<&'static str> {
    kernel
        .dtypes()
        .iter()
        .filter_map(|&d| kernel.symbol(d))
        .collect()
}
