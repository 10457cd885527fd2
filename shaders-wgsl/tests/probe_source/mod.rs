//! A translator input for tests: kiln-math's real sources without its kernels, and one test
//! kernel, `probe(x, out)` with params `n` and `scale`, in `kernels/probe.rs`.

use kiln_math::{Access, BufferDesc, DType, Elem, ParamField, ParamKind};
use kiln_shaders_wgsl::{KernelSpec, Sources};

/// The probe's list entry; its params are `ProbeParams` as [`with_probe`] declares it.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub const PROBE: KernelSpec = KernelSpec {
    name: "probe",
    dtypes: &[DType::F32, DType::F16],
    buffers: &[
        BufferDesc {
            name: "x",
            access: Access::Read,
            elem: Elem::Kernel,
        },
        BufferDesc {
            name: "out",
            access: Access::Write,
            elem: Elem::Kernel,
        },
    ],
    params: &[
        ParamField {
            name: "n",
            kind: ParamKind::U32,
            user: false,
            doc: "",
        },
        ParamField {
            name: "scale",
            kind: ParamKind::F32,
            user: true,
            doc: "",
        },
    ],
};

/// kiln-math's sources the probe needs, embedded: a test binary shipped to a GPU machine
/// (`cargo xtask device-bundle`) has no source tree beside it.
const KILN_MATH: [(&str, &str); 5] = [
    (
        "block.rs",
        include_str!("../../../shared-kernel-math/src/block.rs"),
    ),
    (
        "element.rs",
        include_str!("../../../shared-kernel-math/src/element.rs"),
    ),
    (
        "view.rs",
        include_str!("../../../shared-kernel-math/src/view.rs"),
    ),
    (
        "kernel.rs",
        include_str!("../../../shared-kernel-math/src/kernel.rs"),
    ),
    (
        "lib.rs",
        include_str!("../../../shared-kernel-math/src/lib.rs"),
    ),
];

/// kiln-math's real sources without its kernels, and one test kernel in `kernels/probe.rs`.
pub fn with_probe(body: &str) -> Sources {
    with_probe_and(body, "", &[])
}

/// [`with_probe`], with `items` after the kernel in `kernels/probe.rs` and `others` as extra
/// `(path, text)` files.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn with_probe_and(body: &str, items: &str, others: &[(&str, &str)]) -> Sources {
    let mut texts: Vec<(String, String)> = KILN_MATH
        .iter()
        .map(|(f, text)| (format!("shared-kernel-math/src/{f}"), text.to_string()))
        .collect();
    let kernel = format!(
        "use crate::{{Block, Dst, Element, Src}};\n\
         crate::params! {{ pub struct ProbeParams {{ pub n: u32, pub scale: f32 = 1.0, }} }}\n\
         pub fn probe<T: Element, B: Block>(b: &B, p: &ProbeParams, x: Src<T>, out: Dst<T>) {{\n\
         {body}\n\
         }}\n{items}\n"
    );
    texts.push(("shared-kernel-math/src/kernels/probe.rs".into(), kernel));
    for (path, text) in others {
        texts.push(((*path).into(), (*text).into()));
    }
    Sources::from_texts(texts.iter().map(|(a, b)| (a.as_str(), b.as_str()))).unwrap()
}
