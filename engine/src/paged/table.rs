//! Page tables in the two layouts the kernels read, and their validation against a pool.

use crate::{PortError, Tensor};
use kiln_math::{DType, KernelId};
use std::ops::Range;

/// A CSR page table (spec §9.3): request `r` owns pool rows `indices[indptr[r]..indptr[r+1]]`,
/// skips `first_page_offset[r]` entries of its first page and uses `last_page_len[r]` entries
/// of its last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageTable {
    /// Pool rows of every request's pages, request after request.
    pub indices: Vec<i32>,
    /// `[B+1]` offsets into `indices`, from 0, non-decreasing.
    pub indptr: Vec<i32>,
    /// `[B]` entries used of each request's last page.
    pub last_page_len: Vec<i32>,
    /// `[B]` entries skipped at the start of each request's first page (a window's start).
    pub first_page_offset: Vec<i32>,
}

/// A v1 block table (spec §9.2): sequence `s` owns `rows[row_offsets[s]..row_offsets[s+1]]`;
/// its visible tokens are the absolute positions `logical_starts[s] .. + visible_lens[s]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockTable {
    /// Pool rows of every sequence, sequence after sequence.
    pub rows: Vec<i32>,
    /// `[B+1]` offsets into `rows`, from 0, non-decreasing.
    pub row_offsets: Vec<i32>,
    /// `[B]` absolute position of each sequence's first visible token.
    pub logical_starts: Vec<i32>,
    /// `[B]` tokens each sequence sees.
    pub visible_lens: Vec<i32>,
}

/// One validated request: its page range in the table, where its window starts inside the
/// first page, and how many tokens it sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestSpan {
    /// Its entries of the table's row list.
    pub pages: Range<usize>,
    /// Entries of its first page before its first visible token.
    pub first_offset: usize,
    /// Tokens it sees.
    pub visible: usize,
}

/// Why a page table was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// An array has the wrong length for the batch.
    #[error("{what} has {got} entries, must have {want}")]
    Length {
        /// The array.
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length the batch needs.
        want: usize,
    },
    /// An offsets array decreases.
    #[error("{what} is not monotone: entry {at} is {value} after {previous}")]
    NotMonotone {
        /// The array.
        what: &'static str,
        /// Index of the decreasing entry.
        at: usize,
        /// Its value.
        value: i32,
        /// The entry before it.
        previous: i32,
    },
    /// An offsets array does not start at 0.
    #[error("{what} starts at {first}, must start at 0")]
    NonZeroStart {
        /// The array.
        what: &'static str,
        /// Its first entry.
        first: i32,
    },
    /// An offsets array ends past the row list.
    #[error("{what} ends at {last}, past the {len} table entries")]
    PastTable {
        /// The array.
        what: &'static str,
        /// Its last entry.
        last: i32,
        /// Entries of the row list.
        len: usize,
    },
    /// A table entry names a row the pool does not have.
    #[error("table entry {at} names pool row {row}, the pool has {num_blocks} rows")]
    RowOutsidePool {
        /// Index in the row list.
        at: usize,
        /// The row it names.
        row: i32,
        /// Rows of the pool.
        num_blocks: usize,
    },
    /// A per-request value lies outside its range.
    #[error("request {request}: {what} is {got}, must be in [{lo}, {hi}]")]
    OutOfRange {
        /// The request.
        request: usize,
        /// The value, in words.
        what: &'static str,
        /// Its value.
        got: i64,
        /// The smallest value allowed.
        lo: i64,
        /// The largest value allowed.
        hi: i64,
    },
    /// A request's visible tokens run past its pages.
    #[error("request {request} sees {visible} tokens from position {start}, past its {pages} pages of {page_size}")]
    BeyondTable {
        /// The request.
        request: usize,
        /// Entry of its first page its window starts at.
        start: usize,
        /// Tokens it sees.
        visible: usize,
        /// Pages the table gives it.
        pages: usize,
        /// Tokens per page.
        page_size: usize,
    },
}

impl TableError {
    pub(crate) fn port(self, kernel: KernelId) -> PortError {
        PortError::invalid(kernel, self.to_string())
    }
}

