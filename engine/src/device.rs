//! Devices: a backend plus what a launch needs to know about it (wave width, memory space).

use crate::gpu::GpuDevice;
use crate::host::SimConfig;
use crate::storage::{MemoryMeter, Storage};
use crate::{Backend, PortError};
use kiln_math::{DType, KernelId};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub(crate) enum DeviceKind {
    Cpu,
    Sim(SimConfig),
    Gpu(Arc<dyn GpuDevice>),
}

#[derive(Debug)]
struct Inner {
    backend: Backend,
    name: String,
    wave: u32,
    kind: DeviceKind,
    /// Allocations kiln made on this device (tensors and scratch).
    allocations: AtomicUsize,
    /// The scratch region ops carve their temporaries from, reused call after call.
    pub(crate) scratch: Mutex<Option<Arc<Storage>>>,
    /// Bytes of kiln's live allocations on the device, and their peak.
    meter: Arc<MemoryMeter>,
    /// While profiling: each launch's kernel, dtype and time, in launch order.
    profile: Mutex<Option<Vec<LaunchTime>>>,
}

/// One launch timed by a profiling pass (`kiln::timing::profile_launches`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LaunchTime {
    /// The kernel.
    pub kernel: KernelId,
    /// Its element type.
    pub dtype: DType,
    /// Seconds: device timers around the launch where the backend has them (CUDA events),
    /// else the host clock from a drained queue to the launch's completion.
    pub seconds: f64,
}

impl Inner {
    fn new(backend: Backend, name: String, wave: u32, kind: DeviceKind) -> Inner {
        Inner {
            backend,
            name,
            wave,
            kind,
            allocations: AtomicUsize::new(0),
            scratch: Mutex::new(None),
            meter: Arc::default(),
            profile: Mutex::new(None),
        }
    }
}

/// A device to launch on. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Device(Arc<Inner>);

/// Where a tensor's bytes live; tensors of one memory space can be used on any device of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemorySpace {
    /// Host memory: the cpu and the sim.
    Host,
    /// Memory of one GPU.
    Gpu {
        /// Its backend.
        backend: Backend,
        /// The device among that backend's (CUDA ordinal, HIP device).
        ordinal: usize,
    },
}

impl Device {
    /// The host CPU: kernel bodies run with a serial block (wave 1), blocks spread over cores.
    pub fn cpu() -> Device {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Device(Arc::new(Inner::new(
            Backend::Cpu,
            format!("host cpu ({threads} threads)"),
            1,
            DeviceKind::Cpu,
        )))
    }

    /// The SIMT emulator at `wave` lanes per wave.
    pub fn sim(wave: u32) -> Result<Device, PortError> {
        Device::sim_with(SimConfig::new(wave))
    }

    /// The SIMT emulator with `cfg` (wave, block size override, checks).
    pub fn sim_with(cfg: SimConfig) -> Result<Device, PortError> {
        let refuse = |msg: String| Err(PortError::Device(crate::DeviceError::Other(msg)));
        if !SimConfig::WAVES.contains(&cfg.wave) {
            return refuse(format!(
                "sim wave {} is not one of {:?}",
                cfg.wave,
                SimConfig::WAVES
            ));
        }
        if let Some(b) = cfg.block {
            if b == 0 || b % cfg.wave != 0 || b > 1024 {
                return refuse(format!(
                    "sim block {b} must be a multiple of the wave {} and at most 1024",
                    cfg.wave
                ));
            }
        }
        Ok(Device(Arc::new(Inner::new(
            Backend::Sim,
            format!("SIMT emulator (wave {})", cfg.wave),
            cfg.wave,
            DeviceKind::Sim(cfg),
        ))))
    }

    pub(crate) fn from_gpu(g: Arc<dyn GpuDevice>) -> Device {
        Device(Arc::new(Inner::new(
            g.backend(),
            g.name(),
            g.wave(),
            DeviceKind::Gpu(g),
        )))
    }

    /// The backend the device runs.
    pub fn backend(&self) -> Backend {
        self.0.backend
    }
    /// A human-readable name: the adapter, its arch or warp width, the artifact it runs.
    pub fn name(&self) -> &str {
        &self.0.name
    }
    /// The wave (warp, wavefront, subgroup) width the device runs kernels at.
    pub fn wave(&self) -> u32 {
        self.0.wave
    }
    /// Where its tensors' bytes live.
    pub fn memory_space(&self) -> MemorySpace {
        match &self.0.kind {
            DeviceKind::Gpu(g) => MemorySpace::Gpu {
                backend: g.backend(),
                ordinal: g.ordinal(),
            },
            _ => MemorySpace::Host,
        }
    }
    /// The target a GPU's artifacts must be built for (an AMD arch such as `gfx1151`).
    pub fn target(&self) -> Option<String> {
        match &self.0.kind {
            DeviceKind::Gpu(g) => g.target(),
            _ => None,
        }
    }
    /// Bytes of the device's last-level cache when it reports one (GPU backends).
    pub fn l2_bytes(&self) -> Option<usize> {
        match &self.0.kind {
            DeviceKind::Gpu(g) => g.l2_bytes(),
            _ => None,
        }
    }
    /// The GPU behind this device (backend tests and bench drivers reach `GpuDevice` here).
    pub fn gpu(&self) -> Option<&Arc<dyn GpuDevice>> {
        match &self.0.kind {
            DeviceKind::Gpu(g) => Some(g),
            _ => None,
        }
    }
    pub(crate) fn kind(&self) -> &DeviceKind {
        &self.0.kind
    }

