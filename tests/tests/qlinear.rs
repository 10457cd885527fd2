//! The `qlinear_<b>bit` kernels through `ops::qlinear` and their generated launchers: bad
//! weights and shapes are typed invalid-input errors found before any launch (the output is
//! left untouched); the body is exact at any block and wave where every value is exactly
//! representable, and so is `qlinear_mma_4bit` (the same contract on the wave multiply); the
//! SwiGLU pair in one pass equals the unfused gate, up and `fused_silu_mul`.

use kiln::math::kernels::fused_silu_mul::SiluMulParams;
use kiln::math::kernels::qlinear::QLinearParams;
use kiln::ops::{self, QuantizedWeight};
use kiln::quant::{pack_codes, pack_le_words, quantize, AffineFormat, AffineTensor};
use kiln::{DType, Device, SimConfig, Tensor};

/// Sentinel the refused launches must leave in `y`.
const UNTOUCHED: f32 = 7.0;

fn filled(dev: &Device, dtype: DType, shape: &[usize], v: f32) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f32(dev, dtype, shape, &vec![v; n]).unwrap()
}

fn words(dev: &Device, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_slice(dev, shape, &vec![0x1234_5678u32; n]).unwrap()
}

/// `[m, k] · [n, k]^T` at 4 bits through the raw launcher, buffers of these shapes; expects an
/// invalid-input refusal that leaves `y` untouched.
fn refused(what: &str, p: &QLinearParams, shapes: [&[usize]; 6]) {
    let dev = Device::cpu();
    let [x, w_q, scales, biases, bias, y] = shapes;
    let (x, bias) = (
        filled(&dev, DType::F32, x, 1.0),
        filled(&dev, DType::F32, bias, 1.0),
    );
    let (w_q, scales, biases) = (words(&dev, w_q), words(&dev, scales), words(&dev, biases));
    let mut y = filled(&dev, DType::F32, y, UNTOUCHED);
    match ops::kernel::qlinear_4bit(&dev, p, &x, &w_q, &scales, &biases, &bias, &mut y) {
        Err(e) if e.is_invalid_input() => eprintln!("{what}: refused: {e}"),
        other => panic!("{what}: expected an invalid-input refusal, got {other:?}"),
    }
    assert!(
        y.to_f32_vec().unwrap().iter().all(|&v| v == UNTOUCHED),
        "{what}: a refused launch wrote y"
    );
}

