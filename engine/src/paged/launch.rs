//! The paged-attention ops: each checks its host tables (block table, CSR page table, plan,
//! merge indptr) against the pool and each other, uploads them into the device's scratch region
//! (in order with the launch, no allocation once warm) and launches one kernel.

use super::plan::DecodePlan;
use super::table::{BlockTable, KvGeometry, PageTable};
use crate::launch::{launch_checked_tables, Arg, Mode, Ran};
use crate::scratch::{scratch_bytes, Scratch};
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::paged_attention_decode::PagedDecodeParams;
use kiln_math::kernels::paged_attention_decode_v2_partial::PagedDecodeV2Params;
use kiln_math::kernels::paged_attention_merge_states::MergeStatesParams;
use kiln_math::{DType, KernelId, Params};

/// `0` keeps the decode kernels off their tensor-core sweep (their `mma` param) where it would
/// run; unset or anything else lets it run.
pub const MMA_ENV: &str = "KILN_PAGED_MMA";

/// The decode kernels' `mma` param: 1 unless `KILN_PAGED_MMA` is `0`.
pub fn mma_param() -> u32 {
    match std::env::var(MMA_ENV) {
        Ok(v) if v.trim() == "0" => 0,
        _ => 1,
    }
}

/// Scratch bytes of `tables` uploaded as i32 pieces.
pub(crate) fn table_bytes(tables: &[&[i32]]) -> usize {
    let pieces: Vec<(DType, usize)> = tables.iter().map(|t| (DType::I32, t.len())).collect();
    scratch_bytes(&pieces)
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
        mma: mma_param(),
        ..Default::default()
    };
    let tables: [&[i32]; 4] = [
        &table.rows,
        &table.row_offsets,
        &table.logical_starts,
        &table.visible_lens,
    ];
    let mut scratch = dev.scratch(table_bytes(&tables))?;
    let [rows, offsets, starts, lens] = tables.map(|t| scratch.upload(t));
    let (rows, offsets, starts, lens) = (rows?, offsets?, starts?, lens?);
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
    launch_checked_tables(dev, kernel, p.words(), &mut args, Mode::Auto)
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
    super::plan::validate(plan, &pages, geo.heads_q, geo.head_dim)
        .map_err(|e| PortError::invalid(kernel, e.to_string()))?;
    let p = PagedDecodeV2Params {
        scale,
        pages_per_chunk: plan.pages_per_chunk as u32,
        mma: mma_param(),
        ..Default::default()
    };
    let tables = v2_tables(table, plan);
    let mut scratch = dev.scratch(table_bytes(&tables))?;
    v2_upload_and_launch(
        dev,
        &mut scratch,
        &p,
        q,
        k_pool,
        v_pool,
        &tables,
        out_v,
        out_lse,
    )
}

/// The tables v2 uploads, in the kernel's buffer order.
pub(crate) fn v2_tables<'t>(table: &'t PageTable, plan: &'t DecodePlan) -> [&'t [i32]; 6] {
    [
        &table.indices,
        &table.indptr,
        &table.last_page_len,
        &table.first_page_offset,
        &plan.request_indices,
        &plan.kv_tile_indices,
    ]
}

/// Uploads checked v2 `tables` into `scratch` and launches the partials kernel.
#[allow(clippy::too_many_arguments)]
pub(crate) fn v2_upload_and_launch(
    dev: &Device,
    scratch: &mut Scratch,
    p: &PagedDecodeV2Params,
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    tables: &[&[i32]; 6],
    out_v: &mut Tensor,
    out_lse: &mut Tensor,
) -> Result<Ran, PortError> {
    let t: Vec<Tensor> = tables
        .iter()
        .map(|t| scratch.upload(t))
        .collect::<Result<_, _>>()?;
    let [indices, indptr, last, first, requests, tiles] = &t[..] else {
        unreachable!("six tables")
    };
    v2_launch(
        dev,
        p,
        q,
        k_pool,
        v_pool,
        [indices, indptr, last, first, requests, tiles],
        out_v,
        out_lse,
    )
}

