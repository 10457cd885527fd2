//! SwiGLU's activation, elementwise: `out = silu(gate) · up` with `silu(g) = g / (1 + e^−g)`,
//! computed in f32 from the `T` inputs and rounded to `T` once (the fused form of the MLP's
//! `silu(gate_proj(x)) * up_proj(x)`; spec §7.1's SwiGLU without the expert indexing).

use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `fused_silu_mul`.
    pub struct SiluMulParams {
        /// Elements of `gate` (and of `up` and `out`).
        pub n: u32,
    }
}

/// Elements per block: a contiguous tile, `CHUNK` elements per thread on a GPU block of 256;
/// other blocks (the serial cpu block) stride through the same tile.
const TILE: u32 = 2048;

/// Contiguous elements a thread loads and stores at once where the views allow (16 bytes of a
/// 16-bit type).
const CHUNK: usize = 8;

/// Descriptor of `fused_silu_mul`.
pub struct FusedSiluMul;

impl KernelDef for FusedSiluMul {
    type Params = SiluMulParams;
    const NAME: &'static str = "fused_silu_mul";

    /// Buffers: `gate` (any shape), `up` and `out` (the shape of `gate`).
    fn bind(p: &mut SiluMulParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [gate, up, out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 3,
            });
        };
        if up != gate {
            return Err(ShapeError::Invalid("up must have the shape of gate"));
        }
        if out != gate {
            return Err(ShapeError::Invalid("out must have the shape of gate"));
        }
        let n = shape::numel(gate);
        shape::nonzero("elements of gate", n)?;
        p.n = shape::to_u32("elements of gate", n)?;
        Ok(())
    }

    fn launch(p: &SiluMulParams) -> Launch {
        Launch {
            grid: [p.n.div_ceil(TILE), 1, 1],
            block: TILE / CHUNK as u32,
        }
    }
}

/// `silu(g) = g / (1 + e^−g)` in f32. `e^−g` overflows to +∞ for very negative `g`, which gives
/// `g / ∞ = −0`, the limit.
#[inline(always)]
pub fn silu(g: f32) -> f32 {
    g / (1.0 + libm::expf(-g))
}

/// One element: `silu(g) · u` in f32, rounded once.
#[inline(always)]
pub fn silu_mul_element<T: Element>(gate: T, up: T) -> T {
    T::from_f32(silu(gate.to_f32()) * up.to_f32())
}

/// The body: block `k` handles the tile `[k·TILE, (k+1)·TILE)`; thread `t` takes chunks
/// `t, t + size, …` of a whole, aligned tile, else elements `t, t + size, …`.
pub fn fused_silu_mul<T: Element, B: Block>(
    b: &B,
    p: &SiluMulParams,
    gate: Src<T>,
    up: Src<T>,
    out: Dst<T>,
) {
    let start = b.block_x() as usize * TILE as usize;
    let end = (start + TILE as usize).min(p.n as usize);
    let wide = end - start == TILE as usize
        && gate.chunk_aligned::<CHUNK>(start)
        && up.chunk_aligned::<CHUNK>(start)
        && out.chunk_aligned::<CHUNK>(start);
    if wide {
        let mut at = start + b.thread() as usize * CHUNK;
        while at < end {
            let gs = gate.get_chunk::<CHUNK>(at);
            let us = up.get_chunk::<CHUNK>(at);
            let mut ys = gs;
            let mut j = 0;
            while j < CHUNK {
                ys[j] = silu_mul_element(gs[j], us[j]);
                j += 1;
            }
            out.set_chunk(at, ys);
            at += b.size() as usize * CHUNK;
        }
    } else {
        let mut i = start + b.thread() as usize;
        while i < end {
            out.set(i, silu_mul_element(gate.get(i), up.get(i)));
            i += b.size() as usize;
        }
    }
}