/// The pool and query geometry a decode runs on, read from the tensors' shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvGeometry {
    /// Requests (the first axis of `q`).
    pub batch: usize,
    /// Query heads.
    pub heads_q: usize,
    /// KV heads of the pools.
    pub heads_kv: usize,
    /// Elements per head.
    pub head_dim: usize,
    /// Pool rows (pages).
    pub num_blocks: usize,
    /// Tokens per page.
    pub page_size: usize,
    /// The pools' element type.
    pub pool_dtype: DType,
}

impl KvGeometry {
    /// Reads and checks `q [B, Hq, (1,) D]` f32 and the pools `[NB, PS, Hkv, D]`.
    pub fn of(
        kernel: KernelId,
        q: &Tensor,
        k_pool: &Tensor,
        v_pool: &Tensor,
    ) -> Result<KvGeometry, PortError> {
        let bad = |m: &str| PortError::invalid(kernel, m);
        let (batch, heads_q, head_dim) = match *q.shape() {
            [b, h, d] | [b, h, 1, d] => (b, h, d),
            _ => return Err(bad("q must be [B, Hq, D] or [B, Hq, 1, D]")),
        };
        if q.dtype() != DType::F32 {
            return Err(bad("q must be f32"));
        }
        let [num_blocks, page_size, heads_kv, d] = *k_pool.shape() else {
            return Err(bad("k_pool must be [num_blocks, block_size, Hkv, D]"));
        };
        if v_pool.shape() != k_pool.shape() || v_pool.dtype() != k_pool.dtype() {
            return Err(bad("v_pool must have the shape and dtype of k_pool"));
        }
        // Every arm, the gather fallback included, reads the pools as one of the kernels'
        // element types: any other bytes would be read as garbage.
        if !kernel.dtypes().contains(&k_pool.dtype()) {
            return Err(PortError::UnsupportedDtype {
                kernel: kernel.name(),
                got: k_pool.dtype(),
                supported: kernel.dtypes(),
            });
        }
        if out_of_range_of_i32(k_pool.shape()) {
            return Err(bad("every axis of the pools must fit an i32 table entry"));
        }
        if d != head_dim {
            return Err(bad("the pools' head dim differs from q's"));
        }
        if [batch, heads_q, head_dim, num_blocks, page_size, heads_kv].contains(&0) {
            return Err(bad("every axis of q and the pools must be non-zero"));
        }
        if !heads_q.is_multiple_of(heads_kv) {
            return Err(PortError::invalid(
                kernel,
                format!("Hq = {heads_q} is not a multiple of Hkv = {heads_kv}"),
            ));
        }
        Ok(KvGeometry {
            batch,
            heads_q,
            heads_kv,
            head_dim,
            num_blocks,
            page_size,
            pool_dtype: k_pool.dtype(),
        })
    }
}

/// Whether an axis is past what an i32 table entry (row, position) can name.
fn out_of_range_of_i32(shape: &[usize]) -> bool {
    shape.iter().any(|&n| n > i32::MAX as usize)
}

/// Checks a decode's softmax scale as the kernels' shape binding does (0 means `1 / sqrt(D)`,
/// anything else must be finite), so the gather fallback refuses what the kernel arms refuse.
pub(crate) fn check_scale(kernel: KernelId, scale: f32) -> Result<(), PortError> {
    if scale.is_finite() {
        Ok(())
    } else {
        Err(PortError::invalid(
            kernel,
            format!("scale is {scale}, must be finite"),
        ))
    }
}

fn as_index(v: i32) -> usize {
    v.max(0) as usize
}

/// Checks a prefix-sum array of `len + 1` entries from 0, non-decreasing, ending within
/// `entries`.
pub(crate) fn check_indptr(
    what: &'static str,
    indptr: &[i32],
    len: usize,
    entries: usize,
) -> Result<(), TableError> {
    if indptr.len() != len + 1 {
        return Err(TableError::Length {
            what,
            got: indptr.len(),
            want: len + 1,
        });
    }
    if indptr[0] != 0 {
        return Err(TableError::NonZeroStart {
            what,
            first: indptr[0],
        });
    }
    for (at, w) in indptr.windows(2).enumerate() {
        if w[1] < w[0] {
            return Err(TableError::NotMonotone {
                what,
                at: at + 1,
                value: w[1],
                previous: w[0],
            });
        }
    }
    let last = indptr[len];
    if as_index(last) > entries {
        return Err(TableError::PastTable {
            what,
            last,
            len: entries,
        });
    }
    Ok(())
}

