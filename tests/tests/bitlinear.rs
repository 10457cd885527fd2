//! `ops::bitlinear` (spec §2) on every backend here: spec §2's test vector, random ternary
//! matrices packed here from spec §2's layout against their dense product in f64 (the weights
//! given as the checkpoint's bytes and as words, with identical results), and the refusals as
//! typed invalid-input errors that leave `y` untouched.

use kiln::math::kernels::bitlinear::BitLinearParams;
use kiln::math::Element;
use kiln::ops;
use kiln::rng::Rng;
use kiln::{reference, DType, Device, Tensor};
use kiln_tests::{poisoned, refused, POISON};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::Bf16];

/// Spec §2's packing of a dense `W [out, in]` of −1, 0, +1: byte `[r, c]` holds the codes
/// `W + 1` of rows `r + j·out/4` at bits `2j`.
fn pack(w: &[i8], out: usize, k: usize) -> Vec<u8> {
    let quarter = out / 4;
    let mut bytes = vec![0u8; quarter * k];
    for (i, &v) in w.iter().enumerate() {
        let (o, c) = (i / k, i % k);
        let code = (v + 1) as u8;
        bytes[(o % quarter) * k + c] |= code << (2 * (o / quarter));
    }
    bytes
}

/// The bytes as the little-endian words the kernel reads (`[out/4, in/4]`).
fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

#[test]
fn spec_test_vector_on_every_backend() {
    // Spec §2: out = in = 4, bytes [134, 137, 100, 97], x = [1, 2, 3, 4], s = 2, not inverted.
    let bytes = [134u8, 137, 100, 97];
    let want = [-4.0f32, -4.0, 8.0, 6.0];
    for dev in kiln_tests::test_devices() {
        for dtype in DTYPES {
            let x = Tensor::from_f32(&dev, dtype, &[1, 4], &[1.0, 2.0, 3.0, 4.0]).unwrap();
            let s = Tensor::from_f32(&dev, dtype, &[1], &[2.0]).unwrap();
            let as_bytes = Tensor::from_slice(&dev, &[1, 4], &bytes).unwrap();
            let as_words = Tensor::from_slice(&dev, &[1, 1], &words(&bytes)).unwrap();
            for w in [&as_bytes, &as_words] {
                let mut y = poisoned(&dev, dtype, &[1, 4]);
                ops::bitlinear(&dev, &x, w, &s, false, &mut y).unwrap();
                let got = y.to_f32_vec().unwrap();
                let max_abs = got
                    .iter()
                    .zip(&want)
                    .map(|(g, w)| (g - w).abs())
                    .fold(0.0f32, f32::max);
                eprintln!(
                    "{} {} {}: {got:?}",
                    dev.name(),
                    dtype.name(),
                    w.dtype().name()
                );
                assert!(max_abs < 1e-4, "{} {}: {got:?}", dev.name(), dtype.name());
            }
        }
    }
    // The reference chain reads the same vector the same way.
    let p = BitLinearParams {
        invert_weight_scales: 0,
        rows: 1,
        in_features: 4,
        out_features: 4,
    };
    let mut y = [0.0f32; 4];
    reference::bitlinear::bitlinear(&p, &[1.0, 2.0, 3.0, 4.0], &words(&bytes), &[2.0], &mut y);
    assert_eq!(y, want);
}

/// One layer's inputs: `x [lead.., in]` and `s` in `T` (as f32 values already rounded to it),
/// the dense ternary `W [out, in]`.
struct Layer {
    lead: Vec<usize>,
    k: usize,
    n: usize,
    x: Vec<f32>,
    w: Vec<i8>,
    s: f32,
}

fn layer<T: Element>(rng: &mut Rng, lead: &[usize], k: usize, n: usize) -> Layer {
    let rows: usize = lead.iter().product();
    let round = |v: f64| T::from_f32(v as f32).to_f32();
    Layer {
        lead: lead.to_vec(),
        k,
        n,
        x: (0..rows * k).map(|_| round(rng.normal())).collect(),
        w: (0..n * k)
            .map(|_| ((3.0 * rng.uniform()) as i8).min(2) - 1)
            .collect(),
        s: round(0.5 + 1.5 * rng.uniform()),
    }
}