    /// Waits until every launch and copy queued on the device has finished; a kernel fault
    /// seen then comes back as `DeviceError::KernelFault` naming the last kernel queued.
    /// Host devices run launches to completion, so there is nothing to wait for.
    pub fn sync(&self) -> Result<(), PortError> {
        match &self.0.kind {
            DeviceKind::Gpu(g) => Ok(g.sync()?),
            _ => Ok(()),
        }
    }

    /// Hands the work kiln holds back to the device's queue without waiting for it. On wgpu,
    /// launches and staged copies are held and submitted together at the next read, write,
    /// sync or flush (one submission per decode step): an engine that submits its own work on
    /// the queue it shares with kiln (`Device::wgpu_from`) flushes first. Other backends
    /// launch at once.
    pub fn flush(&self) -> Result<(), PortError> {
        match &self.0.kind {
            DeviceKind::Gpu(g) => Ok(g.flush()?),
            _ => Ok(()),
        }
    }

    /// Queue submissions kiln has made on this device, where the backend batches them (wgpu);
    /// `None` elsewhere. An engine can check that a step is one submission.
    pub fn queue_submissions(&self) -> Option<u64> {
        match &self.0.kind {
            DeviceKind::Gpu(g) => g.queue_submissions(),
            _ => None,
        }
    }

    /// How many allocations kiln has made on this device (tensors and scratch): an engine can
    /// check that a decode step allocates nothing once warm.
    pub fn allocations(&self) -> usize {
        self.0.allocations.load(Ordering::Relaxed)
    }

    /// Bytes of kiln's allocations on this device that are live now (tensors and scratch;
    /// memory borrowed from the caller is not kiln's and not counted).
    pub fn live_bytes(&self) -> usize {
        self.0.meter.live()
    }

    /// The most bytes of kiln's allocations live at once since the device opened or since
    /// [`Device::reset_peak_bytes`].
    pub fn peak_bytes(&self) -> usize {
        self.0.meter.peak()
    }

    /// Starts a new peak from the bytes live now.
    pub fn reset_peak_bytes(&self) {
        self.0.meter.reset_peak();
    }

    pub(crate) fn meter(&self) -> &Arc<MemoryMeter> {
        &self.0.meter
    }

    fn profile_slot(&self) -> std::sync::MutexGuard<'_, Option<Vec<LaunchTime>>> {
        self.0.profile.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts collecting a [`LaunchTime`] per launch (the launcher times each one alone).
    #[cfg_attr(not(feature = "harness"), allow(dead_code))] // timing::profile_launches
    pub(crate) fn start_profile(&self) {
        *self.profile_slot() = Some(Vec::new());
    }

    /// Stops collecting and returns what was collected.
    #[cfg_attr(not(feature = "harness"), allow(dead_code))] // timing::profile_launches
    pub(crate) fn take_profile(&self) -> Vec<LaunchTime> {
        self.profile_slot().take().unwrap_or_default()
    }

    /// Whether launches are being profiled.
    pub(crate) fn is_profiling(&self) -> bool {
        self.profile_slot().is_some()
    }

    pub(crate) fn record_launch(&self, t: LaunchTime) {
        if let Some(v) = self.profile_slot().as_mut() {
            v.push(t);
        }
    }

    pub(crate) fn scratch_slot(&self) -> &Mutex<Option<Arc<Storage>>> {
        &self.0.scratch
    }

    pub(crate) fn count_allocation(&self) {
        self.0.allocations.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes of the scratch region ops take their temporaries from (0 before the first op that
    /// needs one). It grows to the largest request and is then reused.
    pub fn scratch_bytes(&self) -> usize {
        self.0
            .scratch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |s| s.len())
    }

    /// Whether the device is recording launches into a graph (a CUDA stream capture): kiln then
    /// refuses to allocate, since the graph would keep addresses a later allocation frees.
    pub fn is_capturing(&self) -> bool {
        match &self.0.kind {
            DeviceKind::Gpu(g) => g.is_capturing(),
            _ => false,
        }
    }
}
