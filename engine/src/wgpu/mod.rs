//! The wgpu backend: WGSL modules translated from kiln-math at build time (`build.rs`), run
//! through wgpu on Vulkan (Metal on macOS, DX12 on Windows; wgpu's GL backend is not built, so
//! a GL-only machine has no wgpu device rather than one without subgroups).
//!
//! The wave the kernels see is the adapter's subgroup size when the adapter has SUBGROUP and a
//! single subgroup size; otherwise the modules' workgroup-memory variant runs with blocks of 64
//! threads that are one emulated wave of 64.
//! Pipelines are specialised per kernel × dtype × block size × shared words and cached for the
//! process.

use crate::gpu::{DeviceMemory, GpuDevice, GpuLaunch};
use crate::port::{Port, PortLaunch, Slot};
use crate::{Backend, DeviceError};
use kiln_math::{scratch_words, Access, DType, KernelId};
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// One generated module (the table is written by build.rs).
#[derive(Debug)]
pub(crate) struct WgslModule {
    pub kernel: &'static str,
    pub dtype: &'static str,
    pub subgroups: bool,
    pub f16_storage: bool,
    pub uses_shared: bool,
    pub uses_f16: bool,
    /// The module's file name (`kiln_shaders_wgsl::Module::file_name`).
    pub file: &'static str,
    pub source: &'static str,
}

pub(crate) static MODULES: &[WgslModule] = include!(concat!(env!("OUT_DIR"), "/wgsl_modules.rs"));

/// A folder of WGSL files (named as `cargo run -p kiln-shaders-wgsl --example dump` names them)
/// that replace the embedded modules they name: A/B runs of hand-edited or rebuilt modules
/// without rebuilding the engine. Bindings, params and overrides must match this build's.
const WGSL_OVERRIDE_ENV: &str = "KILN_WGSL_DIR";

/// The WGSL of `m`: the file of its name in `$KILN_WGSL_DIR` where that exists, else the
/// embedded module.
fn module_source(m: &WgslModule) -> Result<std::borrow::Cow<'static, str>, DeviceError> {
    let Some(dir) = std::env::var_os(WGSL_OVERRIDE_ENV) else {
        return Ok(m.source.into());
    };
    let path = std::path::Path::new(&dir).join(m.file);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text.into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(m.source.into()),
        Err(e) => Err(other(format!(
            "{WGSL_OVERRIDE_ENV}: {}: {e}",
            path.display()
        ))),
    }
}

/// Wave and block of the workgroup-memory variant. The emulated wave is the whole block, so a
/// wave collective reached in wave-uniform control flow (the Block rules) is block-uniform and
/// its barriers are met by every thread; 64 is the widest wave the sim checks every kernel at.
const EMULATED_WAVE: u32 = 64;

/// Words the meta buffer needs beyond params: (offset, len) per buffer, then the grid.
fn meta_words(params: &[u32], l: &GpuLaunch) -> Result<Vec<u32>, DeviceError> {
    let mut w = params.to_vec();
    for (k, b) in l.bufs.iter().enumerate() {
        let size = b.dtype.size();
        if !b.offset.is_multiple_of(size) {
            return Err(launch_err(
                l.kernel,
                format!(
                    "buffer {k} starts at byte {} (not a whole element)",
                    b.offset
                ),
            ));
        }
        let off = u32::try_from(b.offset / size);
        let len = u32::try_from(b.len);
        match (off, len) {
            (Ok(o), Ok(n)) => w.extend([o, n]),
            _ => {
                return Err(launch_err(
                    l.kernel,
                    format!("buffer {k} is too large for 32-bit indexing"),
                ))
            }
        }
    }
    w.extend(l.grid);
    Ok(w)
}

fn launch_err(kernel: KernelId, detail: String) -> DeviceError {
    DeviceError::Launch {
        kernel: kernel.name(),
        detail,
    }
}

fn other(msg: impl Into<String>) -> DeviceError {
    DeviceError::Other(msg.into())
}

/// Kernels whose WGSL port is held back, and why (`kiln ports` shows the reason; the ops take
/// the fallback there). None at present: RoPE's was until the prelude's exp2f became correctly
/// rounded, xIELU's until module consts resolved per file.
const HELD_BACK: &[(KernelId, &str)] = &[];

