//! The `embedding` and `embedding_affine` kernels through `ops::embedding` /
//! `ops::embedding_affine` and their generated launchers: bad ids, shapes and formats are typed
//! errors found before any launch (the output is left untouched); ids already on the device
//! past the table give zero rows; one quantized upload serves the embedding and a tied LM head
//! (`ops::qlinear`); and the real model's `token_embd.weight`, repacked from its GGUF blocks,
//! gathers to ggml's own dequantization element for element.

use kiln::math::half::{bf16, f16};
use kiln::math::kernels::embedding::{Embedding, EmbeddingParams};
use kiln::math::kernels::embedding_affine::{EmbeddingAffine, EmbeddingAffineParams};
use kiln::math::{Bf16, Element, KernelDef, ShapeError, F16};
use kiln::ops::{self, QuantizedWeight};
use kiln::quant::{dequantize, quantize, repack, AffineFormat, GgufFile, Repacked};
use kiln::rng::Rng;
use kiln::{DType, Device, PortError, Tensor};
use kiln_tests::ggml::{assert_same, dequantize as ggml_dequantize, test_model};

/// Sentinel the refused launches must leave in `out`.
const UNTOUCHED: f32 = 7.0;

fn filled(dev: &Device, dtype: DType, shape: &[usize], v: f32) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f32(dev, dtype, shape, &vec![v; n]).unwrap()
}

fn words(dev: &Device, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_slice(dev, shape, &vec![0x1234_5678u32; n]).unwrap()
}

fn assert_untouched(what: &str, out: &Tensor) {
    assert!(
        out.to_f32_vec().unwrap().iter().all(|&v| v == UNTOUCHED),
        "{what}: a refused call wrote out"
    );
}

/// A `[v, d]` table of unit normals quantized at `format`, from `seed`.
fn random_table(seed: u64, v: usize, d: usize, format: AffineFormat) -> kiln::quant::AffineTensor {
    let mut rng = Rng::new(seed);
    let w: Vec<f32> = (0..v * d).map(|_| rng.normal() as f32).collect();
    quantize(&w, v, d, format).unwrap()
}

#[test]
fn ids_past_the_vocabulary_are_refused_by_name_before_any_launch() {
    let dev = Device::cpu();
    let table = filled(&dev, DType::F32, &[5, 8], 1.0);
    let mut out = filled(&dev, DType::F32, &[3, 8], UNTOUCHED);
    let e = ops::embedding(&dev, &table, &[4, 5, 0], &mut out).unwrap_err();
    assert_eq!(
        e,
        PortError::IdOutOfRange {
            kernel: "embedding",
            position: 1,
            id: 5,
            vocab: 5
        }
    );
    assert!(
        e.is_invalid_input() && e.to_string().contains("id 5") && e.to_string().contains("5 rows")
    );
    assert_untouched("dense id 5 of 5", &out);

    let format = AffineFormat::new(4, 32, DType::F16).unwrap();
    let w = QuantizedWeight::upload(&dev, &random_table(1, 6, 64, format)).unwrap();
    let mut out = filled(&dev, DType::F16, &[2, 64], UNTOUCHED);
    let e = ops::embedding_affine(&dev, &w, &[0, u32::MAX], &mut out).unwrap_err();
    assert_eq!(
        e,
        PortError::IdOutOfRange {
            kernel: "embedding_affine",
            position: 1,
            id: u32::MAX,
            vocab: 6
        }
    );
    assert_untouched("affine id u32::MAX of 6", &out);
}

