//! Buffer views: `Src<T>` (read), `Dst<T>` (write), `Rw<T>` (read and write).
//!
//! A view is a pointer and a length in elements. Every access is bounds-checked; an
//! out-of-bounds index traps the kernel on GPU targets. On host targets it goes to the view's
//! [`Probe`], which records the fault for the launch (`DeviceError::KernelFault`); the access
//! reads zero or writes nothing and the body runs on, so faults need no unwinding and a build
//! with `panic = "abort"` still gets the error. A host view without a probe panics instead.
//! `*_unchecked` accessors skip the check on GPU targets and are `unsafe`: their callers name
//! the host-validated precondition in a comment. The host ports check them like the others, so
//! a cpu or sim run of the body verifies what the GPU ports trust.
//!
//! The SIMT emulator's probe also sees every write (and every read of a writable buffer) and
//! reports races; the cpu's sees faults only.

use crate::element::{DType, Scalar};
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
use core::ptr::NonNull;

/// How a kernel uses a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read only ([`Src`]).
    Read,
    /// Written only ([`Dst`]): every element the kernel's contract covers is written.
    Write,
    /// Read and written ([`Rw`]).
    ReadWrite,
}

impl Access {
    /// `"read"`, `"write"` or `"read-write"`.
    pub const fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "read-write",
        }
    }
    /// Whether the kernel writes the buffer (`Write` or `ReadWrite`).
    pub const fn writes(self) -> bool {
        !matches!(self, Access::Read)
    }
}

/// Where in the kernel source a view access is (host targets: views track their caller).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub type SourceSite = &'static core::panic::Location<'static>;

/// Observer of view accesses (host targets only): the SIMT emulator's race detector and the
/// host backends' watchdog. `at` is the access's place in the kernel source.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub trait Probe: Sync {
    /// `byte` is the byte offset of the accessed element from the start of buffer `buf`.
    fn read(&self, buf: u32, byte: usize, at: SourceSite);
    /// A write of the element at byte offset `byte` of buffer `buf`.
    fn write(&self, buf: u32, byte: usize, at: SourceSite);
    /// A read through a read-only view: not raced, but a loop of them is still running code
    /// (the watchdog's chance to stop a hung body).
    fn tick(&self, _at: SourceSite) {}
    /// An access of buffer `buf` that the view refused; the access reads zero or writes nothing.
    fn fault(&self, buf: u32, fault: ViewFault, at: SourceSite);
}

