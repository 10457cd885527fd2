//! Timing for benchmarks: kernel launches and copies, on the device's own clock where it has
//! one (GPU events) and on the wall clock for the host backends.

use crate::gpu::GpuRecording;
pub use crate::gpu::StreamKernel;
use crate::launch::{gpu_bufs, gpu_launch, launch_checked_tables, prepare, Arg, Mode, Tables};
use crate::ports::{ports, select_port};
use crate::{Device, DeviceKind, LaunchTime, PortError};
use kiln_math::KernelId;
use std::time::Instant;

/// How the timed launches of a pass are issued on a GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Issue {
    /// Recorded once and replayed as one unit where the backend records (CUDA graphs): the
    /// device's time per launch, as the peers' graph replay measures it.
    #[default]
    Replayed,
    /// Issued one by one from the host every pass: where the host's per-launch cost exceeds the
    /// kernel's time, that cost is what is measured.
    Eager,
}

impl Issue {
    /// What `dev` does when asked for `self`: replays only where the backend records.
    pub fn on(self, dev: &Device) -> Issue {
        match dev.kind() {
            DeviceKind::Gpu(g) if g.records() => self,
            _ => Issue::Eager,
        }
    }

    /// `replayed` or `eager`.
    pub fn name(self) -> &'static str {
        match self {
            Issue::Replayed => "replayed",
            Issue::Eager => "eager",
        }
    }
}

/// Times `runs` passes over the argument `sets` (one pass launches the kernel once per set, in
/// order, through its port), after an untimed warm-up pass. Returns seconds per launch for each
/// pass. Rotating over several sets keeps the inputs out of the caches.
pub fn time_kernel(
    dev: &Device,
    kernel: KernelId,
    params: &[u32],
    sets: &mut [Vec<Arg>],
    runs: usize,
    issue: Issue,
) -> Result<Vec<f64>, PortError> {
    if sets.is_empty() {
        return Ok(Vec::new());
    }
    let n = sets.len() as f64;
    match dev.kind() {
        DeviceKind::Gpu(g) => {
            let mut bound = Vec::with_capacity(sets.len());
            for set in sets.iter() {
                bound.push(prepare(dev, kernel, params, set, Tables::Read)?);
            }
            let dtype = bound[0].0;
            let port = select_port(ports(kernel), dev, dtype)?;
            let bufs: Vec<_> = sets.iter().map(|s| gpu_bufs(s)).collect();
            let launches: Vec<_> = bound
                .iter()
                .zip(&bufs)
                .map(|((_, words, geometry), b)| gpu_launch(g.as_ref(), port, words, geometry, b))
                .collect();
            if issue == Issue::Replayed {
                let mut pass = || -> Result<(), PortError> {
                    launches.iter().try_for_each(|l| g.launch(port, l))?;
                    Ok(())
                };
                if let Some(t) = g.time_replays(runs, launches.len(), &mut pass) {
                    return t;
                }
            }
            Ok(g.time_launches(port, &launches, runs)?)
        }
        _ => {
            // The tables are checked once here, so the passes time the kernel alone.
            for set in sets.iter() {
                prepare(dev, kernel, params, set, Tables::Read)?;
            }
            let pass = |sets: &mut [Vec<Arg>]| -> Result<f64, PortError> {
                let t = Instant::now();
                for set in sets.iter_mut() {
                    launch_checked_tables(dev, kernel, params, set, Mode::PortOnly)?;
                }
                Ok(t.elapsed().as_secs_f64() / n)
            };
            pass(sets)?;
            (0..runs).map(|_| pass(sets)).collect()
        }
    }
}

/// Times `runs` copies of `bytes` between two buffers of the device's memory (device to device
/// on a GPU, `memcpy` on the host), after an untimed warm-up copy; seconds per copy.
pub fn time_copy(dev: &Device, bytes: usize, runs: usize) -> Result<Vec<f64>, PortError> {
    match dev.kind() {
        DeviceKind::Gpu(g) => {
            let src = g.alloc(bytes)?;
            let dst = g.alloc(bytes)?;
            // Touch the source so the copy reads written memory.
            src.write(0, &vec![0x3c; bytes])?;
            Ok(g.time_copy(dst.as_ref(), src.as_ref(), bytes, runs)?)
        }
        _ => {
            let src = vec![0x3cu8; bytes];
            let mut dst = vec![0u8; bytes];
            let mut copy = || {
                let t = Instant::now();
                dst.copy_from_slice(std::hint::black_box(&src));
                std::hint::black_box(&mut dst);
                t.elapsed().as_secs_f64()
            };
            copy();
            Ok((0..runs).map(|_| copy()).collect())
        }
    }
}

