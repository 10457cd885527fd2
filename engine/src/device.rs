//! Devices: a backend plus what a launch needs to know about it (wave width, memory space).

use crate::gpu::GpuDevice;
use crate::host::SimConfig;
use crate::{Backend, PortError};
use std::sync::Arc;

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
}

/// A device to launch on. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Device(Arc<Inner>);

/// Where a tensor's bytes live; tensors of one memory space can be used on any device of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemorySpace {
    Host,
    Gpu { backend: Backend, ordinal: usize },
}

impl Device {
    /// The host CPU: kernel bodies run with a serial block (wave 1), blocks spread over cores.
    pub fn cpu() -> Device {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Device(Arc::new(Inner {
            backend: Backend::Cpu,
            name: format!("host cpu ({threads} threads)"),
            wave: 1,
            kind: DeviceKind::Cpu,
        }))
    }

    /// The SIMT emulator at `wave` lanes per wave.
    pub fn sim(wave: u32) -> Result<Device, PortError> {
        Device::sim_with(SimConfig::new(wave))
    }

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
        Ok(Device(Arc::new(Inner {
            backend: Backend::Sim,
            name: format!("SIMT emulator (wave {})", cfg.wave),
            wave: cfg.wave,
            kind: DeviceKind::Sim(cfg),
        })))
    }

    pub(crate) fn from_gpu(g: Arc<dyn GpuDevice>) -> Device {
        Device(Arc::new(Inner {
            backend: g.backend(),
            name: g.name(),
            wave: g.wave(),
            kind: DeviceKind::Gpu(g),
        }))
    }

    pub fn backend(&self) -> Backend {
        self.0.backend
    }
    pub fn name(&self) -> &str {
        &self.0.name
    }
    /// The wave (warp, wavefront, subgroup) width the device runs kernels at.
    pub fn wave(&self) -> u32 {
        self.0.wave
    }
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
}
