//! The parity cases of the `qlinear_<b>bit` kernels and the shapes `kiln bench` times them at.
//!
//! The weights are real MLX-quantized matrices: normal weights through kiln's affine quantizer
//! (spec §13) at the case's format, drawn from a seed fixed per case (the harness's seed draws
//! `x` and the bias), so every code, scale and bias is one a checkpoint could hold.

use super::linear_tolerance;
use crate::case::{Case, Check, Fill};
use crate::quant::{pack_le_words, quantize, AffineFormat, AffineTensor};
use kiln_math::kernels::qlinear::{scale_code, scale_words};
use kiln_math::DType;

/// The buffers' shapes of an `[m, k] · [n, k]^T` case at `format`.
fn shapes(
    format: AffineFormat,
    m: usize,
    k: usize,
    n: usize,
    has_bias: bool,
    act: bool,
) -> Vec<Vec<usize>> {
    let words = k * format.bits() as usize / 32;
    let scale_words = scale_words(
        scale_code(format.scale_dtype()),
        n * k / format.group_size() as usize,
    );
    vec![
        vec![m, k],
        vec![n, words],
        vec![scale_words],
        vec![scale_words],
        if has_bias { vec![n] } else { vec![1] },
        vec![m, if act { n / 2 } else { n }],
    ]
}

fn params(format: AffineFormat, has_bias: bool, act: bool) -> Vec<(&'static str, String)> {
    vec![
        ("act", if act { "1" } else { "0" }.into()),
        ("has_bias", if has_bias { "1" } else { "0" }.into()),
        ("group_size", format.group_size().to_string()),
        ("scale_dtype", scale_code(format.scale_dtype()).to_string()),
    ]
}

fn label(format: AffineFormat, m: usize, k: usize, n: usize, has_bias: bool, act: bool) -> String {
    format!(
        "g{} {} scales {m}x{k}->{n}{}{}",
        format.group_size(),
        format.scale_dtype().name(),
        if has_bias { " +bias" } else { "" },
        if act { " silu*mul" } else { "" }
    )
}

/// Only `y` is checked, at the linear-layer budget of its dtype.
fn checks(dtype: DType) -> Vec<Check> {
    let mut c = vec![Check::None; 5];
    c.push(linear_tolerance(dtype));
    c
}

/// `len` normal draws from a seed fixed by `label` (splitmix64 and Box–Muller: the weights are
/// part of the case, like its shapes; the harness's seed draws `x` and the bias).
pub(super) fn normal_weights(label: &str, len: usize) -> Vec<f32> {
    let mut state = label.bytes().fold(0x9e37_79b9_7f4a_7c15u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..len)
        .map(|_| {
            let (u, v) = (next().max(f64::MIN_POSITIVE), next());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        })
        .collect()
}

/// A parity case whose weights are `normal(0, 1)` quantized at `format`.
fn case(
    format: AffineFormat,
    m: usize,
    k: usize,
    n: usize,
    has_bias: bool,
    act: bool,
    checks: Vec<Check>,
) -> Case {
    let label = label(format, m, k, n, has_bias, act);
    let w = normal_weights(&format!("{} {label}", format.bits()), n * k);
    let q: AffineTensor = quantize(&w, n, k, format).expect("a supported format and shape");
    let values = |words: &[u32]| Fill::Values(words.iter().map(|&w| w as f64).collect());
    Case {
        label,
        shapes: shapes(format, m, k, n, has_bias, act),
        params: params(format, has_bias, act),
        fill: vec![
            Fill::normal(0.0, 1.0),
            values(q.w_q()),
            values(&pack_le_words(q.scales_bytes())),
            values(&pack_le_words(q.biases_bytes())),
            Fill::normal(0.0, 1.0),
            Fill::Output,
        ],
        checks,
        on_sim: true,
    }
}

