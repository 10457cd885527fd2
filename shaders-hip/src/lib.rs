//! kiln's amdgcn port: the HIP [`Block`] and one `extern "gpu-kernel"` entry per kernel × dtype,
//! generated from `kiln_math::for_each_kernel!`. No kernel math lives here.
//!
//! Entry symbols are `<kernel>_<dtype>`; the launch ABI is the params struct by value, then
//! `(ptr, len)` per buffer in list order. The wavefront width is fixed per artifact by the target
//! cpu (see build.rs) and every entry asserts at compile time that the kernel accepts it.
#![no_std]
#![feature(
    abi_gpu_kernel,
    core_intrinsics,
    gpu_intrinsics,
    gpu_launch_sized_workgroup_mem,
    link_llvm_intrinsics,
    stdarch_amdgpu
)]
#![allow(internal_features)]
// build.rs declares only the selected kernel's `kiln_kernel_<name>` cfg; the others are unknown.
#![allow(unexpected_cfgs)]

#[cfg(not(target_arch = "amdgpu"))]
compile_error!("kiln-shaders-hip builds only for amdgcn-amd-amdhsa (use `cargo xtask kernels`)");

use core::arch::amdgpu as gpu;
use core::intrinsics::gpu::{amdgpu_dispatch_ptr, gpu_launch_sized_workgroup_mem};
use core::sync::atomic::{compiler_fence, Ordering};
use kiln_math::{kernels, scratch_words, Block, Rw, Scalar, View};

/// The wavefront width of this artifact, derived from the target cpu by build.rs.
#[cfg(amdgpu_wave = "32")]
pub const WAVE: u32 = 32;
#[cfg(amdgpu_wave = "64")]
pub const WAVE: u32 = 64;
#[cfg(not(any(amdgpu_wave = "32", amdgpu_wave = "64")))]
compile_error!("build.rs derived no wavefront width: pass -C target-cpu=gfxNNNN");

#[cfg(amdgpu_wave = "32")]
macro_rules! wave_name {
    () => {
        "wave32"
    };
}
#[cfg(amdgpu_wave = "64")]
macro_rules! wave_name {
    () => {
        "wave64"
    };
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // `s_trap 2`: the queue reports the fault to the host instead of hanging the dispatch.
    core::intrinsics::abort()
}

unsafe extern "C" {
    #[link_name = "llvm.amdgcn.s.waitcnt"]
    fn llvm_s_waitcnt(counters: i32);
}

/// Byte offsets in the HSA kernel dispatch packet.
mod packet {
    pub const WORKGROUP_SIZE_X: usize = 4;
    pub const GRID_SIZE_X: usize = 12;
    pub const GROUP_SEGMENT_SIZE: usize = 28;
}

#[inline(always)]
fn packet_u16(offset: usize) -> u32 {
    // SAFETY: the dispatch packet is live for the whole dispatch; offsets are the HSA layout.
    unsafe {
        *(amdgpu_dispatch_ptr() as *const u8)
            .add(offset)
            .cast::<u16>() as u32
    }
}

#[inline(always)]
fn packet_u32(offset: usize) -> u32 {
    // SAFETY: as above; the u32 fields are 4-byte aligned in the packet.
    unsafe {
        *(amdgpu_dispatch_ptr() as *const u8)
            .add(offset)
            .cast::<u32>()
    }
}

/// One workgroup of a 1-D-block dispatch, as a kiln [`Block`].
pub struct HipBlock;

impl HipBlock {
    /// Launch-sized LDS in bytes (the dispatch's group segment; kiln kernels have no static LDS).
    #[inline(always)]
    fn lds_bytes(&self) -> usize {
        packet_u32(packet::GROUP_SEGMENT_SIZE) as usize
    }

    #[inline(always)]
    fn lds_base(&self) -> *mut u8 {
        gpu_launch_sized_workgroup_mem::<u8>()
    }
}

impl Block for HipBlock {
    const WAVE: u32 = WAVE;

    #[inline(always)]
    fn thread(&self) -> u32 {
        gpu::workitem_id_x()
    }
    #[inline(always)]
    fn size(&self) -> u32 {
        packet_u16(packet::WORKGROUP_SIZE_X)
    }
    #[inline(always)]
    fn block_x(&self) -> u32 {
        gpu::workgroup_id_x()
    }
    #[inline(always)]
    fn block_y(&self) -> u32 {
        gpu::workgroup_id_y()
    }
    #[inline(always)]
    fn block_z(&self) -> u32 {
        gpu::workgroup_id_z()
    }
    #[inline(always)]
    fn grid_x(&self) -> u32 {
        grid_blocks(0)
    }
    #[inline(always)]
    fn grid_y(&self) -> u32 {
        grid_blocks(1)
    }
    #[inline(always)]
    fn grid_z(&self) -> u32 {
        grid_blocks(2)
    }

