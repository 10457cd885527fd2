//! The pipeline cache (one compute pipeline per kernel × dtype × block × shared words, built
//! from the kernel's module) and launch preparation: the meta and fault buffers, bindings and
//! the grid folded over the dispatch dimensions.

use super::errors::launch_err;
use super::memory::WgpuMemory;
use super::modules::{
    kiln_shaders_wgsl_fault_words, module_for, module_source, KILN_SCRATCH_BYTES,
};
use super::state::{Pipeline, PipelineKey, Prepared, WgpuDevice};
use crate::gpu::GpuLaunch;
use crate::port::Port;
use crate::{Backend, DeviceError};
use kiln_math::{scratch_words, Access, KernelId};
use std::sync::Arc;

/// Words the meta buffer needs beyond params: (offset, len) per buffer, then the grid.
fn meta_words(params: &[u32], l: &GpuLaunch, offsets: &[usize]) -> Result<Vec<u32>, DeviceError> {
    let mut w = params.to_vec();
    for (k, (b, &offset)) in l.bufs.iter().zip(offsets).enumerate() {
        let size = b.dtype.size();
        if !offset.is_multiple_of(size) {
            return Err(launch_err(
                l.kernel,
                format!("buffer {k} starts at byte {offset} (not a whole element)"),
            ));
        }
        let off = u32::try_from(offset / size);
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

fn words_bytes(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl WgpuDevice {
    fn pipeline(&self, key: PipelineKey) -> Result<Arc<Pipeline>, DeviceError> {
        if let Some(p) = self.pipelines.lock().unwrap().get(&key) {
            return Ok(p.clone());
        }
        let kernel = key.kernel;
        let m = module_for(kernel, key.dtype, self.subgroups, self.f16).ok_or_else(|| {
            launch_err(
                kernel,
                format!("no WGSL module for {} on this adapter", key.dtype.name()),
            )
        })?;
        let source = module_source(m)?;
        let dev = &self.ctx.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some(kernel.name()),
            source: wgpu::ShaderSource::Wgsl(source),
        };
        let module = if unchecked_modules() {
            // SAFETY: kiln's views check every index against the buffer they were bound with
            // and record a fault instead of accessing, and `bind` bounds every loop of a body;
            // wgpu's clamps and loop counters only repeat that (measured by `--stream`).
            unsafe {
                dev.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
            }
        } else {
            dev.create_shader_module(desc)
        };
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
    pub(super) fn prepare(&self, port: &Port, l: &GpuLaunch) -> Result<Prepared, DeviceError> {
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
        let mut mems = Vec::with_capacity(l.bufs.len());
        for (k, b) in l.bufs.iter().enumerate() {
            let m = b
                .mem
                .as_any()
                .downcast_ref::<WgpuMemory>()
                .ok_or_else(|| launch_err(kernel, format!("buffer {k} is not wgpu memory")))?;
            mems.push(m.buf.clone());
        }
        let mut offsets: Vec<usize> = l.bufs.iter().map(|b| b.offset).collect();
        self.unalias_inputs(kernel, l, &mut mems, &mut offsets);
        let meta = meta_words(l.params, l, &offsets)?;
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
        let fault_buf = self.ctx.fault_record(fault_bytes);
        let mut entries: Vec<wgpu::BindGroupEntry> = mems
            .iter()
            .enumerate()
            .map(|(k, m)| wgpu::BindGroupEntry {
                binding: k as u32,
                resource: m.as_entire_binding(),
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

    /// WebGPU refuses one buffer bound read-only and read-write in one dispatch: an input that
    /// shares its wgpu buffer with an output (views of one engine arena) is copied to a buffer
    /// of its own first, in queue order, and bound there.
    fn unalias_inputs(
        &self,
        kernel: KernelId,
        l: &GpuLaunch,
        mems: &mut [wgpu::Buffer],
        offsets: &mut [usize],
    ) {
        let descs = kernel.buffers();
        let written = |k: usize| descs.get(k).is_some_and(|d| d.access != Access::Read);
        let dev = &self.ctx.device;
        let mut enc: Option<wgpu::CommandEncoder> = None;
        for k in 0..mems.len() {
            if written(k) || !(0..mems.len()).any(|j| written(j) && mems[j] == mems[k]) {
                continue;
            }
            let b = &l.bufs[k];
            let lo = b.offset / 4 * 4;
            let hi = (b.offset + b.len * b.dtype.size()).div_ceil(4) * 4;
            let copy = dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some("kiln unaliased input"),
                size: (hi - lo).max(4) as u64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let e = enc.get_or_insert_with(|| dev.create_command_encoder(&Default::default()));
            if hi > lo {
                e.copy_buffer_to_buffer(&mems[k], lo as u64, &copy, 0, (hi - lo) as u64);
            }
            mems[k] = copy;
            offsets[k] = b.offset - lo;
        }
        if let Some(e) = enc {
            self.ctx.enqueue(e.finish());
        }
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

/// `KILN_WGPU_UNCHECKED=1`: compile kiln's modules without wgpu's runtime checks (bounds
/// clamping, loop counters), an opt-in until measured on every adapter.
fn unchecked_modules() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("KILN_WGPU_UNCHECKED").is_ok_and(|v| v == "1"))
}
