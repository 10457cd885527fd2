//! wgpu allocations ([`WgpuMemory`] and its `DeviceMemory` impl) and the device context they
//! share with the device: waiting for the queue, copying a buffer back and mapping it.

use super::errors::other;
use crate::gpu::DeviceMemory;
use crate::DeviceError;
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Encoded command buffers held back before they go to the queue together, unless
/// `KILN_WGPU_HELD` says otherwise; a read, write, sync or flush submits them sooner. Measured
/// through Vulkan on an H100 (Llama-3.1-8B layers): 8 gave 22.5 ms a step, 1 22.7, 32 26.5,
/// the whole step 56.3 — kiln encodes a launch slower than the GPU runs it, so a step held
/// whole leaves the GPU idle while the host encodes (docs/results/decode-h100-2026-12-05.md).
const DEFAULT_HELD: usize = 8;

/// The held command buffers' limit: `KILN_WGPU_HELD` (1 submits every launch at once), else
/// [`DEFAULT_HELD`].
fn held_limit() -> usize {
    std::env::var("KILN_WGPU_HELD")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(DEFAULT_HELD)
}

/// The device and queue a wgpu device and its allocations share.
pub(super) struct Ctx {
    pub(super) device: wgpu::Device,
    pub(super) queue: wgpu::Queue,
    /// Fault records of dispatches not checked yet.
    pub(super) faults: super::faults::Faults,
    /// Launches and copies encoded in queue order and not submitted yet: a submission costs
    /// tens of microseconds on a driver, so they go together at the next sync, read, write or
    /// flush.
    held: Mutex<Vec<wgpu::CommandBuffer>>,
    /// Queue submissions made so far.
    submissions: AtomicU64,
    /// Command buffers held at most before a launch submits them.
    max_held: usize,
}

impl Ctx {
    pub(super) fn new(device: wgpu::Device, queue: wgpu::Queue) -> Ctx {
        Ctx {
            device,
            queue,
            faults: Default::default(),
            held: Mutex::new(Vec::new()),
            submissions: AtomicU64::new(0),
            max_held: held_limit(),
        }
    }

    /// Puts `commands` in queue order after everything encoded before it, submitting the held
    /// work once the limit of command buffers wait.
    pub(super) fn enqueue(&self, commands: wgpu::CommandBuffer) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.push(commands);
        if held.len() >= self.max_held {
            self.submit(std::mem::take(&mut *held));
        }
    }

    /// Submits the held command buffers, if any, as one submission.
    pub(super) fn flush(&self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if !held.is_empty() {
            // Under the lock: taken and submitted outside it, another thread's later work
            // (a readback of what these write) could be submitted first.
            self.submit(std::mem::take(&mut *held));
        }
    }

    /// One queue submission of `commands` (counted).
    pub(super) fn submit(&self, commands: Vec<wgpu::CommandBuffer>) {
        self.queue.submit(commands);
        self.submissions.fetch_add(1, Ordering::Relaxed);
    }

    /// Queue submissions made so far.
    pub(super) fn submissions(&self) -> u64 {
        self.submissions.load(Ordering::Relaxed)
    }

    /// A zeroed fault record for a dispatch.
    pub(super) fn fault_record(&self, bytes: u64) -> wgpu::Buffer {
        self.faults.record(&self.device, &self.queue, bytes)
    }

    /// Remembers a dispatch's fault record, checking them all once enough are pending.
    pub(super) fn defer_fault_check(
        &self,
        kernel: kiln_math::KernelId,
        buf: wgpu::Buffer,
        bytes: u64,
        wave: u32,
    ) -> Result<(), DeviceError> {
        if self.faults.defer(kernel, buf, bytes, wave) {
            self.check_faults()
        } else {
            Ok(())
        }
    }

    /// Reads the pending fault records and reports the first fault.
    pub(super) fn check_faults(&self) -> Result<(), DeviceError> {
        self.faults
            .check_reading(&[], |parts| self.read_many(parts))
            .map(|_| ())
    }

    /// Submits the held work and waits for all submitted work.
    pub(super) fn wait(&self) -> Result<(), DeviceError> {
        self.flush();
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|e| other(format!("wgpu poll: {e}")))
    }

    /// Copies `len` bytes at `offset` of `buf` (4-byte aligned) to the host.
    pub(super) fn read_back(
        &self,
        buf: &wgpu::Buffer,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, DeviceError> {
        let mut parts = self.read_many(&[(buf, offset, len)])?;
        Ok(parts.pop().unwrap_or_default())
    }

    /// Copies each `(buffer, offset, len)` (4-byte aligned) to the host through one staging
    /// buffer, after the held work, in one submission and one wait.
    pub(super) fn read_many(
        &self,
        parts: &[(&wgpu::Buffer, u64, u64)],
    ) -> Result<Vec<Vec<u8>>, DeviceError> {
        let total: u64 = parts.iter().map(|p| p.2).sum();
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln readback"),
            size: total.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        let mut at = 0;
        for &(buf, offset, len) in parts {
            if len > 0 {
                enc.copy_buffer_to_buffer(buf, offset, &staging, at, len);
            }
            at += len;
        }
        self.enqueue(enc.finish());
        self.flush();
        let data = self.map_read(&staging)?;
        let mut at = 0;
        Ok(parts
            .iter()
            .map(|p| {
                let part = data[at as usize..(at + p.2) as usize].to_vec();
                at += p.2;
                part
            })
            .collect())
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

/// One wgpu allocation.
pub struct WgpuMemory {
    pub(super) ctx: Arc<Ctx>,
    pub(super) buf: wgpu::Buffer,
    pub(super) len: usize,
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
        // A read waits for the work before it: that work's faults are read with it, in one
        // submission, and reported first. Copies move whole 4-byte words.
        let start = offset / 4 * 4;
        let end = (offset + out.len()).div_ceil(4) * 4;
        let part = (&self.buf, start as u64, (end - start) as u64);
        let parts = if out.is_empty() { &[][..] } else { &[part][..] };
        let data = self
            .ctx
            .faults
            .check_reading(parts, |p| self.ctx.read_many(p))?;
        if let Some(data) = data.first() {
            out.copy_from_slice(&data[offset - start..offset - start + out.len()]);
        }
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
        // A queued write lands before every command buffer of the next submission: the held
        // launches go first.
        self.ctx.flush();
        self.ctx.queue.write_buffer(&self.buf, start as u64, &words);
        self.ctx.submit(Vec::new());
        self.ctx.wait()
    }

    fn write_enqueued(&self, offset: usize, data: &[u8]) -> Result<(), DeviceError> {
        let aligned = offset.is_multiple_of(4) && data.len().is_multiple_of(4);
        if !aligned || offset + data.len() > self.len {
            return self.write(offset, data);
        }
        if data.is_empty() {
            return Ok(());
        }
        // A staged copy keeps queue order with the held launches (a queued write would not).
        let staging = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("kiln staged write"),
            size: data.len() as u64,
            usage: wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        staging
            .slice(..)
            .get_mapped_range_mut()
            .map_err(|e| other(format!("wgpu mapped range: {e}")))?
            .copy_from_slice(data);
        staging.unmap();
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&staging, 0, &self.buf, offset as u64, data.len() as u64);
        self.ctx.enqueue(enc.finish());
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
