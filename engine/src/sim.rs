//! The SIMT emulator: one OS thread per lane, any wave and block size, barriers and lane
//! shuffles emulated by rendezvous, so the collectives of `kiln-math` run exactly as written.
//!
//! It reports, naming the kernel and the block:
//! - `Divergence`: threads of a block (or wave) waiting at different barriers/collectives, a
//!   thread returning while others wait, or a wait longer than the configured timeout;
//! - `Race`: two threads of a block touching one element between two barriers, one of them
//!   writing (reads are recorded as well as writes, so the report does not depend on which
//!   thread ran first), and any element touched by two blocks with one writing;
//! - `LaneOutOfWave`: a shuffle with a lane outside the wave (a fold that assumed a wider wave);
//! - `KernelFault`: an out-of-bounds view access or shared-memory request, a panic in the body,
//!   or a block where no thread passed a barrier or returned for the watchdog's limit (a loop
//!   that never ends), stopped at the thread's next Block call or view access.
//!
//! Every report names the kernel source's file, line and column (views and the lanes' Block
//! methods track their caller). A block keeps its first error only: one report per launch.
//!
//! Nothing but a hung body is stopped by unwinding: after the first error the block's barriers
//! and collectives stop waiting, refused accesses read zero, and its threads run to their end,
//! so a build with `panic = "abort"` gets the same errors.
//!
//! Blocks run one after another; the threads of a block run concurrently.

use crate::host::{block_index, halt_hung, panic_message, place, HostStop, Watchdog};
use crate::host::{HostBuf, HostLaunch, ViewSource};
use crate::DeviceError;
use kiln_math::wave_mma::{mma_fragment_words, mma_from_fragments, MMA_FRAGMENT_WORDS};
use kiln_math::{scratch_words, Block, Element, Probe, Rw, Scalar, SourceSite, View, ViewFault};
use std::cell::Cell;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::ptr::NonNull;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Probe tag of the block's shared memory (global buffers are tagged by their list index).
const SHARED_TAG: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct LaneCtx {
    block: u64,
    tid: u32,
    epoch: u32,
    state: *const BlockState,
}

thread_local! {
    static LANE: Cell<Option<LaneCtx>> = const { Cell::new(None) };
}

fn lane_ctx() -> LaneCtx {
    LANE.get().expect("sim probe used outside a lane")
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Site = SourceSite;

enum RvFail {
    Aborted,
    Diverged(String),
}

struct RvState {
    arrived: u32,
    departed: u32,
    generation: u64,
    site: Option<Site>,
    slots: Vec<u32>,
    published: Vec<u32>,
    failed: bool,
}

/// All `members` threads meet, each leaving a word; each leaves with the word of `pick`.
struct Rendezvous {
    what: &'static str,
    members: u32,
    state: Mutex<RvState>,
    cv: Condvar,
}

impl Rendezvous {
    fn new(what: &'static str, members: u32) -> Rendezvous {
        Rendezvous::wide(what, members, 1)
    }

    /// A rendezvous where each member leaves `width` words.
    fn wide(what: &'static str, members: u32, width: usize) -> Rendezvous {
        Rendezvous {
            what,
            members,
            state: Mutex::new(RvState {
                arrived: 0,
                departed: 0,
                generation: 0,
                site: None,
                slots: vec![0; members as usize * width],
                published: vec![0; members as usize * width],
                failed: false,
            }),
            cv: Condvar::new(),
        }
    }

    fn arrive(
        &self,
        member: u32,
        value: u32,
        pick: u32,
        site: Site,
        timeout: Duration,
    ) -> Result<u32, RvFail> {
        self.meet(member, &[value], site, timeout, |all| all[pick as usize])
    }

    /// All members meet, each leaving `values` (the rendezvous's width of words); each leaves
    /// with `read` of every member's words, member-major.
    fn meet<R>(
        &self,
        member: u32,
        values: &[u32],
        site: Site,
        timeout: Duration,
        read: impl FnOnce(&[u32]) -> R,
    ) -> Result<R, RvFail> {
        let what = self.what;
        let mut g = lock(&self.state);
        if g.failed {
            return Err(RvFail::Aborted);
        }
        if g.departed > 0 {
            return Err(RvFail::Diverged(format!(
                "thread {member} of its group reached the {what} at {site} after {} thread(s) of the group returned",
                g.departed
            )));
        }
        match g.site {
            None => g.site = Some(site),
            Some(s) if s != site => {
                return Err(RvFail::Diverged(format!(
                    "{} thread(s) wait at the {what} at {s} while thread {member} of the group reached one at {site}",
                    g.arrived
                )))
            }
            Some(_) => {}
        }
        let at = member as usize * values.len();
        g.slots[at..at + values.len()].copy_from_slice(values);
        g.arrived += 1;
        if g.arrived == self.members {
            let RvState {
                slots, published, ..
            } = &mut *g;
            published.copy_from_slice(slots);
            g.arrived = 0;
            g.site = None;
            g.generation += 1;
            self.cv.notify_all();
            return Ok(read(&g.published));
        }
        let generation = g.generation;
        let deadline = Instant::now() + timeout;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(RvFail::Diverged(format!(
                    "{} of {} threads waited {timeout:?} at the {what} at {site}; the others never arrived",
                    g.arrived, self.members
                )));
            }
            g = self
                .cv
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if g.generation != generation {
                return Ok(read(&g.published));
            }
            if g.failed {
                return Err(RvFail::Aborted);
            }
        }
    }

    /// A member returned from the kernel.
    fn depart(&self) -> Result<(), String> {
        let mut g = lock(&self.state);
        g.departed += 1;
        match g.site {
            Some(site) if g.arrived > 0 && !g.failed => Err(format!(
                "a thread returned from the kernel while {} thread(s) wait at the {} at {site}",
                g.arrived, self.what
            )),
            _ => Ok(()),
        }
    }

    fn poison(&self) {
        lock(&self.state).failed = true;
        self.cv.notify_all();
    }
}

