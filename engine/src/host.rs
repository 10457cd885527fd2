//! Host launch types: what the cpu and sim backends run (raw buffers, bound params, geometry)
//! and the host data the reference chains read and write.

use crate::DeviceError;
use kiln_math::View;
use std::time::Duration;

/// How the SIMT emulator runs a launch.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Lanes per wave: 1, 2, 4, 8, 16, 32 or 64.
    pub wave: u32,
    /// Threads per block; `None` takes the kernel's preferred size, clamped to `[wave, 256]`
    /// and rounded to a multiple of the wave.
    pub block: Option<u32>,
    /// How long a thread waits at a barrier or collective before the emulator calls it divergent.
    pub timeout: Duration,
}

impl SimConfig {
    /// The wave widths the emulator runs (kiln-math's [`WAVES`](kiln_math::WAVES)).
    pub const WAVES: &'static [u32] = kiln_math::WAVES;

    /// Wave `wave`, the kernel's preferred block size, a 10 s barrier timeout.
    pub fn new(wave: u32) -> SimConfig {
        SimConfig {
            wave,
            block: None,
            timeout: Duration::from_secs(10),
        }
    }
}

/// A host launch: raw buffers, bound params and geometry.
pub(crate) struct HostLaunch<'a> {
    /// The kernel's name, for errors.
    pub kernel: &'static str,
    /// Buffer names in launch order, for the sim's race reports.
    pub buffer_names: &'a [&'static str],
    pub params: &'a [u32],
    pub bufs: &'a [HostBuf],
    pub grid: [u32; 3],
    pub block: u32,
    pub wave: u32,
    /// Total launch-sized shared memory in bytes (collective scratch included).
    pub shared: usize,
    pub sim: Option<&'a SimConfig>,
}

/// One buffer of a host launch: element 0 and the length in elements.
#[derive(Clone, Copy)]
pub(crate) struct HostBuf {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: device pointers handed to one launch, shared by its blocks as on a GPU.
unsafe impl Send for HostBuf {}
unsafe impl Sync for HostBuf {}

pub(crate) type HostEntry = fn(&HostLaunch) -> Result<(), DeviceError>;

/// Host bytes of one buffer for the reference chain (8-byte aligned).
pub(crate) struct HostData {
    pub words: Vec<u64>,
    pub len: usize,
}

/// Where the host launchers get their views from.
pub(crate) trait ViewSource {
    fn view<V: View>(&self, k: usize) -> V;
}

/// Borrowing a reference-chain slice of the right mutability from host data.
pub(crate) trait HostSlice {
    type Out<'a>;
    fn slice(d: &mut HostData) -> Self::Out<'_>;
}

fn elems<E>(d: &HostData) -> usize {
    assert!(d.words.len() * 8 >= d.len * std::mem::size_of::<E>());
    d.len
}

impl<E: kiln_math::Scalar> HostSlice for kiln_math::Src<E> {
    type Out<'a> = &'a [E];
    fn slice(d: &mut HostData) -> &[E] {
        // SAFETY: 8-byte aligned storage of at least len elements of plain data.
        unsafe { std::slice::from_raw_parts(d.words.as_ptr() as *const E, elems::<E>(d)) }
    }
}
impl<E: kiln_math::Scalar> HostSlice for kiln_math::Dst<E> {
    type Out<'a> = &'a mut [E];
    fn slice(d: &mut HostData) -> &mut [E] {
        let n = elems::<E>(d);
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(d.words.as_mut_ptr() as *mut E, n) }
    }
}
impl<E: kiln_math::Scalar> HostSlice for kiln_math::Rw<E> {
    type Out<'a> = &'a mut [E];
    fn slice(d: &mut HostData) -> &mut [E] {
        let n = elems::<E>(d);
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(d.words.as_mut_ptr() as *mut E, n) }
    }
}

pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "kernel panicked".to_string()
    }
}

/// The block index of linear block `lin` in `grid` (x fastest).
pub(crate) fn block_index(lin: u64, grid: [u32; 3]) -> [u32; 3] {
    let (gx, gy) = (grid[0] as u64, grid[1] as u64);
    [
        (lin % gx) as u32,
        ((lin / gx) % gy) as u32,
        (lin / (gx * gy)) as u32,
    ]
}