/// Why a host view refused an access (handed to [`Probe::fault`]).
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewFault {
    /// An element past the end of the view.
    OutOfBounds {
        /// The element (for a chunk: its end).
        index: usize,
        /// The view's length in elements.
        len: usize,
    },
    /// A chunk access where `chunk_aligned` refuses.
    MisalignedChunk,
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
impl core::fmt::Display for ViewFault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ViewFault::OutOfBounds { index, len } => {
                write!(f, "view index {index} out of bounds (len {len})")
            }
            ViewFault::MisalignedChunk => {
                f.write_str("chunk access at an address chunk_aligned refuses")
            }
        }
    }
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
#[derive(Clone, Copy)]
struct Tap {
    probe: NonNull<dyn Probe>,
    buf: u32,
    base: usize,
    /// Whether the probe sees in-bounds accesses too (the sim), or faults only (the cpu).
    accesses: bool,
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
impl Tap {
    #[inline(always)]
    fn read<T>(t: &Option<Tap>, i: usize, at: SourceSite) {
        if let Some(t) = t.filter(|t| t.accesses) {
            // SAFETY: whoever attached the probe keeps it alive for the launch (View::with_probe).
            unsafe { t.probe.as_ref() }.read(t.buf, t.base + i * core::mem::size_of::<T>(), at);
        }
    }
    #[inline(always)]
    fn write<T>(t: &Option<Tap>, i: usize, at: SourceSite) {
        if let Some(t) = t.filter(|t| t.accesses) {
            // SAFETY: as above.
            unsafe { t.probe.as_ref() }.write(t.buf, t.base + i * core::mem::size_of::<T>(), at);
        }
    }
    #[inline(always)]
    fn tick(t: &Option<Tap>, at: SourceSite) {
        if let Some(t) = t.filter(|t| t.accesses) {
            // SAFETY: as above.
            unsafe { t.probe.as_ref() }.tick(at);
        }
    }
    /// Reports a refused access to the probe (a view without one panics: nothing records it).
    #[cold]
    #[inline(never)]
    fn fault(t: &Option<Tap>, fault: ViewFault, at: SourceSite) {
        match t {
            // SAFETY: as above.
            Some(t) => unsafe { t.probe.as_ref() }.fault(t.buf, fault, at),
            None => panic!(
                "kiln: {fault} at {}:{}:{}",
                at.file(),
                at.line(),
                at.column()
            ),
        }
    }
}

/// What a refused host read returns.
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
#[inline(always)]
fn refused<V: Copy>() -> V {
    // SAFETY: only called for Scalar elements and arrays of them, valid for any bits.
    unsafe { core::mem::zeroed() }
}

// A trap in place, not a call: a call makes an AMD kernel keep a stack, and a named local
// function carries the crate's path-dependent hash into the code objects.
#[inline(always)]
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
fn out_of_bounds(_index: usize, _len: usize) -> ! {
    core::intrinsics::abort()
}

/// Chunks: `N` consecutive elements moved together, `N × size_of::<T>()` a multiple of 16
/// bytes. On GPU targets a chunk is one wide access (one or more 16-byte loads or stores) and
/// its address must be 16-byte aligned (`chunk_aligned`); the host moves it element by element
/// and accepts any address, so the cpu and sim ports run the same chunked code paths.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
struct Align16<A>(A);

#[inline(always)]
const fn chunk_fits<T, const N: usize>() -> bool {
    (N * core::mem::size_of::<T>()).is_multiple_of(16) && N > 0
}

#[inline(always)]
#[allow(unused_variables)]
fn address_fits<T>(p: *const T) -> bool {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    return (p as usize) % 16 == 0;
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    return true;
}

/// The bits of a 1-, 2- or 4-byte scalar, widened (GPU chunks move as 32-bit words so the
/// packing stays in registers).
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
#[inline(always)]
fn scalar_bits<T: Scalar>(v: T) -> u32 {
    // SAFETY: Scalar types are plain data of exactly their size.
    unsafe {
        match core::mem::size_of::<T>() {
            1 => core::mem::transmute_copy::<T, u8>(&v) as u32,
            2 => core::mem::transmute_copy::<T, u16>(&v) as u32,
            _ => core::mem::transmute_copy::<T, u32>(&v),
        }
    }
}

#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
#[inline(always)]
fn scalar_from_bits<T: Scalar>(b: u32) -> T {
    // SAFETY: as above; every bit pattern is a valid Scalar.
    unsafe {
        match core::mem::size_of::<T>() {
            1 => core::mem::transmute_copy::<u8, T>(&(b as u8)),
            2 => core::mem::transmute_copy::<u16, T>(&(b as u16)),
            _ => core::mem::transmute_copy::<u32, T>(&b),
        }
    }
}

/// # Safety
/// `p` is valid for reading `N` elements and `address_fits(p)`, `chunk_fits::<T, N>()`.
#[inline(always)]
unsafe fn load_chunk<T: Scalar, const N: usize>(p: *const T) -> [T; N] {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    {
        let size = core::mem::size_of::<T>();
        let per_word = 4 / size;
        // SAFETY: Scalar types are valid for any bits; every element is overwritten below.
        let mut v: [T; N] = unsafe { core::mem::zeroed() };
        let mut k = 0;
        while k < N * size / 16 {
            // SAFETY: per the contract, piece `k` of 16 bytes is in bounds and aligned.
            let w = unsafe { (*(p as *const Align16<[u32; 4]>).add(k)).0 };
            let mut e = 0;
            while e < 16 / size {
                let bits = w[e / per_word] >> (8 * size * (e % per_word));
                v[k * (16 / size) + e] = scalar_from_bits(bits);
                e += 1;
            }
            k += 1;
        }
        v
    }
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    core::array::from_fn(|j| unsafe { *p.add(j) })
}

/// # Safety
/// `p` is valid for writing `N` elements and `address_fits(p)`, `chunk_fits::<T, N>()`.
#[inline(always)]
unsafe fn store_chunk<T: Scalar, const N: usize>(p: *mut T, v: [T; N]) {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    {
        let size = core::mem::size_of::<T>();
        let per_word = 4 / size;
        let mut k = 0;
        while k < N * size / 16 {
            let mut w = [0u32; 4];
            let mut e = 0;
            while e < 16 / size {
                let bits = scalar_bits(v[k * (16 / size) + e]);
                w[e / per_word] |= bits << (8 * size * (e % per_word));
                e += 1;
            }
            // SAFETY: as in load_chunk.
            unsafe { *(p as *mut Align16<[u32; 4]>).add(k) = Align16(w) };
            k += 1;
        }
    }
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    for (j, e) in v.into_iter().enumerate() {
        unsafe { *p.add(j) = e };
    }
}

// A trap in place, as for `out_of_bounds`.
#[inline(always)]
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
fn misaligned_chunk() -> ! {
    core::intrinsics::abort()
}

#[inline(always)]
#[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
fn check_chunk<T, const N: usize>(ptr: *const T, i: usize, len: usize) {
    if i >= len || len - i < N {
        out_of_bounds(i.saturating_add(N), len)
    }
    // SAFETY: in bounds (checked above); only the address is inspected.
    if !chunk_fits::<T, N>() || !address_fits(unsafe { ptr.add(i) }) {
        misaligned_chunk()
    }
}

/// The host's `check_chunk`: the fault, for the probe, instead of a trap.
#[inline(always)]
#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
fn chunk_fault<T, const N: usize>(ptr: *const T, i: usize, len: usize) -> Option<ViewFault> {
    if i >= len || len - i < N {
        return Some(ViewFault::OutOfBounds {
            index: i.saturating_add(N),
            len,
        });
    }
    // SAFETY: in bounds (checked above); only the address is inspected.
    (!chunk_fits::<T, N>() || !address_fits(unsafe { ptr.add(i) }))
        .then_some(ViewFault::MisalignedChunk)
}

/// What the generated entries and the host launchers need to build a view from raw parts.
pub trait View: Copy {
    /// The element type viewed.
    type Elem: Scalar;
    /// How the view may access its buffer.
    const ACCESS: Access;
    /// The dtype of `Elem`.
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
    /// Attach a probe that sees only the accesses this view refuses (out of bounds, misaligned).
    ///
    /// # Safety
    /// As for [`with_probe`](View::with_probe).
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    unsafe fn with_fault_probe(self, probe: NonNull<dyn Probe>, buf: u32) -> Self;
}

macro_rules! view {
    ($(#[$doc:meta])* $name:ident, $access:expr, $ptr:ty) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<T> {
            ptr: $ptr,
            len: usize,
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
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
                $name { tap: Some(Tap { probe, buf, base, accesses: true }), ..self }
            }
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            unsafe fn with_fault_probe(self, probe: NonNull<dyn Probe>, buf: u32) -> Self {
                $name { tap: Some(Tap { probe, buf, base: 0, accesses: false }), ..self }
            }
        }

        impl<T: Scalar> $name<T> {
            /// Number of elements.
            #[inline(always)]
            pub fn len(&self) -> usize {
                self.len
            }
            /// Whether the view has no elements.
            #[inline(always)]
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }
            /// Whether `get_chunk`/`set_chunk::<N>` may start at element `i`: `N` elements
            /// make a multiple of 16 bytes and, on GPU targets, their address is 16-byte
            /// aligned. Bounds are checked at the access.
            #[inline(always)]
            pub fn chunk_aligned<const N: usize>(&self, i: usize) -> bool {
                chunk_fits::<T, N>() && address_fits(self.ptr.wrapping_add(i))
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
    /// Element `i`; when `i >= len()` it traps on a GPU, and on the host reads zero and reports the fault to the probe.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub fn get(&self, i: usize) -> T {
        if i >= self.len {
            #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
            out_of_bounds(i, self.len);
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            {
                let f = ViewFault::OutOfBounds {
                    index: i,
                    len: self.len,
                };
                Tap::fault(&self.tap, f, core::panic::Location::caller());
                return refused();
            }
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Tap::tick(&self.tap, core::panic::Location::caller());
        // SAFETY: checked above; the pointer is valid for `len` elements (View::from_raw_parts).
        unsafe { *self.ptr.add(i) }
    }
    /// [`get`](Self::get) without its bounds check on GPU targets; the host ports still check
    /// it (and report a refused access to the probe), so the cpu and sim runs of a body verify
    /// the precondition its GPU ports trust.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        // SAFETY: the caller's precondition.
        return unsafe { *self.ptr.add(i) };
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        self.get(i)
    }
}

impl<T: Scalar> Src<T> {
    /// Elements `i..i + N` as one chunk (`chunk_aligned::<N>(i)` must hold, else the kernel traps).
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub fn get_chunk<const N: usize>(&self, i: usize) -> [T; N] {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        check_chunk::<T, N>(self.ptr, i, self.len);
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        if let Some(f) = chunk_fault::<T, N>(self.ptr, i, self.len) {
            Tap::fault(&self.tap, f, core::panic::Location::caller());
            return refused();
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Tap::tick(&self.tap, core::panic::Location::caller());
        // SAFETY: checked above.
        unsafe { load_chunk(self.ptr.add(i)) }
    }
}

impl<T: Scalar> Src<T> {
    /// [`get_chunk`](Src::get_chunk) without its bounds and alignment checks on GPU targets:
    /// one wide load. The host ports still check every access (and report a refused one to the
    /// probe), so the cpu and sim runs of a body verify the precondition its GPU ports trust.
    ///
    /// # Safety
    /// `i + N <= len()` and `chunk_aligned::<N>(i)`.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub unsafe fn get_chunk_unchecked<const N: usize>(&self, i: usize) -> [T; N] {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        // SAFETY: the caller's precondition.
        return unsafe { load_chunk(self.ptr.add(i)) };
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        self.get_chunk::<N>(i)
    }
}

impl<T: Scalar> Dst<T> {
    /// Writes elements `i..i + N` as one chunk (`chunk_aligned::<N>(i)` must hold, else the kernel traps).
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub fn set_chunk<const N: usize>(&self, i: usize, v: [T; N]) {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        check_chunk::<T, N>(self.ptr, i, self.len);
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        if let Some(f) = chunk_fault::<T, N>(self.ptr, i, self.len) {
            Tap::fault(&self.tap, f, core::panic::Location::caller());
            return;
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        for j in 0..N {
            Tap::write::<T>(&self.tap, i + j, core::panic::Location::caller());
        }
        // SAFETY: checked above.
        unsafe { store_chunk(self.ptr.add(i), v) }
    }
}

impl<T: Scalar> Dst<T> {
    /// [`set_chunk`](Dst::set_chunk) without its bounds and alignment checks on GPU targets:
    /// one wide store. Checked on the host ports, as [`Src::get_chunk_unchecked`].
    ///
    /// # Safety
    /// `i + N <= len()` and `chunk_aligned::<N>(i)`.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub unsafe fn set_chunk_unchecked<const N: usize>(&self, i: usize, v: [T; N]) {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        // SAFETY: the caller's precondition.
        return unsafe { store_chunk(self.ptr.add(i), v) };
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        self.set_chunk::<N>(i, v)
    }
}

impl<T: Scalar> Rw<T> {
    /// [`get_chunk`](Rw::get_chunk) without its bounds and alignment checks on GPU targets;
    /// checked on the host ports, as [`Src::get_chunk_unchecked`].
    ///
    /// # Safety
    /// `i + N <= len()` and `chunk_aligned::<N>(i)`.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub unsafe fn get_chunk_unchecked<const N: usize>(&self, i: usize) -> [T; N] {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        // SAFETY: the caller's precondition.
        return unsafe { load_chunk(self.ptr.add(i)) };
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        self.get_chunk::<N>(i)
    }
}

