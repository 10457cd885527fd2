//! A paged KV cache for a batch of sequences decoded in lockstep (every sequence at the same
//! position): per layer a K and a V pool of `[pages, page_size, Hkv, D]` rows (layout A of spec
//! §9.1), sequence `b` owning its own run of pages, one decode plan on the device shared by
//! every layer, and the slot of each (sequence, position). RoPE+append writes a token's K and V
//! straight into its pool rows; paged decode attention reads them through the plan.
//!
//! Everything is allocated when the cache is made; a step plans its attention once (the arm
//! the device's dispatch picks for this context, v1 or v2 with its chunks:
//! `DeviceDecodePlan::write`, checked and enqueued) and takes views, which allocate nothing.

use super::{DecodeError, LlamaConfig};
use kiln::paged::{DecodeChoice, DeviceDecodePlan, KvGeometry, PageTable};
use kiln::{DType, Device, PortError, Tensor};

/// Tokens per page: small enough that a short prompt's last page wastes little, large enough
/// that the table stays short.
pub const PAGE_SIZE: usize = 16;

/// The K/V pools of every layer and the table over them.
pub struct KvCache {
    dev: Device,
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    plan: DeviceDecodePlan,
    host_table: PageTable,
    batch: usize,
    row: usize,
    /// Pages each sequence owns.
    pages: usize,
    capacity: usize,
    dtype: DType,
}

impl KvCache {
    /// Pools for `batch` sequences of `capacity` tokens each (rounded up to whole pages) of
    /// `layers` attention layers of `cfg`'s heads, in `dtype` (the model's activation dtype:
    /// RoPE+append writes K and V in it).
    pub fn new(
        dev: &Device,
        cfg: &LlamaConfig,
        layers: usize,
        capacity: usize,
        batch: usize,
        dtype: DType,
    ) -> Result<KvCache, PortError> {
        let batch = batch.max(1);
        let pages = capacity.max(1).div_ceil(PAGE_SIZE);
        let shape = [batch * pages, PAGE_SIZE, cfg.kv_heads, cfg.head_dim];
        let pool = || Tensor::zeros(dev, dtype, &shape);
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for _ in 0..layers {
            k.push(pool()?);
            v.push(pool()?);
        }
        let geo = KvGeometry {
            batch,
            heads_q: cfg.heads,
            heads_kv: cfg.kv_heads,
            head_dim: cfg.head_dim,
            num_blocks: batch * pages,
            page_size: PAGE_SIZE,
            pool_dtype: dtype,
        };
        Ok(KvCache {
            dev: dev.clone(),
            k,
            v,
            plan: DeviceDecodePlan::new(dev, geo, batch * pages)?,
            host_table: PageTable::default(),
            batch,
            row: cfg.kv_heads * cfg.head_dim,
            pages,
            capacity: pages * PAGE_SIZE,
            dtype,
        })
    }

    /// Layers it holds pools for.
    pub fn layers(&self) -> usize {
        self.k.len()
    }

    /// Sequences it holds.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Tokens the cache holds per sequence.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Device bytes of the pools.
    pub fn bytes(&self) -> usize {
        self.k.iter().chain(&self.v).map(Tensor::byte_len).sum()
    }

    /// The pools' dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Makes positions `0..=position` of every sequence visible to attention: the step's
    /// attention is planned once for every layer and the plan's tables are rewritten on the
    /// device in order with the queued work.
    pub fn see_through(&mut self, position: usize) -> Result<(), DecodeError> {
        if position >= self.capacity {
            return Err(DecodeError::ContextFull {
                position,
                capacity: self.capacity,
            });
        }
        let Some(pool) = self.k.first() else {
            return Ok(());
        };
        // Sequence b owns pages b·pages.., in order; it sees the first `position + 1` slots.
        let used = (position + 1).div_ceil(PAGE_SIZE);
        let batch = self.batch;
        let t = &mut self.host_table;
        t.indices.clear();
        for b in 0..batch {
            t.indices
                .extend((0..used).map(|p| (b * self.pages + p) as i32));
        }
        t.indptr.clear();
        t.indptr.extend((0..=batch).map(|b| (b * used) as i32));
        t.last_page_len.clear();
        t.last_page_len
            .resize(batch, (position + 1 - (used - 1) * PAGE_SIZE) as i32);
        t.first_page_offset.clear();
        t.first_page_offset.resize(batch, 0);
        self.plan.write(&self.dev, &self.host_table, pool)?;
        Ok(())
    }

    /// How the step's attention runs (the arm, why, its v2 plan); `None` before a step.
    pub fn choice(&self) -> Option<&DecodeChoice> {
        self.plan.choice()
    }

    /// Layer `layer`'s K and V rows of sequence `seq` at `position`, `[1, 1, Hkv, D]` each:
    /// where RoPE+append writes the token's key and value (a sequence's pages are the pool's
    /// rows in order, so the slot of a position is its offset in the sequence's run).
    pub fn slot(
        &self,
        layer: usize,
        seq: usize,
        position: usize,
    ) -> Result<(Tensor, Tensor), DecodeError> {
        if position >= self.capacity {
            return Err(DecodeError::ContextFull {
                position,
                capacity: self.capacity,
            });
        }
        let shape = [
            1,
            1,
            self.row / self.k[layer].shape()[3],
            self.k[layer].shape()[3],
        ];
        let at = (seq * self.pages * PAGE_SIZE + position) * self.row;
        Ok((
            self.k[layer].view(at, &shape)?,
            self.v[layer].view(at, &shape)?,
        ))
    }

    /// Layer `layer`'s pools and the step's plan.
    pub fn layer(&self, layer: usize) -> (&Tensor, &Tensor, &DeviceDecodePlan) {
        (&self.k[layer], &self.v[layer], &self.plan)
    }
}
