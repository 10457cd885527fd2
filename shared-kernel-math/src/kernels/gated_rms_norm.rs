//! Mamba2's gated RMSNorm (MambaRMSNormGated, spec §8 step 3): per row, the gated values
//! `h = y ⊙ silu(gate)` are normalized over groups of `I / G` contiguous elements and scaled,
//! `out = rnd_T(weight · h / sqrt(mean_group(h²) + eps))`, all in f32 from the `T` inputs and
//! rounded once (the unfused chain rounds `h` and the norm to `T` on the way; the budgets of
//! the norms cover the difference).

use crate::kernel::shape;
use crate::kernels::fused_add_rms_norm::{compensated_add, inverse_rms};
use crate::kernels::fused_silu_mul::silu;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `gated_rms_norm`.
    pub struct GatedRmsNormParams {
        /// Groups per row (`G`, dividing the row length `I`).
        pub groups: u32 = 1,
        /// Added to the mean square before the square root.
        pub eps: f32 = 1e-6,
        /// 1: gate by `silu(gate)`; 0: no gate (grouped RMSNorm; the gate buffer is ignored).
        pub has_gate: u32 = 1,
        /// Rows (product of all but the last axis of `y`), set by `bind`.
        pub rows: u32,
        /// Elements per group (`I / G`), set by `bind`.
        pub group_len: u32,
    }
}

/// Contiguous elements a thread loads at once where the views allow (16 bytes of a 16-bit type).
const CHUNK: usize = 8;

/// Descriptor of `gated_rms_norm`.
pub struct GatedRmsNorm;

impl KernelDef for GatedRmsNorm {
    type Params = GatedRmsNormParams;
    const NAME: &'static str = "gated_rms_norm";

    /// Buffers: `y [.., I]`, `gate` (the shape of `y`; with `has_gate` 0 anything of one
    /// element or more), `weight [I]`, `out` (the shape of `y`).
    fn bind(p: &mut GatedRmsNormParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [y, gate, weight, out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 4,
            });
        };
        let Some(&dim) = y.last() else {
            return Err(ShapeError::Invalid("y must have at least one axis"));
        };
        shape::nonzero("I (the last axis of y)", dim)?;
        let n = shape::numel(y);
        shape::nonzero("rows of y", n)?;
        match p.has_gate {
            0 => shape::nonzero("elements of gate (unused without has_gate)", shape::numel(gate))?,
            1 if gate != y => return Err(ShapeError::Invalid("gate must have the shape of y")),
            1 => {}
            v => {
                return Err(ShapeError::Range {
                    what: "has_gate",
                    got: v as f64,
                    lo: 0.0,
                    hi: 1.0,
                })
            }
        }
        if out != y {
            return Err(ShapeError::Invalid("out must have the shape of y"));
        }
        if weight.len() != 1 {
            return Err(ShapeError::Invalid("weight must be one-dimensional, [I]"));
        }
        shape::eq("weight length against I", weight[0], dim)?;
        let groups = p.groups as usize;
        shape::nonzero("G (the groups param)", groups)?;
        if !dim.is_multiple_of(groups) {
            return Err(ShapeError::Invalid("I must be a multiple of the groups param"));
        }
        if !(p.eps.is_finite() && p.eps >= 0.0) {
            return Err(ShapeError::Range {
                what: "eps",
                got: p.eps as f64,
                lo: 0.0,
                hi: f32::MAX as f64,
            });
        }
        shape::to_u32("elements of y", n)?;
        p.rows = shape::to_u32("rows", n / dim)?;
        p.group_len = shape::to_u32("I / G", dim / groups)?;
        Ok(())
    }

    fn launch(p: &GatedRmsNormParams) -> Launch {
        // One block per (group, row), one chunk per thread per sweep, 32..=256 threads (as for
        // fused_add_rms_norm: several groups share a multiprocessor).
        let want = p.group_len.div_ceil(CHUNK as u32).div_ceil(32) * 32;
        Launch {
            grid: [p.groups, p.rows, 1],
            block: want.clamp(32, 256),
        }
    }
}