#[test]
fn dense_shapes_and_dtypes_are_typed_errors() {
    let bind = |shapes: [&[usize]; 3]| Embedding::bind(&mut EmbeddingParams::default(), &shapes);
    assert_eq!(bind([&[2], &[5, 7], &[2, 7]]), Ok(()));
    assert_eq!(
        bind([&[0], &[5, 7], &[0, 7]]),
        Err(ShapeError::Empty {
            what: "B (the ids)"
        })
    );
    assert!(matches!(
        bind([&[2], &[0, 7], &[2, 7]]),
        Err(ShapeError::Empty { .. })
    ));
    assert!(matches!(
        bind([&[2], &[5, 0], &[2, 0]]),
        Err(ShapeError::Empty { .. })
    ));
    assert!(matches!(
        bind([&[2], &[5, 7], &[2, 8]]),
        Err(ShapeError::Mismatch {
            got: 8,
            want: 7,
            ..
        })
    ));
    assert!(matches!(
        bind([&[2], &[5, 7], &[3, 7]]),
        Err(ShapeError::Mismatch {
            got: 3,
            want: 2,
            ..
        })
    ));
    assert!(matches!(
        bind([&[2], &[35], &[2, 7]]),
        Err(ShapeError::Invalid(_))
    ));

    let dev = Device::cpu();
    let table = filled(&dev, DType::F32, &[5, 7], 1.0);
    for (what, ids, out_dtype, shape) in [
        (
            "out [2, 8] for D 7",
            &[0u32, 1][..],
            DType::F32,
            &[2usize, 8][..],
        ),
        ("out [3, 7] for 2 ids", &[0, 1], DType::F32, &[3, 7]),
        ("no ids", &[], DType::F32, &[0, 7]),
        ("an f16 out for an f32 table", &[0, 1], DType::F16, &[2, 7]),
    ] {
        let mut out = filled(&dev, out_dtype, shape, UNTOUCHED);
        match ops::embedding(&dev, &table, ids, &mut out) {
            Err(e) if e.is_invalid_input() => eprintln!("{what}: refused: {e}"),
            other => panic!("{what}: expected an invalid-input refusal, got {other:?}"),
        }
        assert_untouched(what, &out);
    }
    let flat = filled(&dev, DType::F32, &[35], 1.0);
    let mut out = filled(&dev, DType::F32, &[1, 7], UNTOUCHED);
    assert!(matches!(
        ops::embedding(&dev, &flat, &[0], &mut out),
        Err(PortError::InvalidShape { .. })
    ));
    assert_untouched("a one-dimensional table", &out);
}

/// The affine kernel's binding of `shapes` under `f` applied to the default params.
fn bind_affine(
    f: impl Fn(&mut EmbeddingAffineParams),
    shapes: [&[usize]; 5],
) -> Result<(), ShapeError> {
    let mut p = EmbeddingAffineParams::default();
    f(&mut p);
    EmbeddingAffine::bind(&mut p, &shapes)
}

#[test]
fn affine_shapes_and_formats_are_typed_errors_before_any_launch() {
    // The good shape at the defaults (4 bits, g64, f16): 3 rows of D 128 → 16 words a row,
    // 3 × 2 groups = 6 values = 3 words.
    let keep = |_: &mut EmbeddingAffineParams| {};
    let good: [&[usize]; 5] = [&[2], &[3, 16], &[3], &[3], &[2, 128]];
    assert_eq!(bind_affine(keep, good), Ok(()));
    let mismatch = |r| matches!(r, Err(ShapeError::Mismatch { .. }));
    let invalid = |r| matches!(r, Err(ShapeError::Invalid(_)));
    assert!(mismatch(bind_affine(
        keep,
        [&[2], &[3, 15], &[3], &[3], &[2, 128]]
    )));
    assert!(mismatch(bind_affine(
        keep,
        [&[2], &[3, 16], &[4], &[3], &[2, 128]]
    )));
    assert!(mismatch(bind_affine(
        keep,
        [&[2], &[3, 16], &[3], &[2], &[2, 128]]
    )));
    assert!(mismatch(bind_affine(
        keep,
        [&[2], &[3, 16], &[3], &[3], &[1, 128]]
    )));
    // f32 scales take a word per value.
    let f32_scales = |p: &mut EmbeddingAffineParams| p.scale_dtype = 0;
    assert!(mismatch(bind_affine(f32_scales, good)));
    assert_eq!(
        bind_affine(f32_scales, [&[2], &[3, 16], &[6], &[6], &[2, 128]]),
        Ok(())
    );
    // D 48 is no whole number of words at 3 or 5 bits; D 96 under group 64 splits a group.
    assert!(invalid(bind_affine(
        |p| p.group_size = 16,
        [&[2], &[3, 6], &[3], &[3], &[2, 48]]
    )));
    assert!(invalid(bind_affine(
        keep,
        [&[2], &[3, 12], &[3], &[3], &[2, 96]]
    )));
    assert!(invalid(bind_affine(|p| p.bits = 7, good)));
    assert!(invalid(bind_affine(|p| p.bits = 1, good)));
    assert!(invalid(bind_affine(|p| p.group_size = 96, good)));
    assert!(matches!(
        bind_affine(|p| p.scale_dtype = 3, good),
        Err(ShapeError::Range { .. })
    ));
    for zero in [
        [&[0][..], &[3, 16], &[3], &[3], &[0, 128]],
        [&[2], &[0, 16], &[0], &[0], &[2, 128]],
        [&[2], &[3, 0], &[0], &[0], &[2, 0]],
    ] {
        assert!(matches!(
            bind_affine(keep, zero),
            Err(ShapeError::Empty { .. })
        ));
    }

    // Through the launcher the same refusals are `PortError::Shape`, and nothing is written.
    let dev = Device::cpu();
    let ids = Tensor::from_slice(&dev, &[2], &[0u32, 2]).unwrap();
    let p = EmbeddingAffineParams::default();
    let (w_q, s, b) = (words(&dev, &[3, 15]), words(&dev, &[3]), words(&dev, &[3]));
    let mut out = filled(&dev, DType::F32, &[2, 128], UNTOUCHED);
    let e = ops::kernel::embedding_affine(&dev, &p, &ids, &w_q, &s, &b, &mut out).unwrap_err();
    assert!(matches!(e, PortError::Shape { .. }), "{e}");
    assert_untouched("packed width 15 for D 128", &out);
    let (w_q, s) = (words(&dev, &[3, 16]), words(&dev, &[2]));
    let e = ops::kernel::embedding_affine(&dev, &p, &ids, &w_q, &s, &b, &mut out).unwrap_err();
    assert!(matches!(e, PortError::Shape { .. }), "{e}");
    assert_untouched("scales 2 words for 6 values", &out);
}

