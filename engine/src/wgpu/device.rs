//! Opening the wgpu device (adapter and feature selection under [`Options`]), the
//! [`WgpuDevice`] it yields and that device's `GpuDevice` impl: allocation and launch.

use super::errors::{launch_err, other};
use super::memory::{Ctx, WgpuMemory};
use super::modules::{kiln_shaders_wgsl_max_block, module_for, KILN_SCRATCH_BYTES};
use super::state::{Prepared, Timer, WgpuDevice};
use crate::gpu::{DeviceMemory, GpuDevice, GpuLaunch};
use crate::port::Port;
use crate::{Backend, DeviceError};
use kiln_math::{DType, KernelId};
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Wave and block of the workgroup-memory variant. The emulated wave is the whole block, so a
/// wave collective reached in wave-uniform control flow (the Block rules) is block-uniform and
/// its barriers are met by every thread; 64 is the widest wave the sim checks every kernel at.
const EMULATED_WAVE: u32 = 64;

/// The process's wgpu device, opened once (`KILN_WGPU_NO_SUBGROUPS` / `KILN_WGPU_NO_F16` take
/// the workgroup-memory / packed-f16 modules on a device that has the features;
/// `KILN_WGPU_NO_TIMESTAMPS` times benchmarks on the host clock).
pub(crate) fn open() -> Result<Arc<dyn GpuDevice>, String> {
    static DEV: OnceLock<Result<Arc<WgpuDevice>, String>> = OnceLock::new();
    DEV.get_or_init(|| WgpuDevice::open(Options::from_env()).map(Arc::new))
        .clone()
        .map(|d| d as Arc<dyn GpuDevice>)
}

/// Which adapter features a wgpu device may use (tests open one per module variant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Use subgroup shuffles when the adapter has them; otherwise workgroup memory.
    pub subgroups: bool,
    /// Use `array<f16>` storage when the adapter has SHADER_F16; otherwise packed words.
    pub f16: bool,
    /// Time benchmarks with timestamp queries when the adapter has them; otherwise on the host
    /// clock.
    pub timestamps: bool,
}

impl Options {
    /// Every feature the adapter has.
    pub const ALL: Options = Options {
        subgroups: true,
        f16: true,
        timestamps: true,
    };

    /// What the process's device takes: every feature but those the `KILN_WGPU_NO_*`
    /// variables turn off.
    pub fn from_env() -> Options {
        Options {
            subgroups: std::env::var_os("KILN_WGPU_NO_SUBGROUPS").is_none(),
            f16: std::env::var_os("KILN_WGPU_NO_F16").is_none(),
            timestamps: std::env::var_os("KILN_WGPU_NO_TIMESTAMPS").is_none(),
        }
    }
}

impl crate::Device {
    /// A device on the caller's wgpu device and queue (Vulkan, Metal or DX12): kiln's buffers,
    /// pipelines and submissions go there, beside the engine's own (kiln holds its launches
    /// until a read, write, sync or `Device::flush`: flush before submitting work that reads
    /// kiln's outputs). `adapter` is the info of the adapter the device was requested from (its
    /// subgroup sizes decide the modules); kiln uses the subgroup, f16 and timestamp features
    /// the device was created with.
    pub fn wgpu_from(
        adapter: &wgpu::AdapterInfo,
        device: wgpu::Device,
        queue: wgpu::Queue,
    ) -> Result<crate::Device, crate::PortError> {
        WgpuDevice::on(adapter, device, queue, Options::ALL)
            .map(|d| crate::Device::from_gpu(Arc::new(d)))
            .map_err(|reason| {
                crate::PortError::Device(DeviceError::DeviceUnavailable {
                    backend: Backend::Wgpu,
                    reason,
                })
            })
    }
}

/// A separate wgpu device (its own pipeline cache) restricted to `opts`.
pub fn open_with(opts: Options) -> Result<crate::Device, crate::PortError> {
    WgpuDevice::open(opts)
        .map(|d| crate::Device::from_gpu(Arc::new(d)))
        .map_err(|e| crate::PortError::Device(DeviceError::Other(format!("wgpu: {e}"))))
}

