//! Slice Q/K/V, transpose to heads, RoPE on Q and K, V made contiguous (spec §4), unfused.
//!
//! Angles use the graph's f32 rounding points (`d`, `−d·log2(base)`, `2^(·)`, `scale·pos`,
//! `θ` each an f32); the rotation itself is evaluated in f64 and rounded to `T` once.

use kiln_math::kernels::fused_rope_qk_append::RopeAppendParams;
use kiln_math::Element;

/// One head of one token, `[D]`, rotated (or copied) as `fast::rope` would.
fn rope_head<T: Element>(p: &RopeAppendParams, head: &[T], position: u32) -> Vec<T> {
    let r = p.rotated_dims as usize;
    let mut out = head.to_vec();
    let half = r / 2;
    for k in 0..half {
        let (i1, i2) = if p.traditional != 0 {
            (2 * k, 2 * k + 1)
        } else {
            (k, k + half)
        };
        let d = k as f32 / half as f32;
        let exponent = -d * p.log2_base;
        let inv_freq = 2f64.powf(exponent as f64) as f32;
        let theta = ((p.scale * position as f32) * inv_freq) as f64;
        let (x1, x2) = (head[i1].to_f32() as f64, head[i2].to_f32() as f64);
        out[i1] = T::from_f32((x1 * theta.cos() - x2 * theta.sin()) as f32);
        out[i2] = T::from_f32((x1 * theta.sin() + x2 * theta.cos()) as f32);
    }
    out
}

/// The unfused chain of [`fused_rope_qk_append`](kiln_math::kernels::fused_rope_qk_append::fused_rope_qk_append): its params and
/// buffers, in list order, as host slices.
pub fn fused_rope_qk_append<T: Element>(
    p: &RopeAppendParams,
    qkv: &[T],
    q_out: &mut [T],
    k_out: &mut [T],
    v_out: &mut [T],
) {
    let (bsz, seq, hq, hkv, dim) = (
        p.batch as usize,
        p.seq_len as usize,
        p.heads_q as usize,
        p.heads_kv as usize,
        p.head_dim as usize,
    );
    let width = (hq + 2 * hkv) * dim;
    for b in 0..bsz {
        for t in 0..seq {
            let row = &qkv[(b * seq + t) * width..][..width];
            let position = p.position_base as u32 + t as u32;
            // The Q block, then the K block, then the V block of the projection.
            for h in 0..hq {
                let q = rope_head(p, &row[h * dim..][..dim], position);
                q_out[((b * hq + h) * seq + t) * dim..][..dim].copy_from_slice(&q);
            }
            for h in 0..hkv {
                let dst = if p.layout == 0 {
                    ((b * hkv + h) * seq + t) * dim
                } else {
                    ((b * seq + t) * hkv + h) * dim
                };
                let k = rope_head(p, &row[(hq + h) * dim..][..dim], position);
                k_out[dst..][..dim].copy_from_slice(&k);
                v_out[dst..][..dim].copy_from_slice(&row[(hq + hkv + h) * dim..][..dim]);
            }
        }
    }
}
