//! The parity cases of `embedding_affine` and the shapes `kiln bench` times it at.
//!
//! A case's scales and biases are a checkpoint's: weights fixed per case through kiln's MLX
//! quantizer (spec §13) at the case's format; its codes and ids are drawn with the harness's
//! seed, so every run reads other codes under the same scales.

use super::embedding::{drawn_ids, fixed_ids};
use super::linear_tolerance;
use crate::case::{Case, Check, Fill};
use crate::quant::{pack_le_words, quantize, AffineFormat};
use kiln_math::kernels::embedding_affine::BITS;
use kiln_math::kernels::qlinear::{scale_code, scale_words, GROUP_SIZES};
use kiln_math::DType;

/// The scale dtypes, in `scale_dtype` code order.
const SCALE_DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::Bf16];

/// Exact where the scales are 16-bit: `scale·q` is then exact in f32, so the kernel's one
/// rounding (the add) and T's are the reference's f64 → f32 → T. f32 scales: without an fma
/// (the host ports, WGSL) the product rounds once more, by at most half an f32 ulp of
/// `scale·q`, which is within 2e-6 of the unit-scale rows in f32 and may move a 16-bit `T`
/// by one ulp near a rounding midpoint (the one-rounding budgets of spec §0.2).
fn out_check(dtype: DType, scale_dtype: DType) -> Check {
    match (scale_dtype, dtype) {
        (DType::F32, DType::F32) => Check::Tolerance {
            nrms: 1e-6,
            nmax: 4e-6,
        },
        (DType::F32, _) => linear_tolerance(dtype),
        _ => Check::Exact,
    }
}

/// `len` weights uniform on [-2, 2) from a multiplicative hash of the index salted by `label`
/// (the table is part of the case, like its shapes).
fn weights(label: &str, len: usize) -> Vec<f32> {
    let salt = label.bytes().fold(0u32, |h, b| h.rotate_left(5) ^ b as u32);
    (0..len as u32)
        .map(|i| ((i ^ salt).wrapping_mul(0x9e37_79b9) >> 16) as f32 / 16384.0 - 2.0)
        .collect()
}

/// `b` rows of a `[v, d]` table at `format`, the ids drawn as `ids` says.
fn case(dtype: DType, format: AffineFormat, b: usize, v: usize, d: usize, ids: Fill) -> Case {
    let label = format!(
        "{}b g{} {} scales, {b} of {v}x{d}{}",
        format.bits(),
        format.group_size(),
        format.scale_dtype().name(),
        if let Fill::Values(_) = ids {
            " fixed ids"
        } else {
            ""
        }
    );
    let q = quantize(&weights(&label, v * d), v, d, format).expect("a supported format and shape");
    let values = |words: &[u32]| Fill::Values(words.iter().map(|&w| w as f64).collect());
    let code = scale_code(format.scale_dtype());
    let packed = scale_words(code, v * d / format.group_size() as usize);
    // Only `out` is checked.
    let mut checks = vec![Check::None; 4];
    checks.push(out_check(dtype, format.scale_dtype()));
    Case {
        shapes: vec![
            vec![b],
            vec![v, d * format.bits() as usize / 32],
            vec![packed],
            vec![packed],
            vec![b, d],
        ],
        params: vec![
            ("bits", format.bits().to_string()),
            ("group_size", format.group_size().to_string()),
            ("scale_dtype", code.to_string()),
        ],
        fill: vec![
            ids,
            // Any word is a valid run of codes.
            Fill::Uniform {
                lo: 0.0,
                hi: 4294967296.0,
            },
            values(&pack_le_words(q.scales_bytes())),
            values(&pack_le_words(q.biases_bytes())),
            Fill::Output,
        ],
        checks,
        label,
        on_sim: true,
    }
}

/// The parity cases at `dtype`: every bit width × group size once, the scale dtype rotating
/// with the activation dtype (so the three activation dtypes together cover every width ×
/// group × scale dtype), B 1 to 5 over tables of 1 to 7 rows (B > V repeats an id), D one to
/// three groups (and whole words); fixed ids with repeats and past the table (zero rows).
pub fn cases(dtype: DType) -> Vec<Case> {
    let t = SCALE_DTYPES.iter().position(|&d| d == dtype).unwrap_or(0);
    let rows = [(1, 1), (5, 3), (2, 7), (4, 2), (3, 5)];
    let mut cases = Vec::new();
    for (i, &bits) in BITS.iter().enumerate() {
        for (j, &gs) in GROUP_SIZES.iter().enumerate() {
            let scale = SCALE_DTYPES[(i + j + t) % 3];
            let format = AffineFormat::new(bits, gs, scale).expect("a supported format");
            let (b, v) = rows[(i * GROUP_SIZES.len() + j) % rows.len()];
            let d = (gs as usize).max(32) * (1 + (i + j) % 3);
            cases.push(case(dtype, format, b, v, d, drawn_ids(v)));
        }
    }
    for (bits, gs, scale, ids) in [
        (3, 32, DType::F16, &[4u32, 0, 4, 5, u32::MAX][..]),
        (8, 16, DType::F32, &[1, 1, 0, 1][..]),
    ] {
        let format = AffineFormat::new(bits, gs, scale).expect("a supported format");
        cases.push(case(dtype, format, ids.len(), 5, 64, fixed_ids(ids)));
    }
    cases
}

/// Token embeddings at decode (1 and 8 ids) and prefill (512) over SmolLM2-135M's table
/// (49152 × 576) at 4 bits, group 64 (MLX's default), scales in the activation dtype. `kiln
/// bench` counts the whole table as moved, so its percentage overstates a gather; compare the
/// times.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let format = AffineFormat::new(4, 64, dtype).expect("a supported format");
    [1, 8, 512]
        .iter()
        .map(|&b| {
            let mut c = case(dtype, format, b, 49152, 576, drawn_ids(49152));
            c.checks = vec![Check::None; 5];
            c
        })
        .collect()
}
