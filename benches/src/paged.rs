//! Paged decode bench driver (issue 7): time v1, v2 and the gather fallback over a grid of
//! contexts × batch sizes on one device, with the K/V bytes each decode must read and that rate
//! as a share of the device's measured copy bandwidth. `kiln bench` calls [`run_paged_decode`]
//! per backend; [`crossover`] is the measurement the dispatch's v1/v2 rule comes from.
//!
//! The kernel arms are timed as launches with their tables already on the device (as a server
//! reuses one step's tables for every layer): device events on a GPU, the wall clock on the
//! host; v2 is its partial launch plus, unless the plan is merge-free, the merge. Pools rotate
//! over enough copies that one pass does not fit the device's last-level cache. The fallback
//! (and the `call_seconds` column of every arm) is the wall clock of a whole `paged_decode`
//! call: table validation and upload, launches, completion. `step_seconds` is what an engine
//! pays per layer: one step's plan written to the device, then [`STEP_LAYERS`] planned calls
//! (each over its own pool copy where there are copies) and one wait, by the wall clock.

use kiln::launch::{default_params, Arg};
use kiln::math::kernels::paged_attention_decode::PagedDecodeParams;
use kiln::math::kernels::paged_attention_decode_v2_partial::PagedDecodeV2Params;
use kiln::math::{Bf16, Element, Params, F16};
use kiln::paged::{
    paged_decode_planned, paged_decode_with, plan_decode, DecodeArm, DecodePlan, DecodePolicy,
    DeviceDecodePlan, KvGeometry, PageTable, PlanConfig,
};
use kiln::timing::{time_kernel, Issue};
use kiln::{DType, Device, KernelId, PortError, Tensor};
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
    /// Wall-clock runs continue until both limits are met (after one warm-up run).
    pub min_runs: usize,
    pub min_time: Duration,
    /// Timed passes of the kernel arms on a GPU (each after a warm-up pass).
    pub gpu_runs: usize,
    /// Most bytes of rotated pool copies kept per shape.
    pub max_rotation_bytes: usize,
    /// How the kernel arms' launches are issued while timed.
    pub issue: Issue,
}

impl Default for PagedBenchConfig {
    /// The issue's grid: contexts 1K–32K × batch 1, 4, 8; D 128, Hq 32, Hkv 8, f16 pool.
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
            gpu_runs: 50,
            max_rotation_bytes: 2 << 30,
            issue: Issue::default(),
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
    /// Median seconds per decode: the kernel launches for v1 and v2, the whole call for the
    /// fallback.
    pub seconds: f64,
    pub runs: usize,
    /// Median wall-clock seconds of a whole `paged_decode` call with this arm forced.
    pub call_seconds: f64,
    /// Median wall-clock seconds per layer of a planned step (v1 and v2; NaN for the
    /// fallback, which has no device plan).
    pub step_seconds: f64,
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
    pub const CSV_HEADER: &'static str = "backend,kernel,arm,context,batch,heads_q,heads_kv,head_dim,page_size,pool_dtype,seconds,runs,call_seconds,kv_bytes,gb_per_s,pct_of_copy,pages_per_chunk,chunks,step_seconds";

    pub fn csv(&self, cfg: &PagedBenchConfig) -> String {
        format!(
            "{},paged_decode,{},{},{},{},{},{},{},{},{:.6e},{},{:.6e},{},{:.3},{:.1},{},{},{:.6e}",
            self.backend,
            self.arm.name(),
            self.context,
            self.batch,
            cfg.heads_q,
            cfg.heads_kv,
            cfg.head_dim,
            cfg.page_size,
            cfg.pool_dtype.name(),
            self.seconds,
            self.runs,
            self.call_seconds,
            self.kv_bytes,
            self.bytes_per_s / 1e9,
            self.pct_of_copy,
            self.pages_per_chunk,
            self.chunks,
            self.step_seconds
        )
    }
}

