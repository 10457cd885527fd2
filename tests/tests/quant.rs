//! kiln's GGUF repack against an independent reading of ggml's formats.
//!
//! `ggml_dequantize` ([`kiln_tests::ggml`]) decodes each block type straight from ggml's
//! layouts and arithmetic, sharing no code with `kiln::quant`. Repack → affine dequantization
//! must reproduce it bit for bit; the one allowed difference is the sign of a zero (ggml's
//! `(q − 8)·d` is −0 for a negative `d`, kiln's `8d + (−8d)` is +0).
//!
//! The real model is [`kiln_tests::ggml::test_model`]'s; its tests skip, by name, without it.

use half::f16;
use kiln::quant::{dequantize, repack, GgmlType, GgufFile, GgufWriter, MetaValue, Repacked};
use kiln::quant::{RepackError, ValueType};
use kiln::rng::Rng;
use kiln::DType;
use kiln_tests::ggml::{assert_same, dequantize as ggml_dequantize, test_model};

/// The block types kiln repacks.
const BLOCK_TYPES: [GgmlType; 8] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
];

/// Byte offsets of a block type's f16 fields (d, and m or dmin where present).
fn f16_fields(t: GgmlType) -> &'static [usize] {
    match t {
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => &[0, 2],
        GgmlType::Q6K => &[208],
        _ => &[0],
    }
}

/// Which finite f16 scales random blocks get.
#[derive(Clone, Copy, Debug)]
enum Scales {
    /// |d| < 2, as real files hold: every derived bias is still an f16.
    Realistic,
    /// Any finite f16, so −8d and −128d overflow f16 and the repack takes f32.
    FullRange,
}

/// Random blocks: random bytes for codes and sub-block scales, random finite f16 scales, and
/// one block in eight with a zero scale of either sign.
fn random_blocks(rng: &mut Rng, t: GgmlType, blocks: usize, scales: Scales) -> Vec<u8> {
    let size = t.block().unwrap().1 as usize;
    let mut data: Vec<u8> = (0..blocks * size).map(|_| rng.next_u64() as u8).collect();
    let max_exponent = match scales {
        Scales::Realistic => 15,
        Scales::FullRange => 30,
    };
    for block in data.chunks_exact_mut(size) {
        for &at in f16_fields(t) {
            let r = rng.next_u64();
            let sign = (r & 1) as u16;
            let exponent = ((r >> 1) % (max_exponent + 1)) as u16;
            let mantissa = ((r >> 8) & 0x3ff) as u16;
            let bits = if (r >> 20).is_multiple_of(8) {
                sign << 15
            } else {
                sign << 15 | exponent << 10 | mantissa
            };
            block[at..at + 2].copy_from_slice(&bits.to_le_bytes());
        }
    }
    data
}

/// Repacks and dequantizes a block tensor with kiln; returns its values and scale dtype.
fn kiln_dequantize(name: &str, t: GgmlType, dims: &[u64], data: &[u8]) -> (Vec<f32>, DType) {
    match repack(name, t, dims, data) {
        Ok(Repacked::Affine(a)) => (dequantize(&a), a.format().scale_dtype()),
        other => panic!("{name} ({t}): expected an affine tensor, got {other:?}"),
    }
}