impl<T: Scalar> Rw<T> {
    /// Elements `i..i + N` as one chunk (`chunk_aligned::<N>(i)` must hold, else the kernel traps).
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub fn get_chunk<const N: usize>(&self, i: usize) -> [T; N] {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        check_chunk::<T, N>(self.ptr, i, self.len);
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        if let Some(f) = chunk_fault::<T, N>(self.ptr, i, self.len) {
            Tap::fault(&self.tap, f, core::panic::Location::caller());
            return refused();
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        for j in 0..N {
            Tap::read::<T>(&self.tap, i + j, core::panic::Location::caller());
        }
        // SAFETY: checked above.
        unsafe { load_chunk(self.ptr.add(i)) }
    }
    /// Writes elements `i..i + N` as one chunk (`chunk_aligned::<N>(i)` must hold, else the kernel traps).
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub fn set_chunk<const N: usize>(&self, i: usize, v: [T; N]) {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        check_chunk::<T, N>(self.ptr, i, self.len);
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        if let Some(f) = chunk_fault::<T, N>(self.ptr, i, self.len) {
            Tap::fault(&self.tap, f, core::panic::Location::caller());
            return;
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        for j in 0..N {
            Tap::write::<T>(&self.tap, i + j, core::panic::Location::caller());
        }
        // SAFETY: checked above.
        unsafe { store_chunk(self.ptr.add(i), v) }
    }
}

impl<T: Scalar> Dst<T> {
    /// Writes element `i`; when `i >= len()` it traps on a GPU, and on the host writes nothing and reports the fault to the probe.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub fn set(&self, i: usize, v: T) {
        if i >= self.len {
            #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
            out_of_bounds(i, self.len);
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            {
                let f = ViewFault::OutOfBounds {
                    index: i,
                    len: self.len,
                };
                Tap::fault(&self.tap, f, core::panic::Location::caller());
                return;
            }
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Tap::write::<T>(&self.tap, i, core::panic::Location::caller());
        // SAFETY: checked above.
        unsafe { *self.ptr.add(i) = v }
    }
    /// [`set`](Self::set) without its bounds check on GPU targets; checked on the host ports.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub unsafe fn set_unchecked(&self, i: usize, v: T) {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        // SAFETY: the caller's precondition.
        return unsafe { *self.ptr.add(i) = v };
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        self.set(i, v)
    }
}

impl<T: Scalar> Rw<T> {
    /// Element `i`; when `i >= len()` it traps on a GPU, and on the host reads zero and reports the fault to the probe.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub fn get(&self, i: usize) -> T {
        if i >= self.len {
            #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
            out_of_bounds(i, self.len);
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            {
                let f = ViewFault::OutOfBounds {
                    index: i,
                    len: self.len,
                };
                Tap::fault(&self.tap, f, core::panic::Location::caller());
                return refused();
            }
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Tap::read::<T>(&self.tap, i, core::panic::Location::caller());
        // SAFETY: checked above.
        unsafe { *self.ptr.add(i) }
    }
    /// Writes element `i`; when `i >= len()` it traps on a GPU, and on the host writes nothing and reports the fault to the probe.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub fn set(&self, i: usize, v: T) {
        if i >= self.len {
            #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
            out_of_bounds(i, self.len);
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            {
                let f = ViewFault::OutOfBounds {
                    index: i,
                    len: self.len,
                };
                Tap::fault(&self.tap, f, core::panic::Location::caller());
                return;
            }
        }
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        Tap::write::<T>(&self.tap, i, core::panic::Location::caller());
        // SAFETY: checked above.
        unsafe { *self.ptr.add(i) = v }
    }
    /// [`get`](Self::get) without its bounds check on GPU targets; the host ports still check
    /// it (and report a refused access to the probe), so the cpu and sim runs of a body verify
    /// the precondition its GPU ports trust.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub unsafe fn get_unchecked(&self, i: usize) -> T {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        // SAFETY: the caller's precondition.
        return unsafe { *self.ptr.add(i) };
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        self.get(i)
    }
    /// [`set`](Self::set) without its bounds check on GPU targets; checked on the host ports.
    ///
    /// # Safety
    /// `i < self.len()`.
    #[inline(always)]
    #[cfg_attr(
        not(any(target_arch = "nvptx64", target_arch = "amdgpu")),
        track_caller
    )]
    pub unsafe fn set_unchecked(&self, i: usize, v: T) {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        // SAFETY: the caller's precondition.
        return unsafe { *self.ptr.add(i) = v };
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        self.set(i, v)
    }
}