#[test]
fn qlinear_refuses_bad_shapes_and_formats_before_any_launch() {
    // The good shape: x [2, 128], 4 bits → 16 words a row, g64 f16 scales: 3 rows × 2 groups
    // = 6 values = 3 words.
    let p = QLinearParams::default();
    let good: [&[usize]; 6] = [&[2, 128], &[3, 16], &[3], &[3], &[1], &[2, 3]];
    {
        let dev = Device::cpu();
        let x = filled(&dev, DType::F32, good[0], 1.0);
        let (w_q, s, b) = (
            words(&dev, good[1]),
            words(&dev, good[2]),
            words(&dev, good[3]),
        );
        let bias = filled(&dev, DType::F32, good[4], 0.0);
        let mut y = filled(&dev, DType::F32, good[5], UNTOUCHED);
        ops::kernel::qlinear_4bit(&dev, &p, &x, &w_q, &s, &b, &bias, &mut y).unwrap();
    }
    refused(
        "packed width 15 for K 128",
        &p,
        [&[2, 128], &[3, 15], &[3], &[3], &[1], &[2, 3]],
    );
    refused(
        "scales 4 words for 6 values",
        &p,
        [&[2, 128], &[3, 16], &[4], &[3], &[1], &[2, 3]],
    );
    refused(
        "biases 2 words for 6 values",
        &p,
        [&[2, 128], &[3, 16], &[3], &[2], &[1], &[2, 3]],
    );
    refused(
        "K 48 (not whole units)",
        &p,
        [&[2, 48], &[3, 6], &[3], &[3], &[1], &[2, 3]],
    );
    refused("K 1", &p, [&[2, 1], &[3, 1], &[3], &[3], &[1], &[2, 3]]);
    refused("M 9", &p, [&[9, 128], &[3, 16], &[3], &[3], &[1], &[9, 3]]);
    refused(
        "y [2, 4] for N 3",
        &p,
        [&[2, 128], &[3, 16], &[3], &[3], &[1], &[2, 4]],
    );
    let with = |f: fn(&mut QLinearParams)| {
        let mut q = QLinearParams::default();
        f(&mut q);
        q
    };
    let g96 = with(|q| q.group_size = 96);
    refused(
        "group size 96",
        &g96,
        [&[2, 192], &[3, 24], &[3], &[3], &[1], &[2, 3]],
    );
    let g128 = with(|q| q.group_size = 128);
    refused(
        "K 64 under group size 128",
        &g128,
        [&[2, 64], &[3, 8], &[1], &[1], &[1], &[2, 3]],
    );
    let s3 = with(|q| q.scale_dtype = 3);
    refused("scale dtype code 3", &s3, good);
    let act_odd = with(|q| q.act = 1);
    refused(
        "act 1 with N odd",
        &act_odd,
        [&[2, 128], &[3, 16], &[3], &[3], &[1], &[2, 1]],
    );
    let act2 = with(|q| q.act = 2);
    refused("act 2", &act2, good);
    let bias = with(|q| q.has_bias = 1);
    refused(
        "bias [2] for N 3",
        &bias,
        [&[2, 128], &[3, 16], &[3], &[3], &[2], &[2, 3]],
    );

    // The typed weight refuses buffers that do not match its format.
    let dev = Device::cpu();
    let f = AffineFormat::new(4, 64, DType::F16).unwrap();
    let whole =
        |w_q: Tensor, s: Tensor, b: Tensor| QuantizedWeight::from_parts(f, 3, 128, w_q, s, b);
    assert!(whole(words(&dev, &[3, 16]), words(&dev, &[3]), words(&dev, &[3])).is_ok());
    for (what, r) in [
        (
            "w_q [3, 8]",
            whole(words(&dev, &[3, 8]), words(&dev, &[3]), words(&dev, &[3])),
        ),
        (
            "scales 6 words",
            whole(words(&dev, &[3, 16]), words(&dev, &[6]), words(&dev, &[3])),
        ),
        (
            "w_q as f32",
            whole(
                filled(&dev, DType::F32, &[3, 16], 0.0),
                words(&dev, &[3]),
                words(&dev, &[3]),
            ),
        ),
    ] {
        match r {
            Err(e) if e.is_invalid_input() => eprintln!("{what}: refused: {e}"),
            other => panic!("{what}: expected an invalid-input refusal, got {other:?}"),
        }
    }
    // The activation dtype must match across x, bias and y.
    let w = whole(words(&dev, &[3, 16]), words(&dev, &[3]), words(&dev, &[3])).unwrap();
    let x = filled(&dev, DType::Bf16, &[1, 128], 1.0);
    let mut y = filled(&dev, DType::F32, &[1, 3], UNTOUCHED);
    assert!(ops::qlinear(&dev, &x, &w, None, &mut y).is_err());
    assert!(y.to_f32_vec().unwrap().iter().all(|&v| v == UNTOUCHED));
}

/// A weight of small codes with power-of-two scales: every product and partial sum is exact
/// in f32 on every port, so the results are exact whatever the reduction order.
fn exact_weight(
    bits: u32,
    gs: u32,
    scale_dtype: DType,
    n: usize,
    k: usize,
) -> (AffineTensor, Vec<f32>) {
    let f = AffineFormat::new(bits, gs, scale_dtype).unwrap();
    let groups = k / gs as usize;
    let codes: Vec<u32> = (0..n * k)
        .map(|i| (i as u32 * 5 + 3) % (1 << bits))
        .collect();
    let scale = |e: usize| [0.5f32, 0.25, 1.0][e % 3];
    let offset = |e: usize| [-2.0f32, 1.0, 0.0, -0.5][e % 4];
    let mut w_q = Vec::new();
    for r in 0..n {
        w_q.extend(pack_codes(&codes[r * k..(r + 1) * k], bits).unwrap());
    }
    let mut s_bytes = Vec::new();
    let mut b_bytes = Vec::new();
    for e in 0..n * groups {
        for (v, out) in [(scale(e), &mut s_bytes), (offset(e), &mut b_bytes)] {
            let t = Tensor::from_f32(&Device::cpu(), scale_dtype, &[1], &[v]).unwrap();
            out.extend(t.to_bytes().unwrap());
        }
    }
    let w: Vec<f32> = (0..n * k)
        .map(|i| {
            let e = (i / k) * groups + (i % k) / gs as usize;
            scale(e) * codes[i] as f32 + offset(e)
        })
        .collect();
    let t = AffineTensor::from_parts(f, n, k, w_q, s_bytes, b_bytes).unwrap();
    (t, w)
}

fn small_ints(n: usize, salt: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + salt * 3) % 9) as f32 - 4.0)
        .collect()
}

