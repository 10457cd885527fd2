//! The fused decode MoE experts through `ops::moe_experts` (spec §7.9): against an all-f32
//! dense reference written here from the spec (every selected expert dequantized in f32, f32
//! matmuls, f32 activation, f32 score-weighted K-sum, rounded to bf16 once) at the spec's model
//! shapes; bitwise determinism over reruns and invariance over rows per block on every
//! backend present; bad inputs refused before any launch with the output untouched.

use kiln::math::kernels::moe_combine::MoeCombineParams;
use kiln::math::kernels::moe_experts::MoeParams;
use kiln::math::kernels::qlinear::scale_code;
use kiln::ops::{self, kernel, MoeActivation, MoeExperts, QuantizedWeight};
use kiln::quant::{quantize, AffineFormat, AffineTensor};
use kiln::{Backend, DType, Device, PortError, Tensor};
use kiln_tests::moe_layer::{
    bf16, bits, dense_reference_f32, deviation, layer, rounded_like, routing, weights, Layer,
};
use kiln_tests::{poisoned, ragged_sim_devices, seed, test_devices, untouched};

fn upload(dev: &Device, l: &Layer) -> MoeExperts {
    let q = |t: &AffineTensor| QuantizedWeight::upload(dev, t).unwrap();
    MoeExperts::new(
        l.experts,
        l.activation,
        q(&l.first),
        l.up.as_ref().map(q),
        q(&l.down),
    )
    .unwrap()
}

/// Runs the layer on `dev` for bf16 `x` and returns `out` as f32 values.
fn run(dev: &Device, l: &Layer, x: &[f32], ids: &[u32], scores: &[f32], rpb: u32) -> Vec<f32> {
    let tokens = x.len() / l.din;
    let experts = upload(dev, l);
    let xt = Tensor::from_f32(dev, DType::Bf16, &[tokens, l.din], x).unwrap();
    let mut out = poisoned(dev, DType::Bf16, &[tokens, l.din]);
    let ran = ops::moe_experts(dev, &xt, &experts, ids, scores, rpb, &mut out).unwrap();
    assert!(!ran.up.is_fallback() && !ran.down.is_fallback());
    out.to_f32_vec().unwrap()
}

/// Devices for the model shapes: every backend present but the sim, whose one thread per lane
/// is too slow at them (the parity cases and the invariance test run it at small shapes).
fn model_shape_devices() -> Vec<Device> {
    test_devices()
        .into_iter()
        .filter(|d| d.backend() != Backend::Sim)
        .collect()
}

#[test]
fn moe_experts_match_the_dense_f32_reference_at_model_shapes() {
    let s = seed("moe_experts_match_the_dense_f32_reference_at_model_shapes");
    // (name, E, K, Din, Dff, activation, gate/up bits, down bits). Every expert of a shape is
    // routed to (E = K, in a rotated order): E only indexes, and all-routed keeps the stacked
    // weights the size of the selected ones.
    let shapes = [
        (
            "gemma-4-26b-a4b geglu",
            8,
            8,
            2816,
            704,
            MoeActivation::GeGlu,
            4,
            4,
        ),
        (
            "qwen3-30b-a3b swiglu (4,4)",
            8,
            8,
            2048,
            768,
            MoeActivation::SwiGlu,
            4,
            4,
        ),
        (
            "qwen3-30b-a3b swiglu (8,8)",
            8,
            8,
            2048,
            768,
            MoeActivation::SwiGlu,
            8,
            8,
        ),
        (
            "qwen3-30b-a3b swiglu (4,6)",
            8,
            8,
            2048,
            768,
            MoeActivation::SwiGlu,
            4,
            6,
        ),
        (
            "320/192 K4 swiglu",
            6,
            4,
            320,
            192,
            MoeActivation::SwiGlu,
            4,
            4,
        ),
        (
            "320/192 K4 relu2 (4,4)",
            6,
            4,
            320,
            192,
            MoeActivation::Relu2,
            4,
            4,
        ),
        (
            "320/192 K4 relu2 (8,8)",
            6,
            4,
            320,
            192,
            MoeActivation::Relu2,
            8,
            8,
        ),
    ];
    let devices = model_shape_devices();
    for (i, &(name, e, k, din, dff, act, fb, db)) in shapes.iter().enumerate() {
        let l = layer(s ^ i as u64, e, din, dff, act, fb, db, 64, DType::Bf16);
        let mut state = s.wrapping_add(i as u64);
        let x: Vec<f32> = weights(&mut state, din).iter().map(|&v| bf16(v)).collect();
        let (ids, scores) = routing(&mut state, 1, k, e);
        let raw = dense_reference_f32(&l, &x, &ids, &scores);
        assert!(
            raw.iter().any(|&v| bf16(v) != 0.0),
            "{name}: an all-zero reference"
        );
        for dev in &devices {
            let got = run(dev, &l, &x, &ids, &scores, 8);
            let (nrms, nmax) = deviation(&got, &rounded_like(&raw, &got));
            eprintln!("{name} on {}: nrms {nrms:.3e} nmax {nmax:.3e}", dev.name());
            assert!(
                nrms < 5e-4 && nmax < 2e-2,
                "{name} on {}: nrms {nrms:.3e} (bound 5e-4), nmax {nmax:.3e} (bound 2e-2)",
                dev.name()
            );
        }
    }
}