#[test]
fn random_blocks_repack_to_ggml_values_exactly() {
    let base = kiln_tests::seed("random_blocks_repack_to_ggml_values_exactly");
    let dims = [512u64, 3];
    for t in BLOCK_TYPES {
        for scales in [Scales::Realistic, Scales::FullRange] {
            for round in 0..16 {
                let seed = kiln::rng::derive_seed(base, &format!("{t} {scales:?} {round}"));
                let mut rng = Rng::new(seed);
                let blocks = (512 * 3 / t.block().unwrap().0) as usize;
                let data = random_blocks(&mut rng, t, blocks, scales);
                let what = format!("{t} {scales:?} seed {seed}");
                let (ours, dtype) = kiln_dequantize(&what, t, &dims, &data);
                assert_same(&what, &ours, &ggml_dequantize(t, &data));
                let expect_f16 = t.block().unwrap().0 == 32;
                if let Scales::Realistic = scales {
                    assert_eq!(
                        dtype == DType::F16,
                        expect_f16,
                        "{what}: scale dtype {dtype:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn q8_0_codes_are_offset_by_128() {
    // d = 1 and q = −128..=127 in order: codes 0..=255, bias −128.
    let mut data = Vec::new();
    for block in 0..8 {
        data.extend(f16::from_f32(1.0).to_le_bytes());
        data.extend((0..32).map(|j| (block * 32 + j) as u8 ^ 0x80));
    }
    let Ok(Repacked::Affine(a)) = repack("q8", GgmlType::Q8_0, &[256], &data) else {
        panic!("Q8_0 did not repack");
    };
    assert_eq!(a.format().bits(), 8);
    assert!((0..256).all(|c| a.code(0, c) == Some(c as u32)));
    assert_eq!(a.bias(0, 0), Some(-128.0));
}

/// Name, type and dims of each tensor a synthetic file holds.
type Listing = Vec<(String, GgmlType, Vec<u64>)>;

/// A synthetic file with every type kiln repacks, the dense types, and one it refuses.
fn synthetic_file(rng: &mut Rng) -> (Vec<u8>, Listing) {
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", MetaValue::String("llama".into()));
    w.add_metadata(
        "tokenizer.ggml.tokens",
        MetaValue::Array {
            item_type: ValueType::String,
            items: ["a", "b", "ab"]
                .map(|s| MetaValue::String(s.into()))
                .to_vec(),
        },
    );
    let mut tensors = Vec::new();
    let mut add = |w: &mut GgufWriter, name: String, t: GgmlType, dims: Vec<u64>, data| {
        w.add_tensor(&name, &dims, t, data).unwrap();
        tensors.push((name, t, dims));
    };
    for t in BLOCK_TYPES {
        let dims = vec![256, 2];
        let data = random_blocks(
            rng,
            t,
            (512 / t.block().unwrap().0) as usize,
            Scales::Realistic,
        );
        add(&mut w, format!("blk.0.{t}.weight"), t, dims, data);
    }
    for (t, size) in [(GgmlType::F32, 4), (GgmlType::F16, 2), (GgmlType::Bf16, 2)] {
        let data = (0..48 * size).map(|_| rng.next_u64() as u8).collect();
        add(&mut w, format!("{t}_norm.weight"), t, vec![48], data);
    }
    add(
        &mut w,
        "refused.weight".into(),
        GgmlType::Q3K,
        vec![256],
        vec![0; 110],
    );
    (w.to_bytes().unwrap(), tensors)
}

/// Repacks every tensor of `file`, checking each against ggml exactly; returns the types seen.
fn repack_all_exactly(file: &mut GgufFile) -> Vec<(GgmlType, usize)> {
    let mut seen: Vec<(GgmlType, usize)> = Vec::new();
    for info in file.tensors().to_vec() {
        let data = file.tensor_data(&info.name).unwrap();
        let what = format!("{} ({}, dims {:?})", info.name, info.ggml_type, info.dims);
        match repack(&info.name, info.ggml_type, &info.dims, &data) {
            Ok(Repacked::Dense { bytes, .. }) => assert_eq!(bytes, data, "{what}"),
            Ok(Repacked::Affine(a)) => {
                assert_eq!(a.cols() as u64, info.dims[0], "{what}");
                assert_same(
                    &what,
                    &dequantize(&a),
                    &ggml_dequantize(info.ggml_type, &data),
                );
            }
            Err(e) => panic!("{what}: {e}"),
        }
        match seen.iter_mut().find(|(t, _)| *t == info.ggml_type) {
            Some((_, n)) => *n += 1,
            None => seen.push((info.ggml_type, 1)),
        }
    }
    seen
}

#[test]
fn a_synthetic_file_of_every_type_reads_and_repacks_exactly() {
    let mut rng = Rng::new(kiln_tests::seed("a_synthetic_file_of_every_type"));
    let (bytes, tensors) = synthetic_file(&mut rng);
    let mut file = GgufFile::from_bytes(bytes).unwrap();
    let listed: Vec<_> = file
        .tensors()
        .iter()
        .map(|t| (t.name.clone(), t.ggml_type, t.dims.clone()))
        .collect();
    assert_eq!(listed, tensors);
    let refused = file.tensor_data("refused.weight").unwrap();
    assert_eq!(
        repack("refused.weight", GgmlType::Q3K, &[256], &refused),
        Err(RepackError::Unsupported {
            tensor: "refused.weight".into(),
            ggml_type: GgmlType::Q3K
        })
    );
    let mut w = GgufWriter::new();
    for (name, t, dims) in tensors.iter().filter(|(_, t, _)| *t != GgmlType::Q3K) {
        w.add_tensor(name, dims, *t, file.tensor_data(name).unwrap())
            .unwrap();
    }
    let seen = repack_all_exactly(&mut GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap());
    assert_eq!(seen.len(), BLOCK_TYPES.len() + 3);
}

#[test]
fn the_test_model_repacks_exactly() {
    let Some(path) = test_model("the_test_model_repacks_exactly") else {
        return;
    };
    let mut file = GgufFile::open(&path).unwrap();
    eprintln!(
        "{}: GGUF v{}, {} metadata keys, {} tensors, alignment {}, data at byte {}",
        path.display(),
        file.version(),
        file.metadata().len(),
        file.tensors().len(),
        file.alignment(),
        file.data_offset()
    );
    let tokens = file
        .get("tokenizer.ggml.tokens")
        .and_then(MetaValue::as_strings);
    assert!(
        tokens.is_some_and(|t| !t.is_empty()),
        "no tokenizer vocabulary"
    );
    for key in [
        "general.architecture",
        "general.name",
        "tokenizer.ggml.model",
    ] {
        eprintln!("  {key} = {:?}", file.get(key).and_then(MetaValue::as_str));
    }
    let seen = repack_all_exactly(&mut file);
    let listed: Vec<String> = seen.iter().map(|(t, n)| format!("{t} × {n}")).collect();
    eprintln!("  tensor types: {}", listed.join(", "));
}

#[test]
fn the_test_model_header_survives_truncation_and_flipped_bytes() {
    let test = "the_test_model_header_survives_truncation_and_flipped_bytes";
    let Some(path) = test_model(test) else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let header_end = GgufFile::from_bytes(bytes.clone()).unwrap().data_offset() as usize;
    let mut rng = Rng::new(kiln_tests::seed(test));
    for _ in 0..200 {
        let cut = (rng.next_u64() % header_end as u64) as usize;
        assert!(
            GgufFile::from_bytes(bytes[..cut].to_vec()).is_err(),
            "cut at {cut}"
        );
    }
    let mut parsed = 0;
    for _ in 0..48 {
        let mut flipped = bytes.clone();
        let at = (rng.next_u64() % header_end as u64) as usize;
        flipped[at] ^= 1 << (rng.next_u64() % 8);
        parsed += GgufFile::from_bytes(flipped).is_ok() as usize;
    }
    eprintln!("{test}: {parsed} of 48 single-bit flips still parse");
}
