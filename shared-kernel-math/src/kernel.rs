//! Kernel descriptors: params structs, shape binding and validation, launch geometry.

use core::fmt;

/// The kind of a params field. Every field is 4 bytes, so a params struct has no padding and
/// its bytes are the launch ABI's by-value argument on every backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `f32`.
    F32,
    /// `u32`.
    U32,
    /// `i32`.
    I32,
}

/// One field of a params struct.
#[derive(Clone, Copy, Debug)]
pub struct ParamField {
    /// The field's name in the struct (and for `kiln run --param`).
    pub name: &'static str,
    /// Its type.
    pub kind: ParamKind,
    /// `false`: derived from buffer shapes by `KernelDef::bind`; `true`: set by the caller.
    pub user: bool,
    /// The field's doc comment.
    pub doc: &'static str,
}

/// A field value, widened.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParamValue {
    /// An `f32` field's value.
    F32(f32),
    /// A `u32` field's value.
    U32(u32),
    /// An `i32` field's value.
    I32(i32),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::F32(v) => write!(f, "{v}"),
            ParamValue::U32(v) => write!(f, "{v}"),
            ParamValue::I32(v) => write!(f, "{v}"),
        }
    }
}

/// Why a params field could not be set by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamError {
    /// The struct has no field of that name.
    UnknownField,
    /// The field is derived from the buffers' shapes.
    ShapeDerived,
    /// The value does not parse as the field's kind.
    BadValue(ParamKind),
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamError::UnknownField => f.write_str("no such parameter"),
            ParamError::ShapeDerived => f.write_str("derived from the tensors' shapes"),
            ParamError::BadValue(k) => write!(f, "not a valid {k:?} value"),
        }
    }
}

/// A `#[repr(C)]` params struct shared by host and device (declare it with
/// [`params!`](crate::params)).
pub trait Params: Copy + Default + fmt::Debug + Send + Sync + 'static {
    /// Every field, in declaration (= word) order.
    const FIELDS: &'static [ParamField];
    /// The struct as 32-bit words, in field order (the by-value launch argument).
    fn words(&self) -> &[u32];
    /// The struct from its words; panics unless `words` holds exactly one word per field.
    fn from_words(words: &[u32]) -> Self;
    /// The field `name`'s value; `None` for no such field.
    fn get(&self, name: &str) -> Option<ParamValue>;
    /// Parses `value` into the caller-set field `name`.
    fn set(&mut self, name: &str, value: &str) -> Result<(), ParamError>;
}

/// Declares a params struct: fields with `= default` are set by callers, the rest are bound
/// from buffer shapes by the kernel's `bind`. Field types are `f32`, `u32` or `i32`.
#[macro_export]
macro_rules! params {
    (
        $(#[$m:meta])*
        pub struct $name:ident {
            $( $(#[doc = $doc:literal])* pub $f:ident : $t:ident $(= $def:expr)? ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name { $( $(#[doc = $doc])* pub $f: $t, )* }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $f: $crate::params!(@default $t $(, $def)?), )* }
            }
        }

        impl $crate::Params for $name {
            const FIELDS: &'static [$crate::ParamField] = &[$(
                $crate::ParamField {
                    name: stringify!($f),
                    kind: $crate::params!(@kind $t),
                    user: $crate::params!(@user $($def)?),
                    doc: concat!($($doc),*),
                },
            )*];
            fn words(&self) -> &[u32] {
                const _: () = assert!(core::mem::size_of::<$name>() % 4 == 0);
                // SAFETY: repr(C) struct of 4-byte plain fields, no padding.
                unsafe {
                    core::slice::from_raw_parts(
                        self as *const Self as *const u32,
                        core::mem::size_of::<Self>() / 4,
                    )
                }
            }
            // Inlined into the generated entries: a call would give an AMD kernel a stack.
            #[inline(always)]
            fn from_words(words: &[u32]) -> Self {
                let mut p = Self::default();
                let n = core::mem::size_of::<Self>() / 4;
                assert!(words.len() == n, "params word count");
                // SAFETY: as above; every bit pattern is a valid value of each field.
                unsafe {
                    core::ptr::copy_nonoverlapping(words.as_ptr(), &mut p as *mut Self as *mut u32, n)
                };
                p
            }
            fn get(&self, name: &str) -> Option<$crate::ParamValue> {
                $( if name == stringify!($f) {
                    return Some($crate::params!(@value $t, self.$f));
                } )*
                None
            }
            fn set(&mut self, name: &str, value: &str) -> Result<(), $crate::ParamError> {
                $( if name == stringify!($f) {
                    if !$crate::params!(@user $($def)?) {
                        return Err($crate::ParamError::ShapeDerived);
                    }
                    self.$f = value.trim().parse::<$t>().map_err(|_| {
                        $crate::ParamError::BadValue($crate::params!(@kind $t))
                    })?;
                    return Ok(());
                } )*
                Err($crate::ParamError::UnknownField)
            }
        }
    };
    (@default $t:ident) => { 0 as $t };
    (@default $t:ident, $def:expr) => { $def };
    (@user) => { false };
    (@user $def:expr) => { true };
    (@kind f32) => { $crate::ParamKind::F32 };
    (@kind u32) => { $crate::ParamKind::U32 };
    (@kind i32) => { $crate::ParamKind::I32 };
    (@value f32, $v:expr) => { $crate::ParamValue::F32($v) };
    (@value u32, $v:expr) => { $crate::ParamValue::U32($v) };
    (@value i32, $v:expr) => { $crate::ParamValue::I32($v) };
}