    #[inline(always)]
    fn barrier(&self) {
        // s_barrier alone leaves LDS stores in flight on back-off-barrier chips: wait for them.
        compiler_fence(Ordering::SeqCst);
        // SAFETY: waitcnt(0) waits for every outstanding memory counter; no other effect.
        unsafe { llvm_s_waitcnt(0) };
        gpu::s_barrier();
        compiler_fence(Ordering::SeqCst);
    }

    #[inline(always)]
    fn mul_wide(&self, a: u32, b: u32) -> (u32, u32) {
        kiln_math::random::mul_wide_u64(a, b)
    }

    #[inline(always)]
    fn shuffle_xor(&self, v: u32, mask: u32) -> u32 {
        // ds_bpermute addresses the source lane in bytes (lane * 4).
        let source = (self.lane() ^ mask) << 2;
        // SAFETY: called in uniform control flow (Block's rule), so the source lane is active.
        unsafe { gpu::ds_bpermute(source, v) }
    }

    #[inline(always)]
    fn scratch(&self) -> Rw<u32> {
        let words = scratch_words(self.size(), WAVE) as usize;
        if words * 4 > self.lds_bytes() {
            panic!("kiln: launch gave less LDS than the collectives' scratch");
        }
        // SAFETY: the first `words` words of the launch-sized LDS, checked against its size above.
        unsafe { <Rw<u32> as View>::from_raw_parts(self.lds_base(), words) }
    }

    #[inline(always)]
    fn shared<T: Scalar>(&self, offset: usize, len: usize) -> Rw<T> {
        let start = scratch_words(self.size(), WAVE) as usize * 4 + offset;
        let end = start + len * core::mem::size_of::<T>();
        if end > self.lds_bytes() || !offset.is_multiple_of(core::mem::align_of::<T>()) {
            panic!("kiln: shared memory request outside the launch's LDS");
        }
        // SAFETY: inside the launch-sized LDS (checked above) and aligned for T.
        unsafe { <Rw<T> as View>::from_raw_parts(self.lds_base().add(start), len) }
    }
}

/// Workgroups along `axis`: the packet holds the grid in work-items.
#[inline(always)]
fn grid_blocks(axis: usize) -> u32 {
    let items = packet_u32(packet::GRID_SIZE_X + 4 * axis);
    let group = packet_u16(packet::WORKGROUP_SIZE_X + 2 * axis);
    items.div_ceil(group.max(1))
}

/// Params travel as their 4-byte words: pairs as `u64` chunks, an odd last word as a `u32`
/// tail, absent chunks as zero-sized (ignored) arguments. So the kernarg bytes are exactly the
/// `#[repr(C)]` struct's at offset 0, which rustc's gpu-kernel ABI does not give for a struct
/// argument over 8 bytes (it passes a pointer to it).
pub const PARAM_CHUNKS: usize = 16;

pub struct Pick<const PRESENT: bool>;
pub trait Choose {
    type Chunk: ParamBits;
    type Tail: ParamBits;
}
impl Choose for Pick<true> {
    type Chunk = u64;
    type Tail = u32;
}
impl Choose for Pick<false> {
    type Chunk = ();
    type Tail = ();
}

pub trait ParamBits: Copy {
    fn bits(self) -> u64;
}
impl ParamBits for u64 {
    #[inline(always)]
    fn bits(self) -> u64 {
        self
    }
}
impl ParamBits for u32 {
    #[inline(always)]
    fn bits(self) -> u64 {
        self as u64
    }
}
impl ParamBits for () {
    #[inline(always)]
    fn bits(self) -> u64 {
        0
    }
}

#[inline(always)]
pub fn params_from_chunks<P: kiln_math::Params, const WORDS: usize>(
    chunks: &[u64; PARAM_CHUNKS],
    tail: u64,
) -> P {
    let mut words = [0u32; WORDS];
    let mut k = 0;
    while k < WORDS {
        // Little-endian: the first word of a pair is the chunk's low half.
        words[k] = if k / 2 < WORDS / 2 {
            (chunks[k / 2] >> (32 * (k % 2))) as u32
        } else {
            tail as u32
        };
        k += 1;
    }
    P::from_words(&words)
}