#[test]
fn moe_experts_are_bitwise_deterministic_and_independent_of_rows_per_block() {
    let s = seed("moe_experts_are_bitwise_deterministic_and_independent_of_rows_per_block");
    let devices = ragged_sim_devices();
    let cases = [
        (MoeActivation::SwiGlu, 4, 6, 2),
        (MoeActivation::GeGlu, 8, 4, 1),
        (MoeActivation::Relu2, 4, 8, 2),
    ];
    for (i, &(act, fb, db, tokens)) in cases.iter().enumerate() {
        let (e, k, din, dff) = (4, 2, 64, 32);
        let l = layer(
            s ^ (i as u64 + 100),
            e,
            din,
            dff,
            act,
            fb,
            db,
            32,
            DType::F16,
        );
        let mut state = s.wrapping_add(17 * i as u64);
        let x: Vec<f32> = weights(&mut state, tokens * din)
            .iter()
            .map(|&v| bf16(v))
            .collect();
        let (ids, scores) = routing(&mut state, tokens, k, e);
        for dev in &devices {
            let first = run(dev, &l, &x, &ids, &scores, 8);
            assert!(
                first.iter().any(|&v| v != 0.0),
                "{act:?}: an all-zero answer"
            );
            // A rerun with another temporary allocated in between.
            let _churn = Tensor::zeros(dev, DType::F32, &[1000]).unwrap();
            let again = run(dev, &l, &x, &ids, &scores, 8);
            assert!(
                bits(&again) == bits(&first),
                "{act:?} on {}: a rerun differs",
                dev.name()
            );
            for rpb in [1, 3, 32] {
                let other = run(dev, &l, &x, &ids, &scores, rpb);
                assert!(
                    bits(&other) == bits(&first),
                    "{act:?} on {}: rows per block {rpb} differs from 8",
                    dev.name()
                );
            }
        }
    }
}

