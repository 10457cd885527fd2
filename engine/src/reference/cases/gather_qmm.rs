//! The parity cases of the `gather_qmm_<b>bit` kernels and the shapes `kiln bench` times them
//! at.
//!
//! The weights are real MLX-quantized experts, as for the MoE expert kernels; the index lists
//! are part of each case: decode's `lhs_idx[s] = s / K` over top-k ids, down's `lhs_idx[s] = s`,
//! slots sorted by expert with the hint (runs that cross and fill tiles, a short last tile), the
//! hint given over unsorted slots, and ids past E and rows past L (slots that give zeros).

use super::linear_tolerance;
use super::moe::experts;
use crate::case::{Case, Check, Fill};
use crate::quant::AffineFormat;
use kiln_math::kernels::qlinear::{scale_code, scale_words};
use kiln_math::DType;

/// One parity case: `lhs [l, c]`, `e` experts of `[n, c]`, the slots' index lists.
struct Shape {
    what: &'static str,
    gs: u32,
    scale_dtype: DType,
    sorted: bool,
    rows_per_tile: u32,
    rows_per_block: u32,
    l: usize,
    e: usize,
    c: usize,
    n: usize,
    lhs_idx: &'static [u32],
    rhs_idx: &'static [u32],
}

fn values(v: &[u32]) -> Fill {
    Fill::Values(v.iter().map(|&i| i as f64).collect())
}

fn params(
    gs: u32,
    scale_dtype: DType,
    sorted: bool,
    rpt: u32,
    rpb: u32,
) -> Vec<(&'static str, String)> {
    vec![
        ("group_size", gs.to_string()),
        ("scale_dtype", scale_code(scale_dtype).to_string()),
        ("sorted", u32::from(sorted).to_string()),
        ("rows_per_tile", rpt.to_string()),
        ("rows_per_block", rpb.to_string()),
    ]
}

fn case(bits: u32, dtype: DType, s: &Shape) -> Case {
    let format = AffineFormat::new(bits, s.gs, s.scale_dtype).expect("a supported format");
    let slots = s.rhs_idx.len();
    let label = format!(
        "{} g{} {} scales S{slots} L{} E{} {}->{} {}rpt{} rpb{}",
        s.what,
        s.gs,
        s.scale_dtype.name(),
        s.l,
        s.e,
        s.c,
        s.n,
        if s.sorted { "sorted " } else { "" },
        s.rows_per_tile,
        s.rows_per_block
    );
    let (weights, weight_shapes) = experts(&format!("{bits} {label}"), format, s.e, s.n, s.c);
    let mut shapes = vec![vec![s.l, s.c], vec![slots], vec![slots]];
    shapes.extend(weight_shapes);
    shapes.push(vec![slots, s.n]);
    let mut fill = vec![Fill::normal(0.0, 1.0), values(s.lhs_idx), values(s.rhs_idx)];
    fill.extend(weights);
    fill.push(Fill::Output);
    let mut checks = vec![Check::None; 6];
    checks.push(linear_tolerance(dtype));
    Case {
        label,
        shapes,
        params: params(
            s.gs,
            s.scale_dtype,
            s.sorted,
            s.rows_per_tile,
            s.rows_per_block,
        ),
        fill,
        checks,
        on_sim: true,
    }
}

/// The parity cases at `bits`, checked at the linear-layer budget of `dtype`: every group size
/// and scale dtype once; decode (`s / K` over top-k ids, a repeated expert) unsorted; prefill
/// slots sorted by expert with runs across tile edges and a short last tile; the hint over
/// unsorted slots (several runs per tile, an expert coming back); ids past E and rows past L.
/// Every output holds 32 elements or more (`nrms` normalizes by the output's RMS), the sim's
/// blocks stay small, and C covers one to four units per row (ragged over the lanes).
pub fn cases(bits: u32, dtype: DType) -> Vec<Case> {
    let shapes = [
        Shape {
            what: "decode",
            gs: 32,
            scale_dtype: DType::Bf16,
            sorted: false,
            rows_per_tile: 8,
            rows_per_block: 5,
            l: 2,
            e: 5,
            c: 64,
            n: 24,
            lhs_idx: &[0, 0, 0, 1, 1, 1],
            rhs_idx: &[4, 1, 2, 0, 4, 4],
        },
        Shape {
            what: "prefill",
            gs: 64,
            scale_dtype: DType::F16,
            sorted: true,
            rows_per_tile: 5,
            rows_per_block: 3,
            l: 6,
            e: 4,
            c: 128,
            n: 20,
            lhs_idx: &[1, 4, 0, 2, 3, 5, 0, 1, 2, 3, 4, 5],
            rhs_idx: &[0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3],
        },
        Shape {
            what: "hint over unsorted",
            gs: 128,
            scale_dtype: DType::F32,
            sorted: true,
            rows_per_tile: 4,
            rows_per_block: 8,
            l: 4,
            e: 3,
            c: 128,
            n: 16,
            lhs_idx: &[0, 1, 2, 3, 0, 1, 2, 3],
            rhs_idx: &[2, 0, 2, 1, 1, 1, 0, 2],
        },
        Shape {
            what: "down, ids past E and rows past L",
            gs: 16,
            scale_dtype: DType::F16,
            sorted: true,
            rows_per_tile: 3,
            rows_per_block: 2,
            l: 5,
            e: 3,
            c: 96,
            n: 12,
            lhs_idx: &[0, 1, 7, 2, 3, 4],
            rhs_idx: &[1, 9, 0, 0, 2, 1],
        },
    ];
    shapes.iter().map(|s| case(bits, dtype, s)).collect()
}

