//! The parity cases of `gated_delta_step` and the shapes `kiln bench` times it at.
//!
//! Input laws of a Qwen3-Next layer: `q` and `k` of about unit norm (the model L2-normalizes
//! them; here `N(0, 1/Dk)` per element, which keeps the delta rule's correction stable), `v`
//! and the state `N(0, 1)`, the decay `g` on `[0.8, 1)` and `beta` on `[0, 1)` (a sigmoid).

use super::linear_tolerance;
use crate::case::{Case, Check, Fill};
use kiln_math::kernels::gated_delta_step::{MASK_BYTES, MASK_NONE, MASK_WORDS};
use kiln_math::DType;

/// One launch's geometry and variant.
#[derive(Clone)]
struct Shape {
    batch: usize,
    steps: usize,
    key_heads: usize,
    value_heads: usize,
    key_dim: usize,
    value_dim: usize,
    gate_per_key: bool,
    chain_parity: bool,
    /// `mask_kind` and, with a mask, its buffer's words.
    mask: (u32, Vec<f64>),
}

fn case(label: &str, s: Shape, checks: Vec<Check>, on_sim: bool) -> Case {
    let Shape {
        batch,
        steps,
        key_heads,
        value_heads,
        key_dim,
        value_dim,
        gate_per_key,
        chain_parity,
        mask: (mask_kind, mask_words),
    } = s;
    let keys = vec![batch, steps, key_heads, key_dim];
    let values = vec![batch, steps, value_heads, value_dim];
    let heads = vec![batch, steps, value_heads];
    let gate = if gate_per_key {
        vec![batch, steps, value_heads, key_dim]
    } else {
        heads.clone()
    };
    let state = vec![batch, value_heads, value_dim, key_dim];
    let (mask_shape, mask_fill) = if mask_kind == MASK_NONE {
        (vec![1], Fill::Values(vec![0.0]))
    } else {
        (vec![mask_words.len()], Fill::Values(mask_words))
    };
    let unit = Fill::normal(0.0, (key_dim as f64).sqrt().recip());
    Case {
        label: format!(
            "{label} B{batch} T{steps} Hk{key_heads} Hv{value_heads} Dk{key_dim} Dv{value_dim} \
             gate {} mask {} chain_parity {}",
            if gate_per_key { "per-Dk" } else { "per-head" },
            ["none", "words", "bytes"][mask_kind as usize],
            chain_parity as u32
        ),
        shapes: vec![
            keys.clone(),
            keys,
            values.clone(),
            gate,
            heads,
            mask_shape,
            state.clone(),
            values,
            state,
        ],
        params: vec![
            ("chain_parity", (chain_parity as u32).to_string()),
            ("mask_kind", mask_kind.to_string()),
        ],
        fill: vec![
            unit.clone(),
            unit,
            Fill::normal(0.0, 1.0),
            Fill::Uniform { lo: 0.8, hi: 1.0 },
            Fill::Uniform { lo: 0.0, hi: 1.0 },
            mask_fill,
            Fill::normal(0.0, 1.0),
            Fill::Output,
            Fill::Output,
        ],
        checks,
        on_sim,
    }
}

/// `y` and the state at the dtype's linear-layer budget (f32 arithmetic, one rounding where
/// the chain stores).
fn checks(dtype: DType) -> Vec<Check> {
    let mut c = vec![Check::None; 7];
    c.push(linear_tolerance(dtype));
    c.push(linear_tolerance(dtype));
    c
}

/// The parity cases at `dtype`: on the sim, tiny launches covering Hv/Hk 1 and 2, both gates,
/// both mask encodings, T 1 to 4, Dk 5, 12 and 33 (no multiple of any wave) and both variants;
/// off the sim, Qwen3-Next's heads (`Hk 16, Hv 32, Dk 128, Dv 128`) in both variants.
pub fn cases(dtype: DType) -> Vec<Case> {
    let shape = |batch, steps, key_heads, value_heads, key_dim, value_dim| Shape {
        batch,
        steps,
        key_heads,
        value_heads,
        key_dim,
        value_dim,
        gate_per_key: false,
        chain_parity: false,
        mask: (MASK_NONE, Vec::new()),
    };
    let per_key = |s: Shape| Shape {
        gate_per_key: true,
        ..s
    };
    let chained = |s: Shape| Shape {
        chain_parity: true,
        ..s
    };
    let masked = |s: Shape, kind, words: &[f64]| Shape {
        mask: (kind, words.to_vec()),
        ..s
    };
    // Bytes [1, 0, 0, 1] of four (b, t) steps, little-endian in one word.
    let byte_mask = [f64::from(0x0100_0001u32)];
    let sim = [
        ("grouped one step", shape(1, 1, 1, 2, 5, 3)),
        (
            "grouped masked steps",
            masked(
                per_key(shape(2, 3, 2, 4, 12, 5)),
                MASK_WORDS,
                &[1.0, 0.0, 1.0, 1.0, 1.0, 0.0],
            ),
        ),
        ("chained steps", chained(shape(1, 4, 1, 2, 8, 6))),
        (
            "chained byte-masked steps",
            masked(
                chained(per_key(shape(2, 2, 1, 1, 33, 4))),
                MASK_BYTES,
                &byte_mask,
            ),
        ),
    ];
    let qwen3_next = [
        ("qwen3-next decode", shape(1, 1, 16, 32, 128, 128)),
        (
            "qwen3-next chained block",
            masked(
                chained(shape(2, 4, 16, 32, 128, 128)),
                MASK_WORDS,
                &[1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0],
            ),
        ),
    ];
    let mut out: Vec<Case> = sim
        .into_iter()
        .map(|(label, s)| case(label, s, checks(dtype), true))
        .collect();
    out.extend(
        qwen3_next
            .into_iter()
            .map(|(label, s)| case(label, s, checks(dtype), false)),
    );
    out
}

/// Qwen3-Next's decode step (`Hk 16, Hv 32, Dk 128, Dv 128`, T 1, the per-head gate) at batch 1
/// and 8.
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    [1, 8]
        .into_iter()
        .map(|batch| {
            let s = Shape {
                batch,
                steps: 1,
                key_heads: 16,
                value_heads: 32,
                key_dim: 128,
                value_dim: 128,
                gate_per_key: false,
                chain_parity: false,
                mask: (MASK_NONE, Vec::new()),
            };
            case("qwen3-next decode", s, vec![Check::None; 9], false)
        })
        .collect()
}
