//! The SIMT emulator: one OS thread per lane, any wave and block size, barriers and lane
//! shuffles emulated by rendezvous, so the collectives of `kiln-math` run exactly as written.
//!
//! It reports, naming the kernel and the block:
//! - `Divergence`: threads of a block (or wave) waiting at different barriers/collectives, a
//!   thread returning while others wait, or a wait longer than the configured timeout;
//! - `Race`: two threads writing one element between two barriers (or one reading what another
//!   wrote since the last barrier), and any element touched by two blocks with one writing;
//! - `LaneOutOfWave`: a shuffle with a lane outside the wave (a fold that assumed a wider wave);
//! - `KernelFault`: a panic in the body (out-of-bounds view access), or a block where no thread
//!   passed a barrier or returned for the watchdog's limit (a loop that never ends), stopped at
//!   the thread's next Block call or view access.
//!
//! Every report names the kernel source's file, line and column (views and the lanes' Block
//! methods track their caller).
//!
//! Blocks run one after another; the threads of a block run concurrently.

use crate::host::{block_index, panic_message, Watchdog};
use crate::host::{HostBuf, HostLaunch, ViewSource};
use crate::DeviceError;
use kiln_math::{scratch_words, Block, Probe, Rw, Scalar, SourceSite, View};
use std::cell::Cell;
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe, Location};
use std::ptr::NonNull;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Probe tag of the block's shared memory (global buffers are tagged by their list index).
const SHARED_TAG: u32 = u32::MAX;

/// Unwinding payload of a lane that stops because the launch already failed.
struct Abort;

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