/// Times `runs` passes of a plain stream kernel (not one of kiln's: the adapter's own rate, the
/// yardstick where its buffer copy runs on another engine than its shaders) over `bytes` with
/// `groups` workgroups of 256, after a warm-up; `checked` keeps the backend's runtime checks.
/// Seconds per pass, or `None` where the backend has no stream kernel (wgpu has).
pub fn time_stream(
    dev: &Device,
    kernel: StreamKernel,
    bytes: usize,
    groups: u32,
    checked: bool,
    runs: usize,
) -> Result<Option<Vec<f64>>, PortError> {
    let DeviceKind::Gpu(g) = dev.kind() else {
        return Ok(None);
    };
    let src = g.alloc(bytes)?;
    let dst = g.alloc(bytes)?;
    // Zeroed memory: the read kernel's sum never reaches the word that would make it store.
    src.write(0, &vec![0; bytes])?;
    match g.time_stream(
        kernel,
        src.as_ref(),
        dst.as_ref(),
        bytes,
        groups,
        checked,
        runs,
    ) {
        None => Ok(None),
        Some(t) => Ok(Some(t?)),
    }
}

/// Times `runs` passes of whatever `pass` enqueues (ops on `dev`'s tensors; no allocation in
/// it when replayed), after an untimed pass; seconds per pass ÷ `per_pass`. Replayed as one
/// recorded unit where the backend records and `issue` asks for it; otherwise issued eagerly
/// and timed on the host clock up to the device's idle.
pub fn time_recorded(
    dev: &Device,
    runs: usize,
    per_pass: usize,
    issue: Issue,
    mut pass: impl FnMut() -> Result<(), PortError>,
) -> Result<Vec<f64>, PortError> {
    if let (DeviceKind::Gpu(g), Issue::Replayed) = (dev.kind(), issue) {
        if let Some(t) = g.time_replays(runs, per_pass, &mut pass) {
            return t;
        }
    }
    let per = per_pass.max(1) as f64;
    let mut timed = || -> Result<f64, PortError> {
        let t = Instant::now();
        pass()?;
        dev.sync()?;
        Ok(t.elapsed().as_secs_f64() / per)
    };
    timed()?;
    (0..runs).map(|_| timed()).collect()
}

/// Runs what `pass` enqueues with every launch timed alone, in order: between device events on
/// CUDA, on the host clock from a drained queue to completion on other GPUs, around the body
/// on the host backends. A profile of a decode step, aggregated by kernel and dtype, says where
/// its device time goes; the step runs slower than unprofiled (a wait after every launch).
pub fn profile_launches(
    dev: &Device,
    pass: impl FnOnce() -> Result<(), PortError>,
) -> Result<Vec<LaunchTime>, PortError> {
    dev.sync()?;
    dev.start_profile();
    let ran = pass();
    let launches = dev.take_profile();
    ran?;
    Ok(launches)
}

/// Launches recorded once and replayed as one unit (a CUDA graph).
#[derive(Debug)]
pub struct Recording(Box<dyn GpuRecording>);

impl Recording {
    /// Enqueues one replay; the launches see the buffers' contents at replay time.
    pub fn replay(&self) -> Result<(), PortError> {
        Ok(self.0.replay()?)
    }
}

/// Records what `pass` enqueues (ops on buffers made beforehand: nothing may allocate, so run
/// the pass once eagerly first) where the backend records; `None` elsewhere.
pub fn record(
    dev: &Device,
    mut pass: impl FnMut() -> Result<(), PortError>,
) -> Result<Option<Recording>, PortError> {
    match dev.kind() {
        DeviceKind::Gpu(g) => g.record(&mut pass).transpose().map(|r| r.map(Recording)),
        _ => Ok(None),
    }
}