/// The parity cases at `bits` and activation `dtype`: every group size × scale dtype, each at
/// one of a cycle of shapes — M over 1, 2, 3, 5 and 8 (the 1-, 2-, 4- and 8-row instances,
/// padded ones included), K one to twelve units of 32 (one or two in flight per lane, ragged
/// over the lanes), N 1, odd, and past one block's rows — with and without bias. Every output
/// holds eight elements or more: `nrms` normalizes by the output's RMS, and the RMS of two dot
/// products can be small enough to blow a rounding error past the f32 budget.
pub fn cases(bits: u32, dtype: DType) -> Vec<Case> {
    let shapes: [(usize, usize, usize, bool); 6] = [
        (1, 128, 13, false),
        (3, 256, 5, true),
        (2, 416, 9, false),
        (8, 128, 1, true),
        (5, 256, 16, false),
        (1, 32 * 12, 17, true),
    ];
    let mut cases = Vec::new();
    let mut i = 0;
    for gs in [16, 32, 64, 128] {
        for scale_dtype in [DType::F32, DType::F16, DType::Bf16] {
            let format = AffineFormat::new(bits, gs, scale_dtype).expect("a supported format");
            let (m, mut k, n, b) = shapes[i % shapes.len()];
            k = k.next_multiple_of(gs as usize);
            cases.push(case(format, m, k, n, b, false, checks(dtype)));
            i += 1;
        }
    }
    // The gate+up pair with SwiGLU: rows interleaved, one output per pair. 24 outputs or more:
    // where `g` is negative the f32 error of `silu(g)·u` is the absolute error of `g`, so a few
    // small outputs alone can put `nrms` past the f32 budget.
    for (gs, scale_dtype, m, k, n, b) in [
        (64, DType::F16, 1, 256, 48, false),
        (32, DType::Bf16, 5, 128, 10, true),
    ] {
        let format = AffineFormat::new(bits, gs, scale_dtype).expect("a supported format");
        cases.push(case(format, m, k, n, b, true, checks(dtype)));
    }
    cases
}

/// A parity case of `[m, k] · [n, k]^T` at `bits`, group size `gs` and scales in `scale_dtype`
/// (no SwiGLU), checked at the linear-layer budget of `dtype`.
pub fn case_at(
    bits: u32,
    gs: u32,
    scale_dtype: DType,
    [m, k, n]: [usize; 3],
    has_bias: bool,
    dtype: DType,
) -> Case {
    let format = AffineFormat::new(bits, gs, scale_dtype).expect("a supported format");
    case(format, m, k, n, has_bias, false, checks(dtype))
}

/// A bench case: random codes (any code is as fast as another), every scale 0.02 and bias
/// −0.15 (a constant word: `Uniform` over less than one integer draws it exactly).
fn bench_case(format: AffineFormat, m: usize, k: usize, n: usize) -> Case {
    let word = |v: f32| {
        let mut bytes = Vec::new();
        for _ in 0..2 {
            crate::quant::encode_scale(format.scale_dtype(), v, &mut bytes);
        }
        pack_le_words(&bytes)[0] as f64
    };
    let constant = |w: f64| Fill::Uniform { lo: w, hi: w + 0.5 };
    Case {
        label: format!("g{} {}x{k}->{n}", format.group_size(), m),
        shapes: shapes(format, m, k, n, false, false),
        params: params(format, false, false),
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::Uniform {
                lo: 0.0,
                hi: 4294967296.0,
            },
            constant(word(0.02)),
            constant(word(-0.15)),
            Fill::normal(0.0, 1.0),
            Fill::Output,
        ],
        checks: vec![Check::None; 6],
        on_sim: true,
    }
}

/// Decode shapes, scales in the activation dtype (MLX's convention): at 4 bits, group sizes 64
/// and 32 at batch 1, 2, 4 and 8 over Llama-3.1-8B's projections (q/o, k/v, the fused q/k/v
/// and gate+up, up, down, the LM head) and Qwen3-30B-A3B's attention (q, k/v, o, fused
/// q/k/v); at other widths, group size 64 over Llama's fused q/k/v and down at batch 1.
pub fn bench_cases(bits: u32, dtype: DType) -> Vec<Case> {
    let llama = [
        (4096, 4096),
        (4096, 1024),
        (4096, 6144),
        (4096, 14336),
        (4096, 28672),
        (14336, 4096),
        (4096, 128256),
    ];
    let qwen3_moe_attention = [(2048, 4096), (2048, 512), (4096, 2048), (2048, 5120)];
    let mut cases = Vec::new();
    if bits == 4 {
        for gs in [64, 32] {
            let format = AffineFormat::new(bits, gs, dtype).expect("a supported format");
            for m in [1, 2, 4, 8] {
                for &(k, n) in llama.iter().chain(&qwen3_moe_attention) {
                    cases.push(bench_case(format, m, k, n));
                }
            }
        }
    } else {
        let format = AffineFormat::new(bits, 64, dtype).expect("a supported format");
        for (k, n) in [(4096, 6144), (14336, 4096)] {
            cases.push(bench_case(format, 1, k, n));
        }
    }
    cases
}