/// `file:line:column` of a site.
fn place(at: Site) -> String {
    format!("{}:{}:{}", at.file(), at.line(), at.column())
}

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
        Rendezvous {
            what,
            members,
            state: Mutex::new(RvState {
                arrived: 0,
                departed: 0,
                generation: 0,
                site: None,
                slots: vec![0; members as usize],
                published: vec![0; members as usize],
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
        g.slots[member as usize] = value;
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
            return Ok(g.published[pick as usize]);
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
                return Ok(g.published[pick as usize]);
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
    shared: *mut u8,
    shared_len: usize,
    probe: NonNull<dyn Probe>,
    error: Mutex<Option<DeviceError>>,
    /// Shared-memory byte → (thread, epoch, site) of its last writer.
    shared_writes: Mutex<HashMap<usize, (u32, u32, Site)>>,
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

    fn fail(&self, e: DeviceError) -> ! {
        self.record(e);
        resume_unwind(Box::new(Abort))
    }

    fn rv_fail(&self, f: RvFail) -> ! {
        match f {
            RvFail::Aborted => resume_unwind(Box::new(Abort)),
            RvFail::Diverged(detail) => self.fail(DeviceError::Divergence {
                kernel: self.kernel,
                block: self.idx,
                detail,
            }),
        }
    }

    fn race(&self, detail: String) -> ! {
        self.fail(DeviceError::Race {
            kernel: self.kernel,
            block: self.idx,
            detail,
        })
    }

    /// Stops this lane (and the block) when the watchdog finds the block hung.
    fn watch(&self, tid: u32, at: Site) {
        if let Some(detail) = self.watchdog.check(at) {
            self.fail(DeviceError::KernelFault {
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
    fn shared_view<T: Scalar>(&self, start: usize, len: usize) -> Rw<T> {
        let end = len
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|n| n.checked_add(start));
        if end.is_none_or(|e| e > self.st.shared_len)
            || !start.is_multiple_of(std::mem::align_of::<T>())
        {
            panic!(
                "kiln: shared memory request of {len} elements at byte {start} exceeds the launch's {} bytes",
                self.st.shared_len
            );
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

    #[track_caller]
    fn shuffle_xor(&self, v: u32, mask: u32) -> u32 {
        let site = Location::caller();
        self.st.watch(self.tid, site);
        let lane = self.tid % W;
        let source_lane = lane ^ mask;
        if source_lane >= W {
            self.st.fail(DeviceError::LaneOutOfWave {
                kernel: self.st.kernel,
                block: self.st.idx,
                lane,
                source_lane,
                wave: W,
                at: place(site),
            });
        }
        let rv = &self.st.wave_rv[(self.tid / W) as usize];
        match rv.arrive(lane, v, source_lane, site, self.st.timeout) {
            Ok(x) => x,
            Err(f) => self.st.rv_fail(f),
        }
    }

    #[track_caller]
    fn scratch(&self) -> Rw<u32> {
        self.st.watch(self.tid, Location::caller());
        self.shared_view(0, scratch_words(self.size, W) as usize)
    }

    #[track_caller]
    fn shared<T: Scalar>(&self, offset: usize, len: usize) -> Rw<T> {
        self.st.watch(self.tid, Location::caller());
        self.shared_view(scratch_words(self.size, W) as usize * 4 + offset, len)
    }
}

#[derive(Clone, Copy)]
struct Writer {
    block: u64,
    tid: u32,
    epoch: u32,
    at: Site,
}

/// The race detector over the launch's global buffers (shared memory is tracked per block).
struct SimProbe<'a> {
    buffer_names: &'a [&'static str],
    writes: Mutex<HashMap<(u32, usize), Writer>>,
}

impl SimProbe<'_> {
    fn describe(&self, buf: u32, byte: usize) -> String {
        if buf == SHARED_TAG {
            return format!("shared memory byte {byte}");
        }
        let name = self.buffer_names.get(buf as usize).copied().unwrap_or("?");
        format!("buffer `{name}` byte {byte}")
    }

    fn conflict(w: Writer, ctx: &LaneCtx) -> bool {
        w.block != ctx.block || (w.tid != ctx.tid && w.epoch == ctx.epoch)
    }

    fn who(w: Writer, ctx: &LaneCtx) -> String {
        if w.block != ctx.block {
            format!(
                "another block (linear index {}) wrote at {}",
                w.block,
                place(w.at)
            )
        } else {
            format!(
                "thread {} wrote at {} since the last barrier",
                w.tid,
                place(w.at)
            )
        }
    }

    fn access(&self, buf: u32, byte: usize, write: bool, at: Site) {
        let ctx = lane_ctx();
        // SAFETY: the lane context points at the block state for the lane's whole life.
        let st = unsafe { &*ctx.state };
        st.watch(ctx.tid, at);
        let verb = if write { "wrote" } else { "read" };
        if buf == SHARED_TAG {
            let mut m = lock(&st.shared_writes);
            let prev = m.get(&byte).copied();
            if write {
                m.insert(byte, (ctx.tid, ctx.epoch, at));
            }
            drop(m);
            if let Some((tid, epoch, their)) = prev {
                if tid != ctx.tid && epoch == ctx.epoch {
                    st.race(format!(
                        "thread {} {verb} {} at {} that thread {tid} wrote at {} since the last barrier",
                        ctx.tid,
                        self.describe(buf, byte),
                        place(at),
                        place(their)
                    ));
                }
            }
            return;
        }
        let mut m = lock(&self.writes);
        let prev = m.get(&(buf, byte)).copied();
        if write {
            m.insert(
                (buf, byte),
                Writer {
                    block: ctx.block,
                    tid: ctx.tid,
                    epoch: ctx.epoch,
                    at,
                },
            );
        }
        drop(m);
        if let Some(w) = prev.filter(|&w| Self::conflict(w, &ctx)) {
            st.race(format!(
                "thread {} {verb} {} at {} that {}",
                ctx.tid,
                self.describe(buf, byte),
                place(at),
                Self::who(w, &ctx)
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
        writes: Mutex::new(HashMap::new()),
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
            shared: shm.as_mut_ptr() as *mut u8,
            shared_len: l.shared,
            probe: probe_ptr,
            error: Mutex::new(None),
            shared_writes: Mutex::new(HashMap::new()),
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
                            Err(p) if p.is::<Abort>() => {}
                            Err(p) => st.record(DeviceError::KernelFault {
                                kernel,
                                backend: crate::Backend::Sim,
                                block: Some(st.idx),
                                detail: panic_message(p.as_ref()),
                                state: crate::DeviceState::Usable,
                            }),
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
