//! The decode dispatch: for one batch, run v1, v2 (partials, then the merge unless the plan is
//! merge-free) or the fallback (gather the visible K/V on the host, then plain attention), and
//! say which and why.
//!
//! `KILN_PAGED_DECODE=v1|v2|fallback` forces an arm for A/B runs (a forced arm without a port
//! is an error, not a silent substitute); `auto` or unset lets [`choose_arm`] decide.

use super::launch;
use super::plan::{plan_decode, DecodePlan, PlanConfig};
use super::table::{check_scale, KvGeometry, PageTable, RequestSpan};
use crate::launch::{forced_fallback, resident_blocks, FallbackReason, Path, Ran};
use crate::ports::{ports, select_port};
use crate::reference::primitives::attend_heads;
use crate::{Backend, Device, PortError, Tensor};
use kiln_math::kernels::decode_attention::group_heads;
use kiln_math::kernels::paged_attention_decode::{PagedAttentionDecode, PagedDecodeParams};
use kiln_math::kernels::paged_attention_decode_v2_partial::{
    PagedAttentionDecodeV2Partial, PagedDecodeV2Params,
};
use kiln_math::{DType, Element, KernelDef, KernelId, Params};

/// The environment variable that forces an arm.
pub const ARM_ENV: &str = "KILN_PAGED_DECODE";

/// The three ways to run a paged decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecodeArm {
    /// One block per request and head group, the whole context (spec §9.2).
    V1,
    /// Partials over chunks of pages, then a merge (spec §9.3–9.4).
    V2,
    /// The gather fallback on the host.
    Fallback,
}

impl DecodeArm {
    /// Every arm.
    pub const ALL: [DecodeArm; 3] = [DecodeArm::V1, DecodeArm::V2, DecodeArm::Fallback];

    /// Its name in `KILN_PAGED_DECODE` and reports.
    pub const fn name(self) -> &'static str {
        match self {
            DecodeArm::V1 => "v1",
            DecodeArm::V2 => "v2",
            DecodeArm::Fallback => "fallback",
        }
    }

    /// The arm of a name.
    pub fn parse(s: &str) -> Option<DecodeArm> {
        DecodeArm::ALL.into_iter().find(|a| a.name() == s)
    }

    /// The arm `KILN_PAGED_DECODE` forces, if any (`auto` and unset force none).
    pub fn forced() -> Result<Option<DecodeArm>, PortError> {
        match std::env::var(ARM_ENV) {
            Err(_) => Ok(None),
            Ok(v) if v.trim().is_empty() || v.trim() == "auto" => Ok(None),
            Ok(v) => DecodeArm::parse(v.trim()).map(Some).ok_or_else(|| {
                PortError::invalid(
                    KernelId::PagedAttentionDecode,
                    format!("{ARM_ENV}=`{v}`: expected auto, v1, v2 or fallback"),
                )
            }),
        }
    }
}

/// When v2 is worth its second launch on a device, from measurements (`kiln-benches`' paged
/// driver; figures and commands in `docs/results/paged-decode-*.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodePolicy {
    /// Blocks the device runs at once; v1 with at least this many blocks already fills it.
    /// `None`: not known for this backend, so auto never prefers v2.
    pub concurrent_blocks: Option<usize>,
    /// Below this many visible tokens in the longest request, v2's split does not pay
    /// (`usize::MAX`: it paid at no measured context).
    pub v2_min_tokens: usize,
    /// Partial blocks the device runs at once: the planner's round size.
    pub target_blocks: usize,
    /// Pinned pages per chunk (`KILN_PAGED_V2_PAGES_PER_CHUNK`).
    pub pages_per_chunk: Option<usize>,
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// The planner's round size where the device cannot say how many partial blocks it holds (a
/// forced v2 on such a backend): a few blocks per multiprocessor of a large GPU.
pub const UNKNOWN_TARGET_BLOCKS: usize = 256;