impl WgpuDevice {
    fn open(opts: Options) -> Result<WgpuDevice, String> {
        let backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: None,
            apply_limit_buckets: false,
        }))
        .map_err(|e| {
            format!("no Vulkan, Metal or DX12 adapter ({e}); wgpu's GL backend is not used because the kernels' fast path needs subgroups (on Debian: apt-get install mesa-vulkan-drivers)")
        })?;
        let info = adapter.get_info();
        let feats = adapter.features();
        let limits = adapter.limits();
        let wanted = Self::features_for(&info, feats, opts);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("kiln"),
            required_features: wanted,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| format!("wgpu device on {}: {e}", info.name))?;
        WgpuDevice::on(&info, device, queue, opts)
    }

    /// The features kiln uses of those `feats` offers, under `opts`.
    fn features_for(
        info: &wgpu::AdapterInfo,
        feats: wgpu::Features,
        opts: Options,
    ) -> wgpu::Features {
        // Subgroup shuffles are only usable when the size the kernels fold over is fixed.
        let subgroups = feats.contains(wgpu::Features::SUBGROUP)
            && info.subgroup_min_size == info.subgroup_max_size
            && info.subgroup_min_size >= 4
            && opts.subgroups;
        let mut required = wgpu::Features::empty();
        for (on, f) in [
            (subgroups, wgpu::Features::SUBGROUP),
            (
                opts.f16 && feats.contains(wgpu::Features::SHADER_F16),
                wgpu::Features::SHADER_F16,
            ),
            (
                opts.timestamps && feats.contains(wgpu::Features::TIMESTAMP_QUERY),
                wgpu::Features::TIMESTAMP_QUERY,
            ),
        ] {
            if on {
                required |= f;
            }
        }
        required
    }

    /// A kiln device over an opened wgpu device and queue (the adapter's info gives its
    /// subgroup sizes): kiln uses the features the device was created with.
    fn on(
        info: &wgpu::AdapterInfo,
        device: wgpu::Device,
        queue: wgpu::Queue,
        opts: Options,
    ) -> Result<WgpuDevice, String> {
        let feats = Self::features_for(info, device.features(), opts);
        let limits = device.limits();
        let subgroups = feats.contains(wgpu::Features::SUBGROUP);
        let f16 = feats.contains(wgpu::Features::SHADER_F16);
        let timestamps = feats.contains(wgpu::Features::TIMESTAMP_QUERY);
        device.on_uncaptured_error(Arc::new(|e| eprintln!("kiln wgpu: uncaptured error: {e}")));
        let wave = if subgroups {
            info.subgroup_min_size
        } else {
            EMULATED_WAVE
        };
        let mut max_block = limits
            .max_compute_invocations_per_workgroup
            .min(limits.max_compute_workgroup_size_x)
            .min(kiln_shaders_wgsl_max_block());
        if !subgroups {
            max_block = max_block.min(EMULATED_WAVE);
            if max_block < EMULATED_WAVE {
                return Err(format!("{}: workgroups of {max_block} threads are too small for the emulated wave of {EMULATED_WAVE}", info.name));
            }
        }
        let timer = if timestamps {
            Timer::Timestamps
        } else {
            Timer::HostClock
        };
        Ok(WgpuDevice {
            ctx: Arc::new(Ctx::new(device, queue)),
            name: format!(
                "{} ({:?}, wgpu {:?}, subgroup {}, {}, {})",
                info.name,
                info.device_type,
                info.backend,
                if subgroups {
                    wave.to_string()
                } else {
                    format!("emulated {wave}")
                },
                if f16 { "f16" } else { "no f16" },
                timer.label()
            ),
            wave,
            subgroups,
            f16,
            timer,
            max_block,
            max_groups: limits.max_compute_workgroups_per_dimension,
            max_shared_bytes: limits.max_compute_workgroup_storage_size,
            software: info.device_type == wgpu::DeviceType::Cpu,
            pipelines: Mutex::new(HashMap::new()),
        })
    }

    /// Workgroup memory left for a launch's shared bytes: the modules' fixed scratch (512 words)
    /// and, without subgroups, the shuffle exchange array (1024 words) come first.
    pub(super) fn kernel_shared_limit(&self) -> u32 {
        let fixed = KILN_SCRATCH_BYTES as u32 + if self.subgroups { 0 } else { 1024 * 4 };
        self.max_shared_bytes.saturating_sub(fixed)
    }

    /// How benchmark launches and copies are timed on this device.
    pub fn timer(&self) -> Timer {
        self.timer
    }
}

impl GpuDevice for WgpuDevice {
    fn backend(&self) -> Backend {
        Backend::Wgpu
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn wave(&self) -> u32 {
        self.wave
    }

    fn ordinal(&self) -> usize {
        0
    }

    fn module_file(&self, kernel: KernelId, dtype: DType) -> Option<&'static str> {
        module_for(kernel, dtype, self.subgroups, self.f16).map(|m| m.file)
    }