/// Bytes of the modules' `kiln_scratch` array (the prelude's `KILN_SCRATCH_WORDS`).
const KILN_SCRATCH_BYTES: usize = 512 * 4;

/// The wgpu port slot of a kernel: a port per dtype with a module for this variant set.
pub(crate) fn slot(id: KernelId) -> Slot {
    if let Some((_, why)) = HELD_BACK.iter().find(|(k, _)| *k == id) {
        return Slot::Absent((*why).into());
    }
    let ports: Vec<Port> = id
        .dtypes()
        .iter()
        .filter(|dt| {
            MODULES
                .iter()
                .any(|m| m.kernel == id.name() && m.dtype == dt.name())
        })
        .map(|&dt| Port {
            kernel: id,
            dtype: dt,
            backend: Backend::Wgpu,
            wave: None,
            target: None,
            artifact: Some("WGSL generated at build time (the adapter's subgroup size)".into()),
            launch: PortLaunch::Artifact {
                symbol: id.symbol(dt).expect("a listed dtype has a symbol"),
            },
        })
        .collect();
    if ports.is_empty() {
        Slot::Absent("no WGSL module was generated for this kernel".into())
    } else {
        Slot::Present(ports)
    }
}

/// The process's wgpu device, opened once (`KILN_WGPU_NO_SUBGROUPS` / `KILN_WGPU_NO_F16` take
/// the workgroup-memory / packed-f16 modules on a device that has the features;
/// `KILN_WGPU_NO_TIMESTAMPS` times benchmarks on the host clock).
pub(crate) fn open() -> Result<Arc<dyn GpuDevice>, String> {
    static DEV: OnceLock<Result<Arc<WgpuDevice>, String>> = OnceLock::new();
    DEV.get_or_init(|| {
        WgpuDevice::open(Options {
            subgroups: std::env::var_os("KILN_WGPU_NO_SUBGROUPS").is_none(),
            f16: std::env::var_os("KILN_WGPU_NO_F16").is_none(),
            timestamps: std::env::var_os("KILN_WGPU_NO_TIMESTAMPS").is_none(),
        })
        .map(Arc::new)
    })
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
}

/// How a wgpu device times benchmark launches and copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// Timestamp queries at the start of the first pass and the end of the last.
    Timestamps,
    /// The host clock from submit to the end of a wait for the queue: includes submission
    /// and wake-up latency (adapters without timestamp queries, or `KILN_WGPU_NO_TIMESTAMPS`).
    HostClock,
}

impl Timer {
    /// How the device name states it.
    fn label(self) -> &'static str {
        match self {
            Timer::Timestamps => "timed by timestamp queries",
            Timer::HostClock => "host-timed: submit to queue idle, no timestamp queries",
        }
    }
}

/// A separate wgpu device (its own pipeline cache) restricted to `opts`.
pub fn open_with(opts: Options) -> Result<crate::Device, crate::PortError> {
    WgpuDevice::open(opts)
        .map(|d| crate::Device::from_gpu(Arc::new(d)))
        .map_err(|e| crate::PortError::Device(DeviceError::Other(format!("wgpu: {e}"))))
}

struct Ctx {
    device: wgpu::Device,
    queue: wgpu::Queue,
}