#[test]
fn ids_on_the_device_past_the_table_give_zero_rows() {
    let format = AffineFormat::new(5, 32, DType::Bf16).unwrap();
    let q = random_table(
        kiln_tests::seed("ids_on_the_device_past_the_table"),
        4,
        64,
        format,
    );
    let want = dequantize(&q);
    let ids_host = [3u32, 4, u32::MAX, 0];
    for dev in kiln_tests::test_devices() {
        let what = format!("{} wave {}", dev.backend(), dev.wave());
        let ids = Tensor::from_slice(&dev, &[4], &ids_host).unwrap();
        let table = Tensor::from_slice(&dev, &[4, 64], &want).unwrap();
        let mut out = filled(&dev, DType::F32, &[4, 64], UNTOUCHED);
        let ran = ops::kernel::embedding(&dev, &EmbeddingParams::default(), &ids, &table, &mut out)
            .unwrap();
        assert!(!ran.is_fallback(), "{what}: {ran:?}");
        let dense = out.to_f32_vec().unwrap();
        let w = QuantizedWeight::upload(&dev, &q).unwrap();
        let (w_q, s, b) = w.buffers();
        let p = EmbeddingAffineParams {
            bits: 5,
            group_size: 32,
            scale_dtype: 2,
            ..Default::default()
        };
        let mut out = filled(&dev, DType::F32, &[4, 64], UNTOUCHED);
        let ran = ops::kernel::embedding_affine(&dev, &p, &ids, w_q, s, b, &mut out).unwrap();
        assert!(!ran.is_fallback(), "{what}: {ran:?}");
        let affine = out.to_f32_vec().unwrap();
        for got in [&dense, &affine] {
            assert_eq!(&got[..64], &want[3 * 64..], "{what}: row 3");
            assert_eq!(&got[192..], &want[..64], "{what}: row 0");
            assert!(
                got[64..192].iter().all(|&v| v.to_bits() == 0),
                "{what}: zero rows"
            );
        }
    }
}

#[test]
fn one_quantized_upload_serves_the_embedding_and_a_tied_lm_head() {
    let (v, d) = (11, 96);
    let format = AffineFormat::new(4, 32, DType::F16).unwrap();
    let q = random_table(
        kiln_tests::seed("one_quantized_upload_serves"),
        v,
        d,
        format,
    );
    let table = dequantize(&q);
    let ids = [7u32, 0, 7, 10, 3];
    for dev in kiln_tests::test_devices() {
        let what = format!("{} wave {}", dev.backend(), dev.wave());
        let w = QuantizedWeight::upload(&dev, &q).unwrap();
        let mut x = Tensor::zeros(&dev, DType::F32, &[ids.len(), d]).unwrap();
        let ran = ops::embedding_affine(&dev, &w, &ids, &mut x).unwrap();
        assert!(!ran.is_fallback(), "{what}: {ran:?}");
        let rows = x.to_f32_vec().unwrap();
        // f16 scales: every gathered weight is kiln's own dequantization, bit for bit.
        for (r, &id) in ids.iter().enumerate() {
            let id = id as usize;
            assert_eq!(
                &rows[r * d..(r + 1) * d],
                &table[id * d..(id + 1) * d],
                "{what}"
            );
        }
        // The tied head: logits of the gathered rows against every row of the same weight
        // (not on a software Vulkan, whose LLVM spends a minute on a qlinear module; the
        // parity run covers qlinear there).
        if dev.gpu().is_some_and(|g| g.is_software()) {
            eprintln!("skipped the tied head on {what}: a software Vulkan");
            continue;
        }
        let mut logits = Tensor::zeros(&dev, DType::F32, &[ids.len(), v]).unwrap();
        assert!(!ops::qlinear(&dev, &x, &w, None, &mut logits)
            .unwrap()
            .is_fallback());
        let got = logits.to_f32_vec().unwrap();
        for (r, &id) in ids.iter().enumerate() {
            for n in 0..v {
                let dot: f64 = (0..d)
                    .map(|k| table[id as usize * d + k] as f64 * table[n * d + k] as f64)
                    .sum();
                let err = (got[r * v + n] as f64 - dot).abs();
                assert!(
                    err < 1e-4 * (1.0 + dot.abs()),
                    "{what}: logit {r},{n}: {} vs {dot}",
                    got[r * v + n]
                );
            }
        }
    }
}