    fn alloc(&self, bytes: usize) -> Result<Box<dyn DeviceMemory>, DeviceError> {
        // Bindings and copies are whole words; one spare word keeps zero-length tensors bindable.
        let size = (bytes.div_ceil(4) * 4).max(4) as u64;
        let scope = self
            .ctx
            .device
            .push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buf = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln tensor"),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(other(format!("wgpu allocation of {bytes} bytes: {e}")));
        }
        Ok(Box::new(WgpuMemory {
            ctx: self.ctx.clone(),
            buf,
            len: bytes,
        }))
    }

    fn max_block(&self) -> u32 {
        self.max_block
    }

    fn is_software(&self) -> bool {
        self.software
    }

    fn time_launches(
        &self,
        port: &Port,
        launches: &[GpuLaunch],
        runs: usize,
    ) -> Result<Vec<f64>, DeviceError> {
        WgpuDevice::time_launches(self, port, launches, runs)
    }
    fn time_copy(
        &self,
        dst: &dyn DeviceMemory,
        src: &dyn DeviceMemory,
        bytes: usize,
        runs: usize,
    ) -> Result<Vec<f64>, DeviceError> {
        WgpuDevice::time_copy(self, dst, src, bytes, runs)
    }
    fn time_stream(
        &self,
        kernel: crate::gpu::StreamKernel,
        src: &dyn DeviceMemory,
        dst: &dyn DeviceMemory,
        bytes: usize,
        groups: u32,
        checked: bool,
        runs: usize,
    ) -> Option<Result<Vec<f64>, DeviceError>> {
        Some(WgpuDevice::time_stream(
            self, kernel, src, dst, bytes, groups, checked, runs,
        ))
    }
    fn max_shared_bytes(&self) -> usize {
        self.kernel_shared_limit() as usize
    }

    fn launch(&self, port: &Port, l: &GpuLaunch) -> Result<(), DeviceError> {
        let kernel = l.kernel;
        let dev = &self.ctx.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let Prepared {
            pipeline: p,
            bind,
            groups,
            fault_buf,
            fault_bytes,
            ..
        } = self.prepare(port, l)?;
        let mut enc = dev.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(kernel.name()),
                timestamp_writes: None,
            });
            pass.set_pipeline(&p.pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        }
        // Finished inside the launch's error scope, so a validation error names its kernel;
        // submitted with the rest of the held work.
        let commands = enc.finish();
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(launch_err(kernel, format!("{e}")));
        }
        self.ctx.enqueue(commands);
        self.ctx
            .defer_fault_check(kernel, fault_buf, fault_bytes, self.wave)
    }

    fn sync(&self) -> Result<(), DeviceError> {
        self.ctx.wait()?;
        self.ctx.check_faults()
    }

    fn flush(&self) -> Result<(), DeviceError> {
        self.ctx.flush();
        Ok(())
    }

    fn queue_submissions(&self) -> Option<u64> {
        Some(self.ctx.submissions())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl crate::Tensor {
    /// A view over the caller's wgpu buffer: `shape` elements of `dtype` starting `byte_offset`
    /// bytes into `buffer`, which must belong to `dev`'s wgpu device (see
    /// [`Device::wgpu_from`](crate::Device::wgpu_from)) and have `STORAGE`, `COPY_SRC` and
    /// `COPY_DST` usage. The buffer is reference-counted: the view keeps it alive.
    pub fn from_wgpu_buffer(
        dev: &crate::Device,
        buffer: wgpu::Buffer,
        byte_offset: u64,
        dtype: kiln_math::DType,
        shape: &[usize],
    ) -> Result<crate::Tensor, crate::PortError> {
        let ctx = dev
            .gpu()
            .and_then(|g| g.as_any().downcast_ref::<WgpuDevice>())
            .map(|d| d.ctx.clone())
            .ok_or_else(|| other(format!("{} is not a wgpu device", dev.name())))?;
        let need = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST;
        if !buffer.usage().contains(need) {
            return Err(other(format!(
                "a wgpu buffer with usage {:?} cannot back a tensor: it needs {need:?}",
                buffer.usage()
            ))
            .into());
        }
        let len = buffer.size() as usize;
        let mem = WgpuMemory {
            ctx,
            buf: buffer,
            len,
        };
        crate::Tensor::over_at(
            dev,
            crate::storage::Storage::Gpu(Box::new(mem)),
            byte_offset as usize,
            dtype,
            shape,
        )
    }
}