/// Launches the partials kernel over v2 `tables` already on the device (checked on the host
/// when they were written), in [`v2_tables`]' order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn v2_launch(
    dev: &Device,
    p: &PagedDecodeV2Params,
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    tables: [&Tensor; 6],
    out_v: &mut Tensor,
    out_lse: &mut Tensor,
) -> Result<Ran, PortError> {
    let [indices, indptr, last, first, requests, tiles] = tables;
    let mut args = [
        Arg::In(q),
        Arg::In(k_pool),
        Arg::In(v_pool),
        Arg::In(indices),
        Arg::In(indptr),
        Arg::In(last),
        Arg::In(first),
        Arg::In(requests),
        Arg::In(tiles),
        Arg::Out(out_v),
        Arg::Out(out_lse),
    ];
    launch_checked_tables(
        dev,
        KernelId::PagedAttentionDecodeV2Partial,
        p.words(),
        &mut args,
        Mode::Auto,
    )
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
    super::table::check_indptr(
        "o_indptr",
        o_indptr,
        o_indptr.len().saturating_sub(1),
        partials,
    )
    .map_err(|e| e.port(kernel))?;
    let mut scratch = dev.scratch(table_bytes(&[o_indptr]))?;
    merge_upload_and_launch(&mut scratch, dev, v_in, lse_in, o_indptr, v_out, lse_out)
}

/// Uploads a checked `o_indptr` into `scratch` and launches the merge.
pub(crate) fn merge_upload_and_launch(
    scratch: &mut Scratch,
    dev: &Device,
    v_in: &Tensor,
    lse_in: &Tensor,
    o_indptr: &[i32],
    v_out: &mut Tensor,
    lse_out: &mut Tensor,
) -> Result<Ran, PortError> {
    let indptr = scratch.upload(o_indptr)?;
    merge_launch(dev, v_in, lse_in, &indptr, v_out, lse_out)
}

/// Launches the merge over an `o_indptr` already on the device (checked on the host when it
/// was written).
pub(crate) fn merge_launch(
    dev: &Device,
    v_in: &Tensor,
    lse_in: &Tensor,
    o_indptr: &Tensor,
    v_out: &mut Tensor,
    lse_out: &mut Tensor,
) -> Result<Ran, PortError> {
    let mut args = [
        Arg::In(v_in),
        Arg::In(lse_in),
        Arg::In(o_indptr),
        Arg::Out(v_out),
        Arg::Out(lse_out),
    ];
    launch_checked_tables(
        dev,
        KernelId::PagedAttentionMergeStates,
        MergeStatesParams::default().words(),
        &mut args,
        Mode::Auto,
    )
}

/// Scratch bytes [`v2_partials_and_merge`] carves for `plan` over `batch` requests of `heads_q`
/// heads of `head_dim`: the LSEs, and unless the plan is merge-free the partials and the merged
/// LSEs.
pub(crate) fn v2_scratch_bytes(
    plan: &DecodePlan,
    batch: usize,
    heads_q: usize,
    head_dim: usize,
) -> usize {
    let c = plan.chunks();
    let mut pieces = vec![(DType::F32, c * heads_q)];
    if !plan.merge_free {
        pieces.extend([
            (DType::F32, c * heads_q * head_dim),
            (DType::F32, batch * heads_q),
        ]);
    }
    scratch_bytes(&pieces)
}

/// The v2 partials over `tables` on the device and, unless `plan` is merge-free (one chunk per
/// request, in order: the partials are the answer), their merge by `o_indptr` into `out`; the
/// LSEs and partials come from `scratch` ([`v2_scratch_bytes`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn v2_partials_and_merge(
    dev: &Device,
    scratch: &mut Scratch,
    p: &PagedDecodeV2Params,
    plan: &DecodePlan,
    (q, k_pool, v_pool): (&Tensor, &Tensor, &Tensor),
    tables: [&Tensor; 6],
    o_indptr: &Tensor,
    out: &mut Tensor,
) -> Result<Vec<Ran>, PortError> {
    let (c, batch) = (plan.chunks(), o_indptr.numel() - 1);
    let (hq, d) = (out.shape()[1], *out.shape().last().unwrap_or(&0));
    let mut lse = scratch.tensor(DType::F32, &[c, hq])?;
    if plan.merge_free {
        return Ok(vec![v2_launch(
            dev, p, q, k_pool, v_pool, tables, out, &mut lse,
        )?]);
    }
    let mut partial = scratch.tensor(DType::F32, &[c, hq, d])?;
    let a = v2_launch(dev, p, q, k_pool, v_pool, tables, &mut partial, &mut lse)?;
    let mut merged_lse = scratch.tensor(DType::F32, &[batch, hq])?;
    let b = merge_launch(dev, &partial, &lse, o_indptr, out, &mut merged_lse)?;
    Ok(vec![a, b])
}