impl DecodePolicy {
    /// The policy for batches of geometry `geo` on `dev`, with `KILN_PAGED_V2_MIN_TOKENS`,
    /// `KILN_PAGED_V2_TARGET_BLOCKS` and `KILN_PAGED_V2_PAGES_PER_CHUNK` overriding the
    /// measured defaults. On a GPU both block counts come from the device (multiprocessors ×
    /// blocks of that kernel resident on each, for this head dim and group).
    pub fn for_device(dev: &Device, geo: &KvGeometry) -> DecodePolicy {
        let per_kv = (geo.heads_q / geo.heads_kv.max(1)).max(1) as u32;
        let group = group_heads(per_kv);
        let head_dim = geo.head_dim as u32;
        let v1 = PagedDecodeParams {
            head_dim,
            group_heads: group,
            mma: launch::mma_param(),
            ..Default::default()
        };
        let v2 = PagedDecodeV2Params {
            head_dim,
            group_heads: group,
            mma: launch::mma_param(),
            ..Default::default()
        };
        let gpu_blocks = |kernel, words: &[u32], preferred| {
            resident_blocks(dev, kernel, geo.pool_dtype, words, preferred)
        };
        let (concurrent_blocks, partial_blocks) = match dev.backend() {
            // Blocks are spread over the rayon pool, one per worker at a time; two per worker
            // keeps every worker busy while chunk lengths differ.
            Backend::Cpu => {
                let workers = rayon::current_num_threads();
                (Some(workers), Some(2 * workers))
            }
            // The emulator runs one block at a time.
            Backend::Sim => (Some(1), Some(2)),
            _ => (
                gpu_blocks(
                    KernelId::PagedAttentionDecode,
                    v1.words(),
                    PagedAttentionDecode::launch(&v1).block,
                ),
                gpu_blocks(
                    KernelId::PagedAttentionDecodeV2Partial,
                    v2.words(),
                    PagedAttentionDecodeV2Partial::launch(&v2).block,
                ),
            ),
        };
        DecodePolicy {
            concurrent_blocks,
            v2_min_tokens: env_usize("KILN_PAGED_V2_MIN_TOKENS").unwrap_or(match dev.backend() {
                Backend::Cpu => CPU_V2_MIN_TOKENS,
                Backend::Cuda => CUDA_V2_MIN_TOKENS,
                _ => usize::MAX,
            }),
            target_blocks: env_usize("KILN_PAGED_V2_TARGET_BLOCKS")
                .or(partial_blocks)
                .unwrap_or(UNKNOWN_TARGET_BLOCKS),
            pages_per_chunk: env_usize("KILN_PAGED_V2_PAGES_PER_CHUNK"),
        }
    }
}

/// The shortest longest-request context from which v2 beat v1 on the cpu backend when v1
/// under-filled the workers (`kiln_benches::paged::crossover`: batch 1, one KV head, contexts
/// 256 to 32K). On the 2-core host of docs/results/paged-decode-cpu.md v2 won at no measured
/// context, so auto never picks it on the cpu; rerun the crossover on a larger host and set
/// `KILN_PAGED_V2_MIN_TOKENS` (or this figure) from what it prints.
pub const CPU_V2_MIN_TOKENS: usize = usize::MAX;

/// The same on the cuda backend: on an H200 (kernel time, device events) v2 beat v1 at every
/// measured context from 512 tokens, the shortest measured (31 µs against 112 µs there;
/// `docs/results/paged-decode-cuda-h200-2026-11-29-v2.md`).
pub const CUDA_V2_MIN_TOKENS: usize = 512;

/// The arm for a batch, why, and the v2 plan when v2 runs.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeChoice {
    /// The arm.
    pub arm: DecodeArm,
    /// Why it was chosen.
    pub reason: String,
    /// The v2 plan when v2 runs.
    pub plan: Option<DecodePlan>,
}

