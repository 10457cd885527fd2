//! The parity cases of the MoE expert kernels and the shapes `kiln bench` times them at.
//!
//! The weights are real MLX-quantized experts (normal weights through kiln's affine quantizer
//! at the case's format, drawn from a seed fixed per case, as for `qlinear`); the expert ids
//! are part of the case (repeats, and an id past E, whose slot gives zeros).

use super::linear_tolerance;
use super::qlinear::normal_weights;
use crate::case::{Case, Check, Fill};
use crate::quant::{pack_le_words, quantize, AffineFormat};
use kiln_math::kernels::moe_experts::{ACT_GEGLU, ACT_SWIGLU};
use kiln_math::kernels::qlinear::scale_code;
use kiln_math::DType;

/// Which expert kernel a case is for.
#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    /// `moe_gateup_<b>bit`.
    GateUp,
    /// `moe_fc1_relu2_<b>bit`.
    Fc1,
    /// `moe_down_<b>bit`.
    Down,
    /// `moe_down_sum_<b>bit`: down's buffers with `out [T, Din]` in `T` for the partials.
    DownSum,
}

impl Kind {
    /// Whether the kernel reads `act_g` and the scores (down, with or without the sum).
    fn is_down(self) -> bool {
        matches!(self, Kind::Down | Kind::DownSum)
    }
}

/// One expert case: `t` tokens routed to `ids.len() / t` experts each, of `e` stacked experts
/// `[rows, cols]` per projection.
struct Shape {
    gs: u32,
    scale_dtype: DType,
    act: u32,
    rows_per_block: u32,
    t: usize,
    e: usize,
    din: usize,
    dff: usize,
    ids: &'static [u32],
}

/// `e` experts of `[rows, cols]` normal weights quantized at `format`, as the three buffers'
/// fills (`w_q`, `scales`, `biases`) and their shapes. Shared with `gather_qmm`'s cases.
pub(super) fn experts(
    seed: &str,
    format: AffineFormat,
    e: usize,
    rows: usize,
    cols: usize,
) -> ([Fill; 3], [Vec<usize>; 3]) {
    let w = normal_weights(seed, e * rows * cols);
    let q = quantize(&w, e * rows, cols, format).expect("a supported format and shape");
    let values = |words: &[u32]| Fill::Values(words.iter().map(|&w| w as f64).collect());
    let scales = pack_le_words(q.scales_bytes());
    let biases = pack_le_words(q.biases_bytes());
    let words = cols * format.bits() as usize / 32;
    (
        [values(q.w_q()), values(&scales), values(&biases)],
        [vec![e, rows, words], vec![scales.len()], vec![biases.len()]],
    )
}

fn case(kind: Kind, bits: u32, dtype: DType, s: &Shape) -> Case {
    let format = AffineFormat::new(bits, s.gs, s.scale_dtype).expect("a supported format");
    let k = s.ids.len() / s.t;
    let act = match (kind, s.act) {
        (Kind::GateUp, ACT_GEGLU) => " geglu",
        (Kind::GateUp, _) => " swiglu",
        _ => "",
    };
    let label = format!(
        "g{} {} scales T{} K{k} E{} {}x{} rpb{}{act}",
        s.gs,
        s.scale_dtype.name(),
        s.t,
        s.e,
        s.din,
        s.dff,
        s.rows_per_block
    );
    let ids = Fill::Values(s.ids.iter().map(|&i| i as f64).collect());
    let mut shapes = Vec::new();
    let mut fill = Vec::new();
    let projections = match kind {
        Kind::GateUp => 2,
        Kind::Fc1 | Kind::Down | Kind::DownSum => 1,
    };
    if !kind.is_down() {
        shapes.push(vec![s.t, s.din]);
        fill.push(Fill::normal(0.0, 1.0));
    }
    shapes.push(vec![s.t, k]);
    fill.push(ids);
    let (rows, cols) = if kind.is_down() {
        (s.din, s.dff)
    } else {
        (s.dff, s.din)
    };
    for i in 0..projections {
        let (f, sh) = experts(&format!("{bits} {i} {label}"), format, s.e, rows, cols);
        fill.extend(f);
        shapes.extend(sh);
    }
    if kind.is_down() {
        let out = if kind == Kind::Down {
            vec![s.t, k, s.din]
        } else {
            vec![s.t, s.din]
        };
        shapes.extend([vec![s.t, k, s.dff], vec![s.t, k], out]);
        fill.extend([
            Fill::normal(0.0, 1.0),
            Fill::Uniform { lo: 0.0, hi: 1.0 },
            Fill::Output,
        ]);
    } else {
        shapes.push(vec![s.t, k, s.dff]);
        fill.push(Fill::Output);
    }
    // Only the sum is rounded to T; every other output is f32 whatever T is (x widens
    // exactly): the linear-layer budget of the output's dtype.
    let out_dtype = if kind == Kind::DownSum {
        dtype
    } else {
        DType::F32
    };
    let mut checks = vec![Check::None; fill.len() - 1];
    checks.push(linear_tolerance(out_dtype));
    Case {
        label,
        shapes,
        params: vec![
            ("group_size", s.gs.to_string()),
            ("scale_dtype", scale_code(s.scale_dtype).to_string()),
            (
                "act",
                if kind == Kind::GateUp { s.act } else { 0 }.to_string(),
            ),
            ("rows_per_block", s.rows_per_block.to_string()),
        ],
        fill,
        checks,
        on_sim: true,
    }
}

