//! Host launch types: what the cpu and sim backends run (raw buffers, bound params, geometry)
//! and the host data the reference chains read and write.

use crate::DeviceError;
use kiln_math::{SourceSite, View};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
    /// How long a block may run with no thread passing a barrier or returning before the
    /// watchdog stops it as hung (`KernelFault`); [`watchdog_limit`] by default.
    pub watchdog: Duration,
}

impl SimConfig {
    /// The wave widths the emulator runs (kiln-math's [`WAVES`](kiln_math::WAVES)).
    pub const WAVES: &'static [u32] = kiln_math::WAVES;

    /// Wave `wave`, the kernel's preferred block size, a 10 s barrier timeout, the watchdog
    /// of [`watchdog_limit`].
    pub fn new(wave: u32) -> SimConfig {
        SimConfig {
            wave,
            block: None,
            timeout: Duration::from_secs(10),
            watchdog: watchdog_limit(),
        }
    }

    /// The block the emulator runs a kernel with preferred block `preferred` at (unless
    /// `block` overrides it): clamped to `[wave, 256]` and rounded up to a multiple of the wave.
    pub fn preferred_block(&self, preferred: u32) -> u32 {
        let w = self.wave;
        preferred.clamp(w, 256.max(w)).div_ceil(w) * w
    }
}

/// Seconds a host launch (cpu or sim) may make no progress before its watchdog stops it:
/// `KILN_WATCHDOG_S` (a positive number of seconds), else 5.
pub fn watchdog_limit() -> Duration {
    std::env::var("KILN_WATCHDOG_S")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs(5), Duration::from_secs_f64)
}

/// A launch's watchdog: the time of its last progress (a block finished, a barrier passed);
/// the body's Block calls and probed view accesses ask it whether the launch is hung. The check
/// runs inside the body and unwinds it, so the launch returns only once no thread touches the
/// caller's buffers any more (abandoning a hung thread instead would leave it writing memory
/// the caller frees).
pub(crate) struct Watchdog {
    started: Instant,
    limit: Duration,
    last_progress_ns: AtomicU64,
}

/// Block calls and view accesses between two looks at the clock (each look costs a clock read).
const TICKS_PER_LOOK: u32 = 1024;

thread_local! {
    static TICKS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

impl Watchdog {
    pub(crate) fn new(limit: Duration) -> Watchdog {
        Watchdog {
            started: Instant::now(),
            limit,
            last_progress_ns: AtomicU64::new(0),
        }
    }

    /// Something finished: the launch is not hung.
    pub(crate) fn progress(&self) {
        let now = self.started.elapsed().as_nanos() as u64;
        self.last_progress_ns.fetch_max(now, Ordering::Relaxed);
    }

    /// The fault to stop the body with, when the launch made no progress for the limit; looks
    /// at the clock once every `TICKS_PER_LOOK` calls on this thread.
    pub(crate) fn check(&self, at: SourceSite) -> Option<String> {
        let n = TICKS.get().wrapping_add(1);
        TICKS.set(n);
        if !n.is_multiple_of(TICKS_PER_LOOK) {
            return None;
        }
        let now = self.started.elapsed().as_nanos() as u64;
        let idle = now.saturating_sub(self.last_progress_ns.load(Ordering::Relaxed));
        (Duration::from_nanos(idle) > self.limit).then(|| self.fault(at))
    }

    /// `KernelFault`'s detail for a hung body last seen at `at`.
    pub(crate) fn fault(&self, at: SourceSite) -> String {
        format!(
            "no progress after {} s (a loop that never ends? the body was at {}:{}:{}; KILN_WATCHDOG_S sets the limit)",
            self.limit.as_secs_f64(),
            at.file(),
            at.line(),
            at.column()
        )
    }
}

/// Unwinding payload of a hung host body stopped by the watchdog: the launcher returns the
/// error instead of a panic message.
pub(crate) struct HostStop(pub DeviceError);

/// Stops a hung host body with `e` (no panic hook runs: `resume_unwind`). The one fault that
/// needs unwinding: every other is recorded and the body runs on. Without unwinding
/// (`panic = "abort"`) nothing can stop the thread, so the process ends with `e` printed.
pub(crate) fn halt_hung(e: DeviceError) -> ! {
    #[cfg(panic = "unwind")]
    std::panic::resume_unwind(Box::new(HostStop(e)));
    #[cfg(not(panic = "unwind"))]
    {
        eprintln!("kiln: {e}; a hung body cannot be stopped without unwinding (panic = \"abort\")");
        std::process::abort()
    }
}

/// The first error of a host block (later ones are its consequences): one report per launch.
#[derive(Default)]
pub(crate) struct FirstError(std::sync::Mutex<Option<DeviceError>>);

impl FirstError {
    /// Keeps `e` unless an error is already there.
    pub(crate) fn record(&self, e: DeviceError) {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        g.get_or_insert(e);
    }

    pub(crate) fn take(&self) -> Option<DeviceError> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
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

/// `file:line:column` of a source site.
pub(crate) fn place(at: SourceSite) -> String {
    format!("{}:{}:{}", at.file(), at.line(), at.column())
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
