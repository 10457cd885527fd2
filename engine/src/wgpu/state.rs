//! The state of an opened wgpu device: the device itself, its pipeline cache entries and how it
//! times benchmarks. Opening, launching, pipelines and timing are `impl WgpuDevice` blocks in
//! their own files, each importing this one.

use super::memory::Ctx;
use kiln_math::{DType, KernelId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// An opened wgpu adapter and device.
pub struct WgpuDevice {
    pub(super) ctx: Arc<Ctx>,
    pub(super) name: String,
    pub(super) wave: u32,
    pub(super) subgroups: bool,
    pub(super) f16: bool,
    pub(super) timer: Timer,
    pub(super) max_block: u32,
    pub(super) max_groups: u32,
    pub(super) max_shared_bytes: u32,
    /// A CPU adapter (lavapipe): correct, but slower than kiln's own cpu backend.
    pub(super) software: bool,
    pub(super) pipelines: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
}

impl std::fmt::Debug for WgpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuDevice")
            .field("name", &self.name)
            .field("wave", &self.wave)
            .finish()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct PipelineKey {
    pub(super) kernel: KernelId,
    pub(super) dtype: DType,
    pub(super) block: u32,
    pub(super) shared_words: u32,
}

/// A launch ready to dispatch.
pub(super) struct Prepared {
    pub(super) kernel: KernelId,
    pub(super) pipeline: Arc<Pipeline>,
    pub(super) bind: wgpu::BindGroup,
    pub(super) groups: [u32; 3],
    pub(super) fault_buf: wgpu::Buffer,
    pub(super) fault_bytes: u64,
    /// Kept alive until the dispatch is submitted.
    pub(super) _meta: wgpu::Buffer,
}

pub(super) struct Pipeline {
    pub(super) pipeline: wgpu::ComputePipeline,
    pub(super) layout: wgpu::BindGroupLayout,
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
    pub(super) fn label(self) -> &'static str {
        match self {
            Timer::Timestamps => "timed by timestamp queries",
            Timer::HostClock => "host-timed: submit to queue idle, no timestamp queries",
        }
    }
}
