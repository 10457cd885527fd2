//! A decode step's paged attention planned once and kept on the device: the arm the dispatch
//! picks for the step's batch (v1 or v2, by the device's measured policy), the v2 plan, and
//! the tables of the arm, checked on the host and written in order with the queued work. Every
//! layer of the step then launches over them without uploading or allocating anything, so a
//! step can be recorded once per position and replayed while the engine rewrites the plan
//! between replays (an engine calls attention once per layer with the same page table).

use super::dispatch::{choose_arm, DecodeArm, DecodeChoice, DecodePolicy};
use super::launch::{v2_partials_and_merge, v2_scratch_bytes, v2_tables};
use super::resident::{paged_attention_decode_resident, write_i32, DeviceBlockTable};
use super::table::{check_scale, KvGeometry, PageTable};
use crate::launch::Ran;
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::paged_attention_decode_v2_partial::PagedDecodeV2Params;
use kiln_math::{DType, KernelId};

/// The v2 tables on the device, each as long as the largest table the plan was made for.
#[derive(Debug)]
struct V2Tables {
    /// `indices, indptr, last_page_len, first_page_offset, request_indices, kv_tile_indices`.
    tables: [Tensor; 6],
    o_indptr: Tensor,
    /// Entries of each table the current plan wrote.
    lens: [usize; 6],
}

/// The arm, plan and tables of one step's paged attention, on the device. A recording of
/// launches over it (a CUDA graph) keeps the plan's launch geometry (the arm, v2's chunks and
/// pages per chunk), so replay it only after a write that plans the same: record a step per
/// context length, after writing that step's plan.
#[derive(Debug)]
pub struct DeviceDecodePlan {
    geo: KvGeometry,
    policy: DecodePolicy,
    v1: DeviceBlockTable,
    v2: V2Tables,
    /// Page-table entries the tables hold at most.
    max_pages: usize,
    choice: Option<DecodeChoice>,
}

fn refuse(msg: impl Into<String>) -> PortError {
    PortError::invalid(KernelId::PagedAttentionDecode, msg.into())
}

impl DeviceDecodePlan {
    /// Tables for batches of geometry `geo` whose page tables hold at most `max_pages`
    /// entries, with the device's decode policy (allocates; make it once).
    pub fn new(dev: &Device, geo: KvGeometry, max_pages: usize) -> Result<Self, PortError> {
        Self::with_policy(dev, geo, max_pages, DecodePolicy::for_device(dev, &geo))
    }

    /// [`DeviceDecodePlan::new`] with a policy of the caller's (A/B runs, tests).
    pub fn with_policy(
        dev: &Device,
        geo: KvGeometry,
        max_pages: usize,
        policy: DecodePolicy,
    ) -> Result<Self, PortError> {
        let i32s = |n: usize| Tensor::zeros(dev, DType::I32, &[n.max(1)]);
        let b = geo.batch;
        // A request's chunks never outnumber its pages, and an empty request still has one.
        let chunks = max_pages + b;
        Ok(DeviceDecodePlan {
            geo,
            policy,
            v1: DeviceBlockTable::new(dev, b, max_pages)?,
            v2: V2Tables {
                tables: [
                    i32s(max_pages)?,
                    i32s(b + 1)?,
                    i32s(b)?,
                    i32s(b)?,
                    i32s(chunks)?,
                    i32s(chunks)?,
                ],
                o_indptr: i32s(b + 1)?,
                lens: [0; 6],
            },
            max_pages,
            choice: None,
        })
    }

    /// Plans the step over `table` (checked against the geometry and `k_pool`), picks its arm
    /// (`KILN_PAGED_DECODE` may force one) and writes that arm's tables, in order with the
    /// queued work (no allocation, no wait).
    pub fn write(
        &mut self,
        dev: &Device,
        table: &PageTable,
        k_pool: &Tensor,
    ) -> Result<&DecodeChoice, PortError> {
        self.write_with(dev, table, k_pool, DecodeArm::forced()?)
    }

