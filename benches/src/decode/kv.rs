//! A paged KV cache for one sequence: per layer a K and a V pool of `[pages, page_size, Hkv, D]`
//! rows (layout A of spec §9.1), one block table on the device shared by every layer, and the
//! slot of each position. RoPE+append writes a token's K and V straight into its pool rows;
//! paged decode attention reads them through the table.
//!
//! Everything is allocated when the cache is made; a step rewrites the table's lengths in place
//! (`DeviceBlockTable::write`, checked and enqueued) and takes views, which allocate nothing.

use super::{DecodeError, LlamaConfig};
use kiln::paged::{BlockTable, DeviceBlockTable};
use kiln::{DType, Device, PortError, Tensor};

/// Tokens per page: small enough that a short prompt's last page wastes little, large enough
/// that the table stays short.
pub const PAGE_SIZE: usize = 16;

/// The K/V pools of every layer and the table over them.
pub struct KvCache {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    table: DeviceBlockTable,
    host_table: BlockTable,
    row: usize,
    capacity: usize,
}

impl KvCache {
    /// Pools for `capacity` tokens (rounded up to whole pages) of `cfg`'s layers, in f32.
    pub fn new(dev: &Device, cfg: &LlamaConfig, capacity: usize) -> Result<KvCache, PortError> {
        let pages = capacity.max(1).div_ceil(PAGE_SIZE);
        let shape = [pages, PAGE_SIZE, cfg.kv_heads, cfg.head_dim];
        let pool = || Tensor::zeros(dev, DType::F32, &shape);
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for _ in 0..cfg.layers {
            k.push(pool()?);
            v.push(pool()?);
        }
        // One sequence owns every page, in order.
        let host_table = BlockTable {
            rows: (0..pages as i32).collect(),
            row_offsets: vec![0, pages as i32],
            logical_starts: vec![0],
            visible_lens: vec![0],
        };
        Ok(KvCache {
            k,
            v,
            table: DeviceBlockTable::new(dev, 1, pages)?,
            host_table,
            row: cfg.kv_heads * cfg.head_dim,
            capacity: pages * PAGE_SIZE,
        })
    }

    /// Tokens the cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Device bytes of the pools.
    pub fn bytes(&self) -> usize {
        self.k.iter().chain(&self.v).map(Tensor::byte_len).sum()
    }

    /// Makes positions `0..=position` visible to attention (the table on the device is
    /// rewritten in order with the queued work).
    pub fn see_through(&mut self, position: usize) -> Result<(), DecodeError> {
        if position >= self.capacity {
            return Err(DecodeError::ContextFull {
                position,
                capacity: self.capacity,
            });
        }
        self.host_table.visible_lens[0] = position as i32 + 1;
        self.table.write(&self.host_table, &self.k[0])?;
        Ok(())
    }

    /// Layer `layer`'s K and V rows of `position`, `[1, 1, Hkv, D]` each: where RoPE+append
    /// writes the token's key and value (pages are the pool's rows in order, so the slot of a
    /// position is its offset in the pool).
    pub fn slot(&self, layer: usize, position: usize) -> Result<(Tensor, Tensor), DecodeError> {
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
        let at = position * self.row;
        Ok((
            self.k[layer].view(at, &shape)?,
            self.v[layer].view(at, &shape)?,
        ))
    }

    /// Layer `layer`'s pools and the table.
    pub fn layer(&self, layer: usize) -> (&Tensor, &Tensor, &DeviceBlockTable) {
        (&self.k[layer], &self.v[layer], &self.table)
    }
}