/// One block's emulated hardware.
struct BlockState {
    kernel: &'static str,
    idx: [u32; 3],
    wave: u32,
    timeout: Duration,
    block_rv: Rendezvous,
    wave_rv: Vec<Rendezvous>,
    /// Per wave: the wave multiply's meeting, every lane's fragments at once.
    mma_rv: Vec<Rendezvous>,
    shared: *mut u8,
    shared_len: usize,
    probe: NonNull<dyn Probe>,
    error: Mutex<Option<DeviceError>>,
    /// Shared-memory byte → its accesses since the block began.
    shared_accesses: Mutex<HashMap<usize, Accesses>>,
    watchdog: Watchdog,
}

// SAFETY: `shared` and `probe` point into the launch's allocations, alive for the block's scope;
// concurrent access to them is exactly what the emulator observes and checks.
unsafe impl Sync for BlockState {}

impl BlockState {
    fn record(&self, e: DeviceError) {
        let mut g = lock(&self.error);
        if g.is_none() {
            *g = Some(e);
        }
        drop(g);
        self.block_rv.poison();
        self.wave_rv.iter().for_each(Rendezvous::poison);
    }

    /// A failed rendezvous: the block failed already, or this thread found it divergent.
    fn rv_fail(&self, f: RvFail) {
        if let RvFail::Diverged(detail) = f {
            self.record(DeviceError::Divergence {
                kernel: self.kernel,
                block: self.idx,
                detail,
            })
        }
    }

    fn race(&self, detail: String) {
        self.record(DeviceError::Race {
            kernel: self.kernel,
            block: self.idx,
            detail,
        })
    }

    fn fault(&self, detail: String) {
        self.record(DeviceError::KernelFault {
            kernel: self.kernel,
            backend: crate::Backend::Sim,
            block: Some(self.idx),
            detail,
            state: crate::DeviceState::Usable,
        })
    }

    /// Stops this lane (and the block) when the watchdog finds the block hung.
    fn watch(&self, tid: u32, at: Site) {
        if let Some(detail) = self.watchdog.check(at) {
            halt_hung(DeviceError::KernelFault {
                kernel: self.kernel,
                backend: crate::Backend::Sim,
                block: Some(self.idx),
                detail: format!("thread {tid}: {detail}"),
                state: crate::DeviceState::Usable,
            })
        }
    }
}

/// A lane of the emulated block.
pub(crate) struct SimLane<'a, const W: u32> {
    tid: u32,
    size: u32,
    grid: [u32; 3],
    st: &'a BlockState,
}

impl<const W: u32> SimLane<'_, W> {
    fn shared_view<T: Scalar>(&self, start: usize, len: usize, at: Site) -> Rw<T> {
        let end = len
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|n| n.checked_add(start));
        if end.is_none_or(|e| e > self.st.shared_len)
            || !start.is_multiple_of(std::mem::align_of::<T>())
        {
            self.st.fault(format!(
                "thread {}: shared memory request of {len} elements at byte {start} exceeds the launch's {} bytes, at {}",
                self.tid,
                self.st.shared_len,
                place(at)
            ));
            // An empty view: the body runs on, its accesses refused.
            // SAFETY: no element is reachable through a view of length 0.
            return unsafe {
                Rw::<T>::from_raw_parts(self.st.shared, 0).with_probe(self.st.probe, SHARED_TAG, 0)
            };
        }
        // SAFETY: in range and aligned, checked above; the probe outlives the block.
        unsafe {
            Rw::<T>::from_raw_parts(self.st.shared.add(start), len).with_probe(
                self.st.probe,
                SHARED_TAG,
                start,
            )
        }
    }
}

