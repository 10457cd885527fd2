//! The parity cases of `fused_rope_qk_append` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use kiln_math::DType;

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

/// The parity cases of `fused_rope_qk_append` at `dtype` (shapes, fills, checks with the spec's bounds).
pub fn cases(dtype: DType) -> Vec<Case> {
    sized(
        dtype,
        &[
            (1, 1, 4, 2, 64, 0, 0, 0, 4096),
            (2, 5, 2, 1, 128, 64, 1, 1, 0),
            (1, 3, 2, 2, 32, 0, 1, 0, 131068),
            (1, 7, 3, 1, 80, 40, 0, 0, 17),
            (2, 2, 2, 2, 64, 32, 0, 1, 131070),
        ],
    )
}

/// Cases of the given shapes.
fn sized(dtype: DType, shapes: &[RopeCase]) -> Vec<Case> {
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
                on_sim: true,
            }
        })
        .collect()
}

/// The parity shapes, then model shapes (half-split, the paged pool's layout): Llama-3.1-8B
/// (32/8 heads of 128) decoding batches of 1, 8 and 64 tokens and prefilling 512 and 4096, and
/// Qwen3-30B-A3B (32/4 heads of 128) at batch 1 and 8.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut v = cases(dtype);
    v.extend(sized(
        dtype,
        &[
            (1, 1, 32, 8, 128, 0, 0, 1, 4096),
            (8, 1, 32, 8, 128, 0, 0, 1, 4096),
            (64, 1, 32, 8, 128, 0, 0, 1, 4096),
            (1, 512, 32, 8, 128, 0, 0, 1, 0),
            (1, 4096, 32, 8, 128, 0, 0, 1, 0),
            (1, 1, 32, 4, 128, 0, 0, 1, 4096),
            (8, 1, 32, 4, 128, 0, 0, 1, 4096),
        ],
    ));
    v
}
