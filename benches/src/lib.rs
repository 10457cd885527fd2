//! The device benchmark drivers behind `kiln bench` and the criterion benches.
//!
//! Per kernel × dtype × shape: the bytes a launch must move (each input read once, each output
//! written once, a read-write buffer both) over its median time, and that rate as a percentage
//! of the device's copy bandwidth measured in the same process (a device-to-device copy, read
//! and write bytes counted). GPU launches are timed with device timers (CUDA events, wgpu
//! timestamp queries; on a wgpu adapter without those, the host clock from submit to queue idle,
//! which the device name then says) after a warm-up pass; inputs rotate over enough copies that
//! a pass does not fit in the last-level cache.

pub mod decode;
pub mod moe_block;
pub mod paged;
pub mod samplers;

use kiln::launch::{default_params, set_param, Arg};
use kiln::parity::{bench_cases, draw, Case};
use kiln::rng::Rng;
use kiln::timing::{time_copy, time_kernel, Issue};
use kiln::{DType, Device, KernelId, PortError, Tensor};
use kiln_math::Access;
use std::fmt::Write as _;

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub kernels: Vec<KernelId>,
    /// Only these dtypes of each kernel (all when empty).
    pub dtypes: Vec<DType>,
    /// Only shapes whose label contains one of these texts (all when empty).
    pub shapes: Vec<String>,
    /// Timed passes per kernel × dtype × shape (each after one warm-up pass).
    pub runs: usize,
    /// Bytes of each buffer of the copy-bandwidth measurement.
    pub copy_bytes: usize,
    /// Most bytes of rotated input copies kept per shape.
    pub max_rotation_bytes: usize,
    /// How launches are issued while timed (replayed from a recording where the backend can).
    pub issue: Issue,
}

impl BenchOptions {
    /// Every kernel; more runs on a GPU (cheap) than on the host (slow).
    pub fn for_device(dev: &Device) -> BenchOptions {
        let gpu = dev.l2_bytes().is_some();
        BenchOptions {
            kernels: KernelId::ALL.to_vec(),
            dtypes: Vec::new(),
            shapes: Vec::new(),
            runs: if gpu { 50 } else { 5 },
            copy_bytes: 256 << 20,
            max_rotation_bytes: if gpu { 4 << 30 } else { 1 << 30 },
            issue: Issue::default(),
        }
    }
}

/// The device's copy bandwidth, measured in this run.
#[derive(Clone, Debug)]
pub struct CopyBandwidth {
    pub bytes: usize,
    pub runs: usize,
    pub median_s: f64,
    /// (read + write bytes) / median time, in GB/s (1e9 bytes).
    pub gbps: f64,
}

impl CopyBandwidth {
    /// The median of `runs` device copies of `bytes` (after a warm-up copy).
    pub fn measure(dev: &Device, bytes: usize, runs: usize) -> Result<CopyBandwidth, PortError> {
        let median_s = median(time_copy(dev, bytes, runs)?);
        Ok(CopyBandwidth {
            bytes,
            runs,
            median_s,
            gbps: 2.0 * bytes as f64 / median_s / 1e9,
        })
    }
}

/// One kernel × dtype × shape.
#[derive(Clone, Debug)]
pub struct BenchRow {
    pub kernel: &'static str,
    pub dtype: &'static str,
    pub shape: String,
    /// Bytes one launch must move.
    pub bytes: u64,
    /// Input sets rotated over.
    pub copies: usize,
    pub runs: usize,
    pub median_us: f64,
    pub gbps: f64,
    pub pct_of_copy: f64,
}

/// A whole run.
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub backend: String,
    /// How the launches were issued (`Issue::name`).
    pub issue: &'static str,
    pub device: String,
    pub copy: CopyBandwidth,
    pub rows: Vec<BenchRow>,
}