#[test]
fn qlinear_is_exact_at_any_block_and_wave() {
    let devices = host_devices();
    // (bits, group, scale dtype, m, k, n, bias): every width, each group size, N short of and
    // past a block's rows, odd N (a pair's second row past N).
    let cases = [
        (4, 64, DType::F16, 1, 128, 8, true),
        (2, 32, DType::F32, 3, 96, 13, false),
        (3, 16, DType::Bf16, 8, 64, 9, true),
        (5, 128, DType::F16, 2, 256, 1, true),
        (6, 16, DType::F32, 5, 160, 17, false),
        (8, 32, DType::Bf16, 4, 64, 3, true),
    ];
    for (bits, gs, sd, m, k, n, has_bias) in cases {
        let (host_w, w) = exact_weight(bits, gs, sd, n, k);
        let (xs, bs) = (small_ints(m * k, 1), small_ints(n, 3));
        let want: Vec<f32> = (0..m * n)
            .map(|i| {
                let (r, c) = (i / n, i % n);
                let dot: f32 = (0..k).map(|j| xs[r * k + j] * w[c * k + j]).sum();
                dot + if has_bias { bs[c] } else { 0.0 }
            })
            .collect();
        for (label, dev) in &devices {
            let qw = QuantizedWeight::upload(dev, &host_w).unwrap();
            let x = Tensor::from_f32(dev, DType::F32, &[m, k], &xs).unwrap();
            let bias = Tensor::from_f32(dev, DType::F32, &[n], &bs).unwrap();
            let mut y = filled(dev, DType::F32, &[m, n], f32::NAN);
            let ran = ops::qlinear(dev, &x, &qw, has_bias.then_some(&bias), &mut y)
                .unwrap_or_else(|e| panic!("{label} q{bits} {m}x{k}->{n}: {e}"));
            assert!(!ran.is_fallback(), "{label}: took the fallback");
            assert_eq!(
                y.to_f32_vec().unwrap(),
                want,
                "{label} q{bits} g{gs} {m}x{k}->{n}"
            );
        }
    }
}

/// The sim at waves 1–64 with several block sizes per wave (ragged ones too), and the cpu.
fn host_devices() -> Vec<(String, Device)> {
    [
        (1, 1),
        (1, 3),
        (2, 6),
        (4, 4),
        (4, 12),
        (8, 8),
        (8, 72),
        (32, 96),
        (64, 64),
    ]
    .into_iter()
    .map(|(wave, block)| {
        let cfg = SimConfig {
            block: Some(block),
            ..SimConfig::new(wave)
        };
        (
            format!("sim wave {wave} block {block}"),
            Device::sim_with(cfg).unwrap(),
        )
    })
    .chain([("cpu".to_string(), Device::cpu())])
    .collect()
}

/// `qlinear_mma_4bit` (the wave multiply: f16 and bf16 activations) is exact where every
/// value is: at every wave its multiply is laid out differently (classes, groups, sets per
/// wave, passes of columns), and every group size puts its steps' groups in other columns.
#[test]
fn qlinear_mma_is_exact_at_any_block_and_wave() {
    let devices = host_devices();
    // (group, scale dtype, m, k, n, bias, SwiGLU): every group size it reads, 1..8 rows of x
    // (several passes on narrow waves), K of one group and many (split over a block's sets),
    // N short of a block and past one.
    let cases = [
        (64, DType::F16, 1, 128, 8, true, false),
        (32, DType::F32, 3, 96, 13, false, false),
        (32, DType::Bf16, 8, 64, 9, true, false),
        (128, DType::F16, 2, 384, 1, true, false),
        (64, DType::F32, 5, 1920, 33, false, false),
        (32, DType::Bf16, 4, 256, 20, true, true),
        (32, DType::F16, 2, 2048, 140, false, false),
    ];
    for (gs, sd, m, k, n, has_bias, silu) in cases {
        let (host_w, w) = exact_weight(4, gs, sd, n, k);
        let (xs, bs) = (small_ints(m * k, 1), small_ints(n, 3));
        let dot = |r: usize, c: usize| -> f32 {
            let d: f32 = (0..k).map(|j| xs[r * k + j] * w[c * k + j]).sum();
            d + if has_bias { bs[c] } else { 0.0 }
        };
        let out_n = if silu { n / 2 } else { n };
        for dtype in [DType::F16, DType::Bf16] {
            let round = |v: f32| {
                let t = Tensor::from_f32(&Device::cpu(), dtype, &[1], &[v]).unwrap();
                t.to_f32_vec().unwrap()[0]
            };
            let want: Vec<f32> = (0..m * out_n)
                .map(|i| {
                    let (r, c) = (i / out_n, i % out_n);
                    if silu {
                        let (g, u) = (round(dot(r, 2 * c)), round(dot(r, 2 * c + 1)));
                        round(g / (1.0 + (-g).exp()) * u)
                    } else {
                        round(dot(r, c))
                    }
                })
                .collect();
            let p = QLinearParams {
                has_bias: has_bias as u32,
                group_size: gs,
                scale_dtype: kiln::math::kernels::qlinear::scale_code(sd),
                act: silu as u32,
                ..QLinearParams::default()
            };
            for (label, dev) in &devices {
                let qw = QuantizedWeight::upload(dev, &host_w).unwrap();
                let (w_q, scales, biases) = qw.buffers();
                let x = Tensor::from_f32(dev, dtype, &[m, k], &xs).unwrap();
                let bias = Tensor::from_f32(dev, dtype, &[n], &bs).unwrap();
                let mut y = filled(dev, dtype, &[m, out_n], f32::NAN);
                let what = format!("{label} {} g{gs} {m}x{k}->{n}", dtype.name());
                ops::kernel::qlinear_mma_4bit(dev, &p, &x, w_q, scales, biases, &bias, &mut y)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let got = y.to_f32_vec().unwrap();
                if silu {
                    // silu's exp is libm's on every port here, but the reference's is std's:
                    // within an ulp of T, not bit for bit.
                    for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (g - e).abs() <= e.abs() / 128.0,
                            "{what}: y[{i}] {g} vs {e}"
                        );
                    }
                } else {
                    assert_eq!(got, want, "{what}");
                }
            }
        }
    }
}