/// What [`paged_decode`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeRun {
    /// The arm that ran.
    pub arm: DecodeArm,
    /// Why it was chosen.
    pub reason: String,
    /// The v2 plan when v2 ran.
    pub plan: Option<DecodePlan>,
    /// The launches, in order (one for v1, the fallback, or a merge-free v2; two otherwise).
    pub launches: Vec<Ran>,
}

fn port_refusal(dev: &Device, kernel: KernelId, dtype: DType) -> Option<PortError> {
    select_port(ports(kernel), dev, dtype).err()
}

/// Picks the arm for a validated batch. `forced` is the arm `KILN_PAGED_DECODE` names.
pub fn choose_arm(
    dev: &Device,
    geo: &KvGeometry,
    spans: &[RequestSpan],
    policy: &DecodePolicy,
    forced: Option<DecodeArm>,
) -> Result<DecodeChoice, PortError> {
    let v1_missing = port_refusal(dev, KernelId::PagedAttentionDecode, geo.pool_dtype);
    let v2_missing = port_refusal(dev, KernelId::PagedAttentionDecodeV2Partial, geo.pool_dtype)
        .or_else(|| port_refusal(dev, KernelId::PagedAttentionMergeStates, DType::F32));
    let pages: Vec<usize> = spans.iter().map(|s| s.pages.len()).collect();
    let plan = || {
        plan_decode(
            &pages,
            geo.heads_q,
            geo.heads_kv,
            geo.head_dim,
            PlanConfig {
                target_blocks: policy.target_blocks,
                pages_per_chunk: policy.pages_per_chunk,
            },
        )
    };
    let choice = |arm, reason: String, plan| DecodeChoice { arm, reason, plan };
    match forced {
        Some(DecodeArm::Fallback) => {
            return Ok(choice(
                DecodeArm::Fallback,
                format!("forced by {ARM_ENV}"),
                None,
            ))
        }
        Some(DecodeArm::V1) => {
            return match v1_missing {
                None => Ok(choice(DecodeArm::V1, format!("forced by {ARM_ENV}"), None)),
                Some(e) => Err(e),
            }
        }
        Some(DecodeArm::V2) => {
            if let Some(e) = v2_missing {
                return Err(e);
            }
            let p = plan().map_err(|e| {
                PortError::invalid(KernelId::PagedAttentionDecodeV2Partial, e.to_string())
            })?;
            return Ok(choice(
                DecodeArm::V2,
                format!("forced by {ARM_ENV}"),
                Some(p),
            ));
        }
        None => {}
    }
    if forced_fallback(KernelId::PagedAttentionDecode) {
        return Ok(choice(
            DecodeArm::Fallback,
            "forced by KILN_FORCE_FALLBACK".into(),
            None,
        ));
    }
    let v2_plan = match (&v2_missing, plan()) {
        (None, Ok(p)) => Ok(p),
        (Some(e), _) => Err(e.to_string()),
        (None, Err(e)) => Err(format!("no v2 plan: {e}")),
    };
    let v1_reason = match (&v1_missing, v2_plan) {
        (Some(e1), Err(e2)) => {
            return Ok(choice(
                DecodeArm::Fallback,
                format!("no kernel arm: {e1}; {e2}"),
                None,
            ))
        }
        (Some(e1), Ok(p)) => return Ok(choice(DecodeArm::V2, format!("no v1: {e1}"), Some(p))),
        (None, Err(e2)) => return Ok(choice(DecodeArm::V1, e2, None)),
        (None, Ok(p)) => {
            let per_kv = (geo.heads_q / geo.heads_kv) as u32;
            let v1_blocks = geo.batch * geo.heads_kv * (per_kv / group_heads(per_kv)) as usize;
            let longest = spans.iter().map(|s| s.visible).max().unwrap_or(0);
            match policy.concurrent_blocks {
                None => "no measured v1/v2 crossover for this backend".to_string(),
                Some(full) if v1_blocks >= full => {
                    format!("v1's {v1_blocks} blocks fill the device's {full}")
                }
                Some(_) if policy.v2_min_tokens == usize::MAX => {
                    "v2 beat v1 at no measured context on this backend".to_string()
                }
                Some(_) if longest < policy.v2_min_tokens => format!(
                    "longest request {longest} tokens < v2 crossover {}",
                    policy.v2_min_tokens
                ),
                Some(full) => {
                    let reason = format!(
                        "v1's {v1_blocks} blocks under-fill the device's {full}; {} chunks of {} pages give {} blocks",
                        p.chunks(),
                        p.pages_per_chunk,
                        p.blocks
                    );
                    return Ok(choice(DecodeArm::V2, reason, Some(p)));
                }
            }
        }
    };
    Ok(choice(DecodeArm::V1, v1_reason, None))
}

