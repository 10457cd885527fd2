//! Paged decode bench driver (issue 7): time v1, v2 and the gather fallback over a grid of
//! contexts × batch sizes on one device, with the K/V bytes each decode must read and that rate
//! as a share of the device's measured copy bandwidth. `kiln bench` calls [`run_paged_decode`]
//! per backend; [`crossover`] is the measurement the dispatch's v1/v2 rule comes from.

use kiln::math::{Bf16, Element, F16};
use kiln::paged::{paged_decode_with, DecodeArm, DecodePolicy, PageTable};
use kiln::{DType, Device, PortError, Tensor};
use std::time::{Duration, Instant};

/// The grid and shapes of a paged decode bench.
#[derive(Clone, Debug)]
pub struct PagedBenchConfig {
    /// Visible tokens per request.
    pub contexts: Vec<usize>,
    pub batches: Vec<usize>,
    pub heads_q: usize,
    pub heads_kv: usize,
    pub head_dim: usize,
    pub page_size: usize,
    pub pool_dtype: DType,
    pub arms: Vec<DecodeArm>,
    /// Timed runs continue until both limits are met (after one warm-up run).
    pub min_runs: usize,
    pub min_time: Duration,
}

impl Default for PagedBenchConfig {
    /// The grid: contexts 1K–32K × batch 1, 4, 8; D 128, Hq 32, Hkv 8, f16 pool.
    fn default() -> Self {
        PagedBenchConfig {
            contexts: vec![1024, 4096, 16384, 32768],
            batches: vec![1, 4, 8],
            heads_q: 32,
            heads_kv: 8,
            head_dim: 128,
            page_size: 32,
            pool_dtype: DType::F16,
            arms: DecodeArm::ALL.to_vec(),
            min_runs: 3,
            min_time: Duration::from_millis(300),
        }
    }
}

/// One measured (arm, context, batch).
#[derive(Clone, Debug)]
pub struct PagedBenchRow {
    pub backend: String,
    pub arm: DecodeArm,
    pub context: usize,
    pub batch: usize,
    /// Median seconds per decode.
    pub seconds: f64,
    pub runs: usize,
    /// K and V bytes the decode must read: visible tokens × Hkv × D × 2 × element size.
    pub kv_bytes: u64,
    pub bytes_per_s: f64,
    /// `bytes_per_s` as a percentage of the measured copy bandwidth.
    pub pct_of_copy: f64,
    /// v2's pages per chunk and chunk count (0 for the other arms).
    pub pages_per_chunk: usize,
    pub chunks: usize,
}

impl PagedBenchRow {
    pub const CSV_HEADER: &'static str = "backend,kernel,arm,context,batch,heads_q,heads_kv,head_dim,pool_dtype,seconds,runs,kv_bytes,gb_per_s,pct_of_copy,pages_per_chunk,chunks";

    pub fn csv(&self, cfg: &PagedBenchConfig) -> String {
        format!(
            "{},paged_decode,{},{},{},{},{},{},{},{:.6e},{},{},{:.3},{:.1},{},{}",
            self.backend,
            self.arm.name(),
            self.context,
            self.batch,
            cfg.heads_q,
            cfg.heads_kv,
            cfg.head_dim,
            cfg.pool_dtype.name(),
            self.seconds,
            self.runs,
            self.kv_bytes,
            self.bytes_per_s / 1e9,
            self.pct_of_copy,
            self.pages_per_chunk,
            self.chunks
        )
    }
}

/// Inputs of one decode: every request sees `context` tokens in pages scattered over the pool.
struct Setup {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    table: PageTable,
}

fn pattern(n: usize, seed: u64) -> impl Iterator<Item = f32> {
    // A cheap deterministic fill in [-1, 1): the timing does not depend on the values.
    let mut x = seed | 1;
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    })
}

/// A pool tensor filled without an f32 copy of the whole pool.
fn pool_tensor(
    dev: &Device,
    dtype: DType,
    shape: &[usize],
    seed: u64,
) -> Result<Tensor, PortError> {
    let n = shape.iter().product();
    match dtype {
        DType::F16 => Tensor::from_slice(
            dev,
            shape,
            &pattern(n, seed).map(F16::from_f32).collect::<Vec<_>>(),
        ),
        DType::Bf16 => Tensor::from_slice(
            dev,
            shape,
            &pattern(n, seed).map(Bf16::from_f32).collect::<Vec<_>>(),
        ),
        _ => Tensor::from_slice(dev, shape, &pattern(n, seed).collect::<Vec<_>>()),
    }
}

