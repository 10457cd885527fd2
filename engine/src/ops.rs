//! The op API: one typed function per kernel, documenting its shapes. Every op validates its
//! inputs before any launch, takes the fallback when the device has no port, and says which
//! path ran.

use crate::launch::{launch, Arg, Mode, Ran};
use crate::paged::{BlockTable, DecodePlan, KvGeometry, PageTable};
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::fused_add_rms_norm::AddRmsNormParams;
use kiln_math::kernels::paged_attention_decode::PagedDecodeParams;
use kiln_math::kernels::paged_attention_decode_v2_partial::PagedDecodeV2Params;
use kiln_math::kernels::paged_attention_merge_states::MergeStatesParams;
use kiln_math::{KernelId, Params};

/// Residual add + RMSNorm (spec §3), in place on the residual stream.
///
/// Shapes: `x` and `residual` `[.., D]` (same shape), `weight` `[D]`, `out` `[.., D]`; all one
/// dtype (f32, f16 or bf16). Afterwards `residual = rnd(x + residual)` and
/// `out = rnd(weight · rnd(residual / sqrt(mean(residual²) + eps)))` per row.
pub fn fused_add_rms_norm(
    dev: &Device,
    x: &Tensor,
    residual: &mut Tensor,
    weight: &Tensor,
    eps: f32,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = AddRmsNormParams {
        eps,
        weight_bias: 0.0,
        ..Default::default()
    };
    launch_add_rms_norm(dev, &p, x, residual, weight, out)
}

/// [`fused_add_rms_norm`] with Gemma's gain `(1 + weight)`, the `+1` folded in the weight's dtype.
pub fn fused_add_rms_norm_gemma(
    dev: &Device,
    x: &Tensor,
    residual: &mut Tensor,
    weight: &Tensor,
    eps: f32,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = AddRmsNormParams {
        eps,
        weight_bias: 1.0,
        ..Default::default()
    };
    launch_add_rms_norm(dev, &p, x, residual, weight, out)
}

fn launch_add_rms_norm(
    dev: &Device,
    p: &AddRmsNormParams,
    x: &Tensor,
    residual: &mut Tensor,
    weight: &Tensor,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let mut args = [
        Arg::In(x),
        Arg::Out(residual),
        Arg::In(weight),
        Arg::Out(out),
    ];
    launch(
        dev,
        KernelId::FusedAddRmsNorm,
        p.words(),
        &mut args,
        Mode::Auto,
    )
}

fn i32_tensor(dev: &Device, v: &[i32]) -> Result<Tensor, PortError> {
    Tensor::from_slice(dev, &[v.len()], v)
}

/// Paged decode attention, v1 (spec §9.2): one block per sequence and query-head group.
///
/// Shapes: `q [B, Hq, (1,) D]` f32; `k_pool`, `v_pool [num_blocks, block_size, Hkv, D]` (f32,
/// f16 or bf16, `Hq % Hkv == 0`); `out` f32 shaped like `q`. The block table stays on the host
/// and is checked entry by entry (offsets monotone, rows inside the pool, visible positions
/// inside each sequence's rows) before it is uploaded. `scale` 0 means `1 / sqrt(D)`.
pub fn paged_attention_decode(
    dev: &Device,
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    table: &BlockTable,
    scale: f32,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = KernelId::PagedAttentionDecode;
    let geo = KvGeometry::of(kernel, q, k_pool, v_pool)?;
    table
        .validate(geo.batch, geo.num_blocks, geo.page_size)
        .map_err(|e| e.port(kernel))?;
    let p = PagedDecodeParams {
        scale,
        ..Default::default()
    };
    let rows = i32_tensor(dev, &table.rows)?;
    let offsets = i32_tensor(dev, &table.row_offsets)?;
    let starts = i32_tensor(dev, &table.logical_starts)?;
    let lens = i32_tensor(dev, &table.visible_lens)?;
    let mut args = [
        Arg::In(q),
        Arg::In(k_pool),
        Arg::In(v_pool),
        Arg::In(&rows),
        Arg::In(&offsets),
        Arg::In(&starts),
        Arg::In(&lens),
        Arg::Out(out),
    ];
    launch(dev, kernel, p.words(), &mut args, Mode::Auto)
}

/// Paged decode attention, v2 partials (spec §9.3): chunk `c` of `plan` attends over its pages
/// and writes its normalised output `out_v [C, Hq, (1,) D]` and base-2 LSE `out_lse [C, Hq]`.
///
/// Shapes as for [`paged_attention_decode`]; the CSR `table` and the `plan` stay on the host and
/// are checked against the pool and each other before upload.
#[allow(clippy::too_many_arguments)]
pub fn paged_attention_decode_v2_partial(
    dev: &Device,
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    table: &PageTable,
    plan: &DecodePlan,
    scale: f32,
    out_v: &mut Tensor,
    out_lse: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = KernelId::PagedAttentionDecodeV2Partial;
    let geo = KvGeometry::of(kernel, q, k_pool, v_pool)?;
    let spans = table
        .validate(geo.batch, geo.num_blocks, geo.page_size)
        .map_err(|e| e.port(kernel))?;
    let pages: Vec<usize> = spans.iter().map(|s| s.pages.len()).collect();
    crate::paged::plan::validate(plan, &pages, geo.heads_q, geo.head_dim)
        .map_err(|e| PortError::invalid(kernel, e.to_string()))?;
    let p = PagedDecodeV2Params {
        scale,
        pages_per_chunk: plan.pages_per_chunk as u32,
        ..Default::default()
    };
    let indices = i32_tensor(dev, &table.indices)?;
    let indptr = i32_tensor(dev, &table.indptr)?;
    let last = i32_tensor(dev, &table.last_page_len)?;
    let first = i32_tensor(dev, &table.first_page_offset)?;
    let requests = i32_tensor(dev, &plan.request_indices)?;
    let tiles = i32_tensor(dev, &plan.kv_tile_indices)?;
    let mut args = [
        Arg::In(q),
        Arg::In(k_pool),
        Arg::In(v_pool),
        Arg::In(&indices),
        Arg::In(&indptr),
        Arg::In(&last),
        Arg::In(&first),
        Arg::In(&requests),
        Arg::In(&tiles),
        Arg::Out(out_v),
        Arg::Out(out_lse),
    ];
    launch(dev, kernel, p.words(), &mut args, Mode::Auto)
}

/// Merge of attention states (spec §9.4): output row `o` combines partials
/// `o_indptr[o] .. o_indptr[o+1]` of `v_in [N, H, D]` by their base-2 LSEs `lse_in [N, H]`
/// (non-finite LSEs skipped) into `v_out [M, H, (1,) D]` and `lse_out [M, H]`, all f32.
pub fn paged_attention_merge_states(
    dev: &Device,
    v_in: &Tensor,
    lse_in: &Tensor,
    o_indptr: &[i32],
    v_out: &mut Tensor,
    lse_out: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = KernelId::PagedAttentionMergeStates;
    let partials = v_in.shape().first().copied().unwrap_or(0);
    crate::paged::table::check_indptr(
        "o_indptr",
        o_indptr,
        o_indptr.len().saturating_sub(1),
        partials,
    )
    .map_err(|e| e.port(kernel))?;
    let indptr = i32_tensor(dev, o_indptr)?;
    let mut args = [
        Arg::In(v_in),
        Arg::In(lse_in),
        Arg::In(&indptr),
        Arg::Out(v_out),
        Arg::Out(lse_out),
    ];
    launch(
        dev,
        kernel,
        MergeStatesParams::default().words(),
        &mut args,
        Mode::Auto,
    )
}
