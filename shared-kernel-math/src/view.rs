//! Buffer views: `Src<T>` (read), `Dst<T>` (write), `Rw<T>` (read and write).
//!
//! A view is a pointer and a length in elements. Every access is bounds-checked; an
//! out-of-bounds index panics, which traps the kernel on GPU targets and becomes
//! `DeviceError::KernelFault` on the host backends. `*_unchecked` accessors skip the check and
//! are `unsafe`: their callers name the host-validated precondition in a comment.
//!
//! On host targets a view may carry a [`Probe`], which the SIMT emulator uses to see every
//! write (and every read of a writable buffer) and report races.

use crate::element::{DType, Scalar};
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
use core::ptr::NonNull;

/// How a kernel uses a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub const fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "read-write",
        }
    }
    pub const fn writes(self) -> bool {
        !matches!(self, Access::Read)
    }
}

/// Observer of view accesses (host targets only): the SIMT emulator's race detector.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub trait Probe: Sync {
    /// `byte` is the byte offset of the accessed element from the start of buffer `buf`.
    fn read(&self, buf: u32, byte: usize);
    fn write(&self, buf: u32, byte: usize);
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
#[derive(Clone, Copy)]
struct Tap {
    probe: NonNull<dyn Probe>,
    buf: u32,
    base: usize,
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
impl Tap {
    #[inline(always)]
    fn read<T>(t: &Option<Tap>, i: usize) {
        if let Some(t) = t {
            // SAFETY: whoever attached the probe keeps it alive for the launch (View::with_probe).
            unsafe { t.probe.as_ref() }.read(t.buf, t.base + i * core::mem::size_of::<T>());
        }
    }
    #[inline(always)]
    fn write<T>(t: &Option<Tap>, i: usize) {
        if let Some(t) = t {
            // SAFETY: as above.
            unsafe { t.probe.as_ref() }.write(t.buf, t.base + i * core::mem::size_of::<T>());
        }
    }
}

#[cold]
#[inline(never)]
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
fn out_of_bounds(index: usize, len: usize) -> ! {
    panic!("kiln: view index {index} out of bounds (len {len})")
}

#[cold]
#[inline(never)]
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
fn out_of_bounds(_index: usize, _len: usize) -> ! {
    panic!("kiln: view index out of bounds")
}

/// What the generated entries and the host launchers need to build a view from raw parts.
pub trait View: Copy {
    type Elem: Scalar;
    const ACCESS: Access;
    const DTYPE: DType = <Self::Elem as Scalar>::DTYPE;
    /// # Safety
    /// `ptr` is valid for `len` elements of `Self::Elem` for as long as the view is used, with
    /// the access `Self::ACCESS` allows, and aligned for `Self::Elem`.
    unsafe fn from_raw_parts(ptr: *mut u8, len: usize) -> Self;
    /// Attach a probe that sees accesses through this view; `base` is the view's byte offset
    /// inside buffer `buf`.
    ///
    /// # Safety
    /// The probe must outlive every use of the returned view.
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    unsafe fn with_probe(self, probe: NonNull<dyn Probe>, buf: u32, base: usize) -> Self;
}

macro_rules! view {
    ($(#[$doc:meta])* $name:ident, $access:expr, $ptr:ty) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<T> {
            ptr: $ptr,
            len: usize,
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            #[allow(dead_code)] // read-only views are not probed
            tap: Option<Tap>,
        }

        // SAFETY: a view is a device pointer handed to one launch; the launch contract (and the
        // sim's race detector) governs concurrent use, exactly as for a CUDA pointer argument.
        unsafe impl<T: Scalar> Send for $name<T> {}
        unsafe impl<T: Scalar> Sync for $name<T> {}

        impl<T: Scalar> View for $name<T> {
            type Elem = T;
            const ACCESS: Access = $access;
            #[inline(always)]
            unsafe fn from_raw_parts(ptr: *mut u8, len: usize) -> Self {
                $name {
                    ptr: ptr as $ptr,
                    len,
                    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
                    tap: None,
                }
            }
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            unsafe fn with_probe(self, probe: NonNull<dyn Probe>, buf: u32, base: usize) -> Self {
                $name { tap: Some(Tap { probe, buf, base }), ..self }
            }
        }

        impl<T: Scalar> $name<T> {
            /// Number of elements.
            #[inline(always)]
            pub fn len(&self) -> usize {
                self.len
            }
            #[inline(always)]
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }
        }
    };
}

view!(
    /// A read-only view.
    Src, Access::Read, *const T
);
view!(
    /// A write-only view.
    Dst, Access::Write, *mut T
);
view!(
    /// A read-write view (also what `Block::shared` hands out).
    Rw, Access::ReadWrite, *mut T
);

impl<T: Scalar> Src<T> {
    #[inline(always)]
    pub fn get(&self, i: usize) -> T {
        if i >= self.len {
            out_of_bounds(i, self.len)
        }
        // SAFETY: checked above; the pointer is valid for `len` elements (View::from_raw_parts).
        unsafe { *self.ptr.add(i) }
    }
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        unsafe { *self.ptr.add(i) }
    }
}

impl<T: Scalar> Dst<T> {
    #[inline(always)]
    pub fn set(&self, i: usize, v: T) {
        if i >= self.len {
            out_of_bounds(i, self.len)
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Tap::write::<T>(&self.tap, i);
        // SAFETY: checked above.
        unsafe { *self.ptr.add(i) = v }
    }
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn set_unchecked(&self, i: usize, v: T) {
        unsafe { *self.ptr.add(i) = v }
    }
}

impl<T: Scalar> Rw<T> {
    #[inline(always)]
    pub fn get(&self, i: usize) -> T {
        if i >= self.len {
            out_of_bounds(i, self.len)
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Tap::read::<T>(&self.tap, i);
        // SAFETY: checked above.
        unsafe { *self.ptr.add(i) }
    }
    #[inline(always)]
    pub fn set(&self, i: usize, v: T) {
        if i >= self.len {
            out_of_bounds(i, self.len)
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Tap::write::<T>(&self.tap, i);
        // SAFETY: checked above.
        unsafe { *self.ptr.add(i) = v }
    }
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        unsafe { *self.ptr.add(i) }
    }
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    pub unsafe fn set_unchecked(&self, i: usize, v: T) {
        unsafe { *self.ptr.add(i) = v }
    }
}
