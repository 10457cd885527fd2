//! The kernels to translate, as kiln-math itself lists them (`KernelId`): each one's name,
//! dtypes, buffers and params fields.

use kiln_math::{Access, BufferDesc, DType, Elem, KernelId, ParamField};

/// One kernel the translator instantiates.
#[derive(Clone, Copy, Debug)]
pub struct KernelSpec {
    /// The module in `kernels/` and its body function.
    pub name: &'static str,
    /// The element types `T` it is instantiated for.
    pub dtypes: &'static [DType],
    /// The body's views in launch order: buffer `k` is binding `k`.
    pub buffers: &'static [BufferDesc],
    /// The params struct's fields in order: the first words of `kiln_meta`.
    pub params: &'static [ParamField],
}

impl KernelSpec {
    pub const fn of(id: KernelId) -> KernelSpec {
        KernelSpec {
            name: id.name(),
            dtypes: id.dtypes(),
            buffers: id.buffers(),
            params: id.params(),
        }
    }

    /// Whether a buffer has the fixed element type F16 (its modules then vary with f16 storage).
    pub fn has_fixed_f16(&self) -> bool {
        self.buffers
            .iter()
            .any(|b| b.elem == Elem::Fixed(DType::F16))
    }
}

impl From<KernelId> for KernelSpec {
    fn from(id: KernelId) -> KernelSpec {
        KernelSpec::of(id)
    }
}

/// Every kernel of kiln-math's list, in list order.
pub fn kernels() -> Vec<KernelSpec> {
    KernelId::ALL.iter().map(|&id| KernelSpec::of(id)).collect()
}

/// The view type the list writes for `access`.
pub(crate) fn view_type_name(access: Access) -> &'static str {
    match access {
        Access::Read => "Src",
        Access::Write => "Dst",
        Access::ReadWrite => "Rw",
    }
}

/// The element type as the list writes it: `T`, or the fixed type's Rust name.
pub(crate) fn elem_type_name(elem: Elem) -> &'static str {
    match elem {
        Elem::Kernel => "T",
        Elem::Fixed(DType::F16) => "F16",
        Elem::Fixed(DType::Bf16) => "Bf16",
        Elem::Fixed(d) => d.name(),
    }
}