impl Ctx {
    /// Waits for all submitted work.
    fn wait(&self) -> Result<(), DeviceError> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| other(format!("wgpu poll: {e}")))
    }

    /// Copies `len` bytes at `offset` of `buf` (4-byte aligned) to the host.
    fn read_back(&self, buf: &wgpu::Buffer, offset: u64, len: u64) -> Result<Vec<u8>, DeviceError> {
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln readback"),
            size: len,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(buf, offset, &staging, 0, len);
        self.queue.submit([enc.finish()]);
        self.map_read(&staging)
    }

    fn map_read(&self, staging: &wgpu::Buffer) -> Result<Vec<u8>, DeviceError> {
        let slice = staging.slice(..);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        rx.recv()
            .map_err(|_| other("wgpu map callback dropped"))?
            .map_err(|e| other(format!("wgpu map: {e}")))?;
        let data = slice
            .get_mapped_range()
            .map_err(|e| other(format!("wgpu mapped range: {e}")))?
            .to_vec();
        staging.unmap();
        Ok(data)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct PipelineKey {
    kernel: KernelId,
    dtype: DType,
    block: u32,
    shared_words: u32,
}

/// A launch ready to dispatch.
struct Prepared {
    kernel: KernelId,
    pipeline: Arc<Pipeline>,
    bind: wgpu::BindGroup,
    groups: [u32; 3],
    fault_buf: wgpu::Buffer,
    fault_bytes: u64,
    /// Kept alive until the dispatch is submitted.
    _meta: wgpu::Buffer,
}

struct Pipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

/// An opened wgpu adapter and device.
pub struct WgpuDevice {
    ctx: Arc<Ctx>,
    name: String,
    wave: u32,
    subgroups: bool,
    f16: bool,
    timer: Timer,
    max_block: u32,
    max_groups: u32,
    max_shared_bytes: u32,
    pipelines: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
}

impl std::fmt::Debug for WgpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuDevice")
            .field("name", &self.name)
            .field("wave", &self.wave)
            .finish()
    }
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
        // Subgroup shuffles are only usable when the size the kernels fold over is fixed.
        let subgroups = feats.contains(wgpu::Features::SUBGROUP)
            && info.subgroup_min_size == info.subgroup_max_size
            && info.subgroup_min_size >= 4
            && opts.subgroups;
        let f16 = feats.contains(wgpu::Features::SHADER_F16) && opts.f16;
        let timestamps = feats.contains(wgpu::Features::TIMESTAMP_QUERY) && opts.timestamps;
        let mut required = wgpu::Features::empty();
        for (on, f) in [
            (subgroups, wgpu::Features::SUBGROUP),
            (f16, wgpu::Features::SHADER_F16),
            (timestamps, wgpu::Features::TIMESTAMP_QUERY),
        ] {
            if on {
                required |= f;
            }
        }
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("kiln"),
            required_features: required,
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| format!("wgpu device on {}: {e}", info.name))?;
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
            ctx: Arc::new(Ctx { device, queue }),
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
            pipelines: Mutex::new(HashMap::new()),
        })
    }

    /// Workgroup memory left for a launch's shared bytes: the modules' fixed scratch (512 words)
    /// and, without subgroups, the shuffle exchange array (1024 words) come first.
    fn kernel_shared_limit(&self) -> u32 {
        let fixed = KILN_SCRATCH_BYTES as u32 + if self.subgroups { 0 } else { 1024 * 4 };
        self.max_shared_bytes.saturating_sub(fixed)
    }

    /// How benchmark launches and copies are timed on this device.
    pub fn timer(&self) -> Timer {
        self.timer
    }

    fn module_for(&self, kernel: KernelId, dtype: DType) -> Option<&'static WgslModule> {
        let has_fixed_f16 = kernel
            .buffers()
            .iter()
            .any(|b| b.elem == kiln_math::Elem::Fixed(DType::F16));
        let f16_storage = self.f16 && (dtype == DType::F16 || has_fixed_f16);
        MODULES.iter().find(|m| {
            m.kernel == kernel.name()
                && m.dtype == dtype.name()
                && m.subgroups == self.subgroups
                && m.f16_storage == f16_storage
                && (!m.uses_f16 || self.f16)
        })
    }

    fn pipeline(&self, key: PipelineKey) -> Result<Arc<Pipeline>, DeviceError> {
        if let Some(p) = self.pipelines.lock().unwrap().get(&key) {
            return Ok(p.clone());
        }
        let kernel = key.kernel;
        let m = self.module_for(kernel, key.dtype).ok_or_else(|| {
            launch_err(
                kernel,
                format!("no WGSL module for {} on this adapter", key.dtype.name()),
            )
        })?;
        let source = module_source(m)?;
        let dev = &self.ctx.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(kernel.name()),
            source: wgpu::ShaderSource::Wgsl(source),
        });
        let storage = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let bufs = kernel.buffers();
        let mut entries: Vec<_> = bufs
            .iter()
            .enumerate()
            .map(|(k, b)| storage(k as u32, b.access == Access::Read))
            .collect();
        entries.push(storage(bufs.len() as u32, true));
        entries.push(storage(bufs.len() as u32 + 1, false));
        let layout = dev.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(kernel.name()),
            entries: &entries,
        });
        let pl = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(kernel.name()),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let mut constants = vec![
            ("KILN_BLOCK", key.block as f64),
            ("KILN_WAVE", self.wave as f64),
        ];
        if m.uses_shared {
            constants.push(("KILN_SHARED_WORDS", key.shared_words.max(1) as f64));
        }
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(kernel.name()),
            layout: Some(&pl),
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &constants,
                zero_initialize_workgroup_memory: true,
            },
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(launch_err(
                kernel,
                format!("pipeline for {}: {e}", key.dtype.name()),
            ));
        }
        let p = Arc::new(Pipeline { pipeline, layout });
        self.pipelines.lock().unwrap().insert(key, p.clone());
        Ok(p)
    }

    /// Everything a dispatch needs: pipeline, bindings (meta and fault buffers), folded grid.
    fn prepare(&self, port: &Port, l: &GpuLaunch) -> Result<Prepared, DeviceError> {
        let kernel = l.kernel;
        if port.backend != Backend::Wgpu || port.kernel != kernel || port.dtype != l.dtype {
            return Err(launch_err(
                kernel,
                "the port does not match the launch".into(),
            ));
        }
        if l.block == 0 || l.block > self.max_block || !l.block.is_multiple_of(self.wave) {
            return Err(launch_err(
                kernel,
                format!(
                    "block {} (device max {}, wave {})",
                    l.block, self.max_block, self.wave
                ),
            ));
        }
        let scratch = scratch_words(l.block, self.wave) as usize * 4;
        let kernel_bytes = l.shared.saturating_sub(scratch);
        // The collectives' scratch lives in the modules' own `kiln_scratch` array: only the
        // kernel's part competes for the rest of the device's shared memory.
        if scratch > KILN_SCRATCH_BYTES || kernel_bytes > self.kernel_shared_limit() as usize {
            return Err(launch_err(
                kernel,
                format!(
                    "{kernel_bytes} bytes of kernel shared memory and {scratch} of scratch \
                     (device max {} beside the modules' own arrays, scratch max {KILN_SCRATCH_BYTES})",
                    self.kernel_shared_limit()
                ),
            ));
        }
        let blocks = l.grid.iter().map(|&g| g as u64).product::<u64>();
        let groups = self
            .fold(blocks)
            .ok_or_else(|| launch_err(kernel, format!("grid {:?} is too large", l.grid)))?;
        let key = PipelineKey {
            kernel,
            dtype: l.dtype,
            block: l.block,
            shared_words: kernel_bytes.div_ceil(4) as u32,
        };
        let p = self.pipeline(key)?;
        let dev = &self.ctx.device;
        let meta = meta_words(l.params, l)?;
        let meta_buf = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln meta"),
            size: (meta.len() * 4) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.ctx
            .queue
            .write_buffer(&meta_buf, 0, &words_bytes(&meta));
        let fault_bytes = (kiln_shaders_wgsl_fault_words() * 4) as u64;
        let fault_buf = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln fault"),
            size: fault_bytes,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.ctx
            .queue
            .write_buffer(&fault_buf, 0, &vec![0u8; fault_bytes as usize]);
        let mut mems = Vec::with_capacity(l.bufs.len());
        for (k, b) in l.bufs.iter().enumerate() {
            let m = b
                .mem
                .as_any()
                .downcast_ref::<WgpuMemory>()
                .ok_or_else(|| launch_err(kernel, format!("buffer {k} is not wgpu memory")))?;
            mems.push(m);
        }
        let mut entries: Vec<wgpu::BindGroupEntry> = mems
            .iter()
            .enumerate()
            .map(|(k, m)| wgpu::BindGroupEntry {
                binding: k as u32,
                resource: m.buf.as_entire_binding(),
            })
            .collect();
        let nb = mems.len() as u32;
        entries.push(wgpu::BindGroupEntry {
            binding: nb,
            resource: meta_buf.as_entire_binding(),
        });
        entries.push(wgpu::BindGroupEntry {
            binding: nb + 1,
            resource: fault_buf.as_entire_binding(),
        });
        let bind = dev.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(kernel.name()),
            layout: &p.layout,
            entries: &entries,
        });
        Ok(Prepared {
            kernel,
            pipeline: p,
            bind,
            groups,
            fault_buf,
            fault_bytes,
            _meta: meta_buf,
        })
    }

    /// Seconds per launch for each of `runs` passes over `launches` (each launched once per
    /// pass, in order, one compute pass each), after an untimed warm-up pass; timed by
    /// [`Timer`]. This is the backend's `GpuDevice::time_launches`.
    pub fn time_launches(
        &self,
        port: &Port,
        launches: &[GpuLaunch],
        runs: usize,
    ) -> Result<Vec<f64>, DeviceError> {
        let prepared = launches
            .iter()
            .map(|l| self.prepare(port, l))
            .collect::<Result<Vec<_>, _>>()?;
        if prepared.is_empty() {
            return Ok(Vec::new());
        }
        let last = prepared.len() - 1;
        crate::gpu::warm_then_timed(runs, prepared.len(), || {
            self.timed(|enc, ts| {
                for (k, pr) in prepared.iter().enumerate() {
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(pr.kernel.name()),
                        timestamp_writes: pass_timestamps(ts, k == 0, k == last),
                    });
                    pass.set_pipeline(&pr.pipeline.pipeline);
                    pass.set_bind_group(0, &pr.bind, &[]);
                    pass.dispatch_workgroups(pr.groups[0], pr.groups[1], pr.groups[2]);
                }
            })
        })
    }

    /// Seconds per device-to-device copy of `bytes`, for each of `runs` copies after a warm-up
    /// copy; timed by [`Timer`] (with timestamps, empty passes on either side carry them).
    pub fn time_copy(
        &self,
        dst: &dyn DeviceMemory,
        src: &dyn DeviceMemory,
        bytes: usize,
        runs: usize,
    ) -> Result<Vec<f64>, DeviceError> {
        let (d, s) = match (
            dst.as_any().downcast_ref::<WgpuMemory>(),
            src.as_any().downcast_ref::<WgpuMemory>(),
        ) {
            (Some(d), Some(s)) => (d, s),
            _ => return Err(other("time_copy: not wgpu memory")),
        };
        let n = (bytes / 4 * 4) as u64;
        if n as usize > d.len.min(s.len) {
            return Err(other(format!("time_copy: {bytes} bytes past the buffers")));
        }
        crate::gpu::warm_then_timed(runs, 1, || {
            self.timed(|enc, ts| {
                enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("kiln copy start"),
                    timestamp_writes: pass_timestamps(ts, true, false),
                });
                enc.copy_buffer_to_buffer(&s.buf, 0, &d.buf, 0, n);
                enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("kiln copy end"),
                    timestamp_writes: pass_timestamps(ts, false, true),
                });
            })
        })
    }

    /// Runs what `record` encodes and returns its seconds: between timestamps 0 and 1 (the
    /// query set `record` gets), or on the host clock from submit until the queue is idle.
    fn timed(
        &self,
        record: impl FnOnce(&mut wgpu::CommandEncoder, Option<&wgpu::QuerySet>),
    ) -> Result<f64, DeviceError> {
        let dev = &self.ctx.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let queries = (self.timer == Timer::Timestamps).then(|| {
            let set = dev.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("kiln timing"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let resolve = dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("kiln timing"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            (set, resolve)
        });
        let mut enc = dev.create_command_encoder(&Default::default());
        record(&mut enc, queries.as_ref().map(|(set, _)| set));
        if let Some((set, resolve)) = &queries {
            enc.resolve_query_set(set, 0..2, resolve, 0);
        }
        let start = Instant::now();
        self.ctx.queue.submit([enc.finish()]);
        let Some((_, resolve)) = &queries else {
            self.ctx.wait()?;
            return match pollster::block_on(scope.pop()) {
                Some(e) => Err(other(format!("wgpu timing: {e}"))),
                None => Ok(start.elapsed().as_secs_f64()),
            };
        };
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(other(format!("wgpu timing: {e}")));
        }
        let t = self.ctx.read_back(resolve, 0, 16)?;
        let t0 = u64::from_le_bytes(t[0..8].try_into().unwrap());
        let t1 = u64::from_le_bytes(t[8..16].try_into().unwrap());
        if t1 <= t0 {
            return Err(other(format!(
                "wgpu timing: timestamps {t0}..{t1} do not advance"
            )));
        }
        Ok((t1 - t0) as f64 * self.ctx.queue.get_timestamp_period() as f64 * 1e-9)
    }

    /// Splits `blocks` over up to three dispatch dimensions of at most `max_groups` each.
    fn fold(&self, blocks: u64) -> Option<[u32; 3]> {
        let m = self.max_groups.max(1) as u64;
        let x = blocks.min(m);
        let rest = blocks.div_ceil(x);
        let y = rest.min(m);
        let z = rest.div_ceil(y);
        (z <= m).then_some([x as u32, y as u32, z as u32])
    }
}