/// A bench case: `slots` slots over `e` stacked experts of `[n, c]` at `bits`, group size 64,
/// scales in bf16 (MLX's usual checkpoint dtype), random codes (any code is as fast as
/// another) and small scales and biases.
#[allow(clippy::too_many_arguments)]
fn bench_case(
    bits: u32,
    label: String,
    l: usize,
    e: usize,
    c: usize,
    n: usize,
    (lhs_idx, rhs_idx): (Vec<u32>, Vec<u32>),
    sorted: bool,
) -> Case {
    let slots = rhs_idx.len();
    let words = scale_words(scale_code(DType::Bf16), e * n * c / 64);
    let small = || Fill::Packed {
        dtype: DType::Bf16,
        of: Box::new(Fill::Uniform {
            lo: -0.05,
            hi: 0.05,
        }),
    };
    Case {
        label,
        shapes: vec![
            vec![l, c],
            vec![slots],
            vec![slots],
            vec![e, n, c * bits as usize / 32],
            vec![words],
            vec![words],
            vec![slots, n],
        ],
        params: params(64, DType::Bf16, sorted, 16, 8),
        fill: vec![
            Fill::normal(0.0, 1.0),
            values(&lhs_idx),
            values(&rhs_idx),
            Fill::Uniform {
                lo: 0.0,
                hi: 4294967296.0,
            },
            small(),
            small(),
            Fill::Output,
        ],
        checks: vec![Check::None; 7],
        on_sim: false,
    }
}

/// Decode: one token's `k` slots, slot `i` reading expert `k − 1 − i` (every expert once, not
/// in memory order). Only the routed experts are stacked, so `kiln bench`'s bytes (every
/// buffer counts as moved) are the selected experts'.
fn decode(k: usize) -> (Vec<u32>, Vec<u32>) {
    (vec![0; k], (0..k as u32).rev().collect())
}

/// Prefill: `t` tokens routed to `k` distinct experts of `e` each (token `i`, pick `j`: expert
/// `(i + j·e/k) mod e`), the slots sorted by expert (stable: tokens in order within an
/// expert), as `gather_sort` leaves them.
fn prefill(t: usize, k: usize, e: usize) -> (Vec<u32>, Vec<u32>) {
    let mut slots: Vec<(u32, u32)> = (0..t)
        .flat_map(|i| (0..k).map(move |j| (((i + j * e / k) % e) as u32, i as u32)))
        .collect();
    slots.sort_by_key(|&(expert, _)| expert);
    slots
        .into_iter()
        .map(|(expert, token)| (token, expert))
        .unzip()
}

/// Qwen3-30B-A3B's gate/up projection (E 128, K 8, 2048 → 768) at decode (one token, the
/// routed experts stacked) and at a 512-token prefill sorted by expert (all 128 experts
/// stacked: every one is routed to); Mixtral-8x7B's (E 8, K 2, 4096 → 14336) at decode.
pub fn bench_cases(bits: u32) -> Vec<Case> {
    vec![
        bench_case(
            bits,
            "qwen3-30b-a3b gate/up decode T1 K8 of E128 2048->768 g64".into(),
            1,
            8,
            2048,
            768,
            decode(8),
            false,
        ),
        bench_case(
            bits,
            "qwen3-30b-a3b gate/up prefill T512 K8 E128 2048->768 g64 sorted rpt16".into(),
            512,
            128,
            2048,
            768,
            prefill(512, 8, 128),
            true,
        ),
        bench_case(
            bits,
            "mixtral-8x7b gate/up decode T1 K2 of E8 4096->14336 g64".into(),
            1,
            2,
            4096,
            14336,
            decode(2),
            false,
        ),
    ]
}
