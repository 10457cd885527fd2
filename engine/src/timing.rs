//! Timing for benchmarks: kernel launches and copies, on the device's own clock where it has
//! one (GPU events) and on the wall clock for the host backends.

use crate::launch::{gpu_bufs, gpu_launch, launch_checked_tables, prepare, Arg, Mode, Tables};
use crate::ports::{ports, select_port};
use crate::{Device, DeviceKind, PortError};
use kiln_math::KernelId;
use std::time::Instant;

/// Times `runs` passes over the argument `sets` (one pass launches the kernel once per set, in
/// order, through its port), after an untimed warm-up pass. Returns seconds per launch for each
/// pass. Rotating over several sets keeps the inputs out of the caches.
pub fn time_kernel(
    dev: &Device,
    kernel: KernelId,
    params: &[u32],
    sets: &mut [Vec<Arg>],
    runs: usize,
) -> Result<Vec<f64>, PortError> {
    if sets.is_empty() {
        return Ok(Vec::new());
    }
    let n = sets.len() as f64;
    match dev.kind() {
        DeviceKind::Gpu(g) => {
            let mut bound = Vec::with_capacity(sets.len());
            for set in sets.iter() {
                bound.push(prepare(dev, kernel, params, set, Tables::Read)?);
            }
            let dtype = bound[0].0;
            let port = select_port(ports(kernel), dev, dtype)?;
            let bufs: Vec<_> = sets.iter().map(|s| gpu_bufs(s)).collect();
            let launches: Vec<_> = bound
                .iter()
                .zip(&bufs)
                .map(|((_, words, geometry), b)| gpu_launch(g.as_ref(), port, words, geometry, b))
                .collect();
            Ok(g.time_launches(port, &launches, runs)?)
        }
        _ => {
            // The tables are checked once here, so the passes time the kernel alone.
            for set in sets.iter() {
                prepare(dev, kernel, params, set, Tables::Read)?;
            }
            let pass = |sets: &mut [Vec<Arg>]| -> Result<f64, PortError> {
                let t = Instant::now();
                for set in sets.iter_mut() {
                    launch_checked_tables(dev, kernel, params, set, Mode::PortOnly)?;
                }
                Ok(t.elapsed().as_secs_f64() / n)
            };
            pass(sets)?;
            (0..runs).map(|_| pass(sets)).collect()
        }
    }
}

/// Times `runs` copies of `bytes` between two buffers of the device's memory (device to device
/// on a GPU, `memcpy` on the host), after an untimed warm-up copy; seconds per copy.
pub fn time_copy(dev: &Device, bytes: usize, runs: usize) -> Result<Vec<f64>, PortError> {
    match dev.kind() {
        DeviceKind::Gpu(g) => {
            let src = g.alloc(bytes)?;
            let dst = g.alloc(bytes)?;
            // Touch the source so the copy reads written memory.
            src.write(0, &vec![0x3c; bytes])?;
            Ok(g.time_copy(dst.as_ref(), src.as_ref(), bytes, runs)?)
        }
        _ => {
            let src = vec![0x3cu8; bytes];
            let mut dst = vec![0u8; bytes];
            let mut copy = || {
                let t = Instant::now();
                dst.copy_from_slice(std::hint::black_box(&src));
                std::hint::black_box(&mut dst);
                t.elapsed().as_secs_f64()
            };
            copy();
            Ok((0..runs).map(|_| copy()).collect())
        }
    }
}
