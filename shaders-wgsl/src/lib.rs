//! kiln's WGSL port: a translator from `kiln-math`'s Rust (the subset in README.md) to one WGSL
//! module per kernel × dtype × device variant.
//!
//! The translator reads kiln-math's own sources: the kernel list (`list.rs`), each kernel body
//! and every function it calls, the `Block` trait's provided collectives (`block.rs`) and the
//! element conversions (`element.rs`). Only the `Block` primitives, the views and `libm` map to
//! hand-written WGSL (`prelude.rs`), so collectives and kernels added later translate for free.
//!
//! Each module is specialised at pipeline creation by three override constants:
//! `KILN_BLOCK` (threads per workgroup), `KILN_WAVE` (the wave the kernel sees: the subgroup
//! size with subgroups, any power of two without) and `KILN_SHARED_WORDS` (kernel shared
//! memory). Bindings (group 0): the kernel's buffers in list order, then `kiln_meta` (params
//! words, then `(element offset, length)` per buffer, then the grid), then `kiln_fault` (the
//! first out-of-bounds access: flag, block x/y/z, buffer, index).

pub mod libm_wgsl;
mod list;
mod prelude;
mod translate;

use std::fmt;
use std::path::{Path, PathBuf};

pub use list::{BufferSpec, KernelSpec, ParamSpec};

/// The path the precise libm functions are known by in errors.
pub const LIBM_PATH: &str = "shaders-wgsl/src/libm_wgsl.rs";

/// Where kiln-math's sources live in this workspace.
pub const KILN_MATH_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared-kernel-math/src");

/// How a module reaches the device's hardware.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variant {
    /// Wave shuffles through subgroup operations (the SUBGROUP feature); otherwise through
    /// workgroup memory, at any `KILN_WAVE`.
    pub subgroups: bool,
    /// f16 buffers as `array<f16>` (`enable f16;`, the SHADER_F16 feature); otherwise packed
    /// in u32 words with atomic stores.
    pub f16_storage: bool,
}

impl Variant {
    pub const ALL: [Variant; 4] = [
        Variant {
            subgroups: true,
            f16_storage: true,
        },
        Variant {
            subgroups: true,
            f16_storage: false,
        },
        Variant {
            subgroups: false,
            f16_storage: true,
        },
        Variant {
            subgroups: false,
            f16_storage: false,
        },
    ];

    /// A short tag used in symbols: `sg`/`wg`, then `h16`/`p16`.
    pub fn tag(self) -> &'static str {
        match (self.subgroups, self.f16_storage) {
            (true, true) => "sg_h16",
            (true, false) => "sg_p16",
            (false, true) => "wg_h16",
            (false, false) => "wg_p16",
        }
    }
}

/// Binding index of `kiln_meta` for a kernel with `buffers` buffers (`kiln_fault` is next).
pub fn meta_binding(buffers: usize) -> u32 {
    buffers as u32
}

/// Word index in `kiln_meta` of buffer `k`'s `(offset, len)` pair.
pub fn meta_buffer_word(param_words: usize, k: usize) -> usize {
    param_words + 2 * k
}

/// Word index in `kiln_meta` of the grid (x, y, z).
pub fn meta_grid_word(param_words: usize, buffers: usize) -> usize {
    param_words + 2 * buffers
}

/// Words of `kiln_fault`.
pub const FAULT_WORDS: usize = 6;

/// Largest workgroup the modules support (sizes the no-subgroup exchange array).
pub const MAX_BLOCK: u32 = 1024;

/// A construct the translator does not accept, or a translation failure, located in kiln-math.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// Path relative to the workspace (`shared-kernel-math/src/...`).
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// What was found (`closure`, `macro call \`panic!\``, `method \`sqrt\` on f32`, …).
    pub construct: String,
    /// Why it is refused, or what the translator expected instead.
    pub detail: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {} is outside kiln's WGSL subset: {} (see shaders-wgsl/README.md)",
            self.file, self.line, self.column, self.construct, self.detail
        )
    }
}

impl std::error::Error for Error {}

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
        for (path, text) in texts.into_iter().chain([libm]) {
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

    /// The kernels of the list (`for_each_kernel!` in `list.rs`).
    pub fn kernels(&self) -> Result<Vec<KernelSpec>, Error> {
        list::kernels(self)
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

/// One generated module.
#[derive(Clone, Debug)]
pub struct Module {
    pub kernel: String,
    /// `f32`, `f16` or `bf16`.
    pub dtype: String,
    pub variant: Variant,
    pub wgsl: String,
    /// Which WGSL features the module needs (for naga's capabilities and wgpu's features).
    pub uses_f16: bool,
    pub uses_subgroups: bool,
    /// Whether the body calls `Block::shared` (the engine sizes `KILN_SHARED_WORDS`).
    pub uses_shared: bool,
}

impl Module {
    /// `<kernel>_<dtype>_<variant>.wgsl`: the name the engine embeds it under, the dump example
    /// writes it as, and `KILN_WGSL_DIR` replaces it by.
    pub fn file_name(&self) -> String {
        format!("{}_{}_{}.wgsl", self.kernel, self.dtype, self.variant.tag())
    }
}

/// Translates one kernel × dtype × variant.
pub fn translate(
    src: &Sources,
    kernel: &KernelSpec,
    dtype: &str,
    variant: Variant,
) -> Result<Module, Error> {
    translate::module(src, kernel, dtype, variant)
}

/// Every module of every kernel in the list: each dtype, each variant (f32 and bf16 modules do
/// not depend on `f16_storage`, so only its `false` variant is generated for them).
pub fn generate_all(src: &Sources) -> Result<Vec<Module>, Error> {
    let mut out = Vec::new();
    for k in src.kernels()? {
        for dt in &k.dtypes {
            for v in Variant::ALL {
                if dt != "f16" && v.f16_storage && !k.has_fixed_f16() {
                    continue;
                }
                out.push(translate(src, &k, dt, v)?);
            }
        }
    }
    Ok(out)
}

/// The variant of `dtype` modules a device with these features runs.
pub fn variant_for(dtype: &str, has_fixed_f16: bool, subgroups: bool, f16: bool) -> Variant {
    Variant {
        subgroups,
        f16_storage: f16 && (dtype == "f16" || has_fixed_f16),
    }
}