fn kiln_shaders_wgsl_max_block() -> u32 {
    // The modules' exchange array and scratch are sized for this block (kiln-shaders-wgsl).
    1024
}

/// One wgpu allocation.
pub struct WgpuMemory {
    ctx: Arc<Ctx>,
    buf: wgpu::Buffer,
    len: usize,
}

impl std::fmt::Debug for WgpuMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuMemory({} bytes)", self.len)
    }
}

impl DeviceMemory for WgpuMemory {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), DeviceError> {
        if offset + out.len() > self.len {
            return Err(other(format!(
                "read of {} bytes at {offset} past a {}-byte buffer",
                out.len(),
                self.len
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        // Copies move whole 4-byte words.
        let start = offset / 4 * 4;
        let end = (offset + out.len()).div_ceil(4) * 4;
        let data = self
            .ctx
            .read_back(&self.buf, start as u64, (end - start) as u64)?;
        out.copy_from_slice(&data[offset - start..offset - start + out.len()]);
        Ok(())
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<(), DeviceError> {
        if offset + data.len() > self.len {
            return Err(other(format!(
                "write of {} bytes at {offset} past a {}-byte buffer",
                data.len(),
                self.len
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        let start = offset / 4 * 4;
        let end = (offset + data.len()).div_ceil(4) * 4;
        let mut words = if start == offset && end == offset + data.len() {
            Vec::new()
        } else {
            // Keep the bytes of the edge words that lie outside the write.
            self.ctx
                .read_back(&self.buf, start as u64, (end - start) as u64)?
        };
        if words.is_empty() {
            words = data.to_vec();
        } else {
            words[offset - start..offset - start + data.len()].copy_from_slice(data);
        }
        self.ctx.queue.write_buffer(&self.buf, start as u64, &words);
        self.ctx.queue.submit([]);
        self.ctx.wait()
    }

    fn as_any(&self) -> &dyn Any {
        self
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
        self.ctx.queue.submit([enc.finish()]);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(launch_err(kernel, format!("{e}")));
        }
        let fault = self.ctx.read_back(&fault_buf, 0, fault_bytes)?;
        let w: Vec<u32> = fault
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if w[0] != 0 {
            let block = [w[1], w[2], w[3]];
            let message = if w[4] == u32::MAX {
                format!(
                    "the adapter ran subgroups of {} lanes, the pipeline was built for {}",
                    w[5], self.wave
                )
            } else {
                let what = kernel
                    .buffers()
                    .get(w[4] as usize)
                    .map(|b| format!("`{}`", b.name))
                    .unwrap_or_else(|| "shared memory".into());
                format!(
                    "view index {} out of bounds of {what} ({} faulting accesses)",
                    w[5], w[0]
                )
            };
            return Err(DeviceError::KernelFault {
                kernel: kernel.name(),
                block,
                message,
            });
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The timestamp writes of one pass of a timed sequence: index 0 at the start of the first
/// pass, 1 at the end of the last, none for a pass between them (wgpu refuses an empty pair).
fn pass_timestamps(
    set: Option<&wgpu::QuerySet>,
    first: bool,
    last: bool,
) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
    set.filter(|_| first || last)
        .map(|query_set| wgpu::ComputePassTimestampWrites {
            query_set,
            beginning_of_pass_write_index: first.then_some(0),
            end_of_pass_write_index: last.then_some(1),
        })
}

fn kiln_shaders_wgsl_fault_words() -> usize {
    // Matches kiln_shaders_wgsl::FAULT_WORDS: flag, block x/y/z, buffer, index.
    6
}

fn words_bytes(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}
