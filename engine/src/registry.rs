//! The backend registry: the one place that names every backend. It opens devices and asks
//! each GPU backend for its slot of a kernel; nothing below it knows the backends exist.

use crate::gpu::GpuDevice;
use crate::port::Slot;
use crate::{Backend, Device, PortError};
use kiln_math::KernelId;
use std::sync::Arc;

impl Device {
    /// Opens the default device of a backend (`sim` at wave 32, GPU ordinal 0).
    pub fn open(backend: Backend) -> Result<Device, PortError> {
        match backend {
            Backend::Cpu => Ok(Device::cpu()),
            Backend::Sim => Device::sim(32),
            other => match open_gpu(other) {
                Ok(g) => Ok(Device::from_gpu(g)),
                Err(reason) => Err(PortError::Device(crate::DeviceError::DeviceUnavailable {
                    backend: other,
                    reason,
                })),
            },
        }
    }

    /// The fastest device present: CUDA, then ROCm, then a hardware wgpu adapter, else the
    /// host cpu (a software adapter such as lavapipe loses to the host backend).
    pub fn best() -> Device {
        [Backend::Cuda, Backend::Rocm, Backend::Wgpu]
            .into_iter()
            .filter_map(|b| Device::open(b).ok())
            .find(|d| !d.gpu().is_some_and(|g| g.is_software()))
            .unwrap_or_else(Device::cpu)
    }
}

/// The slot of a GPU backend for one kernel: its artifacts' ports, or why there are none.
#[cfg_attr(
    not(any(feature = "cuda", feature = "rocm", feature = "wgpu")),
    allow(unused_variables)
)]
pub(crate) fn gpu_slot(id: KernelId, backend: Backend) -> Slot {
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => crate::cuda::slot(id),
        #[cfg(feature = "rocm")]
        Backend::Rocm => crate::rocm::slot(id),
        #[cfg(feature = "wgpu")]
        Backend::Wgpu => crate::wgpu::slot(id),
        Backend::Cpu | Backend::Sim => unreachable!("host backends have host slots"),
        #[allow(unreachable_patterns)] // every backend feature on
        other => Slot::Absent(not_built(other)),
    }
}

/// Opens a GPU backend's first device, or says why it cannot.
fn open_gpu(backend: Backend) -> Result<Arc<dyn GpuDevice>, String> {
    match backend {
        Backend::Cpu | Backend::Sim => Err("not a GPU backend".into()),
        #[cfg(feature = "cuda")]
        Backend::Cuda => crate::cuda::open(),
        #[cfg(feature = "rocm")]
        Backend::Rocm => crate::rocm::open(),
        #[cfg(feature = "wgpu")]
        Backend::Wgpu => crate::wgpu::open(),
        #[allow(unreachable_patterns)] // every backend feature on
        other => Err(not_built(other)),
    }
}

/// Why a backend compiled out of this build (its Cargo feature off) is absent.
fn not_built(backend: Backend) -> String {
    format!("kiln was built without the `{backend}` feature")
}

/// Why a backend cannot be opened on this machine, or `None` when it can.
pub fn unavailable_reason(backend: Backend) -> Option<String> {
    match backend {
        Backend::Cpu | Backend::Sim => None,
        other => open_gpu(other).err(),
    }
}

/// One line of `kiln devices`.
#[derive(Clone, Debug)]
pub struct DeviceReport {
    /// The backend.
    pub backend: Backend,
    /// Whether a device of it opens here.
    pub available: bool,
    /// The device's name when available, else why not.
    pub detail: String,
    /// The device's wave when available.
    pub wave: Option<u32>,
}

/// Every backend and whether it can run here.
pub fn devices() -> Vec<DeviceReport> {
    Backend::ALL
        .into_iter()
        .map(|b| match Device::open(b) {
            Ok(d) => DeviceReport {
                backend: b,
                available: true,
                detail: d.name().to_string(),
                wave: Some(d.wave()),
            },
            Err(e) => DeviceReport {
                backend: b,
                available: false,
                detail: unavailable_reason(b).unwrap_or_else(|| e.to_string()),
                wave: None,
            },
        })
        .collect()
}
