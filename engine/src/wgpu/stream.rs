//! The adapter's own streaming rate: plain WGSL kernels that read, write and copy a buffer,
//! the yardstick for kiln's WGSL kernels where the adapter's buffer copy runs on another
//! engine than its shaders (NVIDIA's Vulkan copies at ~0.8 TB/s where its shaders read at
//! ~2.9 TB/s on an H100).
//!
//! Each kernel is compiled twice: with wgpu's runtime checks (how kiln's modules run) and
//! without them (bounds clamping and loop bounding off), so a run shows what those checks cost.

use super::errors::other;
use super::memory::WgpuMemory;
use super::state::WgpuDevice;
use crate::gpu::{DeviceMemory, StreamKernel};
use crate::DeviceError;

fn binding(buf: &wgpu::Buffer, size: u64) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer: buf,
        offset: 0,
        size: wgpu::BufferSize::new(size),
    })
}

/// The bindings of a stream module whose arrays hold `ELEM`.
const BINDINGS_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<ELEM>;
@group(0) @binding(1) var<storage, read_write> dst: array<ELEM>;
"#;

/// Each invocation XORs four 16-byte loads per turn (grid-stride) and writes only when the sum
/// hits a word that zeroed memory never gives, so the loads stay live and nothing is stored.
const READ_WGSL: &str = r#"
@compute @workgroup_size(256)
fn stream_read(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let n = arrayLength(&src);
    let stride = groups.x * 256u;
    var acc = vec4<u32>(0u);
    var i = gid.x;
    loop {
        if i + 3u * stride >= n { break; }
        acc = acc ^ src[i] ^ src[i + stride] ^ src[i + 2u * stride] ^ src[i + 3u * stride];
        i = i + 4u * stride;
    }
    loop {
        if i >= n { break; }
        acc = acc ^ src[i];
        i = i + stride;
    }
    if (acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u {
        dst[gid.x & 1023u] = acc;
    }
}
"#;

/// The write (one store of `ELEM` per turn) and the copy (four loads, then their stores), with
/// `SUFFIX` after their names.
const WRITE_COPY_WGSL: &str = r#"
@compute @workgroup_size(256)
fn stream_writeSUFFIX(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let n = arrayLength(&dst);
    let stride = groups.x * 256u;
    let v = ELEM(gid.x);
    var i = gid.x;
    loop {
        if i >= n { break; }
        dst[i] = v;
        i = i + stride;
    }
}

@compute @workgroup_size(256)
fn stream_copySUFFIX(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let n = min(arrayLength(&src), arrayLength(&dst));
    let stride = groups.x * 256u;
    var i = gid.x;
    loop {
        if i + 3u * stride >= n { break; }
        let a = src[i];
        let b = src[i + stride];
        let c = src[i + 2u * stride];
        let d = src[i + 3u * stride];
        dst[i] = a;
        dst[i + stride] = b;
        dst[i + 2u * stride] = c;
        dst[i + 3u * stride] = d;
        i = i + 4u * stride;
    }
    loop {
        if i >= n { break; }
        dst[i] = src[i];
        i = i + stride;
    }
}
"#;

/// The module of `kernel`: 16-byte accesses (with the read kernel), or 4-byte ones for the
/// word kernels (entry names ending `_words`).
fn stream_module(kernel: StreamKernel) -> String {
    let (elem, suffix, read) = if kernel.access_bytes() == 4 {
        ("u32", "_words", "")
    } else {
        ("vec4<u32>", "", READ_WGSL)
    };
    format!(
        "{}{read}{}",
        BINDINGS_WGSL.replace("ELEM", elem),
        WRITE_COPY_WGSL
            .replace("ELEM", elem)
            .replace("SUFFIX", suffix)
    )
}

impl WgpuDevice {
    /// Seconds per pass of a stream kernel over the first `bytes` of `src` (and `dst` for a
    /// copy) with `groups` workgroups of 256, for each of `runs` passes after a warm-up;
    /// `checked` keeps wgpu's runtime checks.
    #[allow(clippy::too_many_arguments)]
    pub fn time_stream(
        &self,
        kernel: StreamKernel,
        src: &dyn DeviceMemory,
        dst: &dyn DeviceMemory,
        bytes: usize,
        groups: u32,
        checked: bool,
        runs: usize,
    ) -> Result<Vec<f64>, DeviceError> {
        let (s, d) = match (
            src.as_any().downcast_ref::<WgpuMemory>(),
            dst.as_any().downcast_ref::<WgpuMemory>(),
        ) {
            (Some(s), Some(d)) => (s, d),
            _ => return Err(other("time_stream: not wgpu memory")),
        };
        let n = (bytes / 16 * 16) as u64;
        if n == 0 || n as usize > s.len || (kernel.writes() && n as usize > d.len) {
            return Err(other(format!(
                "time_stream: {bytes} bytes do not fit the buffers"
            )));
        }
        if groups == 0 || groups > self.max_groups {
            return Err(other(format!(
                "time_stream: {groups} workgroups (1..={})",
                self.max_groups
            )));
        }
        let dev = &self.ctx.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let desc = wgpu::ShaderModuleDescriptor {
            label: Some("kiln stream"),
            source: wgpu::ShaderSource::Wgsl(stream_module(kernel).into()),
        };
        let module = if checked {
            dev.create_shader_module(desc)
        } else {
            // SAFETY: every access is below `arrayLength` and every loop ends (`i` grows by a
            // non-zero stride towards `n`), which is what the skipped checks would enforce.
            unsafe {
                dev.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
            }
        };
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("kiln stream"),
            layout: None,
            module: &module,
            entry_point: Some(&format!("stream_{}", kernel.name())),
            compilation_options: Default::default(),
            cache: None,
        });
        // The read kernel's destination is never written; a small one keeps its binding cheap.
        let sink = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln stream sink"),
            size: 1024 * 16,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let out = wgpu::BindGroupEntry {
            binding: 1,
            resource: if kernel.writes() {
                binding(&d.buf, n)
            } else {
                binding(&sink, 1024 * 16)
            },
        };
        // The write kernel reads nothing, so its layout has no source binding.
        let entries = if kernel.reads() {
            vec![
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: binding(&s.buf, n),
                },
                out,
            ]
        } else {
            vec![out]
        };
        let bind = dev.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("kiln stream"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(other(format!("stream kernel: {e}")));
        }
        crate::gpu::warm_then_timed(runs, 1, || {
            self.timed(|enc, ts| {
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("kiln stream"),
                    timestamp_writes: super::timing::pass_timestamps(ts, true, true),
                });
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bind, &[]);
                pass.dispatch_workgroups(groups, 1, 1);
            })
        })
    }
}