impl<const W: u32> Block for SimLane<'_, W> {
    const WAVE: u32 = W;
    const MMA_NATIVE: bool = true;
    #[track_caller]
    fn thread(&self) -> u32 {
        self.st.watch(self.tid, Location::caller());
        self.tid
    }
    #[track_caller]
    fn size(&self) -> u32 {
        self.st.watch(self.tid, Location::caller());
        self.size
    }
    #[track_caller]
    fn block_x(&self) -> u32 {
        self.st.watch(self.tid, Location::caller());
        self.st.idx[0]
    }
    #[track_caller]
    fn block_y(&self) -> u32 {
        self.st.watch(self.tid, Location::caller());
        self.st.idx[1]
    }
    #[track_caller]
    fn block_z(&self) -> u32 {
        self.st.watch(self.tid, Location::caller());
        self.st.idx[2]
    }
    #[track_caller]
    fn grid_x(&self) -> u32 {
        self.st.watch(self.tid, Location::caller());
        self.grid[0]
    }
    #[track_caller]
    fn grid_y(&self) -> u32 {
        self.st.watch(self.tid, Location::caller());
        self.grid[1]
    }
    #[track_caller]
    fn grid_z(&self) -> u32 {
        self.st.watch(self.tid, Location::caller());
        self.grid[2]
    }

    #[track_caller]
    fn barrier(&self) {
        let site = Location::caller();
        self.st.watch(self.tid, site);
        match self
            .st
            .block_rv
            .arrive(self.tid, 0, self.tid, site, self.st.timeout)
        {
            Ok(_) => {
                self.st.watchdog.progress();
                LANE.with(|c| {
                    let mut ctx = c.get().expect("lane context");
                    ctx.epoch += 1;
                    c.set(Some(ctx));
                })
            }
            Err(f) => self.st.rv_fail(f),
        }
    }

    #[inline(always)]
    fn mul_wide(&self, a: u32, b: u32) -> (u32, u32) {
        kiln_math::random::mul_wide_u64(a, b)
    }

    #[track_caller]
    fn shuffle_xor(&self, v: u32, mask: u32) -> u32 {
        let site = Location::caller();
        self.st.watch(self.tid, site);
        let lane = self.tid % W;
        let source_lane = lane ^ mask;
        if source_lane >= W {
            self.st.record(DeviceError::LaneOutOfWave {
                kernel: self.st.kernel,
                block: self.st.idx,
                lane,
                source_lane,
                wave: W,
                at: place(site),
            });
            return v;
        }
        let rv = &self.st.wave_rv[(self.tid / W) as usize];
        match rv.arrive(lane, v, source_lane, site, self.st.timeout) {
            Ok(x) => x,
            Err(f) => {
                self.st.rv_fail(f);
                v
            }
        }
    }

    /// The multiply from every lane's fragments at one meeting (the definition in
    /// `kiln_math::wave_mma`; the shuffle version that other ports run is tested against it).
    #[track_caller]
    fn wave_mma<T: Element>(
        &self,
        a: [[u32; 2]; 2],
        b: [u32; 2],
        c: [[f32; 2]; 2],
    ) -> [[f32; 2]; 2] {
        let site = Location::caller();
        self.st.watch(self.tid, site);
        let lane = self.tid % W;
        let rv = &self.st.mma_rv[(self.tid / W) as usize];
        let mine = mma_fragment_words(a, b);
        match rv.meet(lane, &mine, site, self.st.timeout, |all| {
            mma_from_fragments::<T>(W, lane, all, c)
        }) {
            Ok(v) => v,
            Err(f) => {
                self.st.rv_fail(f);
                c
            }
        }
    }

    #[track_caller]
    fn scratch(&self) -> Rw<u32> {
        let at = Location::caller();
        self.st.watch(self.tid, at);
        self.shared_view(0, scratch_words(self.size, W) as usize, at)
    }

    #[track_caller]
    fn shared<T: Scalar>(&self, offset: usize, len: usize) -> Rw<T> {
        let at = Location::caller();
        self.st.watch(self.tid, at);
        self.shared_view(scratch_words(self.size, W) as usize * 4 + offset, len, at)
    }
}

