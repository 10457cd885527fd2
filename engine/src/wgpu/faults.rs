//! Kernel faults on wgpu, checked late: every dispatch writes a small fault record (view index
//! out of bounds, unexpected subgroup width) that is read back at the next synchronisation or
//! read instead of after each dispatch, so launches only enqueue. Fault records are reused.

use crate::{Backend, DeviceError};
use kiln_math::KernelId;
use std::sync::Mutex;

/// Dispatches whose fault records have not been read: past this many, a launch reads them
/// (above a decode step's launches, so a step waits for nothing).
const MAX_PENDING: usize = 4096;

/// A dispatch's fault record, not read yet.
struct Pending {
    kernel: KernelId,
    buf: wgpu::Buffer,
    bytes: u64,
    wave: u32,
}

/// The records of one device: those waiting to be read and those free for reuse.
#[derive(Default)]
pub(super) struct Faults {
    pending: Mutex<Vec<Pending>>,
    free: Mutex<Vec<wgpu::Buffer>>,
}

impl Faults {
    /// A zeroed fault record of `bytes` (every record of a device has the same size).
    pub(super) fn record(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        bytes: u64,
    ) -> wgpu::Buffer {
        let reused = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let buf = reused.unwrap_or_else(|| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("kiln fault"),
                size: bytes,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        queue.write_buffer(&buf, 0, &vec![0u8; bytes as usize]);
        buf
    }

    /// Remembers `buf` to be read at the next check; true when enough are pending that the
    /// caller should check now.
    pub(super) fn defer(&self, kernel: KernelId, buf: wgpu::Buffer, bytes: u64, wave: u32) -> bool {
        let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        p.push(Pending {
            kernel,
            buf,
            bytes,
            wave,
        });
        p.len() >= MAX_PENDING
    }

    /// Reads every pending record and the `extra` parts with one call of `read` (which waits
    /// for their dispatches) and reports the first fault, else returns the extra parts' bytes;
    /// the records go back to the free list.
    pub(super) fn check_reading(
        &self,
        extra: &[(&wgpu::Buffer, u64, u64)],
        read: impl Fn(&[(&wgpu::Buffer, u64, u64)]) -> Result<Vec<Vec<u8>>, DeviceError>,
    ) -> Result<Vec<Vec<u8>>, DeviceError> {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        if pending.is_empty() && extra.is_empty() {
            return Ok(Vec::new());
        }
        let mut parts: Vec<_> = pending.iter().map(|p| (&p.buf, 0, p.bytes)).collect();
        parts.extend_from_slice(extra);
        let mut records = read(&parts)?;
        let extras = records.split_off(pending.len());
        let first = pending
            .iter()
            .zip(&records)
            .find_map(|(p, w)| decode(p.kernel, p.wave, w));
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(pending.into_iter().map(|p| p.buf));
        first.map_or(Ok(extras), Err)
    }
}

/// The fault a record reports, if any: `[count, block x, y, z, buffer (u32::MAX: subgroup
/// width), index or width]`.
fn decode(kernel: KernelId, wave: u32, bytes: &[u8]) -> Option<DeviceError> {
    let w: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    if w.first().copied().unwrap_or(0) == 0 || w.len() < 6 {
        return None;
    }
    let detail = if w[4] == u32::MAX {
        format!(
            "the adapter ran subgroups of {} lanes, the pipeline was built for {wave}",
            w[5]
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
    Some(DeviceError::KernelFault {
        kernel: kernel.name(),
        backend: Backend::Wgpu,
        block: Some([w[1], w[2], w[3]]),
        detail,
        state: crate::DeviceState::Usable,
    })
}
