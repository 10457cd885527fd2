//! q/k RoPE + K/V in their cache layout, one dispatch (spec §4).
//!
//! Reads the fused QKV projection `[B, L, (Hq + 2·Hkv)·D]` once and writes rotated Q as
//! `[B, Hq, L, D]`, rotated K and plain V in the cache's layout (dense slab `[B, Hkv, L, D]`
//! or paged rows `[B, L, Hkv, D]`). Only the first `rotated_dims` of each Q/K head rotate; the
//! tail is copied. Angles follow the graph's f32 rounding points:
//! `θ = (scale · f32(position)) · 2^(−(p / (R/2)) · log2(base))`, with precise `sinf`/`cosf`.

use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `fused_rope_qk_append`.
    pub struct RopeAppendParams {
        /// Sequences (B, the first axis of `qkv`).
        pub batch: u32,
        /// Tokens in the window (L).
        pub seq_len: u32,
        /// Query heads (Hq).
        pub heads_q: u32,
        /// KV heads (Hkv).
        pub heads_kv: u32,
        /// Elements per head (D).
        pub head_dim: u32,
        /// Rotated leading dims of each head: `rope_dims`, or `head_dim` when that is 0.
        pub rotated_dims: u32,
        /// Leading dims of each Q/K head that rotate (even); 0 rotates the whole head.
        pub rope_dims: u32 = 0,
        /// `log2(base)` of the RoPE frequencies (computed on the host; 10000 by default).
        pub log2_base: f32 = 13.287712,
        /// Multiplies positions (linear RoPE scaling; 1 for none).
        pub scale: f32 = 1.0,
        /// Position of the window's first token (the cache offset).
        pub position_base: i32 = 0,
        /// 1: interleaved pairs `(2p, 2p+1)`; 0: half-split pairs `(p, p + R/2)` (GPT-NeoX).
        pub traditional: u32 = 0,
        /// K/V output layout: 0 dense slab `[B, Hkv, L, D]`, 1 paged pool rows `[B, L, Hkv, D]`.
        pub layout: u32 = 0,
    }
}

/// Descriptor of `fused_rope_qk_append`.
pub struct FusedRopeQkAppend;

impl KernelDef for FusedRopeQkAppend {
    type Params = RopeAppendParams;
    const NAME: &'static str = "fused_rope_qk_append";

    /// Buffers: `qkv [B, L, (Hq + 2·Hkv)·D]`, `q_out [B, Hq, L, D]`, `k_out` and `v_out`
    /// `[B, Hkv, L, D]` (layout 0) or `[B, L, Hkv, D]` (layout 1).
    fn bind(p: &mut RopeAppendParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [qkv, q_out, k_out, v_out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 4,
            });
        };
        let &[batch, heads_q, seq_len, head_dim] = *q_out else {
            return Err(ShapeError::Invalid(
                "q_out must be [batch, heads_q, seq_len, head_dim]",
            ));
        };
        shape::nonzero("batch", batch)?;
        shape::nonzero("seq_len", seq_len)?;
        shape::nonzero("heads_q", heads_q)?;
        shape::nonzero("head_dim", head_dim)?;
        if head_dim % 2 != 0 {
            return Err(ShapeError::Invalid(
                "head_dim must be even: RoPE rotates pairs of dims",
            ));
        }
        let heads_kv = match (p.layout, *k_out) {
            (0, &[b, h, l, d]) if b == batch && l == seq_len && d == head_dim => h,
            (1, &[b, l, h, d]) if b == batch && l == seq_len && d == head_dim => h,
            (0, _) => {
                return Err(ShapeError::Invalid(
                    "k_out must be [batch, heads_kv, seq_len, head_dim] for layout 0",
                ))
            }
            (1, _) => {
                return Err(ShapeError::Invalid(
                    "k_out must be [batch, seq_len, heads_kv, head_dim] for layout 1",
                ))
            }
            _ => {
                return Err(ShapeError::Range {
                    what: "layout",
                    got: p.layout as f64,
                    lo: 0.0,
                    hi: 1.0,
                })
            }
        };
        shape::nonzero("heads_kv", heads_kv)?;
        if v_out != k_out {
            return Err(ShapeError::Invalid("v_out must have the shape of k_out"));
        }
        let width = (heads_q + 2 * heads_kv) * head_dim;
        if *qkv != [batch, seq_len, width] {
            return Err(ShapeError::Invalid(
                "qkv must be [batch, seq_len, (heads_q + 2·heads_kv)·head_dim]",
            ));
        }
        let rotated = if p.rope_dims == 0 {
            head_dim
        } else {
            p.rope_dims as usize
        };
        if rotated % 2 != 0 || rotated > head_dim {
            return Err(ShapeError::Invalid(
                "rope_dims must be even and at most head_dim",
            ));
        }
        if p.traditional > 1 {
            return Err(ShapeError::Range {
                what: "traditional",
                got: p.traditional as f64,
                lo: 0.0,
                hi: 1.0,
            });
        }
        if !(p.log2_base.is_finite() && p.scale.is_finite()) {
            return Err(ShapeError::Invalid("log2_base and scale must be finite"));
        }
        // Positions are non-negative and fit an i32 to the window's last token.
        let last = p.position_base as i64 + seq_len as i64 - 1;
        if p.position_base < 0 || last > i32::MAX as i64 {
            return Err(ShapeError::Range {
                what: "position_base",
                got: p.position_base as f64,
                lo: 0.0,
                hi: (i32::MAX as i64 - seq_len as i64 + 1) as f64,
            });
        }
        // Grid y and z are 16-bit on CUDA.
        for (what, v) in [
            ("batch", batch),
            ("heads_q + 2·heads_kv", heads_q + 2 * heads_kv),
        ] {
            if v > 65535 {
                return Err(ShapeError::Range {
                    what,
                    got: v as f64,
                    lo: 1.0,
                    hi: 65535.0,
                });
            }
        }
        p.batch = shape::to_u32("batch", batch)?;
        p.seq_len = shape::to_u32("seq_len", seq_len)?;
        p.heads_q = shape::to_u32("heads_q", heads_q)?;
        p.heads_kv = shape::to_u32("heads_kv", heads_kv)?;
        p.head_dim = shape::to_u32("head_dim", head_dim)?;
        p.rotated_dims = shape::to_u32("rope_dims", rotated)?;
        shape::to_u32("qkv elements", shape::numel(qkv))?;
        Ok(())
    }

    fn launch(p: &RopeAppendParams) -> Launch {
        // One block per (token, head slot, batch row); one thread per dim pair, 32..=64 threads.
        Launch {
            grid: [p.seq_len, p.heads_q + 2 * p.heads_kv, p.batch],
            block: (p.head_dim / 2).div_ceil(32).clamp(1, 2) * 32,
        }
    }
}