/// One access the race detector remembers: who, between which two barriers, where.
#[derive(Clone, Copy)]
struct Touch {
    block: u64,
    tid: u32,
    epoch: u32,
    at: Site,
}

impl Touch {
    /// Whether this access and one by `ctx` are unordered: other blocks, or other threads of
    /// one block between the same two barriers.
    fn races(&self, ctx: &LaneCtx) -> bool {
        self.block != ctx.block || (self.tid != ctx.tid && self.epoch == ctx.epoch)
    }
}

/// An element's accesses: the last write and the reads a later write can race with. Blocks run
/// in order and a block's epochs only grow, so the running block's latest read and its latest
/// by another thread find any read of the same interval, and one read stands for earlier blocks.
#[derive(Clone, Copy, Default)]
struct Accesses {
    write: Option<Touch>,
    /// The running block's latest read, and its latest by a thread other than that one's.
    reads: [Option<Touch>; 2],
    earlier_block_read: Option<Touch>,
}

impl Accesses {
    /// Records an access by `ctx`; the earlier access it races with and whether that wrote.
    fn record(&mut self, ctx: &LaneCtx, write: bool, at: Site) -> Option<(Touch, bool)> {
        let now = Touch {
            block: ctx.block,
            tid: ctx.tid,
            epoch: ctx.epoch,
            at,
        };
        let mut raced = self.write.filter(|w| w.races(ctx)).map(|w| (w, true));
        if write {
            if raced.is_none() {
                raced = [self.earlier_block_read, self.reads[0], self.reads[1]]
                    .into_iter()
                    .flatten()
                    .find(|r| r.races(ctx))
                    .map(|r| (r, false));
            }
            self.write = Some(now);
            return raced;
        }
        if let Some(r) = self.reads[0].filter(|r| r.block != ctx.block) {
            self.earlier_block_read = Some(r);
            self.reads = [None, None];
        }
        match self.reads[0] {
            Some(r) if r.tid == ctx.tid => self.reads[0] = Some(now),
            latest => self.reads = [Some(now), latest],
        }
        raced
    }
}

/// The race detector over the launch's global buffers (shared memory is tracked per block).
struct SimProbe<'a> {
    buffer_names: &'a [&'static str],
    accesses: Mutex<HashMap<(u32, usize), Accesses>>,
}

impl SimProbe<'_> {
    fn name(&self, buf: u32) -> String {
        if buf == SHARED_TAG {
            return "shared memory".into();
        }
        let name = self.buffer_names.get(buf as usize).copied().unwrap_or("?");
        format!("buffer `{name}`")
    }

    fn who(t: Touch, wrote: bool, ctx: &LaneCtx) -> String {
        let verb = if wrote { "wrote" } else { "read" };
        if t.block != ctx.block {
            format!(
                "another block (linear index {}) {verb} at {}",
                t.block,
                place(t.at)
            )
        } else {
            format!(
                "thread {} {verb} at {} since the last barrier",
                t.tid,
                place(t.at)
            )
        }
    }

    fn access(&self, buf: u32, byte: usize, write: bool, at: Site) {
        let ctx = lane_ctx();
        // SAFETY: the lane context points at the block state for the lane's whole life.
        let st = unsafe { &*ctx.state };
        st.watch(ctx.tid, at);
        let raced = if buf == SHARED_TAG {
            let mut m = lock(&st.shared_accesses);
            m.entry(byte).or_default().record(&ctx, write, at)
        } else {
            let mut m = lock(&self.accesses);
            m.entry((buf, byte)).or_default().record(&ctx, write, at)
        };
        if let Some((t, wrote)) = raced {
            let verb = if write { "wrote" } else { "read" };
            st.race(format!(
                "thread {} {verb} {} byte {byte} at {} that {}",
                ctx.tid,
                self.name(buf),
                place(at),
                Self::who(t, wrote, &ctx)
            ));
        }
    }
}

impl Probe for SimProbe<'_> {
    fn read(&self, buf: u32, byte: usize, at: Site) {
        self.access(buf, byte, false, at)
    }
    fn write(&self, buf: u32, byte: usize, at: Site) {
        self.access(buf, byte, true, at)
    }
    fn tick(&self, at: Site) {
        let ctx = lane_ctx();
        // SAFETY: as in `access`.
        unsafe { &*ctx.state }.watch(ctx.tid, at);
    }
    fn fault(&self, buf: u32, fault: ViewFault, at: Site) {
        let ctx = lane_ctx();
        let what = self.name(buf);
        // SAFETY: as in `access`.
        unsafe { &*ctx.state }.fault(format!(
            "thread {}: {fault} of {what} at {}",
            ctx.tid,
            place(at)
        ));
    }
}

