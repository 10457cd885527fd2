//! Token embedding over an MLX affine table (spec §13), dequantized to `T`:
//! `out[b, d] = rnd_T(scale[r, g]·q[r, d] + bias[r, g])` for `r = ids[b]`, `g = d / group_size`,
//! the dequantization in f32 (one fused multiply-add on GPUs). The table's layout is exactly
//! the one the `qlinear_<b>bit` kernels read, so one quantized matrix serves both the
//! embedding and a tied LM head.
//!
//! Buffers: `ids [B]` u32; `w_q [V, D·bits/32]` u32 (each row one LSB-first bit stream of `D`
//! codes); `scales` and `biases`, `V·D/group_size` values of the scale dtype packed into u32
//! words as `qlinear` takes them (16-bit values two per word, the last word zero-padded);
//! `out [B, D]` in `T`. An id ≥ V reads nothing and writes a row of zeros (the kernel never
//! reads outside the table; `ops::embedding_affine` refuses such an id before any launch).
//!
//! Geometry: one block per row of `out`; its threads stride over the row in chunks of
//! [`CHUNK`] codes, which lie in one group (`D` and the group are multiples of it), so a chunk
//! loads one scale and one bias. The bit width is a param: a gather reads each code once, so
//! nothing is gained by compiling a kernel per width.

use super::affine_codes::{packed_scale, stream_code};
use super::qlinear::{check_format, scale_words};
use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Bit widths the kernel reads (MLX's affine widths).
pub const BITS: [u32; 6] = [2, 3, 4, 5, 6, 8];

/// Codes per chunk: 16 bytes of a 16-bit `T` per store.
pub const CHUNK: usize = 8;

/// Preferred threads per block: a chunk each covers 1024 elements of a row per pass.
const BLOCK_THREADS: u32 = 128;

crate::params! {
    /// Params of `embedding_affine`.
    pub struct EmbeddingAffineParams {
        /// Rows gathered: ids, rows of `out`.
        pub b: u32,
        /// Row length: codes per row of `w_q`, columns of `out`.
        pub d: u32,
        /// Vocabulary: rows of `w_q` (an id ≥ V gives a zero row).
        pub v: u32,
        /// Bits per code: 2, 3, 4, 5, 6 or 8.
        pub bits: u32 = 4,
        /// Elements per group, one scale and one bias each: 16, 32, 64 or 128.
        pub group_size: u32 = 64,
        /// The dtype of `scales` and `biases`: 0 f32, 1 f16, 2 bf16 (`qlinear::scale_code`).
        pub scale_dtype: u32 = 1,
    }
}

/// Descriptor of `embedding_affine`.
pub struct EmbeddingAffine;

impl KernelDef for EmbeddingAffine {
    type Params = EmbeddingAffineParams;
    const NAME: &'static str = "embedding_affine";

    /// Buffers: `ids [B]`, `w_q [V, D·bits/32]`, `scales` and `biases` (packed words of
    /// `V·D/group_size` values, any shape), `out [B, D]`.
    fn bind(p: &mut EmbeddingAffineParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [ids, w_q, scales, biases, out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 5,
            });
        };
        let &[b] = *ids else {
            return Err(ShapeError::Invalid("ids must be one-dimensional: [B]"));
        };
        let &[v, words] = *w_q else {
            return Err(ShapeError::Invalid(
                "w_q must be two-dimensional: [V, D·bits/32]",
            ));
        };
        let &[ob, d] = *out else {
            return Err(ShapeError::Invalid("out must be two-dimensional: [B, D]"));
        };
        shape::nonzero("B (the ids)", b)?;
        shape::nonzero("V (the rows of w_q)", v)?;
        shape::nonzero("D (the columns of out)", d)?;
        shape::eq("rows of out against B (the ids)", ob, b)?;
        if !BITS.contains(&p.bits) {
            return Err(ShapeError::Invalid("bits must be 2, 3, 4, 5, 6 or 8"));
        }
        check_format(p.group_size, p.scale_dtype)?;
        if !d.is_multiple_of(32) {
            return Err(ShapeError::Invalid(
                "D (the columns of out) must be a multiple of 32: a row of w_q is whole words",
            ));
        }
        if !d.is_multiple_of(p.group_size as usize) {
            return Err(ShapeError::Invalid(
                "D (the columns of out) must be a multiple of group_size",
            ));
        }
        shape::eq(
            "words per row of w_q against D·bits/32",
            words,
            d / 32 * p.bits as usize,
        )?;
        let groups = v.saturating_mul(d / p.group_size as usize);
        let want = scale_words(p.scale_dtype, groups);
        shape::eq(
            "words of scales (V·D/group_size values packed)",
            shape::numel(scales),
            want,
        )?;
        shape::eq(
            "words of biases (V·D/group_size values packed)",
            shape::numel(biases),
            want,
        )?;
        // Every element index must fit the u32 a WGSL index holds.
        shape::to_u32("words of w_q", v.saturating_mul(words))?;
        shape::to_u32("elements of out", b.saturating_mul(d))?;
        shape::to_u32("values of scales", groups)?;
        p.b = b as u32;
        p.d = d as u32;
        p.v = v as u32;
        Ok(())
    }

    fn launch(p: &EmbeddingAffineParams) -> Launch {
        Launch {
            grid: [p.b, 1, 1],
            block: BLOCK_THREADS,
        }
    }
}

/// The body: block `r` writes row `r` of `out`, dequantizing row `ids[r]` of the table (zeros
/// when the id is out of range).
pub fn embedding_affine<T: Element, B: Block>(
    b: &B,
    p: &EmbeddingAffineParams,
    ids: Src<u32>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    out: Dst<T>,
) {
    let d = p.d as usize;
    // Group indices by a shift (bind checked a power of two): a division by a param would
    // bring a divide-by-zero panic path, a call, into the GPU code.
    let group_log2 = p.group_size.trailing_zeros();
    let row = b.block_x() as usize;
    let id = ids.get(row) as usize;
    let known = id < p.v as usize;
    // An unknown id reads nothing; its offsets stay those of row 0.
    let src = if known { id } else { 0 };
    let first_word = src * (d / 32 * p.bits as usize);
    let first_group = src * (d >> group_log2);
    let dst = row * d;
    let wide = out.chunk_aligned::<CHUNK>(dst);
    let mut c = b.thread() as usize * CHUNK;
    while c < d {
        let mut v = [0.0f32; CHUNK];
        if known {
            let e = first_group + (c >> group_log2);
            let s = packed_scale(scales, p.scale_dtype, e);
            let o = packed_scale(biases, p.scale_dtype, e);
            let mut j = 0;
            while j < CHUNK {
                let q = stream_code(w_q, first_word, p.bits, c + j) as f32;
                v[j] = crate::mul_add(s, q, o);
                j += 1;
            }
        }
        let mut t = [T::from_f32(0.0); CHUNK];
        let mut j = 0;
        while j < CHUNK {
            let pair = T::from_f32_pair(v[j], v[j + 1]);
            t[j] = pair[0];
            t[j + 1] = pair[1];
            j += 2;
        }
        if wide {
            out.set_chunk(dst + c, t);
        } else {
            let mut j = 0;
            while j < CHUNK {
                out.set(dst + c + j, t[j]);
                j += 1;
            }
        }
        c += b.size() as usize * CHUNK;
    }
}