/// The model's `token_embd.weight` rows at `ids` through kiln on the cpu, in `T`, against ggml's
/// dequantization of the same rows' blocks rounded to `T`.
fn gathered_rows_match<T: Element>(
    dev: &Device,
    repacked: &Repacked,
    reference: &[Vec<f32>],
    ids: &[u32],
    d: usize,
) {
    let dtype = T::DTYPE;
    let mut out = Tensor::zeros(dev, dtype, &[ids.len(), d]).unwrap();
    let ran = match repacked {
        Repacked::Affine(a) => {
            let w = QuantizedWeight::upload(dev, a).unwrap();
            ops::embedding_affine(dev, &w, ids, &mut out).unwrap()
        }
        Repacked::Dense {
            dtype: table_dtype,
            bytes,
        } => {
            assert_eq!(
                *table_dtype, dtype,
                "a dense table is gathered in its own dtype"
            );
            let rows = bytes.len() / (d * dtype.size());
            let table = Tensor::from_bytes(dev, dtype, &[rows, d], bytes).unwrap();
            ops::embedding(dev, &table, ids, &mut out).unwrap()
        }
    };
    assert!(!ran.is_fallback(), "{ran:?}");
    let got = out.to_f32_vec().unwrap();
    for (r, want) in reference.iter().enumerate() {
        let rounded: Vec<f32> = want.iter().map(|&v| T::from_f32(v).to_f32()).collect();
        let what = format!("token_embd row {} in {}", ids[r], dtype.name());
        assert_same(&what, &got[r * d..(r + 1) * d], &rounded);
    }
}

/// Little-endian f32, f16 or bf16 bytes as f32 (through the `half` crate).
fn dense_values(dtype: DType, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        DType::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect(),
        DType::F16 => bytes
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        _ => bytes
            .chunks_exact(2)
            .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
    }
}

#[test]
fn the_test_model_token_embeddings_gather_to_ggml_values() {
    let test = "the_test_model_token_embeddings_gather_to_ggml_values";
    let Some(path) = test_model(test) else {
        return;
    };
    let mut file = GgufFile::open(&path).unwrap();
    let info = file
        .tensor("token_embd.weight")
        .expect("a token embedding")
        .clone();
    let (d, vocab) = (info.dims[0] as usize, info.dims[1] as usize);
    let data = file.tensor_data(&info.name).unwrap();
    let repacked = repack(&info.name, info.ggml_type, &info.dims, &data).unwrap();
    let tied = file.tensor("output.weight").is_none();
    eprintln!(
        "{test}: token_embd.weight {} [{vocab}, {d}] ({}), tied head: {tied}",
        info.ggml_type,
        match &repacked {
            Repacked::Affine(a) => format!("affine {:?}", a.format()),
            Repacked::Dense { dtype, .. } => format!("dense {}", dtype.name()),
        }
    );
    let mut rng = Rng::new(kiln_tests::seed(test));
    let mut ids = vec![0, vocab as u32 - 1, 1];
    ids.extend((0..5).map(|_| (rng.next_u64() % vocab as u64) as u32));
    ids.push(ids[3]);
    // ggml's values of each gathered row, decoded from that row's own bytes.
    let row_bytes = data.len() / vocab;
    let reference: Vec<Vec<f32>> = ids
        .iter()
        .map(|&id| {
            let row = &data[id as usize * row_bytes..(id as usize + 1) * row_bytes];
            match &repacked {
                Repacked::Affine(_) => ggml_dequantize(info.ggml_type, row),
                Repacked::Dense { dtype, .. } => dense_values(*dtype, row),
            }
        })
        .collect();
    let dev = Device::cpu();
    match &repacked {
        Repacked::Affine(_) => {
            gathered_rows_match::<f32>(&dev, &repacked, &reference, &ids, d);
            gathered_rows_match::<F16>(&dev, &repacked, &reference, &ids, d);
            gathered_rows_match::<Bf16>(&dev, &repacked, &reference, &ids, d);
        }
        Repacked::Dense {
            dtype: DType::F32, ..
        } => gathered_rows_match::<f32>(&dev, &repacked, &reference, &ids, d),
        Repacked::Dense {
            dtype: DType::F16, ..
        } => gathered_rows_match::<F16>(&dev, &repacked, &reference, &ids, d),
        Repacked::Dense { .. } => gathered_rows_match::<Bf16>(&dev, &repacked, &reference, &ids, d),
    }
}
