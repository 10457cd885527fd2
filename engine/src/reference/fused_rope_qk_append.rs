//! Slice Q/K/V, transpose to heads, RoPE on Q and K, V made contiguous (spec §4), unfused.
//!
//! Angles use the graph's f32 rounding points (`d`, `−d·log2(base)`, `2^(·)`, `scale·pos`,
//! `θ` each an f32); the rotation itself is evaluated in f64 and rounded to `T` once.

use crate::case::{Case, Check, Fill};
use kiln_math::kernels::fused_rope_qk_append::RopeAppendParams;
use kiln_math::{DType, Element};

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

/// Spec §4 / §15 budgets: f32 and f16 share the f16 budget, bf16 the norm's bf16 one.
fn tolerance(dtype: DType) -> Check {
    match dtype {
        DType::Bf16 => Check::Tolerance {
            nrms: 1.6e-2,
            nmax: 7e-2,
        },
        _ => Check::Tolerance {
            nrms: 2e-3,
            nmax: 1.2e-2,
        },
    }
}

/// (batch, seq_len, heads_q, heads_kv, head_dim, rope_dims, traditional, layout, position).
type RopeCase = (usize, usize, usize, usize, usize, u32, u32, u32, i32);

pub fn cases(dtype: DType) -> Vec<Case> {
    let shapes: [RopeCase; 5] = [
        (1, 1, 4, 2, 64, 0, 0, 0, 4096),
        (2, 5, 2, 1, 128, 64, 1, 1, 0),
        (1, 3, 2, 2, 32, 0, 1, 0, 131068),
        (1, 7, 3, 1, 80, 40, 0, 0, 17),
        (2, 2, 2, 2, 64, 32, 0, 1, 131070),
    ];
    shapes
        .iter()
        .map(|&(b, l, hq, hkv, d, r, trad, layout, pos)| {
            let kv = if layout == 0 {
                vec![b, hkv, l, d]
            } else {
                vec![b, l, hkv, d]
            };
            Case {
                label: format!(
                    "b{b} l{l} hq{hq} hkv{hkv} d{d} r{r} {} layout{layout} pos{pos}",
                    if trad == 1 {
                        "interleaved"
                    } else {
                        "half-split"
                    }
                ),
                shapes: vec![
                    vec![b, l, (hq + 2 * hkv) * d],
                    vec![b, hq, l, d],
                    kv.clone(),
                    kv,
                ],
                params: vec![
                    ("rope_dims", r.to_string()),
                    ("traditional", trad.to_string()),
                    ("layout", layout.to_string()),
                    ("position_base", pos.to_string()),
                    // log2(500000), Llama 3's base.
                    ("log2_base", "18.931568".into()),
                ],
                fill: vec![
                    Fill::normal(0.0, 1.0),
                    Fill::Output,
                    Fill::Output,
                    Fill::Output,
                ],
                checks: vec![
                    Check::None,
                    tolerance(dtype),
                    tolerance(dtype),
                    Check::Exact,
                ],
            }
        })
        .collect()
}

/// Benchmarked at its parity shapes.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    cases(dtype)
}