/// `x·Wᵀ` in f64 times `s` or the f32 `1/s`.
fn dense_product(l: &Layer, invert: bool) -> Vec<f64> {
    let scale = if invert { 1.0 / l.s } else { l.s } as f64;
    let rows = l.x.len() / l.k;
    let mut y = Vec::with_capacity(rows * l.n);
    for b in 0..rows {
        for o in 0..l.n {
            let dot: f64 = (0..l.k)
                .map(|c| l.x[b * l.k + c] as f64 * l.w[o * l.k + c] as f64)
                .sum();
            y.push(dot * scale);
        }
    }
    y
}

/// `y` through the op with `W` given as bytes and as words (asserted bit-identical).
fn run(dev: &Device, dtype: DType, l: &Layer, invert: bool) -> Vec<f32> {
    let with_dim = |d: usize| [l.lead.as_slice(), &[d]].concat();
    let x = Tensor::from_f32(dev, dtype, &with_dim(l.k), &l.x).unwrap();
    let s = Tensor::from_f32(dev, dtype, &[1], &[l.s]).unwrap();
    let bytes = pack(&l.w, l.n, l.k);
    let as_bytes = Tensor::from_slice(dev, &[l.n / 4, l.k], &bytes).unwrap();
    let as_words = Tensor::from_slice(dev, &[l.n / 4, l.k / 4], &words(&bytes)).unwrap();
    let mut outs = Vec::new();
    for w in [&as_bytes, &as_words] {
        let mut y = poisoned(dev, dtype, &with_dim(l.n));
        ops::bitlinear(dev, &x, w, &s, invert, &mut y).unwrap();
        outs.push(y.to_f32_vec().unwrap());
    }
    assert_eq!(outs[0], outs[1], "{}: bytes and words differ", dev.name());
    outs.swap_remove(0)
}

/// `max|got − want| / rms(want)` (the harness's nmax), failing on an element left poisoned or
/// non-finite.
fn nmax(got: &[f32], want: &[f64]) -> f64 {
    assert!(
        got.iter().all(|v| v.is_finite() && *v != POISON),
        "an element unwritten or non-finite"
    );
    let got: Vec<f64> = got.iter().map(|&g| g as f64).collect();
    kiln::parity::normalized_deviation(&got, want).1
}

#[test]
fn random_ternary_layers_match_their_dense_product_on_every_backend() {
    let seed = kiln_tests::seed("bitlinear dense products");
    let mut rng = Rng::new(seed);
    // Batch 1, 3 and 11 (a second tile), leading dims [2, 5]; `in` read in units (64, 48) and
    // word by word (36); both scale conventions.
    let shapes: [(&[usize], usize, usize, bool); 5] = [
        (&[1], 64, 8, false),
        (&[3], 36, 12, true),
        (&[11], 48, 16, false),
        (&[2, 5], 64, 4, true),
        (&[9], 36, 8, true),
    ];
    for dev in kiln_tests::test_devices() {
        for dtype in DTYPES {
            // The dtype's budget of spec §0.2 (nmax of a linear layer).
            let bound = match dtype {
                DType::F32 => 1e-4,
                DType::F16 => 1.2e-2,
                _ => 7e-2,
            };
            for &(lead, k, n, invert) in &shapes {
                let l = match dtype {
                    DType::F32 => layer::<f32>(&mut rng, lead, k, n),
                    DType::F16 => layer::<kiln::math::F16>(&mut rng, lead, k, n),
                    _ => layer::<kiln::math::Bf16>(&mut rng, lead, k, n),
                };
                let e = nmax(&run(&dev, dtype, &l, invert), &dense_product(&l, invert));
                eprintln!(
                    "{} {} {lead:?}x{k}->{n} invert {invert}: nmax {e:.2e}",
                    dev.name(),
                    dtype.name()
                );
                assert!(e < bound, "{} {}: nmax {e:e}", dev.name(), dtype.name());
            }
        }
    }
}