fn setup(
    dev: &Device,
    cfg: &PagedBenchConfig,
    context: usize,
    batch: usize,
) -> Result<Setup, PortError> {
    let pages = context.div_ceil(cfg.page_size);
    let num_blocks = pages * batch;
    // A stride coprime to the pool size scatters consecutive pages across it.
    let stride = (num_blocks / 2 + 1..num_blocks.max(2))
        .find(|s| gcd(*s, num_blocks) == 1)
        .unwrap_or(1);
    let mut table = PageTable {
        indptr: vec![0],
        ..Default::default()
    };
    for r in 0..batch {
        for p in 0..pages {
            table
                .indices
                .push((((r * pages + p) * stride) % num_blocks) as i32);
        }
        table.indptr.push(table.indices.len() as i32);
        table
            .last_page_len
            .push((context - (pages - 1) * cfg.page_size) as i32);
        table.first_page_offset.push(0);
    }
    let pool = [num_blocks, cfg.page_size, cfg.heads_kv, cfg.head_dim];
    let qs = [batch, cfg.heads_q, 1, cfg.head_dim];
    let qn = batch * cfg.heads_q * cfg.head_dim;
    Ok(Setup {
        q: Tensor::from_slice(dev, &qs, &pattern(qn, 7).collect::<Vec<_>>())?,
        k: pool_tensor(dev, cfg.pool_dtype, &pool, 11)?,
        v: pool_tensor(dev, cfg.pool_dtype, &pool, 13)?,
        out: Tensor::zeros(dev, DType::F32, &qs)?,
        table,
    })
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Median seconds of `arm` on `s` (one warm-up run first), and the v2 plan's shape.
fn time_arm(
    dev: &Device,
    cfg: &PagedBenchConfig,
    s: &mut Setup,
    arm: DecodeArm,
    policy: &DecodePolicy,
) -> Result<(f64, usize, usize, usize), PortError> {
    let once = |s: &mut Setup| {
        let t = Instant::now();
        let run = paged_decode_with(
            dev,
            &s.q,
            &s.k,
            &s.v,
            &s.table,
            0.0,
            &mut s.out,
            policy,
            Some(arm),
        )?;
        Ok::<_, PortError>((t.elapsed().as_secs_f64(), run))
    };
    let (_, run) = once(s)?;
    let (ppc, chunks) = run
        .plan
        .as_ref()
        .map_or((0, 0), |p| (p.pages_per_chunk, p.chunks()));
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < cfg.min_runs || start.elapsed() < cfg.min_time {
        times.push(once(s)?.0);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], times.len(), ppc, chunks))
}

/// Runs the grid on `dev`; `copy_bytes_per_s` is the device's copy bandwidth measured in the
/// same run (bytes read per second of a large device-to-device copy). `each` sees every row as
/// it is measured.
pub fn run_paged_decode(
    dev: &Device,
    cfg: &PagedBenchConfig,
    copy_bytes_per_s: f64,
    mut each: impl FnMut(&PagedBenchRow),
) -> Result<Vec<PagedBenchRow>, PortError> {
    let policy = DecodePolicy::for_device(dev);
    let mut rows = Vec::new();
    for &context in &cfg.contexts {
        for &batch in &cfg.batches {
            let mut s = setup(dev, cfg, context, batch)?;
            let kv_bytes =
                (context * batch * cfg.heads_kv * cfg.head_dim * 2 * cfg.pool_dtype.size()) as u64;
            for &arm in &cfg.arms {
                let (seconds, runs, pages_per_chunk, chunks) =
                    time_arm(dev, cfg, &mut s, arm, &policy)?;
                let bytes_per_s = kv_bytes as f64 / seconds;
                let row = PagedBenchRow {
                    backend: dev.backend().name().to_string(),
                    arm,
                    context,
                    batch,
                    seconds,
                    runs,
                    kv_bytes,
                    bytes_per_s,
                    pct_of_copy: 100.0 * bytes_per_s / copy_bytes_per_s,
                    pages_per_chunk,
                    chunks,
                };
                each(&row);
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// Host memory copy bandwidth (bytes read per second, best of `runs` copies of `bytes`): the
/// cpu backend's device memory is host memory, so this is its copy bandwidth.
pub fn host_copy_bandwidth(bytes: usize, runs: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let mut best = f64::MAX;
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        best = best.min(t.elapsed().as_secs_f64());
    }
    bytes as f64 / best
}

/// One point of the v1/v2 crossover measurement.
#[derive(Clone, Debug)]
pub struct CrossoverPoint {
    pub context: usize,
    pub v1_seconds: f64,
    pub v2_seconds: f64,
}

/// The v1/v2 crossover on `dev` where v1 under-fills it: batch 1 with one KV head (one v1
/// block), v2 planned by the device's policy. Returns every point and the shortest context
/// from which v2 is faster at that and every longer context measured.
pub fn crossover(
    dev: &Device,
    contexts: &[usize],
) -> Result<(Vec<CrossoverPoint>, Option<usize>), PortError> {
    let cfg = PagedBenchConfig {
        heads_q: 8,
        heads_kv: 1,
        ..PagedBenchConfig::default()
    };
    // The measured quantity is the split itself: ignore any crossover already configured.
    let policy = DecodePolicy {
        v2_min_tokens: 0,
        ..DecodePolicy::for_device(dev)
    };
    let mut points = Vec::new();
    for &context in contexts {
        let mut s = setup(dev, &cfg, context, 1)?;
        let v1 = time_arm(dev, &cfg, &mut s, DecodeArm::V1, &policy)?.0;
        let v2 = time_arm(dev, &cfg, &mut s, DecodeArm::V2, &policy)?.0;
        points.push(CrossoverPoint {
            context,
            v1_seconds: v1,
            v2_seconds: v2,
        });
    }
    let from = (0..points.len())
        .find(|&i| points[i..].iter().all(|p| p.v2_seconds < p.v1_seconds))
        .map(|i| points[i].context);
    Ok((points, from))
}
