//! Benchmark timing on a wgpu device: timestamp queries around the timed passes, or the host
//! clock where the adapter has none ([`Timer`]).

use super::errors::other;
use super::memory::WgpuMemory;
use super::state::{Timer, WgpuDevice};
use crate::gpu::{DeviceMemory, GpuLaunch};
use crate::port::Port;
use crate::DeviceError;
use std::time::Instant;

impl WgpuDevice {
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
    pub(super) fn timed(
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
        let commands = enc.finish();
        // The held work runs before the clock starts.
        self.ctx.wait()?;
        let start = Instant::now();
        self.ctx.submit(vec![commands]);
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
}

/// The timestamp writes of one pass of a timed sequence: index 0 at the start of the first
/// pass, 1 at the end of the last, none for a pass between them (wgpu refuses an empty pair).
pub(super) fn pass_timestamps(
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