/// Bytes a launch must move: reads once, writes once, read-write buffers both.
pub fn bytes_moved(kernel: KernelId, dtype: DType, shapes: &[Vec<usize>]) -> u64 {
    kernel
        .buffers()
        .iter()
        .zip(shapes)
        .map(|(d, s)| {
            let n = s.iter().product::<usize>() as u64 * d.elem.resolve(dtype).size() as u64;
            if d.access == Access::ReadWrite {
                2 * n
            } else {
                n
            }
        })
        .sum()
}

/// Copies of `bytes` of inputs a timed pass rotates over so that it reads twice the device's
/// last-level cache from DRAM: at least 1, at most `most`, and 1 where the device has no cache
/// figure (the host backends).
pub fn rotation_copies(dev: &Device, bytes: usize, most: usize) -> usize {
    dev.l2_bytes().map_or(1, |l2| {
        (2 * l2).div_ceil(bytes.max(1)).clamp(1, most.max(1))
    })
}

/// The median of `v` (NaN when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Measures the copy bandwidth, then every kernel × dtype × bench shape.
pub fn run(dev: &Device, opts: &BenchOptions) -> Result<BenchReport, PortError> {
    run_with(dev, opts, |_, _| {})
}

/// [`run`], handing each row to `on_row` (with the copy bandwidth) as soon as it is measured.
pub fn run_with(
    dev: &Device,
    opts: &BenchOptions,
    mut on_row: impl FnMut(&CopyBandwidth, &BenchRow),
) -> Result<BenchReport, PortError> {
    let copy = CopyBandwidth::measure(dev, opts.copy_bytes, opts.runs.max(5))?;
    // Rotated copies of a shape's buffers should span twice the cache (64 MiB if unknown).
    let rotate = 2 * dev.l2_bytes().unwrap_or(64 << 20);
    let mut rows = Vec::new();
    for &kernel in &opts.kernels {
        for &dtype in kernel.dtypes() {
            if !opts.dtypes.is_empty() && !opts.dtypes.contains(&dtype) {
                continue;
            }
            // The port tables say where a kernel runs: an absent or held-back port is skipped.
            if let Err(e) = kiln::select_port(kiln::ports::ports(kernel), dev, dtype) {
                if e.is_fallback() {
                    eprintln!("skipped {} {}: {e}", kernel.name(), dtype.name());
                    continue;
                }
            }
            for case in bench_cases(kernel, dtype) {
                if !opts.shapes.is_empty() && !opts.shapes.iter().any(|s| case.label.contains(s)) {
                    continue;
                }
                let set_bytes: usize = kernel
                    .buffers()
                    .iter()
                    .zip(&case.shapes)
                    .map(|(d, s)| s.iter().product::<usize>() * d.elem.resolve(dtype).size())
                    .sum();
                let copies = rotate
                    .div_ceil(set_bytes.max(1))
                    .clamp(2, 512)
                    .min((opts.max_rotation_bytes / set_bytes.max(1)).max(1));
                let median_s =
                    bench_case(dev, kernel, dtype, &case, copies, opts.runs, opts.issue)?;
                let bytes = bytes_moved(kernel, dtype, &case.shapes);
                let gbps = bytes as f64 / median_s / 1e9;
                rows.push(BenchRow {
                    kernel: kernel.name(),
                    dtype: dtype.name(),
                    shape: case.label.clone(),
                    bytes,
                    copies,
                    runs: opts.runs,
                    median_us: median_s * 1e6,
                    gbps,
                    pct_of_copy: 100.0 * gbps / copy.gbps,
                });
                on_row(&copy, rows.last().expect("just pushed"));
            }
        }
    }
    Ok(BenchReport {
        backend: dev.backend().to_string(),
        issue: opts.issue.on(dev).name(),
        device: dev.name().to_string(),
        copy,
        rows,
    })
}

