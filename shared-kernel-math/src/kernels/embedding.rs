//! Token embedding, dense: `out[b, :] = table[ids[b], :]`, the `T` bits copied unchanged (a
//! gather has no arithmetic, so every port is bit-identical to the reference).
//!
//! Buffers: `ids [B]` u32, `table [V, D]` and `out [B, D]` in `T`. An id ≥ V reads nothing and
//! writes a row of zeros: the kernel never reads outside the table, and `ops::embedding`
//! refuses such an id before any launch, so only a caller of the raw launcher (ids already on
//! the device, e.g. a sampled token) can see it.
//!
//! Geometry: one block per row of `out`; its threads stride over the row in chunks of
//! [`CHUNK`] elements (16-byte accesses where both rows start aligned), else element by element.

use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `embedding`.
    pub struct EmbeddingParams {
        /// Rows gathered: ids, rows of `out`.
        pub b: u32,
        /// Row length: columns of `table` and `out`.
        pub d: u32,
        /// Vocabulary: rows of `table` (an id ≥ V gives a zero row).
        pub v: u32,
    }
}

/// Elements per chunk: 16 bytes of a 16-bit `T` (two 16-byte accesses for f32).
pub const CHUNK: usize = 8;

/// Preferred threads per block: a chunk each covers 1024 elements of a row per pass.
const BLOCK_THREADS: u32 = 128;

/// Descriptor of `embedding`.
pub struct Embedding;

impl KernelDef for Embedding {
    type Params = EmbeddingParams;
    const NAME: &'static str = "embedding";

    /// Buffers: `ids [B]`, `table [V, D]`, `out [B, D]`.
    fn bind(p: &mut EmbeddingParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [ids, table, out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 3,
            });
        };
        let &[b] = *ids else {
            return Err(ShapeError::Invalid("ids must be one-dimensional: [B]"));
        };
        let &[v, d] = *table else {
            return Err(ShapeError::Invalid("table must be two-dimensional: [V, D]"));
        };
        let &[ob, od] = *out else {
            return Err(ShapeError::Invalid("out must be two-dimensional: [B, D]"));
        };
        shape::nonzero("B (the ids)", b)?;
        shape::nonzero("V (the rows of table)", v)?;
        shape::nonzero("D (the columns of table)", d)?;
        shape::eq("rows of out against B (the ids)", ob, b)?;
        shape::eq("columns of out against D (the columns of table)", od, d)?;
        // Every element index must fit the u32 a WGSL index holds.
        shape::to_u32("elements of table", v.saturating_mul(d))?;
        shape::to_u32("elements of out", b.saturating_mul(d))?;
        p.b = b as u32;
        p.d = d as u32;
        p.v = v as u32;
        Ok(())
    }

    fn launch(p: &EmbeddingParams) -> Launch {
        Launch {
            grid: [p.b, 1, 1],
            block: BLOCK_THREADS,
        }
    }
}

/// The body: block `r` writes row `r` of `out` from row `ids[r]` of `table` (zeros when the id
/// is out of range).
pub fn embedding<T: Element, B: Block>(
    b: &B,
    p: &EmbeddingParams,
    ids: Src<u32>,
    table: Src<T>,
    out: Dst<T>,
) {
    let d = p.d as usize;
    let row = b.block_x() as usize;
    let id = ids.get(row) as usize;
    let dst = row * d;
    let step = b.size() as usize;
    let known = id < p.v as usize;
    // An unknown id's row is zeros and reads nothing; its source index stays in bounds.
    let src = if known { id * d } else { 0 };
    let zero = T::from_f32(0.0);
    let whole = d - d % CHUNK;
    let wide = out.chunk_aligned::<CHUNK>(dst) && (!known || table.chunk_aligned::<CHUNK>(src));
    // Elements before `tail` went in chunks.
    let mut tail = 0;
    if wide {
        let mut i = b.thread() as usize * CHUNK;
        while i < whole {
            let c = if known {
                table.get_chunk::<CHUNK>(src + i)
            } else {
                [zero; CHUNK]
            };
            out.set_chunk(dst + i, c);
            i += step * CHUNK;
        }
        tail = whole;
    }
    let mut i = tail + b.thread() as usize;
    while i < d {
        out.set(dst + i, if known { table.get(src + i) } else { zero });
        i += step;
    }
}
