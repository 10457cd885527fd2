//! wgpu allocations ([`WgpuMemory`] and its `DeviceMemory` impl) and the device context they
//! share with the device: waiting for the queue, copying a buffer back and mapping it.

use super::errors::other;
use crate::gpu::DeviceMemory;
use crate::DeviceError;
use std::any::Any;
use std::sync::Arc;

/// The device and queue a wgpu device and its allocations share.
pub(super) struct Ctx {
    pub(super) device: wgpu::Device,
    pub(super) queue: wgpu::Queue,
    /// Fault records of dispatches not checked yet.
    pub(super) faults: super::faults::Faults,
}

impl Ctx {
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
            .check(|buf, bytes| self.read_back(buf, 0, bytes))
    }

    /// Waits for all submitted work.
    pub(super) fn wait(&self) -> Result<(), DeviceError> {
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
        // A read waits for the work before it: report that work's faults first.
        self.ctx.check_faults()?;
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