/// The parity cases of an expert kernel at `bits`: every group size and scale dtype, one and
/// two tokens, K 1 to 4, repeated ids and an id past E (a zero slot), rows per block 1 to 8
/// over row counts that leave a ragged last block (up to 32 in tests/tests/moe.rs: a block of
/// 1024 sim threads is slow), and both activations of the gate/up pair.
/// Din and Dff are whole groups (MLX quantizes whole groups), so the same shapes serve down.
pub fn cases(kind: Kind, bits: u32, dtype: DType) -> Vec<Case> {
    let shapes = [
        Shape {
            gs: 64,
            scale_dtype: DType::F16,
            act: ACT_SWIGLU,
            rows_per_block: 7,
            t: 1,
            e: 4,
            din: 128,
            dff: 64,
            ids: &[3, 1],
        },
        Shape {
            gs: 32,
            scale_dtype: DType::Bf16,
            act: ACT_GEGLU,
            rows_per_block: 3,
            t: 1,
            e: 5,
            din: 96,
            dff: 64,
            ids: &[0, 4, 4, 2],
        },
        Shape {
            gs: 128,
            scale_dtype: DType::F32,
            act: ACT_SWIGLU,
            rows_per_block: 6,
            t: 1,
            e: 3,
            din: 128,
            dff: 128,
            ids: &[2, 0],
        },
        Shape {
            gs: 16,
            scale_dtype: DType::F16,
            act: ACT_GEGLU,
            rows_per_block: 1,
            t: 1,
            e: 3,
            din: 64,
            dff: 64,
            ids: &[1, 7, 0],
        },
        Shape {
            gs: 32,
            scale_dtype: DType::Bf16,
            act: ACT_SWIGLU,
            rows_per_block: 5,
            t: 2,
            e: 2,
            din: 160,
            dff: 32,
            ids: &[1, 0],
        },
    ];
    shapes.iter().map(|s| case(kind, bits, dtype, s)).collect()
}

/// A bench case: one token routed to `k` distinct experts of a model with `of` at
/// `[din, dff]`, random codes (any code is as fast as another), group size 64, scales in
/// `dtype`. Only the `k` routed experts are stacked: `kiln bench` counts every buffer as
/// moved, so its bytes are then exactly the selected experts' weights, scales and biases
/// (plus the small activations).
#[allow(clippy::too_many_arguments)]
fn bench_case(
    kind: Kind,
    bits: u32,
    dtype: DType,
    name: &str,
    of: usize,
    k: usize,
    din: usize,
    dff: usize,
) -> Case {
    let e = k;
    let format = AffineFormat::new(bits, 64, dtype).expect("a supported format");
    let (rows, cols) = if kind.is_down() {
        (din, dff)
    } else {
        (dff, din)
    };
    let words = cols * bits as usize / 32;
    let scale_words = kiln_math::kernels::qlinear::scale_words(
        scale_code(format.scale_dtype()),
        e * rows * cols / 64,
    );
    let random = || Fill::Uniform {
        lo: 0.0,
        hi: 4294967296.0,
    };
    let small = || Fill::Packed {
        dtype,
        of: Box::new(Fill::Uniform {
            lo: -0.05,
            hi: 0.05,
        }),
    };
    // Slot i reads expert k − 1 − i: every expert once, not in memory order.
    let ids = Fill::Values((0..k).map(|i| (k - 1 - i) as f64).collect());
    let projection = |shapes: &mut Vec<Vec<usize>>, fill: &mut Vec<Fill>| {
        shapes.extend([vec![e, rows, words], vec![scale_words], vec![scale_words]]);
        fill.extend([random(), small(), small()]);
    };
    let mut shapes = Vec::new();
    let mut fill = Vec::new();
    if !kind.is_down() {
        shapes.push(vec![1, din]);
        fill.push(Fill::normal(0.0, 1.0));
    }
    shapes.push(vec![1, k]);
    fill.push(ids);
    projection(&mut shapes, &mut fill);
    if kind == Kind::GateUp {
        projection(&mut shapes, &mut fill);
    }
    if kind.is_down() {
        let out = if kind == Kind::Down {
            vec![1, k, din]
        } else {
            vec![1, din]
        };
        shapes.extend([vec![1, k, dff], vec![1, k], out]);
        fill.extend([
            Fill::normal(0.0, 1.0),
            Fill::Uniform { lo: 0.0, hi: 1.0 },
            Fill::Output,
        ]);
    } else {
        shapes.push(vec![1, k, dff]);
        fill.push(Fill::Output);
    }
    Case {
        label: format!("{name} K{k} of E{of} {din}x{dff} g64"),
        checks: vec![Check::None; shapes.len()],
        shapes,
        params: vec![
            ("group_size", "64".into()),
            ("scale_dtype", scale_code(dtype).to_string()),
        ],
        fill,
        on_sim: true,
    }
}

/// One token at model shapes: Qwen3-30B-A3B (E 128, K 8, 2048/768) and Mixtral-8x7B (E 8,
/// K 2, 4096/14336) for the gate/up pair and down, Nemotron-3-Nano-30B-A3B's relu² experts
/// (E 128, K 6, 2688/1856) for fc1 and down; the bytes are the K selected experts'.
pub fn bench_cases(kind: Kind, bits: u32, dtype: DType) -> Vec<Case> {
    let mut shapes = vec![];
    if kind != Kind::Fc1 {
        shapes.push(("qwen3-30b-a3b", 128, 8, 2048, 768));
        shapes.push(("mixtral-8x7b", 8, 2, 4096, 14336));
    }
    if kind != Kind::GateUp {
        shapes.push(("nemotron-3-nano", 128, 6, 2688, 1856));
    }
    shapes
        .into_iter()
        .map(|(name, e, k, din, dff)| bench_case(kind, bits, dtype, name, e, k, din, dff))
        .collect()
}
