//! kiln-math's source files, parsed once, with the precise libm functions of `libm_wgsl.rs`
//! and the exact arithmetic of `exact_wgsl.rs` alongside them (kernel code calls the first as
//! `libm::*`; `Block::div_exact` becomes `div_ieee`).

use std::path::{Path, PathBuf};

/// The path the precise libm functions are known by in errors.
pub const LIBM_PATH: &str = "shaders-wgsl/src/libm_wgsl.rs";

/// The path of the exact integer arithmetic the libm functions (and `Block::div_exact`) use.
pub const EXACT_PATH: &str = "shaders-wgsl/src/exact_wgsl.rs";

/// Whether `path` is one of the prelude's own files (written for the device's `/`, not kernel
/// code).
pub fn is_prelude(path: &str) -> bool {
    path == LIBM_PATH || path == EXACT_PATH
}

/// Where kiln-math's sources live in this workspace.
pub const KILN_MATH_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared-kernel-math/src");

/// One parsed source file of kiln-math.
pub struct SourceFile {
    /// Path shown in errors.
    pub path: String,
    pub ast: syn::File,
}

/// kiln-math's sources, parsed.
pub struct Sources {
    pub files: Vec<SourceFile>,
}

impl Sources {
    /// Parses every `.rs` file under `src` (kiln-math's `src/`).
    pub fn load(src: &Path) -> Result<Sources, String> {
        let mut paths = Vec::new();
        collect_rs(src, &mut paths)?;
        paths.sort();
        let mut named = Vec::new();
        for p in paths {
            let rel = p
                .strip_prefix(src)
                .unwrap_or(&p)
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            named.push((format!("shared-kernel-math/src/{rel}"), text));
        }
        Sources::from_texts(named.iter().map(|(a, b)| (a.as_str(), b.as_str())))
    }

    /// Parses sources given as `(path, text)` (tests feed the translator this way).
    pub fn from_texts<'a>(
        texts: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Sources, String> {
        let mut files = Vec::new();
        let libm = (LIBM_PATH, include_str!("libm_wgsl.rs"));
        let exact = (EXACT_PATH, include_str!("exact_wgsl.rs"));
        for (path, text) in texts.into_iter().chain([libm, exact]) {
            let ast = syn::parse_file(text).map_err(|e| {
                let at = e.span().start();
                format!("{path}:{}:{}: {e}", at.line, at.column + 1)
            })?;
            files.push(SourceFile {
                path: path.to_string(),
                ast,
            });
        }
        Ok(Sources { files })
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in rd {
        let p = entry.map_err(|e| e.to_string())?.path();
        if p.is_dir() {
            collect_rs(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    Ok(())
}
