//! Port tables: which backend can run which kernel × dtype, and the one function that answers
//! both "is there a port" and "which port", so a gate and a launch cannot disagree.

use crate::catalog::KERNELS;
use crate::port::PortLaunch;
pub use crate::port::{Port, Slot};
use crate::registry;
use crate::{Backend, Device, PortError};
use kiln_math::{DType, KernelId, Waves};
use std::sync::OnceLock;

/// Every backend's ports of one kernel.
#[derive(Debug)]
pub struct KernelPorts {
    /// The kernel.
    pub kernel: KernelId,
    /// The cpu backend's slot.
    pub cpu: Slot,
    /// The sim backend's slot.
    pub sim: Slot,
    /// The CUDA backend's slot.
    pub cuda: Slot,
    /// The ROCm backend's slot.
    pub rocm: Slot,
    /// The wgpu backend's slot.
    pub wgpu: Slot,
}

impl KernelPorts {
    /// The slot of `backend`.
    pub fn slot(&self, backend: Backend) -> &Slot {
        match backend {
            Backend::Cpu => &self.cpu,
            Backend::Sim => &self.sim,
            Backend::Cuda => &self.cuda,
            Backend::Rocm => &self.rocm,
            Backend::Wgpu => &self.wgpu,
        }
    }
}

fn host_slot(id: KernelId, backend: Backend, wave: Option<u32>) -> Slot {
    let entry = KERNELS
        .iter()
        .find(|k| k.id == id)
        .expect("every listed kernel has an entry");
    Slot::Present(
        entry
            .instances
            .iter()
            .map(|i| Port {
                kernel: id,
                dtype: i.dtype,
                backend,
                wave,
                target: None,
                artifact: None,
                launch: PortLaunch::Host(if backend == Backend::Cpu {
                    i.cpu
                } else {
                    i.sim
                }),
            })
            .collect(),
    )
}

/// The port table of every kernel in the list, built once per process.
pub fn all_ports() -> &'static [KernelPorts] {
    static TABLE: OnceLock<Vec<KernelPorts>> = OnceLock::new();
    TABLE.get_or_init(|| {
        KernelId::ALL
            .iter()
            .map(|&id| KernelPorts {
                kernel: id,
                cpu: host_slot(id, Backend::Cpu, Some(1)),
                sim: host_slot(id, Backend::Sim, None),
                cuda: registry::gpu_slot(id, Backend::Cuda),
                rocm: registry::gpu_slot(id, Backend::Rocm),
                wgpu: registry::gpu_slot(id, Backend::Wgpu),
            })
            .collect()
    })
}

/// The port table of one kernel.
pub fn ports(kernel: KernelId) -> &'static KernelPorts {
    all_ports()
        .iter()
        .find(|t| t.kernel == kernel)
        .expect("every listed kernel has a table")
}

/// The port that runs `t`'s kernel as `dtype` on `dev`, or why there is none.
pub fn select_port<'a>(
    t: &'a KernelPorts,
    dev: &Device,
    dtype: DType,
) -> Result<&'a Port, PortError> {
    let kernel = t.kernel.name();
    let backend = dev.backend();
    let ports = match t.slot(backend) {
        Slot::Absent(reason) => {
            return Err(PortError::NoPort {
                kernel,
                backend,
                reason: reason.clone(),
            })
        }
        Slot::Present(p) => p,
    };
    let with_dtype: Vec<&Port> = ports.iter().filter(|p| p.dtype == dtype).collect();
    if with_dtype.is_empty() {
        return Err(PortError::NoPort {
            kernel,
            backend,
            reason: format!("the kernel has no {} instance", dtype.name()),
        });
    }
    let port = match dev.target() {
        // Artifacts built per target: the device's own, or none.
        Some(target) if with_dtype.iter().any(|p| p.target.is_some()) => with_dtype
            .iter()
            .copied()
            .find(|p| p.target == Some(target.as_str()))
            .ok_or_else(|| {
                let built: Vec<_> = with_dtype.iter().filter_map(|p| p.target).collect();
                PortError::NoPort {
                    kernel,
                    backend,
                    reason: format!("no artifact for {target} (built for {})", built.join(", ")),
                }
            })?,
        // Otherwise the first built for the device's wave, else the first (refused below).
        _ => with_dtype
            .iter()
            .copied()
            .find(|p| p.wave.is_none_or(|w| w == dev.wave()))
            .unwrap_or(with_dtype[0]),
    };
    if let Waves::Only(w) = t.kernel.waves() {
        if w != dev.wave() {
            return Err(PortError::WaveMismatch {
                kernel,
                built: w,
                device: dev.wave(),
            });
        }
    }
    if let Some(w) = port.wave {
        if w != dev.wave() {
            return Err(PortError::WaveMismatch {
                kernel,
                built: w,
                device: dev.wave(),
            });
        }
    }
    Ok(port)
}

/// Whether `select_port` would find a port.
pub fn has_port(t: &KernelPorts, dev: &Device, dtype: DType) -> bool {
    select_port(t, dev, dtype).is_ok()
}