/// `h = y · silu(gate)` (or `y`) in f32.
#[inline(always)]
fn gated<T: Element>(p: &GatedRmsNormParams, y: T, gate: Src<T>, at: usize) -> f32 {
    if p.has_gate == 1 {
        y.widen() * silu(gate.get(at).widen())
    } else {
        y.widen()
    }
}

/// The gated chunk at `at` (chunked `gate` loads when gated).
#[inline(always)]
fn gated_chunk<T: Element>(
    p: &GatedRmsNormParams,
    y: Src<T>,
    gate: Src<T>,
    at: usize,
) -> [f32; CHUNK] {
    let ys = y.get_chunk::<CHUNK>(at);
    let mut h = [0.0f32; CHUNK];
    let mut j = 0;
    if p.has_gate == 1 {
        let gs = gate.get_chunk::<CHUNK>(at);
        while j < CHUNK {
            h[j] = ys[j].widen() * silu(gs[j].widen());
            j += 1;
        }
    } else {
        while j < CHUNK {
            h[j] = ys[j].widen();
            j += 1;
        }
    }
    h
}

/// The body: block `(g, r)` normalizes group `g` of row `r`; thread `t` takes chunks
/// `t, t + size, …` of the group when every view allows chunks there, else elements. The
/// second sweep recomputes `h` from the inputs (the group was just read: cache hits) rather
/// than holding it.
pub fn gated_rms_norm<T: Element, B: Block>(
    b: &B,
    p: &GatedRmsNormParams,
    y: Src<T>,
    gate: Src<T>,
    weight: Src<T>,
    out: Dst<T>,
) {
    let len = p.group_len as usize;
    let first = b.block_x() as usize * len;
    let base = (b.block_y() as usize * p.groups as usize) * len + first;
    let step = b.size() as usize;
    let wide = len.is_multiple_of(CHUNK)
        && y.chunk_aligned::<CHUNK>(base)
        && (p.has_gate == 0 || gate.chunk_aligned::<CHUNK>(base))
        && out.chunk_aligned::<CHUNK>(base)
        && weight.chunk_aligned::<CHUNK>(first);
    let chunks = if wide { len / CHUNK } else { 0 };
    let tail = chunks * CHUNK;

    // Compensated per-thread sums: the serial cpu block sums a whole group (see
    // fused_add_rms_norm).
    let (mut sq, mut carry) = (0.0f32, 0.0f32);
    let mut c = b.thread() as usize;
    while c < chunks {
        let h = gated_chunk(p, y, gate, base + c * CHUNK);
        let mut part = 0.0f32;
        let mut j = 0;
        while j < CHUNK {
            part += h[j] * h[j];
            j += 1;
        }
        (sq, carry) = compensated_add(sq, carry, part);
        c += step;
    }
    let mut i = tail + b.thread() as usize;
    while i < len {
        let h = gated(p, y.get(base + i), gate, base + i);
        (sq, carry) = compensated_add(sq, carry, h * h);
        i += step;
    }
    let inv = inverse_rms(b.sum(sq), p.group_len, p.eps);

    let mut c = b.thread() as usize;
    while c < chunks {
        let at = c * CHUNK;
        let h = gated_chunk(p, y, gate, base + at);
        let ws = weight.get_chunk::<CHUNK>(first + at);
        let mut o = ws;
        let mut j = 0;
        while j < CHUNK {
            o[j] = T::from_f32(ws[j].widen() * (h[j] * inv));
            j += 1;
        }
        out.set_chunk(base + at, o);
        c += step;
    }
    let mut i = tail + b.thread() as usize;
    while i < len {
        let h = gated(p, y.get(base + i), gate, base + i);
        out.set(
            base + i,
            T::from_f32(weight.get(first + i).widen() * (h * inv)),
        );
        i += step;
    }
}
