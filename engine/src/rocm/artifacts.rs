//! The code objects kiln embeds, the entry ABI they are launched with (the kernarg layout) and
//! the arch names they are matched by.

use kiln_math::KernelId;

/// One arch kiln embeds code objects for.
#[derive(Debug)]
pub struct Artifact {
    /// The target cpu it was built for (`gfx1151`, …).
    pub arch: &'static str,
    /// The wavefront width build.rs derived for it.
    pub wave: u32,
    /// The amdhsa code object version (see xtask/src/hip.rs for why V5).
    pub code_object_version: u32,
}

impl Artifact {
    /// The code object of `kernel` for this arch, if one is embedded.
    pub fn code_object(&self, kernel: KernelId) -> Option<&'static CodeObject> {
        CODE_OBJECTS
            .iter()
            .find(|c| c.arch == self.arch && c.kernel == kernel.name())
    }

    /// Every code object embedded for this arch.
    pub fn code_objects(&self) -> impl Iterator<Item = &'static CodeObject> + '_ {
        CODE_OBJECTS.iter().filter(move |c| c.arch == self.arch)
    }
}

/// One embedded code object: the entries of one kernel (every dtype) for one arch.
#[derive(Debug)]
pub struct CodeObject {
    /// The kernel whose entries it holds.
    pub kernel: &'static str,
    /// The arch it was built for.
    pub arch: &'static str,
    /// The ELF bytes, 8-byte aligned.
    pub bytes: &'static [u8],
}

/// Whether a code object defines the entry `symbol` and its kernel descriptor `<symbol>.kd`:
/// its string table holds both names NUL-delimited.
pub(crate) fn has_entry(c: &CodeObject, symbol: &str) -> bool {
    let has = |name: &str| {
        let name = [&[0u8][..], name.as_bytes(), &[0u8][..]].concat();
        c.bytes.windows(name.len()).any(|w| w == name)
    };
    has(symbol) && has(&format!("{symbol}.kd"))
}

/// Code object bytes at ELF alignment, so they can be parsed in place.
#[repr(C, align(8))]
struct Aligned<B: ?Sized>(B);

/// Every embedded code object (the table xtask writes beside them), kernel by kernel.
pub static CODE_OBJECTS: &[CodeObject] = include!("../../artifacts/hip/modules.rs");

/// Every arch kiln embeds code objects for.
pub static ARTIFACTS: &[Artifact] = &[
    Artifact {
        arch: "gfx1151",
        wave: 32,
        code_object_version: 5,
    },
    Artifact {
        arch: "gfx942",
        wave: 64,
        code_object_version: 5,
    },
];

/// Where each launch argument lives in the kernarg segment: the params struct's bytes at 0,
/// then per buffer its pointer and its element count (`u64`), each 8-byte aligned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernargLayout {
    /// Bytes of the params struct, at offset 0.
    pub params_bytes: usize,
    /// Per buffer in list order: (pointer offset, length offset).
    pub buffers: Vec<(usize, usize)>,
    /// Total explicit kernarg bytes.
    pub size: usize,
}

/// The layout the engine launches `kernel` with.
pub fn kernarg_layout(kernel: KernelId) -> KernargLayout {
    // Every params field is 4 bytes (kiln_math::ParamKind).
    let params_bytes = kernel.params().len() * 4;
    let mut at = params_bytes.next_multiple_of(8);
    let buffers = kernel
        .buffers()
        .iter()
        .map(|_| {
            let b = (at, at + 8);
            at += 16;
            b
        })
        .collect();
    KernargLayout {
        params_bytes,
        buffers,
        size: at,
    }
}

/// The kernarg bytes of one launch: `params` words, then `(device pointer, element count)` per
/// buffer.
pub(crate) fn kernarg_bytes(kernel: KernelId, params: &[u32], bufs: &[(u64, u64)]) -> Vec<u8> {
    let l = kernarg_layout(kernel);
    let mut out = vec![0u8; l.size];
    for (k, w) in params.iter().enumerate() {
        out[4 * k..4 * k + 4].copy_from_slice(&w.to_le_bytes());
    }
    for (&(p, n), &(po, no)) in bufs.iter().zip(&l.buffers) {
        out[po..po + 8].copy_from_slice(&p.to_le_bytes());
        out[no..no + 8].copy_from_slice(&n.to_le_bytes());
    }
    out
}

/// The arch part of a `gcnArchName` such as `gfx90a:sramecc+:xnack-`.
pub(crate) fn base_arch(gcn_arch_name: &str) -> &str {
    gcn_arch_name
        .split(':')
        .next()
        .unwrap_or(gcn_arch_name)
        .trim()
}