/// `qlinear_mma_4bit` reads group sizes 32, 64 and 128: a group of 16 is refused before any
/// launch, and the op runs `qlinear_4bit` there.
#[test]
fn qlinear_mma_refuses_groups_of_16() {
    let dev = Device::cpu();
    let (host_w, _) = exact_weight(4, 16, DType::F16, 3, 64);
    let qw = QuantizedWeight::upload(&dev, &host_w).unwrap();
    let (w_q, scales, biases) = qw.buffers();
    let x = filled(&dev, DType::F16, &[1, 64], 1.0);
    let bias = filled(&dev, DType::F16, &[3], 0.0);
    let mut y = filled(&dev, DType::F16, &[1, 3], UNTOUCHED);
    let p = QLinearParams {
        group_size: 16,
        ..QLinearParams::default()
    };
    match ops::kernel::qlinear_mma_4bit(&dev, &p, &x, w_q, scales, biases, &bias, &mut y) {
        Err(e) if e.is_invalid_input() => eprintln!("g16: refused: {e}"),
        other => panic!("g16: expected an invalid-input refusal, got {other:?}"),
    }
    assert!(y.to_f32_vec().unwrap().iter().all(|&v| v == UNTOUCHED));
    assert_eq!(qw.kernel_on(&dev, &x), qw.kernel());
}

#[test]
fn qlinear_silu_mul_equals_the_unfused_pair() {
    let seed = kiln::parity::base_seed();
    eprintln!("seed {seed} (KILN_SEED={seed} to replay)");
    let mut rng = kiln::rng::Rng::new(seed);
    let (m, k, n) = (3, 256, 11);
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        let f = AffineFormat::new(4, 64, dtype).unwrap();
        let mut draw = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.normal() as f32).collect() };
        let gate = quantize(&draw(n * k), n, k, f).unwrap();
        let up = quantize(&draw(n * k), n, k, f).unwrap();
        let xs = draw(m * k);
        for dev in [Device::cpu(), Device::sim(8).unwrap()] {
            let x = Tensor::from_f32(&dev, dtype, &[m, k], &xs).unwrap();
            let pair =
                QuantizedWeight::upload(&dev, &ops::interleave_rows(&gate, &up).unwrap()).unwrap();
            let mut fused = filled(&dev, dtype, &[m, n], f32::NAN);
            ops::qlinear_silu_mul(&dev, &x, &pair, None, &mut fused).unwrap();
            let mut g = filled(&dev, dtype, &[m, n], f32::NAN);
            let mut u = filled(&dev, dtype, &[m, n], f32::NAN);
            ops::qlinear(
                &dev,
                &x,
                &QuantizedWeight::upload(&dev, &gate).unwrap(),
                None,
                &mut g,
            )
            .unwrap();
            ops::qlinear(
                &dev,
                &x,
                &QuantizedWeight::upload(&dev, &up).unwrap(),
                None,
                &mut u,
            )
            .unwrap();
            let mut unfused = filled(&dev, dtype, &[m, n], f32::NAN);
            ops::kernel::fused_silu_mul(&dev, &SiluMulParams::default(), &g, &u, &mut unfused)
                .unwrap();
            assert_eq!(
                fused.to_bytes().unwrap(),
                unfused.to_bytes().unwrap(),
                "{} on {:?}",
                dtype.name(),
                dev.backend()
            );
        }
    }
    // The padded words of 16-bit scales: an odd value count still packs and uploads.
    assert_eq!(
        pack_le_words(&[1, 0, 2, 0, 3, 0]),
        vec![0x0002_0001, 0x0000_0003]
    );
}