/// Inputs of one decode: every request sees `context` tokens in pages scattered over the pool;
/// `pools` holds the rotated K/V copies (the first is what whole calls use).
struct Setup {
    q: Tensor,
    pools: Vec<(Tensor, Tensor)>,
    out: Tensor,
    table: PageTable,
    geo: KvGeometry,
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

/// K and V bytes one decode of `context` tokens × `batch` reads.
fn kv_bytes(cfg: &PagedBenchConfig, context: usize, batch: usize) -> u64 {
    (context * batch * cfg.heads_kv * cfg.head_dim * 2 * cfg.pool_dtype.size()) as u64
}

/// Pool copies to rotate over: enough that a pass reads twice the last-level cache (one copy
/// on the host, or when a pass already does), within `max_rotation_bytes`.
fn rotation(dev: &Device, cfg: &PagedBenchConfig, bytes: u64) -> usize {
    let most = (cfg.max_rotation_bytes as u64 / bytes.max(1)).max(1) as usize;
    crate::rotation_copies(dev, bytes as usize, most)
}

fn setup(
    dev: &Device,
    cfg: &PagedBenchConfig,
    context: usize,
    batch: usize,
    copies: usize,
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
    let q = Tensor::from_slice(dev, &qs, &pattern(qn, 7).collect::<Vec<_>>())?;
    let pools = (0..copies.max(1) as u64)
        .map(|c| {
            Ok((
                pool_tensor(dev, cfg.pool_dtype, &pool, 11 + 2 * c)?,
                pool_tensor(dev, cfg.pool_dtype, &pool, 13 + 2 * c)?,
            ))
        })
        .collect::<Result<Vec<_>, PortError>>()?;
    let geo = KvGeometry::of(KernelId::PagedAttentionDecode, &q, &pools[0].0, &pools[0].1)?;
    Ok(Setup {
        q,
        pools,
        out: Tensor::zeros(dev, DType::F32, &qs)?,
        table,
        geo,
    })
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Median wall-clock seconds of a whole `paged_decode` call with `arm` forced (one warm-up
/// call first), the runs taken, and the v2 plan's shape.
fn time_call(
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
            &s.pools[0].0,
            &s.pools[0].1,
            &s.table,
            0.0,
            &mut s.out,
            policy,
            Some(arm),
        )?;
        dev.sync()?;
        Ok::<_, PortError>((t.elapsed().as_secs_f64(), run))
    };
    let (_, run) = once(s)?;
    let (ppc, chunks) = run
        .plan
        .as_ref()
        .map_or((0, 0), |p| (p.pages_per_chunk, p.chunks()));
    let times = repeat_timed(cfg, || Ok(once(s)?.0))?;
    let n = times.len();
    Ok((median(times), n, ppc, chunks))
}

/// Seconds of `run` repeated until both `cfg.min_runs` runs and `cfg.min_time` are reached.
fn repeat_timed(
    cfg: &PagedBenchConfig,
    mut run: impl FnMut() -> Result<f64, PortError>,
) -> Result<Vec<f64>, PortError> {
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < cfg.min_runs || start.elapsed() < cfg.min_time {
        times.push(run()?);
    }
    Ok(times)
}

/// Layers of the decode step whose per-layer wall clock is `step_seconds` (Llama-3.1-8B's).
pub const STEP_LAYERS: usize = 32;

/// Median wall-clock seconds per layer of a decode step with `arm` forced: the plan written
/// once, [`STEP_LAYERS`] planned launches over the rotated pools, one wait (one warm-up step).
fn time_step(
    dev: &Device,
    cfg: &PagedBenchConfig,
    s: &mut Setup,
    arm: DecodeArm,
    policy: &DecodePolicy,
) -> Result<f64, PortError> {
    let mut plan = DeviceDecodePlan::with_policy(dev, s.geo, s.table.indices.len(), *policy)?;
    let mut once = |s: &mut Setup| {
        let t = Instant::now();
        plan.write_with(dev, &s.table, &s.pools[0].0, Some(arm))?;
        for layer in 0..STEP_LAYERS {
            let (k, v) = &s.pools[layer % s.pools.len()];
            paged_decode_planned(dev, &s.q, k, v, &plan, 0.0, &mut s.out)?;
        }
        dev.sync()?;
        Ok::<_, PortError>(t.elapsed().as_secs_f64() / STEP_LAYERS as f64)
    };
    once(s)?;
    Ok(median(repeat_timed(cfg, || once(s))?))
}

fn invalid(kernel: KernelId, msg: String) -> PortError {
    PortError::InvalidShape {
        kernel: kernel.name(),
        msg,
    }
}

fn i32_tensor(dev: &Device, v: &[i32]) -> Result<Tensor, PortError> {
    Tensor::from_slice(dev, &[v.len()], v)
}

/// Median seconds of one pass of `kernel` over the rotated argument sets: device events on a
/// GPU (`gpu_runs` passes), the wall clock on the host (`min_runs` passes).
fn time_sets(
    dev: &Device,
    cfg: &PagedBenchConfig,
    kernel: KernelId,
    words: &[u32],
    sets: &mut [Vec<Arg>],
) -> Result<(f64, usize), PortError> {
    let runs = if dev.gpu().is_some() {
        cfg.gpu_runs
    } else {
        cfg.min_runs
    };
    let t = time_kernel(dev, kernel, words, sets, runs, cfg.issue)?;
    let n = t.len();
    Ok((median(t), n))
}

/// Median seconds of the v1 launch, or of v2's partial launch plus the merge (the merge's
/// inputs are one chunk set, read where the partial just wrote them).
fn time_kernels(
    dev: &Device,
    cfg: &PagedBenchConfig,
    s: &mut Setup,
    arm: DecodeArm,
    plan: Option<&DecodePlan>,
) -> Result<(f64, usize), PortError> {
    let spans = s
        .table
        .validate(s.geo.batch, s.geo.num_blocks, s.geo.page_size)
        .map_err(|e| invalid(KernelId::PagedAttentionDecode, e.to_string()))?;
    match (arm, plan) {
        (DecodeArm::V1, _) => {
            let bt = s.table.to_block_table(&spans);
            let tables = [
                i32_tensor(dev, &bt.rows)?,
                i32_tensor(dev, &bt.row_offsets)?,
                i32_tensor(dev, &bt.logical_starts)?,
                i32_tensor(dev, &bt.visible_lens)?,
            ];
            let mut outs = (0..s.pools.len())
                .map(|_| Tensor::zeros(dev, DType::F32, s.q.shape()))
                .collect::<Result<Vec<_>, _>>()?;
            let mut sets: Vec<Vec<Arg>> = s
                .pools
                .iter()
                .zip(outs.iter_mut())
                .map(|((k, v), out)| {
                    let mut set = vec![Arg::In(&s.q), Arg::In(k), Arg::In(v)];
                    set.extend(tables.iter().map(Arg::In));
                    set.push(Arg::Out(out));
                    set
                })
                .collect();
            let p = PagedDecodeParams {
                mma: kiln::paged::mma_param(),
                ..Default::default()
            };
            time_sets(
                dev,
                cfg,
                KernelId::PagedAttentionDecode,
                p.words(),
                &mut sets,
            )
        }
        (DecodeArm::V2, Some(plan)) => {
            let c = plan.chunks();
            let (hq, d) = (s.geo.heads_q, s.geo.head_dim);
            let tables = [
                i32_tensor(dev, &s.table.indices)?,
                i32_tensor(dev, &s.table.indptr)?,
                i32_tensor(dev, &s.table.last_page_len)?,
                i32_tensor(dev, &s.table.first_page_offset)?,
                i32_tensor(dev, &plan.request_indices)?,
                i32_tensor(dev, &plan.kv_tile_indices)?,
            ];
            let v_shape: Vec<usize> = if plan.merge_free {
                s.q.shape().to_vec()
            } else {
                vec![c, hq, d]
            };
            let mut partials = (0..s.pools.len())
                .map(|_| {
                    Ok((
                        Tensor::zeros(dev, DType::F32, &v_shape)?,
                        Tensor::zeros(dev, DType::F32, &[c, hq])?,
                    ))
                })
                .collect::<Result<Vec<_>, PortError>>()?;
            let p = PagedDecodeV2Params {
                pages_per_chunk: plan.pages_per_chunk as u32,
                mma: kiln::paged::mma_param(),
                ..Default::default()
            };
            let mut sets: Vec<Vec<Arg>> = s
                .pools
                .iter()
                .zip(partials.iter_mut())
                .map(|((k, v), (out_v, out_lse))| {
                    let mut set = vec![Arg::In(&s.q), Arg::In(k), Arg::In(v)];
                    set.extend(tables.iter().map(Arg::In));
                    set.push(Arg::Out(out_v));
                    set.push(Arg::Out(out_lse));
                    set
                })
                .collect();
            let kernel = KernelId::PagedAttentionDecodeV2Partial;
            let (partial, runs) = time_sets(dev, cfg, kernel, p.words(), &mut sets)?;
            drop(sets);
            if plan.merge_free {
                return Ok((partial, runs));
            }
            let o_indptr = i32_tensor(dev, &plan.o_indptr)?;
            let mut v_out = Tensor::zeros(dev, DType::F32, s.q.shape())?;
            let mut lse_out = Tensor::zeros(dev, DType::F32, &[s.geo.batch, hq])?;
            let (v_in, lse_in) = &partials[0];
            let mut merge = vec![vec![
                Arg::In(v_in),
                Arg::In(lse_in),
                Arg::In(&o_indptr),
                Arg::Out(&mut v_out),
                Arg::Out(&mut lse_out),
            ]];
            let words = default_params(KernelId::PagedAttentionMergeStates);
            let (merged, _) = time_sets(
                dev,
                cfg,
                KernelId::PagedAttentionMergeStates,
                &words,
                &mut merge,
            )?;
            Ok((partial + merged, runs))
        }
        _ => Err(invalid(
            KernelId::PagedAttentionDecode,
            "only the kernel arms are timed as launches (v2 needs its plan)".into(),
        )),
    }
}

/// What [`measure`] returns for one row.
struct Measured {
    seconds: f64,
    runs: usize,
    call_seconds: f64,
    step_seconds: f64,
    pages_per_chunk: usize,
    chunks: usize,
}

/// One row: the kernel arms timed as launches, as whole calls and as planned steps; the
/// fallback as whole calls.
fn measure(
    dev: &Device,
    cfg: &PagedBenchConfig,
    s: &mut Setup,
    arm: DecodeArm,
    policy: &DecodePolicy,
) -> Result<Measured, PortError> {
    let (call, call_runs, pages_per_chunk, chunks) = time_call(dev, cfg, s, arm, policy)?;
    let mut m = Measured {
        seconds: call,
        runs: call_runs,
        call_seconds: call,
        step_seconds: f64::NAN,
        pages_per_chunk,
        chunks,
    };
    if arm == DecodeArm::Fallback {
        return Ok(m);
    }
    let plan = match arm {
        DecodeArm::V2 => Some(plan_for(s, policy)?),
        _ => None,
    };
    (m.seconds, m.runs) = time_kernels(dev, cfg, s, arm, plan.as_ref())?;
    m.step_seconds = time_step(dev, cfg, s, arm, policy)?;
    Ok(m)
}

/// The v2 plan the dispatch makes for `s` under `policy`.
fn plan_for(s: &Setup, policy: &DecodePolicy) -> Result<DecodePlan, PortError> {
    let pages: Vec<usize> = (0..s.geo.batch)
        .map(|r| (s.table.indptr[r + 1] - s.table.indptr[r]) as usize)
        .collect();
    plan_decode(
        &pages,
        s.geo.heads_q,
        s.geo.heads_kv,
        s.geo.head_dim,
        PlanConfig {
            target_blocks: policy.target_blocks,
            pages_per_chunk: policy.pages_per_chunk,
        },
    )
    .map_err(|e| invalid(KernelId::PagedAttentionDecodeV2Partial, e.to_string()))
}

/// Runs the grid on `dev`; `copy_bytes_per_s` is the device's copy bandwidth measured in the
/// same run. `each` sees every row as it is measured.
pub fn run_paged_decode(
    dev: &Device,
    cfg: &PagedBenchConfig,
    copy_bytes_per_s: f64,
    mut each: impl FnMut(&PagedBenchRow),
) -> Result<Vec<PagedBenchRow>, PortError> {
    let mut rows = Vec::new();
    for &context in &cfg.contexts {
        for &batch in &cfg.batches {
            let bytes = kv_bytes(cfg, context, batch);
            let mut s = setup(dev, cfg, context, batch, rotation(dev, cfg, bytes))?;
            let policy = DecodePolicy::for_device(dev, &s.geo);
            for &arm in &cfg.arms {
                let m = measure(dev, cfg, &mut s, arm, &policy)?;
                let bytes_per_s = bytes as f64 / m.seconds;
                let row = PagedBenchRow {
                    backend: dev.backend().name().to_string(),
                    arm,
                    context,
                    batch,
                    seconds: m.seconds,
                    runs: m.runs,
                    call_seconds: m.call_seconds,
                    step_seconds: m.step_seconds,
                    kv_bytes: bytes,
                    bytes_per_s,
                    pct_of_copy: 100.0 * bytes_per_s / copy_bytes_per_s,
                    pages_per_chunk: m.pages_per_chunk,
                    chunks: m.chunks,
                };
                each(&row);
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// Host memory copy bandwidth (bytes read and written per second, best of `runs` copies of
/// `bytes`): the cpu backend's device memory is host memory, so this is its copy bandwidth.
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
    2.0 * bytes as f64 / best
}

/// One point of the v1/v2 crossover measurement.
#[derive(Clone, Debug)]
pub struct CrossoverPoint {
    pub context: usize,
    pub v1_seconds: f64,
    pub v2_seconds: f64,
}

/// The v1/v2 crossover on `dev` where v1 under-fills it: batch 1 with one KV head (two v1
/// blocks), v2 planned by the device's policy, both timed as launches. Returns every point and
/// the shortest context from which v2 is faster at that and every longer context measured.
pub fn crossover(
    dev: &Device,
    contexts: &[usize],
) -> Result<(Vec<CrossoverPoint>, Option<usize>), PortError> {
    let cfg = PagedBenchConfig {
        heads_q: 8,
        heads_kv: 1,
        ..PagedBenchConfig::default()
    };
    let mut points = Vec::new();
    for &context in contexts {
        let bytes = kv_bytes(&cfg, context, 1);
        let mut s = setup(dev, &cfg, context, 1, rotation(dev, &cfg, bytes))?;
        let policy = DecodePolicy::for_device(dev, &s.geo);
        let plan = plan_for(&s, &policy)?;
        let v1 = time_kernels(dev, &cfg, &mut s, DecodeArm::V1, None)?.0;
        let v2 = time_kernels(dev, &cfg, &mut s, DecodeArm::V2, Some(&plan))?.0;
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