/// Paged decode attention for a batch: `q [B, Hq, (1,) D]` f32, pools `[NB, PS, Hkv, D]`
/// (f32, f16 or bf16) read through the CSR `table`, `out` shaped like `q`. Validates every
/// shape and table entry before anything runs; returns the arm, the reason and the launches.
pub fn paged_decode(
    dev: &Device,
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    table: &PageTable,
    scale: f32,
    out: &mut Tensor,
) -> Result<DecodeRun, PortError> {
    let forced = DecodeArm::forced()?;
    let geo = KvGeometry::of(KernelId::PagedAttentionDecode, q, k_pool, v_pool)?;
    paged_decode_with(
        dev,
        q,
        k_pool,
        v_pool,
        table,
        scale,
        out,
        &DecodePolicy::for_device(dev, &geo),
        forced,
    )
}

/// [`paged_decode`] with an explicit policy and forced arm (no environment lookup).
#[allow(clippy::too_many_arguments)]
pub fn paged_decode_with(
    dev: &Device,
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    table: &PageTable,
    scale: f32,
    out: &mut Tensor,
    policy: &DecodePolicy,
    forced: Option<DecodeArm>,
) -> Result<DecodeRun, PortError> {
    let kernel = KernelId::PagedAttentionDecode;
    let geo = KvGeometry::of(kernel, q, k_pool, v_pool)?;
    if out.shape() != q.shape() || out.dtype() != DType::F32 {
        return Err(PortError::invalid(kernel, "out must be f32 shaped like q"));
    }
    check_scale(kernel, scale)?;
    let spans = table
        .validate(geo.batch, geo.num_blocks, geo.page_size)
        .map_err(|e| e.port(kernel))?;
    let c = choose_arm(dev, &geo, &spans, policy, forced)?;
    let launches = match c.arm {
        DecodeArm::V1 => vec![launch::paged_attention_decode(
            dev,
            q,
            k_pool,
            v_pool,
            &table.to_block_table(&spans),
            scale,
            out,
        )?],
        DecodeArm::V2 => {
            let plan = c.plan.as_ref().expect("a v2 choice carries its plan");
            run_v2(dev, &geo, q, k_pool, v_pool, table, plan, scale, out)?
        }
        DecodeArm::Fallback => {
            gather_attend(&geo, q, k_pool, v_pool, table, &spans, scale, out)?;
            let reason = match port_refusal(dev, kernel, geo.pool_dtype) {
                _ if forced == Some(DecodeArm::Fallback) || forced_fallback(kernel) => {
                    FallbackReason::Forced
                }
                Some(refusal) => FallbackReason::Refused(refusal),
                None => FallbackReason::Requested,
            };
            vec![Ran {
                kernel,
                dtype: geo.pool_dtype,
                path: Path::Fallback(reason),
            }]
        }
    };
    Ok(DecodeRun {
        arm: c.arm,
        reason: c.reason,
        plan: c.plan,
        launches,
    })
}

