//! A v1 block table that lives on the device, for decode steps that must not upload anything
//! while they run (a captured graph replays the same launches over tables the engine rewrites
//! between replays). The table is checked when it is written, against the pool geometry it is
//! written for; a launch then only checks that it runs over that geometry.

use super::table::{BlockTable, KvGeometry};
use crate::launch::{launch_checked_tables, Arg, Mode, Ran};
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::paged_attention_decode::PagedDecodeParams;
use kiln_math::{DType, KernelId, Params};

/// A block table in device memory: `batch` requests over at most `max_rows` pool rows.
#[derive(Debug)]
pub struct DeviceBlockTable {
    rows: Tensor,
    row_offsets: Tensor,
    logical_starts: Tensor,
    visible_lens: Tensor,
    /// `(num_blocks, block_size)` of the pool the current contents were checked against.
    checked_for: Option<(usize, usize)>,
}

impl DeviceBlockTable {
    /// An empty table for `batch` requests and up to `max_rows` rows (allocates; do it once).
    pub fn new(dev: &Device, batch: usize, max_rows: usize) -> Result<DeviceBlockTable, PortError> {
        Ok(DeviceBlockTable {
            rows: Tensor::zeros(dev, DType::I32, &[max_rows.max(1)])?,
            row_offsets: Tensor::zeros(dev, DType::I32, &[batch + 1])?,
            logical_starts: Tensor::zeros(dev, DType::I32, &[batch])?,
            visible_lens: Tensor::zeros(dev, DType::I32, &[batch])?,
            checked_for: None,
        })
    }

    /// Requests the table holds.
    pub fn batch(&self) -> usize {
        self.logical_starts.numel()
    }

    /// Checks `table` against `k_pool`'s geometry (`[num_blocks, block_size, Hkv, D]`) and
    /// writes it, in order with the work queued on the device (no allocation, no wait).
    pub fn write(&mut self, table: &BlockTable, k_pool: &Tensor) -> Result<(), PortError> {
        let kernel = KernelId::PagedAttentionDecode;
        let [num_blocks, block_size, ..] = *k_pool.shape() else {
            return Err(PortError::invalid(
                kernel,
                "k_pool must be [num_blocks, block_size, Hkv, D]",
            ));
        };
        table
            .validate(self.batch(), num_blocks, block_size)
            .map_err(|e| e.port(kernel))?;
        if table.rows.len() > self.rows.numel() {
            return Err(PortError::shape(
                kernel,
                "rows",
                &[self.rows.numel()],
                &[table.rows.len()],
            ));
        }
        // A failed write leaves contents nobody checked: forget the geometry until one succeeds.
        self.checked_for = None;
        for (t, v) in [
            (&self.rows, &table.rows),
            (&self.row_offsets, &table.row_offsets),
            (&self.logical_starts, &table.logical_starts),
            (&self.visible_lens, &table.visible_lens),
        ] {
            write_i32(t, v)?;
        }
        self.checked_for = Some((num_blocks, block_size));
        Ok(())
    }
}

/// [`paged_attention_decode`](super::launch::paged_attention_decode) over a table already on
/// the device: nothing is uploaded or allocated, so the launch can be captured into a graph and
/// replayed while the engine rewrites `table` between replays. The pools must have the
/// geometry the table was last written for.
pub fn paged_attention_decode_resident(
    dev: &Device,
    q: &Tensor,
    k_pool: &Tensor,
    v_pool: &Tensor,
    table: &DeviceBlockTable,
    scale: f32,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = KernelId::PagedAttentionDecode;
    let geo = KvGeometry::of(kernel, q, k_pool, v_pool)?;
    if table.checked_for != Some((geo.num_blocks, geo.page_size)) || table.batch() != geo.batch {
        return Err(PortError::invalid(
            kernel,
            format!(
                "the device table holds {} requests checked for a pool of (blocks, block size) \
                 {:?}; this launch has {} requests over ({}, {})",
                table.batch(),
                table.checked_for,
                geo.batch,
                geo.num_blocks,
                geo.page_size
            ),
        ));
    }
    let p = PagedDecodeParams {
        scale,
        mma: super::launch::mma_param(),
        ..Default::default()
    };
    // The table was checked on the host when it was written.
    let mut args = [
        Arg::In(q),
        Arg::In(k_pool),
        Arg::In(v_pool),
        Arg::In(&table.rows),
        Arg::In(&table.row_offsets),
        Arg::In(&table.logical_starts),
        Arg::In(&table.visible_lens),
        Arg::Out(out),
    ];
    launch_checked_tables(dev, kernel, p.words(), &mut args, Mode::Auto)
}

/// Writes `host` into the front of the device table `t`, in order with the queued work.
pub(crate) fn write_i32(t: &Tensor, host: &[i32]) -> Result<(), PortError> {
    if host.len() > t.numel() {
        return Err(PortError::invalid(
            KernelId::PagedAttentionDecode,
            format!(
                "a table of {} entries does not fit {}",
                host.len(),
                t.numel()
            ),
        ));
    }
    // SAFETY: i32 is plain data.
    let bytes = unsafe { std::slice::from_raw_parts(host.as_ptr() as *const u8, host.len() * 4) };
    t.enqueue_write_at(0, bytes)
}