#[test]
fn moe_down_sum_is_moe_combine_of_moe_down_bit_for_bit() {
    let s = seed("moe_down_sum_is_moe_combine_of_moe_down_bit_for_bit");
    let (e, k, din, dff, tokens) = (4, 3, 64, 64, 2);
    let devices = ragged_sim_devices();
    for (i, bits) in [4u32, 6, 8].into_iter().enumerate() {
        let l = layer(
            s ^ (i as u64 + 200),
            e,
            din,
            dff,
            MoeActivation::Relu2,
            4,
            bits,
            32,
            DType::Bf16,
        );
        let mut state = s.wrapping_add(31 * i as u64);
        let act = weights(&mut state, tokens * k * dff);
        let (mut ids, scores) = routing(&mut state, tokens, k, e);
        // An unknown expert adds nothing (the kernels' contract; ops refuse such ids).
        ids[1] = e as u32 + 2;
        let p = MoeParams {
            group_size: 32,
            scale_dtype: scale_code(DType::Bf16),
            rows_per_block: 3,
            ..MoeParams::default()
        };
        for dev in &devices {
            let down = QuantizedWeight::upload(dev, &l.down).unwrap();
            let (q, scales, biases) = down.buffers();
            let q = q.reshape(&[e, din, q.shape()[1]]).unwrap();
            let ids = Tensor::from_slice(dev, &[tokens, k], &ids).unwrap();
            let scores = Tensor::from_slice(dev, &[tokens, k], &scores).unwrap();
            let act = Tensor::from_slice(dev, &[tokens, k, dff], &act).unwrap();
            let mut partial = poisoned(dev, DType::F32, &[tokens, k, din]);
            let (down_ran, sum_kernel) = match bits {
                4 => (
                    kernel::moe_down_4bit(
                        dev,
                        &p,
                        &ids,
                        &q,
                        scales,
                        biases,
                        &act,
                        &scores,
                        &mut partial,
                    ),
                    kernel::moe_down_sum_4bit as SumLauncher,
                ),
                6 => (
                    kernel::moe_down_6bit(
                        dev,
                        &p,
                        &ids,
                        &q,
                        scales,
                        biases,
                        &act,
                        &scores,
                        &mut partial,
                    ),
                    kernel::moe_down_sum_6bit as SumLauncher,
                ),
                _ => (
                    kernel::moe_down_8bit(
                        dev,
                        &p,
                        &ids,
                        &q,
                        scales,
                        biases,
                        &act,
                        &scores,
                        &mut partial,
                    ),
                    kernel::moe_down_sum_8bit as SumLauncher,
                ),
            };
            down_ran.unwrap();
            for dtype in [DType::F32, DType::F16, DType::Bf16] {
                let mut want = poisoned(dev, dtype, &[tokens, din]);
                kernel::moe_combine(dev, &MoeCombineParams::default(), &partial, &mut want)
                    .unwrap();
                let mut got = poisoned(dev, dtype, &[tokens, din]);
                sum_kernel(dev, &p, &ids, &q, scales, biases, &act, &scores, &mut got).unwrap();
                assert!(
                    got.to_bytes().unwrap() == want.to_bytes().unwrap(),
                    "{bits}-bit down, {} out on {}: the fused sum differs from moe_combine's",
                    dtype.name(),
                    dev.name()
                );
                assert!(!untouched(&got), "nothing written");
            }
        }
    }
}

/// The signature of the `moe_down_sum_<b>bit` launchers.
type SumLauncher = fn(
    &Device,
    &MoeParams,
    &Tensor,
    &Tensor,
    &Tensor,
    &Tensor,
    &Tensor,
    &Tensor,
    &mut Tensor,
) -> Result<kiln::launch::Ran, PortError>;