fn check_rows(rows: &[i32], used: usize, num_blocks: usize) -> Result<(), TableError> {
    for (at, &row) in rows[..used].iter().enumerate() {
        if row < 0 || row as usize >= num_blocks {
            return Err(TableError::RowOutsidePool {
                at,
                row,
                num_blocks,
            });
        }
    }
    Ok(())
}

fn check_len(what: &'static str, v: &[i32], want: usize) -> Result<(), TableError> {
    if v.len() == want {
        Ok(())
    } else {
        Err(TableError::Length {
            what,
            got: v.len(),
            want,
        })
    }
}

impl PageTable {
    /// Requests in the table.
    pub fn batch(&self) -> usize {
        self.indptr.len().saturating_sub(1)
    }

    /// Checks the table against `batch` requests and the pool; returns every request's span.
    pub fn validate(
        &self,
        batch: usize,
        num_blocks: usize,
        page_size: usize,
    ) -> Result<Vec<RequestSpan>, TableError> {
        check_indptr("indptr", &self.indptr, batch, self.indices.len())?;
        check_len("last_page_len", &self.last_page_len, batch)?;
        check_len("first_page_offset", &self.first_page_offset, batch)?;
        check_rows(&self.indices, as_index(self.indptr[batch]), num_blocks)?;
        let ps = page_size as i64;
        (0..batch)
            .map(|r| {
                let pages = as_index(self.indptr[r])..as_index(self.indptr[r + 1]);
                let (fpo, lpl) = (
                    self.first_page_offset[r] as i64,
                    self.last_page_len[r] as i64,
                );
                if pages.is_empty() {
                    return Ok(RequestSpan {
                        pages,
                        first_offset: 0,
                        visible: 0,
                    });
                }
                let range = |what, got: i64, lo: i64, hi: i64| {
                    if (lo..=hi).contains(&got) {
                        Ok(())
                    } else {
                        Err(TableError::OutOfRange {
                            request: r,
                            what,
                            got,
                            lo,
                            hi,
                        })
                    }
                };
                range("last_page_len", lpl, 1, ps)?;
                let used = (pages.len() as i64 - 1) * ps + lpl;
                range("first_page_offset", fpo, 0, (ps - 1).min(used))?;
                Ok(RequestSpan {
                    first_offset: fpo as usize,
                    visible: (used - fpo) as usize,
                    pages,
                })
            })
            .collect()
    }

    /// The same batch as a v1 block table.
    pub fn to_block_table(&self, spans: &[RequestSpan]) -> BlockTable {
        BlockTable {
            rows: self.indices.clone(),
            row_offsets: self.indptr.clone(),
            logical_starts: spans.iter().map(|s| s.first_offset as i32).collect(),
            visible_lens: spans.iter().map(|s| s.visible as i32).collect(),
        }
    }
}

impl BlockTable {
    /// Checks the table against `batch` sequences and the pool: offsets monotone, rows inside
    /// the pool, starts and lengths non-negative, every visible position inside the sequence's
    /// rows.
    pub fn validate(
        &self,
        batch: usize,
        num_blocks: usize,
        block_size: usize,
    ) -> Result<(), TableError> {
        check_indptr("row_offsets", &self.row_offsets, batch, self.rows.len())?;
        check_len("logical_starts", &self.logical_starts, batch)?;
        check_len("visible_lens", &self.visible_lens, batch)?;
        check_rows(&self.rows, as_index(self.row_offsets[batch]), num_blocks)?;
        for s in 0..batch {
            let pages = (self.row_offsets[s + 1] - self.row_offsets[s]) as usize;
            let (start, len) = (self.logical_starts[s], self.visible_lens[s]);
            for (what, v) in [("logical_starts", start), ("visible_lens", len)] {
                if v < 0 {
                    return Err(TableError::OutOfRange {
                        request: s,
                        what,
                        got: v as i64,
                        lo: 0,
                        hi: i32::MAX as i64,
                    });
                }
            }
            if len > 0 && start as usize + len as usize > pages * block_size {
                return Err(TableError::BeyondTable {
                    request: s,
                    start: start as usize,
                    visible: len as usize,
                    pages,
                    page_size: block_size,
                });
            }
        }
        Ok(())
    }
}