/// Median seconds per launch of one case, rotating over `copies` input sets.
fn bench_case(
    dev: &Device,
    kernel: KernelId,
    dtype: DType,
    case: &Case,
    copies: usize,
    runs: usize,
    issue: Issue,
) -> Result<f64, PortError> {
    let desc = kernel.buffers();
    let mut params = default_params(kernel);
    for (name, value) in &case.params {
        set_param(kernel, &mut params, name, value)?;
    }
    let mut rng = Rng::new(0x6b69_6c6e);
    let mut tensors: Vec<Vec<Tensor>> = Vec::with_capacity(copies);
    for _ in 0..copies {
        let mut set = Vec::with_capacity(desc.len());
        for ((d, shape), fill) in desc.iter().zip(&case.shapes).zip(&case.fill) {
            let bt = d.elem.resolve(dtype);
            let n: usize = shape.iter().product();
            set.push(if d.access == Access::Write {
                Tensor::zeros(dev, bt, shape)?
            } else {
                Tensor::from_bytes(dev, bt, shape, &draw(bt, n, fill, &mut rng))?
            });
        }
        tensors.push(set);
    }
    let mut sets: Vec<Vec<Arg>> = tensors
        .iter_mut()
        .map(|set| {
            set.iter_mut()
                .zip(desc)
                .map(|(t, d)| {
                    if d.access == Access::Read {
                        Arg::In(&*t)
                    } else {
                        Arg::Out(t)
                    }
                })
                .collect()
        })
        .collect();
    Ok(median(time_kernel(
        dev, kernel, &params, &mut sets, runs, issue,
    )?))
}

impl BenchReport {
    /// A plain-text table.
    pub fn table(&self) -> String {
        let mut s = BenchReport::table_header(&self.backend, &self.device, &self.copy, self.issue);
        for r in &self.rows {
            let _ = writeln!(s, "{}", BenchReport::table_row(r));
        }
        s
    }

    /// The table's first lines: the copy bandwidth, then the column names.
    pub fn table_header(backend: &str, device: &str, copy: &CopyBandwidth, issue: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{backend} on {device}: copy bandwidth {:.1} GB/s ({} MiB copy, read + write bytes, median of {}); launches {issue}",
            copy.gbps,
            copy.bytes >> 20,
            copy.runs
        );
        let _ = writeln!(
            s,
            "{:<22} {:<5} {:<12} {:>12} {:>7} {:>11} {:>9} {:>7}",
            "kernel", "dtype", "shape", "bytes", "copies", "median us", "GB/s", "% copy"
        );
        s
    }

    /// One row of the table (no newline).
    pub fn table_row(r: &BenchRow) -> String {
        format!(
            "{:<22} {:<5} {:<12} {:>12} {:>7} {:>11.2} {:>9.1} {:>6.1}%",
            r.kernel, r.dtype, r.shape, r.bytes, r.copies, r.median_us, r.gbps, r.pct_of_copy
        )
    }

    /// The report as JSON.
    pub fn json(&self) -> String {
        let rows: Vec<_> = self
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "kernel": r.kernel, "dtype": r.dtype, "shape": r.shape, "bytes": r.bytes,
                    "copies": r.copies, "runs": r.runs, "median_us": r.median_us,
                    "gbps": r.gbps, "pct_of_copy": r.pct_of_copy,
                })
            })
            .collect();
        serde_json::to_string_pretty(&serde_json::json!({
            "backend": self.backend,
            "issue": self.issue,
            "device": self.device,
            "copy": {
                "bytes": self.copy.bytes, "runs": self.copy.runs,
                "median_us": self.copy.median_s * 1e6, "gbps": self.copy.gbps,
            },
            "rows": rows,
        }))
        .expect("plain JSON values")
    }

    /// One CSV row per kernel × dtype × shape, the copy bandwidth repeated on each.
    pub fn csv(&self) -> String {
        let mut s = String::from(
            "backend,device,kernel,dtype,shape,bytes,copies,runs,median_us,gbps,copy_gbps,pct_of_copy,issue\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{},\"{}\",{},{},{},{},{},{},{:.3},{:.2},{:.2},{:.2},{}",
                self.backend,
                self.device.replace('"', "'"),
                r.kernel,
                r.dtype,
                r.shape,
                r.bytes,
                r.copies,
                r.runs,
                r.median_us,
                r.gbps,
                self.copy.gbps,
                r.pct_of_copy,
                self.issue
            );
        }
        s
    }
}