#[allow(clippy::too_many_arguments)]
fn run_v2(
    dev: &Device,
    geo: &KvGeometry,
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    table: &PageTable,
    plan: &DecodePlan,
    scale: f32,
    out: &mut Tensor,
) -> Result<Vec<Ran>, PortError> {
    let tables = launch::v2_tables(table, plan);
    let p = PagedDecodeV2Params {
        scale,
        pages_per_chunk: plan.pages_per_chunk as u32,
        mma: launch::mma_param(),
        ..Default::default()
    };
    // The uploaded tables, partials and LSEs all come from the device's scratch region.
    let bytes = launch::table_bytes(&tables)
        + launch::table_bytes(&[&plan.o_indptr])
        + launch::v2_scratch_bytes(plan, geo.batch, geo.heads_q, geo.head_dim);
    let mut scratch = dev.scratch(bytes)?;
    let t: Vec<Tensor> = tables
        .iter()
        .chain([&&plan.o_indptr[..]])
        .map(|t| scratch.upload(t))
        .collect::<Result<_, _>>()?;
    let [indices, indptr, last, first, requests, tiles, o_indptr] = &t[..] else {
        unreachable!("seven tables")
    };
    launch::v2_partials_and_merge(
        dev,
        &mut scratch,
        &p,
        plan,
        (q, k_pool, v_pool),
        [indices, indptr, last, first, requests, tiles],
        o_indptr,
        out,
    )
}

fn widen(dtype: DType, bytes: &[u8]) -> Result<Vec<f64>, PortError> {
    Ok(match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|b| kiln_math::F16(u16::from_le_bytes(b.try_into().unwrap())).to_f32() as f64)
            .collect(),
        DType::Bf16 => bytes
            .chunks_exact(2)
            .map(|b| kiln_math::Bf16(u16::from_le_bytes(b.try_into().unwrap())).to_f32() as f64)
            .collect(),
        // KvGeometry::of refuses every other pool dtype; this keeps the gather from guessing.
        other => {
            return Err(PortError::UnsupportedDtype {
                kernel: KernelId::PagedAttentionDecode.name(),
                got: other,
                supported: KernelId::PagedAttentionDecode.dtypes(),
            })
        }
    })
}

/// The fallback: copy each request's visible K/V out of the pools page by page, then plain
/// single-query attention per head.
#[allow(clippy::too_many_arguments)]
fn gather_attend(
    geo: &KvGeometry,
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    table: &PageTable,
    spans: &[RequestSpan],
    scale: f32,
    out: &mut Tensor,
) -> Result<(), PortError> {
    let (hq, hkv, d, ps) = (geo.heads_q, geo.heads_kv, geo.head_dim, geo.page_size);
    let token = hkv * d;
    let scale = if scale == 0.0 {
        1.0 / (d as f64).sqrt()
    } else {
        scale as f64
    };
    let qv = q.to_f32_vec()?;
    let mut result = vec![0.0f32; geo.batch * hq * d];
    for (r, span) in spans.iter().enumerate() {
        let (mut keys, mut values) = (Vec::new(), Vec::new());
        let first = span.first_offset;
        let end = first + span.visible;
        for (k, &row) in table.indices[span.pages.clone()].iter().enumerate() {
            // Visible entries of page k: [first, end) clipped to the page.
            let lo = first.max(k * ps).saturating_sub(k * ps);
            let hi = end.min((k + 1) * ps).saturating_sub(k * ps);
            if lo >= hi {
                continue;
            }
            let at = (row as usize * ps + lo) * token;
            let n = (hi - lo) * token;
            keys.extend(widen(geo.pool_dtype, &k_pool.element_bytes(at, n)?)?);
            values.extend(widen(geo.pool_dtype, &v_pool.element_bytes(at, n)?)?);
        }
        let rows = r * hq * d..(r + 1) * hq * d;
        attend_heads(
            &qv[rows.clone()],
            &keys,
            &values,
            hkv,
            d,
            scale,
            &mut result[rows],
        );
    }
    out.write(&result)
}