/// The op over zero-filled buffers of these shapes (`w` u8 unless `w_dtype` says otherwise).
fn refused_shapes(
    what: &str,
    x: &[usize],
    w: (&[usize], DType),
    s: (&[usize], DType),
    y: &[usize],
) {
    let dev = Device::cpu();
    let x = Tensor::zeros(&dev, DType::F32, x).unwrap();
    let w = Tensor::zeros(&dev, w.1, w.0).unwrap();
    let s = Tensor::zeros(&dev, s.1, s.0).unwrap();
    let mut yt = poisoned(&dev, DType::F32, y);
    let r = ops::bitlinear(&dev, &x, &w, &s, true, &mut yt);
    refused(what, &[&yt], r);
}

#[test]
fn bad_shapes_and_buffers_are_typed_errors_before_any_launch() {
    use DType::{F16, F32, U32, U8};
    let one: (&[usize], DType) = (&[1], F32);
    refused_shapes("in 6", &[1, 6], (&[1, 6], U8), one, &[1, 4]);
    refused_shapes("in 6 as words", &[1, 6], (&[1, 1], U32), one, &[1, 4]);
    refused_shapes("out 6", &[1, 4], (&[1, 4], U8), one, &[1, 6]);
    refused_shapes(
        "out 8 for 1 packed row",
        &[1, 4],
        (&[1, 4], U8),
        one,
        &[1, 8],
    );
    refused_shapes(
        "in 8 for 4 packed columns",
        &[1, 8],
        (&[1, 4], U8),
        one,
        &[1, 4],
    );
    refused_shapes("batch 0", &[0, 4], (&[1, 4], U8), one, &[0, 4]);
    refused_shapes("in 0", &[1, 0], (&[1, 0], U8), one, &[1, 4]);
    refused_shapes("out 0", &[1, 4], (&[0, 4], U8), one, &[1, 0]);
    refused_shapes("a scalar x", &[], (&[1, 4], U8), one, &[4]);
    refused_shapes(
        "y of other leading dims",
        &[2, 4],
        (&[1, 4], U8),
        one,
        &[1, 2, 4],
    );
    refused_shapes("two scales", &[1, 4], (&[1, 4], U8), (&[2], F32), &[1, 4]);
    refused_shapes(
        "an f16 scale for f32 x",
        &[1, 4],
        (&[1, 4], U8),
        (&[1], F16),
        &[1, 4],
    );
    refused_shapes("f32 weights", &[1, 4], (&[1, 4], F32), one, &[1, 4]);
    refused_shapes("3-d weights", &[1, 4], (&[1, 1, 4], U8), one, &[1, 4]);

    // The checkpoint's bytes starting mid-word cannot be read as words.
    let dev = Device::cpu();
    let x = Tensor::zeros(&dev, DType::F32, &[1, 4]).unwrap();
    let s = Tensor::zeros(&dev, DType::F32, &[1]).unwrap();
    let arena = Tensor::zeros(&dev, DType::U8, &[8]).unwrap();
    let w = arena.view(1, &[1, 4]).unwrap();
    let mut y = poisoned(&dev, DType::F32, &[1, 4]);
    let r = ops::bitlinear(&dev, &x, &w, &s, true, &mut y);
    refused("bytes at offset 1", &[&y], r);

    // invert_weight_scales is 0 or 1 through the raw launcher.
    let w = Tensor::zeros(&dev, DType::U32, &[1, 1]).unwrap();
    let p = BitLinearParams {
        invert_weight_scales: 2,
        ..Default::default()
    };
    let r = ops::kernel::bitlinear(&dev, &p, &x, &w, &s, &mut y);
    refused("invert_weight_scales 2", &[&y], r);
}