/// The views of a sim launch: every buffer tapped by the race detector.
pub(crate) struct SimViews<'a> {
    bufs: &'a [HostBuf],
    probe: NonNull<dyn Probe>,
}

// SAFETY: raw pointers shared by the lanes of one launch; the probe is Sync.
unsafe impl Sync for SimViews<'_> {}

impl ViewSource for SimViews<'_> {
    fn view<V: View>(&self, k: usize) -> V {
        let b = self.bufs[k];
        // SAFETY: the launcher checked every buffer against the list; the probe outlives the launch.
        unsafe { V::from_raw_parts(b.ptr, b.len).with_probe(self.probe, k as u32, 0) }
    }
}

/// Runs `f` on every lane of every block of the launch.
pub(crate) fn run<const W: u32, F>(l: &HostLaunch, f: F) -> Result<(), DeviceError>
where
    F: Fn(&SimLane<W>, &SimViews) + Sync,
{
    let cfg = l.sim.expect("sim launch without a sim config");
    let kernel = l.kernel;
    if l.block == 0 || !l.block.is_multiple_of(W) {
        return Err(DeviceError::Launch {
            kernel,
            detail: format!("block {} is not a multiple of wave {W}", l.block),
        });
    }
    let probe = SimProbe {
        buffer_names: l.buffer_names,
        accesses: Mutex::new(HashMap::new()),
    };
    // SAFETY (lifetime erasure): the probe outlives every lane, all joined before `run` returns.
    let probe_ptr: NonNull<dyn Probe> = unsafe {
        std::mem::transmute::<NonNull<dyn Probe + '_>, NonNull<dyn Probe>>(NonNull::from(
            &probe as &dyn Probe,
        ))
    };
    let views = SimViews {
        bufs: l.bufs,
        probe: probe_ptr,
    };
    let blocks = l.grid.iter().map(|&g| g as u64).product::<u64>();
    for lin in 0..blocks {
        let mut shm = vec![0u64; l.shared.div_ceil(8).max(1)];
        let st = BlockState {
            kernel,
            idx: block_index(lin, l.grid),
            wave: W,
            timeout: cfg.timeout,
            block_rv: Rendezvous::new("barrier", l.block),
            wave_rv: (0..l.block / W)
                .map(|_| Rendezvous::new("wave collective", W))
                .collect(),
            mma_rv: (0..l.block / W)
                .map(|_| Rendezvous::wide("wave multiply", W, MMA_FRAGMENT_WORDS))
                .collect(),
            shared: shm.as_mut_ptr() as *mut u8,
            shared_len: l.shared,
            probe: probe_ptr,
            error: Mutex::new(None),
            shared_accesses: Mutex::new(HashMap::new()),
            watchdog: Watchdog::new(cfg.watchdog),
        };
        let spawned = std::thread::scope(|s| -> std::io::Result<()> {
            for tid in 0..l.block {
                let (st, views, f) = (&st, &views, &f);
                std::thread::Builder::new()
                    .stack_size(512 << 10)
                    .spawn_scoped(s, move || {
                        LANE.set(Some(LaneCtx {
                            block: lin,
                            tid,
                            epoch: 0,
                            state: st,
                        }));
                        let lane = SimLane::<W> {
                            tid,
                            size: l.block,
                            grid: l.grid,
                            st,
                        };
                        let ran = catch_unwind(AssertUnwindSafe(|| f(&lane, views)));
                        st.watchdog.progress();
                        match ran {
                            Ok(()) => {
                                let wave = &st.wave_rv[(tid / st.wave) as usize];
                                if let Err(detail) =
                                    st.block_rv.depart().and_then(|_| wave.depart())
                                {
                                    st.record(DeviceError::Divergence {
                                        kernel,
                                        block: st.idx,
                                        detail,
                                    });
                                }
                            }
                            Err(p) => match p.downcast::<HostStop>() {
                                Ok(stopped) => st.record(stopped.0),
                                Err(p) => st.fault(panic_message(p.as_ref())),
                            },
                        }
                        LANE.set(None);
                    })?;
            }
            Ok(())
        });
        if let Err(e) = spawned {
            return Err(DeviceError::Launch {
                kernel,
                detail: format!("could not start lane threads: {e}"),
            });
        }
        if let Some(e) = st.error.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        drop(shm);
    }
    Ok(())
}
