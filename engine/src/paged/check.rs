//! The index tables of a paged kernel launched directly (`kiln::launch`, `kiln run`, the
//! generated launchers), checked with the same rules the typed ops apply to their host tables:
//! so no entry reaches a kernel or a reference with an index outside the pool or the partials.

use super::plan::check_chunks;
use super::table::{check_indptr, BlockTable, PageTable};
use crate::PortError;
use kiln_math::kernels::paged_attention_decode_v2_partial::PagedDecodeV2Params;
use kiln_math::{KernelId, Params};

/// Reads buffer `k` of the launch (an i32 table) to the host.
pub(crate) type ReadTable<'a> = dyn Fn(usize) -> Result<Vec<i32>, PortError> + 'a;

/// Checks the index tables of `kernel` (bound `words`, buffer `shapes` in list order, tables
/// read by `read`); kernels without index tables pass without reading anything.
pub(crate) fn index_tables(
    kernel: KernelId,
    words: &[u32],
    shapes: &[&[usize]],
    read: &ReadTable,
) -> Result<(), PortError> {
    // `bind` has checked the shapes: q [B, ..], pools [NB, PS, ..], one table per buffer.
    let first = |k: usize| shapes[k].first().copied().unwrap_or(0);
    match kernel {
        KernelId::PagedAttentionDecode => {
            let table = BlockTable {
                rows: read(3)?,
                row_offsets: read(4)?,
                logical_starts: read(5)?,
                visible_lens: read(6)?,
            };
            table
                .validate(first(0), first(1), shapes[1][1])
                .map_err(|e| e.port(kernel))
        }
        KernelId::PagedAttentionDecodeV2Partial => {
            let table = PageTable {
                indices: read(3)?,
                indptr: read(4)?,
                last_page_len: read(5)?,
                first_page_offset: read(6)?,
            };
            let spans = table
                .validate(first(0), first(1), shapes[1][1])
                .map_err(|e| e.port(kernel))?;
            let pages: Vec<usize> = spans.iter().map(|s| s.pages.len()).collect();
            let ppc = PagedDecodeV2Params::from_words(words).pages_per_chunk as usize;
            check_chunks(&read(7)?, &read(8)?, ppc, &pages)
                .map_err(|e| PortError::invalid(kernel, e.to_string()))
        }
        KernelId::PagedAttentionMergeStates => {
            let o_indptr = read(2)?;
            let rows = o_indptr.len().saturating_sub(1);
            check_indptr("o_indptr", &o_indptr, rows, first(0)).map_err(|e| e.port(kernel))
        }
        _ => Ok(()),
    }
}
