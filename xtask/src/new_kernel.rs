//! `cargo xtask new-kernel <name>`: the skeleton of a kernel in every file a kernel needs — its
//! module in kiln-math (params, `KernelDef`, body), its list entry, its reference chain and its
//! parity cases — compiling, translating to WGSL and building for every GPU as they are, and
//! failing parity until the reference is written from the spec (it answers NaN).

use std::path::Path;

/// The files and the list entry `name` gets, or why it cannot.
pub fn new_kernel(name: &str) -> Result<(), String> {
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        return Err(format!("`{name}` is not a snake_case kernel name"));
    }
    if kiln_math::KernelId::from_name(name).is_some() {
        return Err(format!("the kernel list already has `{name}`"));
    }
    let id = camel(name);
    let root = crate::paths::repo_root();
    let files = [
        (
            format!("shared-kernel-math/src/kernels/{name}.rs"),
            kernel_file(name, &id),
        ),
        (
            format!("engine/src/reference/{name}.rs"),
            reference_file(name, &id),
        ),
        (
            format!("engine/src/reference/cases/{name}.rs"),
            cases_file(name),
        ),
    ];
    for (path, _) in &files {
        if root.join(path).exists() {
            return Err(format!("{path} exists already"));
        }
    }
    add_list_entry(&root, name, &id)?;
    for (path, text) in &files {
        std::fs::write(root.join(path), text).map_err(|e| format!("{path}: {e}"))?;
        println!("new-kernel: wrote {path}");
    }
    println!(
        "new-kernel: `{name}` is in the list; write its body, reference and cases, then run \
         `cargo xtask kernels` and `cargo run -p kiln-cli -- parity --kernel {name}`"
    );
    Ok(())
}

/// `fused_silu_mul` → `FusedSiluMul`.
fn camel(name: &str) -> String {
    name.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// Appends the entry as the last of `for_each_kernel!`'s list.
fn add_list_entry(root: &Path, name: &str, id: &str) -> Result<(), String> {
    let path = root.join("shared-kernel-math/src/kernels/mod.rs");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // The list is the `$m! { … }` block: its closing brace is the first `        }` line after it.
    let start = text
        .find("        $m! {\n")
        .ok_or("kernels/mod.rs has no `$m! {` list")?;
    let close = text[start..]
        .find("\n        }\n")
        .map(|i| start + i + 1)
        .ok_or("kernels/mod.rs: the list is not closed")?;
    let entry = format!("            {name}: {id} [f32, f16, bf16] (x: Src<T>, out: Dst<T>);\n");
    let updated = format!("{}{entry}{}", &text[..close], &text[close..]);
    std::fs::write(&path, updated).map_err(|e| format!("{}: {e}", path.display()))
}

fn kernel_file(name: &str, id: &str) -> String {
    format!(
        r#"//! `{name}`: TODO, the kernel's spec in a sentence (what it computes, in which precision).
//! The skeleton `cargo xtask new-kernel` wrote copies `x` to `out` elementwise, through f32.

use crate::kernel::shape;
use crate::{{Block, Dst, Element, KernelDef, Launch, ShapeError, Src}};

crate::params! {{
    /// Params of `{name}`.
    pub struct {id}Params {{
        /// Elements of `x` (and of `out`).
        pub n: u32,
    }}
}}

/// Threads per block.
const BLOCK: u32 = 256;

/// Descriptor of `{name}`.
pub struct {id};

impl KernelDef for {id} {{
    type Params = {id}Params;
    const NAME: &'static str = "{name}";

    /// Buffers: `x` (any shape) and `out` (the shape of `x`).
    fn bind(p: &mut {id}Params, shapes: &[&[usize]]) -> Result<(), ShapeError> {{
        let [x, out] = shapes else {{
            return Err(ShapeError::BufferCount {{
                got: shapes.len(),
                want: 2,
            }});
        }};
        if out != x {{
            return Err(ShapeError::Invalid("out must have the shape of x"));
        }}
        let n = shape::numel(x);
        shape::nonzero("elements of x", n)?;
        p.n = shape::to_u32("elements of x", n)?;
        Ok(())
    }}

    fn launch(p: &{id}Params) -> Launch {{
        Launch {{
            grid: [p.n.div_ceil(BLOCK), 1, 1],
            block: BLOCK,
        }}
    }}
}}

/// The body: block `k` covers elements `[k·BLOCK, (k+1)·BLOCK)`, thread `t` every `size`-th.
pub fn {name}<T: Element, B: Block>(b: &B, p: &{id}Params, x: Src<T>, out: Dst<T>) {{
    let end = ((b.block_x() + 1) * BLOCK).min(p.n) as usize;
    let mut i = (b.block_x() * BLOCK + b.thread()) as usize;
    while i < end {{
        // Through f32, as bodies compute: a bit copy is the same code for f16 and bf16, which
        // the amdgcn build's function merging would fold into one entry.
        out.set(i, T::from_f32(x.get(i).to_f32()));
        i += b.size() as usize;
    }}
}}
"#
    )
}

fn reference_file(name: &str, id: &str) -> String {
    format!(
        r#"//! `{name}` as its unfused chain, written from the spec (not from the body).

use kiln_math::kernels::{name}::{id}Params;
use kiln_math::Element;

/// The unfused chain of [`{name}`](kiln_math::kernels::{name}::{name}): its params and buffers,
/// in list order, as host slices. NaN until the chain is written, so parity fails until then.
pub fn {name}<T: Element>(_p: &{id}Params, _x: &[T], out: &mut [T]) {{
    out.fill(T::from_f32(f32::NAN));
}}
"#
    )
}

fn cases_file(name: &str) -> String {
    format!(
        r#"//! The parity cases of `{name}` and the shapes `kiln bench` times it at.

use crate::case::{{Case, Check, Fill}};
use kiln_math::DType;

/// The budgets of the dtype (TODO: the spec's bounds for this kernel).
fn check(dtype: DType) -> Check {{
    let (nrms, nmax) = match dtype {{
        DType::F32 => (1e-6, 1e-5),
        DType::F16 => (1e-3, 1e-2),
        _ => (8e-3, 6e-2),
    }};
    Check::Tolerance {{ nrms, nmax }}
}}

fn case(dtype: DType, label: &str, shape: Vec<usize>) -> Case {{
    Case {{
        label: label.into(),
        shapes: vec![shape.clone(), shape],
        params: vec![],
        fill: vec![Fill::normal(0.0, 1.0), Fill::Output],
        checks: vec![Check::None, check(dtype)],
        on_sim: true,
    }}
}}

/// The parity cases of `{name}` at `dtype`: a whole block, a ragged tail.
pub fn cases(dtype: DType) -> Vec<Case> {{
    vec![
        case(dtype, "2x256", vec![2, 256]),
        case(dtype, "1x77", vec![1, 77]),
    ]
}}

/// The shapes `kiln bench` times (its parity cases until model shapes are known).
pub fn bench_cases(dtype: DType) -> Vec<Case> {{
    cases(dtype)
}}
"#
    )
}
