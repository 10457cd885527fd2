//! Opening kiln on the engine's own device objects, and the eager / captured runs of the step.

use crate::arena::{copy, Arena, ArenaView};
use crate::model::{Dims, Model};
use kiln::{Backend, Device};
use std::time::Instant;

/// What a run measured.
#[derive(Debug)]
pub struct Report {
    /// The device.
    pub device: String,
    /// Host time to enqueue one eager step, µs (mean over the timed steps).
    pub eager_host_us: f64,
    /// Wall time per eager step including the wait for the device, µs.
    pub eager_step_us: f64,
    /// Graph replays checked against the eager step (CUDA only; 0 elsewhere).
    pub replays: usize,
    /// Host time to launch one replay, µs.
    pub replay_host_us: Option<f64>,
    /// Wall time per replay, back to back, including the final wait, µs.
    pub replay_step_us: Option<f64>,
    /// kiln allocations during the timed steps and replays (must be 0).
    pub steady_allocations: usize,
}

const KEY: [u32; 2] = [0x1234_5678, 0x9abc_def0];

/// Runs the step on `backend` the way an engine does: eagerly `steps` times (each must equal
/// the first), then on CUDA captured into a graph and replayed `replays` times, each replay
/// checked bit for bit against the eager outputs.
pub fn run(backend: Backend, steps: usize, replays: usize) -> Result<Report, String> {
    let dims = Dims::for_backend(backend);
    let bytes = dims.arena_bytes();
    let (dev, weights, acts) = open(backend, bytes)?;
    let mut w = ArenaView::new(&dev, weights, bytes).map_err(|e| e.to_string())?;
    let mut a = ArenaView::new(&dev, acts, bytes).map_err(|e| e.to_string())?;
    let mut m = Model::new(&dev, &mut w, &mut a, dims).map_err(|e| e.to_string())?;
    dev.reserve_scratch(m.scratch_bytes())
        .map_err(|e| e.to_string())?;
    let step = |m: &mut Model| -> Result<(), String> {
        copy(&w, &m.residual_init, &a, &m.residual)?;
        m.step(&dev, KEY).map_err(|e| e.to_string())
    };
    step(&mut m)?;
    let eager = m.outputs().map_err(|e| e.to_string())?;
    let before = dev.allocations();
    let (mut host, t0) = (0.0, Instant::now());
    for i in 0..steps {
        let t = Instant::now();
        step(&mut m)?;
        host += t.elapsed().as_secs_f64();
        dev.sync().map_err(|e| e.to_string())?;
        if i == 0 && m.outputs().map_err(|e| e.to_string())? != eager {
            return Err("a second eager step differs from the first".into());
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let mut report = Report {
        device: dev.name().to_string(),
        eager_host_us: host / steps.max(1) as f64 * 1e6,
        eager_step_us: wall / steps.max(1) as f64 * 1e6,
        replays: 0,
        replay_host_us: None,
        replay_step_us: None,
        steady_allocations: 0,
    };
    #[cfg(feature = "cuda")]
    if let Arena::Cuda { stream, .. } = &a.arena {
        let graph = capture(stream, || step(&mut m))?;
        for r in 0..replays {
            m.logits
                .view(0, &[1])
                .and_then(|mut t| t.write_f32(&[f32::NAN]))
                .map_err(|e| e.to_string())?;
            graph
                .launch()
                .map_err(|e| format!("cuGraphLaunch: {e:?}"))?;
            if m.outputs().map_err(|e| e.to_string())? != eager {
                return Err(format!("graph replay {r} differs from the eager step"));
            }
        }
        let (mut host, t0) = (0.0, Instant::now());
        for _ in 0..replays {
            let t = Instant::now();
            graph
                .launch()
                .map_err(|e| format!("cuGraphLaunch: {e:?}"))?;
            host += t.elapsed().as_secs_f64();
        }
        dev.sync().map_err(|e| e.to_string())?;
        let wall = t0.elapsed().as_secs_f64();
        report.replays = replays;
        report.replay_host_us = Some(host / replays.max(1) as f64 * 1e6);
        report.replay_step_us = Some(wall / replays.max(1) as f64 * 1e6);
    }
    let _ = replays;
    report.steady_allocations = dev.allocations() - before;
    if report.steady_allocations != 0 {
        return Err(format!(
            "{} kiln allocations in the steady state",
            report.steady_allocations
        ));
    }
    Ok(report)
}

/// Captures what `enqueue` puts on `stream` into an instantiated graph.
#[cfg(feature = "cuda")]
fn capture(
    stream: &std::sync::Arc<kiln::cuda_api::CudaStream>,
    enqueue: impl FnOnce() -> Result<(), String>,
) -> Result<kiln::cuda_api::CudaGraph, String> {
    use kiln::cuda_api::sys;
    stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(|e| format!("cuStreamBeginCapture: {e:?}"))?;
    let enqueued = enqueue();
    let graph = stream
        .end_capture(sys::CUgraphInstantiate_flags(0))
        .map_err(|e| format!("cuStreamEndCapture: {e:?}"))?;
    enqueued?;
    graph.ok_or_else(|| "the capture recorded nothing".to_string())
}

/// The engine's device objects and its two arenas (weights, activations) of `bytes` each,
/// with kiln opened on them.
fn open(backend: Backend, bytes: usize) -> Result<(Device, Arena, Arena), String> {
    match backend {
        Backend::Cpu | Backend::Sim => {
            let dev = Device::open(backend).map_err(|e| e.to_string())?;
            let host = || Arena::Host(vec![0u64; bytes.div_ceil(8)]);
            Ok((dev, host(), host()))
        }
        #[cfg(feature = "cuda")]
        Backend::Cuda => {
            use kiln::cuda_api::{result, CudaContext};
            let ctx = CudaContext::new(0).map_err(|e| format!("CUDA: {e:?}"))?;
            let stream = ctx
                .new_stream()
                .map_err(|e| format!("cuStreamCreate: {e:?}"))?;
            // SAFETY: the context is current (CudaContext::new binds it); freed never: the
            // example's process ends with the run.
            let alloc = || {
                unsafe { result::malloc_sync(bytes) }
                    .map(|ptr| Arena::Cuda {
                        ptr,
                        stream: stream.clone(),
                    })
                    .map_err(|e| format!("cuMemAlloc: {e:?}"))
            };
            let (weights, acts) = (alloc()?, alloc()?);
            let dev = Device::cuda_on_stream(stream.clone()).map_err(|e| e.to_string())?;
            Ok((dev, weights, acts))
        }
        #[cfg(feature = "wgpu")]
        Backend::Wgpu => {
            use kiln::wgpu::api as wgpu;
            let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
                backends: wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
                ..wgpu::InstanceDescriptor::new_without_display_handle()
            });
            let adapter = pollster::block_on(instance.request_adapter(&Default::default()))
                .map_err(|e| format!("no wgpu adapter: {e}"))?;
            let info = adapter.get_info();
            let feats = adapter.features()
                & (wgpu::Features::SUBGROUP
                    | wgpu::Features::SHADER_F16
                    | wgpu::Features::TIMESTAMP_QUERY);
            let (device, queue) =
                pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                    label: Some("engine"),
                    required_features: feats,
                    required_limits: adapter.limits(),
                    ..Default::default()
                }))
                .map_err(|e| format!("wgpu device: {e}"))?;
            let arena = |label| Arena::Wgpu {
                buffer: device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(label),
                    size: bytes.next_multiple_of(4) as u64,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }),
                device: device.clone(),
                queue: queue.clone(),
            };
            let (weights, acts) = (arena("engine weights"), arena("engine activations"));
            let dev = Device::wgpu_from(&info, device.clone(), queue.clone())
                .map_err(|e| e.to_string())?;
            Ok((dev, weights, acts))
        }
        other => Err(format!("the example does not embed {other}")),
    }
}