#[test]
fn moe_experts_refuse_bad_inputs_before_any_launch() {
    let dev = Device::cpu();
    let l = layer(7, 4, 64, 32, MoeActivation::SwiGlu, 4, 4, 32, DType::F16);
    let experts = upload(&dev, &l);
    let x = Tensor::from_f32(&dev, DType::F32, &[1, 64], &[0.5; 64]).unwrap();
    let mut out = poisoned(&dev, DType::F32, &[1, 64]);
    let mut check =
        |what: &str, ids: &[u32], scores: &[f32], rpb: u32, want: fn(&PortError) -> bool| {
            match ops::moe_experts(&dev, &x, &experts, ids, scores, rpb, &mut out) {
                Err(e) if want(&e) => eprintln!("{what}: refused: {e}"),
                other => panic!("{what}: expected a refusal, got {other:?}"),
            }
            assert!(untouched(&out), "{what}: a refused call wrote out");
        };
    let invalid: fn(&PortError) -> bool = |e| e.is_invalid_input();
    check("expert id ≥ E", &[1, 4], &[0.5, 0.5], 8, |e| {
        matches!(
            e,
            PortError::ExpertOutOfRange {
                id: 4,
                position: 1,
                experts: 4,
                ..
            }
        )
    });
    check("K > E", &[0, 1, 2, 3, 0], &[0.2; 5], 8, invalid);
    check("scores of another length", &[0, 1], &[1.0], 8, invalid);
    check("rows per block 0", &[0, 1], &[0.5, 0.5], 0, invalid);
    check("rows per block 33", &[0, 1], &[0.5, 0.5], 33, invalid);
    check("no ids", &[], &[], 8, invalid);

    // Formats the fused experts do not read, and layers that do not fit together.
    let q = |t: &AffineTensor| QuantizedWeight::upload(&dev, t).unwrap();
    let f16 = |bits| AffineFormat::new(bits, 32, DType::F16).unwrap();
    let m = |rows: usize, cols: usize, bits: u32| {
        quantize(&vec![0.25; rows * cols], rows, cols, f16(bits)).unwrap()
    };
    let refused = |what: &str, r: Result<MoeExperts, PortError>| match r {
        Err(e) if e.is_invalid_input() => eprintln!("{what}: refused: {e}"),
        other => panic!("{what}: expected a refusal, got {:?}", other.map(|_| ())),
    };
    let gated = MoeActivation::SwiGlu;
    refused(
        "2-bit gate/up",
        MoeExperts::new(
            4,
            gated,
            q(&m(128, 64, 2)),
            Some(q(&m(128, 64, 2))),
            q(&m(256, 32, 4)),
        ),
    );
    refused(
        "6-bit gate/up",
        MoeExperts::new(
            4,
            gated,
            q(&m(128, 64, 6)),
            Some(q(&m(128, 64, 6))),
            q(&m(256, 32, 4)),
        ),
    );
    refused(
        "3-bit down",
        MoeExperts::new(
            4,
            gated,
            q(&m(128, 64, 4)),
            Some(q(&m(128, 64, 4))),
            q(&m(256, 32, 3)),
        ),
    );
    refused(
        "gated without up",
        MoeExperts::new(4, gated, q(&m(128, 64, 4)), None, q(&m(256, 32, 4))),
    );
    refused(
        "relu² with up",
        MoeExperts::new(
            4,
            MoeActivation::Relu2,
            q(&m(128, 64, 4)),
            Some(q(&m(128, 64, 4))),
            q(&m(256, 32, 4)),
        ),
    );
    refused(
        "rows not E experts of equal height",
        MoeExperts::new(
            3,
            gated,
            q(&m(128, 64, 4)),
            Some(q(&m(128, 64, 4))),
            q(&m(192, 32, 4)),
        ),
    );
    refused(
        "down of the wrong shape",
        MoeExperts::new(
            4,
            gated,
            q(&m(128, 64, 4)),
            Some(q(&m(128, 64, 4))),
            q(&m(256, 64, 4)),
        ),
    );
}

#[test]
fn routing_on_the_device_feeds_the_experts_as_host_routing_does() {
    let s = seed("routing_on_the_device_feeds_the_experts_as_host_routing_does");
    let (e, k, din, dff, tokens) = (6, 2, 64, 32, 3);
    let l = layer(s, e, din, dff, MoeActivation::SwiGlu, 4, 4, 32, DType::Bf16);
    let mut state = s ^ 0x5eed;
    let x: Vec<f32> = weights(&mut state, tokens * din)
        .iter()
        .map(|&v| bf16(v))
        .collect();
    let logits: Vec<f32> = weights(&mut state, tokens * e);
    for dev in test_devices() {
        let experts = upload(&dev, &l);
        let lt = Tensor::from_f32(&dev, DType::F32, &[tokens, e], &logits).unwrap();
        let mut ids = Tensor::zeros(&dev, DType::U32, &[tokens, k]).unwrap();
        let mut scores = poisoned(&dev, DType::F32, &[tokens, k]);
        let router = ops::MoeRouter::Softmax { renormalize: true };
        ops::moe_route(&dev, &lt, router, None, &mut ids, &mut scores).unwrap();
        let (host_ids, host_scores) = (
            ids.to_vec::<u32>().unwrap(),
            scores.to_vec::<f32>().unwrap(),
        );
        // Best first, distinct, in range; renormalized scores sum to 1.
        for t in 0..tokens {
            let row = &host_ids[t * k..(t + 1) * k];
            assert!(row[0] != row[1] && row.iter().all(|&i| (i as usize) < e));
            let l0 = logits[t * e + row[0] as usize];
            let l1 = logits[t * e + row[1] as usize];
            assert!(l0 >= l1, "{}: picks not best first", dev.name());
            let sum: f32 = host_scores[t * k..(t + 1) * k].iter().sum();
            assert!(
                (sum - 1.0).abs() < 1e-6,
                "{}: scores sum to {sum}",
                dev.name()
            );
        }
        let xt = Tensor::from_f32(&dev, DType::Bf16, &[tokens, din], &x).unwrap();
        let mut routed = poisoned(&dev, DType::Bf16, &[tokens, din]);
        ops::moe_experts_routed(&dev, &xt, &experts, &ids, &scores, 4, &mut routed).unwrap();
        let direct = run(&dev, &l, &x, &host_ids, &host_scores, 4);
        assert!(
            bits(&routed.to_f32_vec().unwrap()) == bits(&direct),
            "{}: the device-routed experts differ from the host-routed ones",
            dev.name()
        );
    }
}

