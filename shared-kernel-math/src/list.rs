//! The vocabulary of the kernel list (`kernels/mod.rs`): buffer descriptions, element kinds, the
//! dtype names an entry may use, and the wave widths.

/// Calls `$m!(args… ; waves…)` with every wave width a kernel may meet: the widths the sim
/// emulates and the only ones a device build or a device is checked against.
#[macro_export]
macro_rules! for_each_wave {
    ($m:ident $(, $($args:tt)*)?) => {
        $m!($($($args)*)? ; 1, 2, 4, 8, 16, 32, 64)
    };
}

macro_rules! wave_list {
    (; $($w:literal),*) => {
        &[$($w),*]
    };
}

/// Every wave width, narrowest first (see [`for_each_wave!`]).
pub const WAVES: &[u32] = for_each_wave!(wave_list);

/// The Rust type of a list dtype name.
#[macro_export]
macro_rules! elem {
    (f32) => {
        f32
    };
    (f16) => {
        $crate::F16
    };
    (bf16) => {
        $crate::Bf16
    };
}

/// The element of a list buffer: `T` (the instantiation's dtype) or a fixed scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// `T`: the dtype the kernel is instantiated for.
    Kernel,
    /// Always this dtype.
    Fixed(crate::DType),
}

impl Elem {
    /// The concrete dtype when the kernel runs as `kernel_dtype`.
    pub const fn resolve(self, kernel_dtype: crate::DType) -> crate::DType {
        match self {
            Elem::Kernel => kernel_dtype,
            Elem::Fixed(d) => d,
        }
    }
}

/// One buffer of a kernel, as the list declares it.
#[derive(Clone, Copy, Debug)]
pub struct BufferDesc {
    /// The buffer's name in the list (and the body's view argument).
    pub name: &'static str,
    /// Read, write or both, from the view type (`Src`, `Dst`, `Rw`).
    pub access: crate::Access,
    /// Its element type.
    pub elem: Elem,
}

#[doc(hidden)]
#[macro_export]
macro_rules! elem_kind {
    (T) => {
        $crate::Elem::Kernel
    };
    ($t:ident) => {
        $crate::Elem::Fixed(<$t as $crate::Scalar>::DTYPE)
    };
}