/// Expands one kernel list into entries: `<kernel>_<dtype>` for every dtype, each behind
/// compile-time wave gates. `$root` is the crate-root module holding the kernels' modules.
macro_rules! hip_entries {
    ($root:ident; $( $name:ident : $id:ident [$($dt:ident),*] $bufs:tt ; )*) => {
        $( hip_entries!(@kernel $root $name $id [$($dt),*] $bufs); )*
    };
    (@kernel $root:ident $name:ident $id:ident [$($dt:ident),*] $bufs:tt) => {
        $( hip_entries!(@entry $root $name $id $dt $bufs); )*
    };
    (@entry $root:ident $name:ident $id:ident $dt:ident ( $($b:ident : $acc:ident < $e:ident >),* )) => {
        paste::paste! {
            #[cfg(any(not(kiln_one_kernel), [<kiln_kernel_ $name>]))]
            const _: () = {
                use $crate::{params_from_chunks, Choose, HipBlock, ParamBits, Pick, PARAM_CHUNKS, WAVE};
                use kiln_math::{Block, View};
                type Def = crate::$root::$name::$id;
                type P = <Def as kiln_math::KernelDef>::Params;
                #[allow(dead_code)]
                type T = kiln_math::elem!($dt);

                // The Block's width is the one build.rs derived from the target cpu …
                const _: () = assert!(
                    <HipBlock as Block>::WAVE == WAVE,
                    "kiln-shaders-hip: the HIP Block's WAVE differs from the target cpu's wavefront width"
                );
                // … and the kernel accepts that width (KernelDef::WAVES).
                const _: () = assert!(
                    <Def as kiln_math::KernelDef>::WAVES.accepts(WAVE),
                    concat!(
                        "kiln-shaders-hip: kernel `", stringify!($name), "` declares (KernelDef::WAVES) a wave width ",
                        "that excludes this target's ", wave_name!(), " (derived from -C target-cpu by build.rs); ",
                        "it cannot be built for this target"
                    )
                );

                const WORDS: usize = core::mem::size_of::<P>() / 4;
                const _: () = assert!(
                    WORDS <= 2 * PARAM_CHUNKS,
                    concat!("kiln-shaders-hip: the params of `", stringify!($name), "` exceed the entry's 32 words")
                );
                // The chunk types are u64, u32 or (), which the lints cannot see through.
                #[allow(improper_ctypes_definitions, improper_gpu_kernel_arg)]
                #[unsafe(export_name = concat!(stringify!($name), "_", stringify!($dt)))]
                unsafe extern "gpu-kernel" fn entry(
                    c0: <Pick<{ 1 < WORDS }> as Choose>::Chunk,
                    c1: <Pick<{ 3 < WORDS }> as Choose>::Chunk,
                    c2: <Pick<{ 5 < WORDS }> as Choose>::Chunk,
                    c3: <Pick<{ 7 < WORDS }> as Choose>::Chunk,
                    c4: <Pick<{ 9 < WORDS }> as Choose>::Chunk,
                    c5: <Pick<{ 11 < WORDS }> as Choose>::Chunk,
                    c6: <Pick<{ 13 < WORDS }> as Choose>::Chunk,
                    c7: <Pick<{ 15 < WORDS }> as Choose>::Chunk,
                    c8: <Pick<{ 17 < WORDS }> as Choose>::Chunk,
                    c9: <Pick<{ 19 < WORDS }> as Choose>::Chunk,
                    c10: <Pick<{ 21 < WORDS }> as Choose>::Chunk,
                    c11: <Pick<{ 23 < WORDS }> as Choose>::Chunk,
                    c12: <Pick<{ 25 < WORDS }> as Choose>::Chunk,
                    c13: <Pick<{ 27 < WORDS }> as Choose>::Chunk,
                    c14: <Pick<{ 29 < WORDS }> as Choose>::Chunk,
                    c15: <Pick<{ 31 < WORDS }> as Choose>::Chunk,
                    tail: <Pick<{ WORDS % 2 == 1 }> as Choose>::Tail,
                    $( $b: *mut u8, [<$b _len>]: usize, )*
                ) {
                    let chunks = [
                        c0.bits(), c1.bits(), c2.bits(), c3.bits(), c4.bits(), c5.bits(), c6.bits(), c7.bits(),
                        c8.bits(), c9.bits(), c10.bits(), c11.bits(), c12.bits(), c13.bits(), c14.bits(), c15.bits(),
                    ];
                    let params: P = params_from_chunks::<P, WORDS>(&chunks, tail.bits());
                    // SAFETY: the engine passes each buffer's device pointer with its element
                    // count, validated against the kernel's shapes before launch.
                    $( let $b = unsafe { <kiln_math::$acc<$e> as View>::from_raw_parts($b, [<$b _len>]) }; )*
                    crate::$root::$name::$name::<T, HipBlock>(&HipBlock, &params, $($b),*);
                }
            };
        }
    };
}

macro_rules! kiln_entries {
    ($($list:tt)*) => {
        hip_entries! { kernels; $($list)* }
    };
}

kiln_math::for_each_kernel!(kiln_entries);

#[cfg(feature = "wave32-probe")]
mod probe;