/// The softmax router reads 16-bit logits as it reads f32 ones (its unread bias slot is f32).
#[test]
fn the_softmax_router_takes_16_bit_logits() {
    let (e, k) = (5, 3);
    // Distinct, exact in f16 and bf16; the picks are the largest three, best first.
    let logits = [0.25f32, -1.5, 2.0, 0.75, -0.125, 1.0, 3.0, -2.0, 0.5, 0.0];
    let want: [u32; 6] = [2, 3, 0, 1, 0, 3];
    for dev in test_devices() {
        for dt in [DType::F16, DType::Bf16] {
            let lt = Tensor::from_f32(&dev, dt, &[2, e], &logits).unwrap();
            let mut ids = Tensor::zeros(&dev, DType::U32, &[2, k]).unwrap();
            let mut scores = poisoned(&dev, DType::F32, &[2, k]);
            let router = ops::MoeRouter::Softmax { renormalize: false };
            ops::moe_route(&dev, &lt, router, None, &mut ids, &mut scores).unwrap();
            assert_eq!(
                ids.to_vec::<u32>().unwrap(),
                want,
                "{} {}",
                dev.name(),
                dt.name()
            );
            assert!(scores
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .all(|&p| p > 0.0 && p < 1.0));
        }
    }
}

#[test]
fn moe_route_refuses_bad_inputs_before_any_launch() {
    let dev = Device::cpu();
    let logits = Tensor::from_f32(&dev, DType::F32, &[2, 4], &[0.5; 8]).unwrap();
    let bias = Tensor::from_f32(&dev, DType::F32, &[4], &[0.0; 4]).unwrap();
    let softmax = ops::MoeRouter::Softmax { renormalize: false };
    let sigmoid = ops::MoeRouter::SigmoidBias {
        renormalize: true,
        scaling_factor: 1.0,
    };
    let cases: [(&str, ops::MoeRouter, Option<&Tensor>, usize); 5] = [
        ("K > E", softmax, None, 5),
        ("a bias with softmax", softmax, Some(&bias), 2),
        ("sigmoid without its bias", sigmoid, None, 2),
        (
            "a non-finite scaling factor",
            ops::MoeRouter::SigmoidBias {
                renormalize: false,
                scaling_factor: f32::NAN,
            },
            Some(&bias),
            2,
        ),
        ("the bias of another length", sigmoid, Some(&logits), 2),
    ];
    for (what, router, b, k) in cases {
        let mut ids = Tensor::from_slice(&dev, &[2, k], &vec![7u32; 2 * k]).unwrap();
        let mut scores = poisoned(&dev, DType::F32, &[2, k]);
        match ops::moe_route(&dev, &logits, router, b, &mut ids, &mut scores) {
            Err(e) if e.is_invalid_input() => eprintln!("{what}: refused: {e}"),
            other => panic!("{what}: expected a refusal, got {other:?}"),
        }
        assert!(untouched(&scores), "{what}: a refused call wrote scores");
        assert!(ids.to_vec::<u32>().unwrap().iter().all(|&i| i == 7));
    }
}