/// The body: block (t, slot, b) handles one head of one token; threads stride over dim pairs.
pub fn fused_rope_qk_append<T: Element, B: Block>(
    b: &B,
    p: &RopeAppendParams,
    qkv: Src<T>,
    q_out: Dst<T>,
    k_out: Dst<T>,
    v_out: Dst<T>,
) {
    let (t, slot, row) = (
        b.block_x() as usize,
        b.block_y() as usize,
        b.block_z() as usize,
    );
    let (seq, hq, hkv) = (p.seq_len as usize, p.heads_q as usize, p.heads_kv as usize);
    let dim = p.head_dim as usize;
    let rot_half = p.rotated_dims as usize / 2;
    // Q heads, then K heads, then V heads, each `dim` contiguous in the projection row.
    let in_base = ((row * seq + t) * (hq + 2 * hkv) + slot) * dim;
    let kv_base = |h: usize| {
        if p.layout == 0 {
            ((row * hkv + h) * seq + t) * dim
        } else {
            ((row * seq + t) * hkv + h) * dim
        }
    };
    let is_v = slot >= hq + hkv;
    let out_base = if slot < hq {
        ((row * hq + slot) * seq + t) * dim
    } else if !is_v {
        kv_base(slot - hq)
    } else {
        kv_base(slot - hq - hkv)
    };
    let position = (t as u32 + p.position_base as u32) as f32;

    let mut pair = b.thread() as usize;
    while pair < dim / 2 {
        let rotate = !is_v && pair < rot_half;
        let (i1, i2) = if !rotate {
            // V copies pairs in place; Q/K tails start after the rotated dims.
            let start = if is_v {
                2 * pair
            } else {
                2 * rot_half + 2 * (pair - rot_half)
            };
            (start, start + 1)
        } else if p.traditional != 0 {
            (2 * pair, 2 * pair + 1)
        } else {
            (pair, pair + rot_half)
        };
        let (x1, x2) = (qkv.get(in_base + i1), qkv.get(in_base + i2));
        let (y1, y2) = if rotate {
            // Correctly rounded everywhere: one ulp of d is radians at long positions.
            let d = b.div_exact(pair as f32, rot_half as f32);
            let inv_freq = libm::exp2f(-d * p.log2_base);
            let theta = (p.scale * position) * inv_freq;
            let (s, c) = (libm::sinf(theta), libm::cosf(theta));
            let (f1, f2) = (x1.to_f32(), x2.to_f32());
            (T::from_f32(f1 * c - f2 * s), T::from_f32(f1 * s + f2 * c))
        } else {
            (x1, x2)
        };
        if slot < hq {
            q_out.set(out_base + i1, y1);
            q_out.set(out_base + i2, y2);
        } else if !is_v {
            k_out.set(out_base + i1, y1);
            k_out.set(out_base + i2, y2);
        } else {
            v_out.set(out_base + i1, y1);
            v_out.set(out_base + i2, y2);
        }
        pair += b.size() as usize;
    }
}