/// Launch geometry for bound params.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Blocks per axis.
    pub grid: [u32; 3],
    /// Preferred threads per block on GPUs (a multiple of 32 the engine may clamp); the kernel is
    /// correct for any block size that is a multiple of the wave.
    pub block: u32,
}

/// A kernel's launch bound: the most threads any launch of it has, and the fewest blocks of
/// that size one GPU multiprocessor should hold at once. GPU compilers budget registers for it
/// (the CUDA port's `.maxntid` and `.minnctapersm`), so a kernel whose block is fixed keeps the
/// occupancy it was tuned for; the GPU launch path never exceeds `max_threads` (it clamps to
/// the entry's limit). The body stays correct for any block that is a multiple of the wave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchBound {
    /// Most threads per block.
    pub max_threads: u32,
    /// Fewest resident blocks per multiprocessor the register budget must allow.
    pub min_blocks: u32,
}

/// Which wave sizes a kernel body is correct for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waves {
    /// Every wave size.
    Any,
    /// Only this width (a kernel that hard-wires lane arithmetic; declare why in the list).
    Only(u32),
}

impl Waves {
    /// Whether the body is correct at `wave` lanes.
    pub const fn accepts(self, wave: u32) -> bool {
        match self {
            Waves::Any => true,
            Waves::Only(w) => w == wave,
        }
    }
}

/// A shape or parameter that a kernel refuses, found before any launch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShapeError {
    /// Wrong number of buffers (the list and the caller disagree).
    BufferCount {
        /// Buffers given.
        got: usize,
        /// Buffers the kernel takes.
        want: usize,
    },
    /// `what` must equal `want`.
    Mismatch {
        /// The quantity, in words.
        what: &'static str,
        /// Its value.
        got: u64,
        /// The value it must have.
        want: u64,
    },
    /// `what` must be non-zero.
    Empty {
        /// The quantity, in words.
        what: &'static str,
    },
    /// `what` must lie in `[lo, hi]`.
    Range {
        /// The quantity, in words.
        what: &'static str,
        /// Its value.
        got: f64,
        /// The smallest value allowed.
        lo: f64,
        /// The largest value allowed.
        hi: f64,
    },
    /// Anything else, said in words.
    Invalid(&'static str),
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ShapeError::BufferCount { got, want } => {
                write!(f, "{got} buffers given, the kernel takes {want}")
            }
            ShapeError::Mismatch { what, got, want } => {
                write!(f, "{what} is {got}, must be {want}")
            }
            ShapeError::Empty { what } => write!(f, "{what} is 0, must be positive"),
            ShapeError::Range { what, got, lo, hi } => {
                write!(f, "{what} is {got}, must be in [{lo}, {hi}]")
            }
            ShapeError::Invalid(msg) => f.write_str(msg),
        }
    }
}

/// Shape helpers for `bind` implementations.
pub mod shape {
    use super::ShapeError;

    /// Elements of a tensor of shape `s` (1 for a scalar shape `[]`).
    pub fn numel(s: &[usize]) -> usize {
        s.iter().product()
    }

    /// `got == want`, else [`ShapeError::Mismatch`] naming `what`.
    pub fn eq(what: &'static str, got: usize, want: usize) -> Result<(), ShapeError> {
        if got == want {
            Ok(())
        } else {
            Err(ShapeError::Mismatch {
                what,
                got: got as u64,
                want: want as u64,
            })
        }
    }

    /// `v > 0`, else [`ShapeError::Empty`] naming `what`.
    pub fn nonzero(what: &'static str, v: usize) -> Result<(), ShapeError> {
        if v == 0 {
            Err(ShapeError::Empty { what })
        } else {
            Ok(())
        }
    }

    /// Converts a size to the u32 a params struct holds.
    pub fn to_u32(what: &'static str, v: usize) -> Result<u32, ShapeError> {
        u32::try_from(v).map_err(|_| ShapeError::Range {
            what,
            got: v as f64,
            lo: 0.0,
            hi: u32::MAX as f64,
        })
    }
}

/// A kernel: its params, how shapes bind to them, and how it launches.
pub trait KernelDef {
    /// Its params struct (declared with [`params!`](crate::params)).
    type Params: crate::Params;
    /// Its name in the kernel list (`KernelId::name`).
    const NAME: &'static str;
    /// Wave sizes the body is correct for.
    const WAVES: Waves = Waves::Any;
    /// Its launch bound, if its block is fixed (see [`LaunchBound`]).
    const LAUNCH_BOUND: Option<LaunchBound> = None;
    /// Fill the shape-derived params from the buffers' shapes (in list order) and validate the
    /// shapes together with the caller's params. Runs on the host before every launch.
    fn bind(p: &mut Self::Params, shapes: &[&[usize]]) -> Result<(), ShapeError>;
    /// Grid and preferred block size for bound params.
    fn launch(p: &Self::Params) -> Launch;
    /// The kernel's own launch-sized shared memory in bytes (after the collectives' scratch).
    fn shared_bytes(_p: &Self::Params, _block: u32, _wave: u32) -> usize {
        0
    }
}