    /// [`DeviceDecodePlan::write`] with the arm `forced` (`None`: the policy's choice).
    pub fn write_with(
        &mut self,
        dev: &Device,
        table: &PageTable,
        k_pool: &Tensor,
        forced: Option<DecodeArm>,
    ) -> Result<&DecodeChoice, PortError> {
        let geo = self.geo;
        if k_pool.shape() != [geo.num_blocks, geo.page_size, geo.heads_kv, geo.head_dim] {
            return Err(refuse(format!(
                "the plan was made for pools [{}, {}, {}, {}], k_pool is {:?}",
                geo.num_blocks,
                geo.page_size,
                geo.heads_kv,
                geo.head_dim,
                k_pool.shape()
            )));
        }
        if table.indices.len() > self.max_pages {
            return Err(refuse(format!(
                "the table has {} page entries, the plan holds {}",
                table.indices.len(),
                self.max_pages
            )));
        }
        let spans = table
            .validate(geo.batch, geo.num_blocks, geo.page_size)
            .map_err(|e| e.port(KernelId::PagedAttentionDecode))?;
        // Until a write succeeds the device holds tables nobody checked.
        self.choice = None;
        let choice = choose_arm(dev, &geo, &spans, &self.policy, forced)?;
        match (choice.arm, &choice.plan) {
            (DecodeArm::V1, _) => self.v1.write(&table.to_block_table(&spans), k_pool)?,
            (DecodeArm::V2, Some(plan)) => {
                let tables = v2_tables(table, plan);
                for ((t, host), len) in self.v2.tables.iter().zip(tables).zip(&mut self.v2.lens) {
                    write_i32(t, host)?;
                    *len = host.len();
                }
                write_i32(&self.v2.o_indptr, &plan.o_indptr)?;
            }
            (arm, _) => {
                return Err(refuse(format!(
                    "the {} arm cannot run from tables on the device ({})",
                    arm.name(),
                    choice.reason
                )))
            }
        }
        Ok(self.choice.insert(choice))
    }

    /// The step's arm, why, and its v2 plan; `None` before a successful write.
    pub fn choice(&self) -> Option<&DecodeChoice> {
        self.choice.as_ref()
    }
}

/// Scratch bytes [`paged_decode_planned`] takes for the plan's current step (partials, LSEs).
pub fn planned_scratch_bytes(plan: &DeviceDecodePlan) -> usize {
    match plan.choice.as_ref().and_then(|c| c.plan.as_ref()) {
        Some(p) => v2_scratch_bytes(p, plan.geo.batch, plan.geo.heads_q, plan.geo.head_dim),
        None => 0,
    }
}

/// Paged decode attention of one layer over the step's `plan` (written by
/// [`DeviceDecodePlan::write`] for pools of this geometry): `q [B, Hq, (1,) D]` f32 and `out`
/// f32 shaped like `q`, as [`paged_decode`](super::paged_decode). The partials and LSEs come from
/// the device's scratch region; nothing is uploaded.
pub fn paged_decode_planned(
    dev: &Device,
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    plan: &DeviceDecodePlan,
    scale: f32,
    out: &mut Tensor,
) -> Result<Vec<Ran>, PortError> {
    let kernel = KernelId::PagedAttentionDecode;
    let geo = KvGeometry::of(kernel, q, k_pool, v_pool)?;
    if geo != plan.geo {
        return Err(refuse(format!(
            "the plan was made for {:?}; this launch runs over {geo:?}",
            plan.geo
        )));
    }
    if out.shape() != q.shape() || out.dtype() != DType::F32 {
        return Err(refuse("out must be f32 shaped like q"));
    }
    check_scale(kernel, scale)?;
    let Some(choice) = &plan.choice else {
        return Err(refuse("no step planned: write the plan first"));
    };
    let Some(p) = choice.plan.as_ref().filter(|_| choice.arm == DecodeArm::V2) else {
        return Ok(vec![paged_attention_decode_resident(
            dev, q, k_pool, v_pool, &plan.v1, scale, out,
        )?]);
    };
    let params = PagedDecodeV2Params {
        scale,
        pages_per_chunk: p.pages_per_chunk as u32,
        mma: super::launch::mma_param(),
        ..Default::default()
    };
    let views: Vec<Tensor> = plan
        .v2
        .tables
        .iter()
        .zip(plan.v2.lens)
        .map(|(t, len)| t.view(0, &[len.max(1)]))
        .collect::<Result<_, _>>()?;
    let [indices, indptr, last, first, requests, tiles] = &views[..] else {
        unreachable!("six tables")
    };
    let tables = [indices, indptr, last, first, requests, tiles];
    let mut scratch = dev.scratch(planned_scratch_bytes(plan))?;
    let o_indptr = plan.v2.o_indptr.view(0, &[geo.batch + 1])?;
    v2_partials_and_merge(
        dev,
        &mut scratch,
        &params,
        p,
        (q, k_pool, v_pool),
        tables,
        &o_indptr,
        out,
    )
}
