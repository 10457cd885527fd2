//! `ops::moe_block` (spec §7.8): router → routed experts → K-sum (+ the shared expert) for a
//! batch, against an all-f32 dense reference written here from the spec — the routing of §7.8
//! step 1 (softmax top-k with or without renormalization, sigmoid + correction bias) over the
//! router's logits, every selected expert dequantized, f32 matmuls and activations, the
//! score-weighted K-sum and the shared expert added in f32, rounded to bf16 once — with spec
//! §7.9's bounds for the path that ran; the path each batch takes; refusals before any launch.

use kiln::ops::{
    self, MoeActivation, MoeBlock, MoeBlockPath, MoeExperts, MoeGate, MoeRouter, QuantizedWeight,
    SharedExpert,
};
use kiln::quant::{quantize, AffineFormat, AffineTensor};
use kiln::{Backend, DType, Device, PortError, Tensor};
use kiln_tests::moe_layer::{
    bf16, dense_reference_f32, deviation, layer, rounded_like, weights, Layer,
};
use kiln_tests::{assert_invalid, poisoned, ragged_sim_devices, seed, untouched};

/// Spec §7.9's bounds: the fused kernels, and the `gather_qmm` chain (fallback health).
const FUSED: (f64, f64) = (5e-4, 2e-2);
const GATHER: (f64, f64) = (5e-2, 2e-1);

/// One block's host weights.
struct HostBlock {
    experts: Layer,
    k: usize,
    rule: MoeRouter,
    router: AffineTensor,
    correction_bias: Option<Vec<f32>>,
    shared: Option<Layer>,
}

/// A case: (name, E, K, Din, Dff, activation, gate/up bits, down bits, router, shared
/// activation and width).
type Shape = (
    &'static str,
    usize,
    usize,
    usize,
    usize,
    MoeActivation,
    u32,
    u32,
    MoeRouter,
    Option<(MoeActivation, usize)>,
);

fn host_block(s: u64, shape: &Shape) -> HostBlock {
    let &(_, e, k, din, dff, act, fb, db, rule, shared) = shape;
    let experts = layer(s, e, din, dff, act, fb, db, 32, DType::Bf16);
    let mut state = s ^ 0x5eed;
    // Router rows scaled so the softmax is neither flat nor one-hot.
    let w: Vec<f32> = weights(&mut state, e * din)
        .iter()
        .map(|v| v * 0.2)
        .collect();
    // 4 bits: the router's qlinear module is the one lavapipe builds for the parity run.
    let fmt = AffineFormat::new(4, 32, DType::Bf16).unwrap();
    let router = quantize(&w, e, din, fmt).unwrap();
    let correction_bias = matches!(rule, MoeRouter::SigmoidBias { .. })
        .then(|| weights(&mut state, e).iter().map(|v| v * 0.05).collect());
    let shared =
        shared.map(|(a, dsh)| layer(s ^ 0x54a7ed, 1, din, dsh, a, fb, db, 32, DType::Bf16));
    HostBlock {
        experts,
        k,
        rule,
        router,
        correction_bias,
        shared,
    }
}

fn upload_experts(dev: &Device, l: &Layer) -> Result<MoeExperts, PortError> {
    let q = |t: &AffineTensor| QuantizedWeight::upload(dev, t).unwrap();
    MoeExperts::new(
        l.experts,
        l.activation,
        q(&l.first),
        l.up.as_ref().map(q),
        q(&l.down),
    )
}

fn upload(dev: &Device, h: &HostBlock) -> MoeBlock {
    let gate = MoeGate {
        weight: QuantizedWeight::upload(dev, &h.router).unwrap(),
        rule: h.rule,
        correction_bias: h
            .correction_bias
            .as_ref()
            .map(|b| Tensor::from_f32(dev, DType::F32, &[b.len()], b).unwrap()),
    };
    let shared = h.shared.as_ref().map(|l| {
        let q = |t: &AffineTensor| QuantizedWeight::upload(dev, t).unwrap();
        SharedExpert::new(l.activation, q(&l.first), l.up.as_ref().map(q), q(&l.down)).unwrap()
    });
    MoeBlock::new(gate, h.k, upload_experts(dev, &h.experts).unwrap(), shared).unwrap()
}

/// The router's logits on `dev` (the block's own first step, through the same op), as f32.
fn device_logits(dev: &Device, h: &HostBlock, x: &Tensor) -> Vec<f32> {
    let (tokens, e) = (x.shape()[0], h.experts.experts);
    let w = QuantizedWeight::upload(dev, &h.router).unwrap();
    let din = h.experts.din;
    let mut all = Vec::new();
    // One qlinear launch takes 8 rows.
    for first in (0..tokens).step_by(8) {
        let rows = 8.min(tokens - first);
        let xs = x.view(first * din, &[rows, din]).unwrap();
        let mut y = poisoned(dev, x.dtype(), &[rows, e]);
        ops::qlinear(dev, &xs, &w, None, &mut y).unwrap();
        all.extend(y.to_f32_vec().unwrap());
    }
    all
}

/// Spec §7.8 step 1 and the softmax router, in f64: each token's top k (ties to the lower
/// index) and their scores.
fn route(h: &HostBlock, logits: &[f32]) -> (Vec<u32>, Vec<f32>) {
    let (e, k) = (h.experts.experts, h.k);
    let mut ids = Vec::new();
    let mut scores = Vec::new();
    for row in logits.chunks(e) {
        let l: Vec<f64> = row.iter().map(|&v| v as f64).collect();
        let (rank, weight): (Vec<f64>, Vec<f64>) = match (h.rule, &h.correction_bias) {
            (MoeRouter::Softmax { .. }, _) => {
                let m = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let ex: Vec<f64> = l.iter().map(|v| (v - m).exp()).collect();
                let sum: f64 = ex.iter().sum();
                let p: Vec<f64> = ex.iter().map(|v| v / sum).collect();
                (p.clone(), p)
            }
            (MoeRouter::SigmoidBias { .. }, Some(bias)) => {
                let orig: Vec<f64> = l.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
                let biased = orig.iter().zip(bias).map(|(o, &b)| o + b as f64).collect();
                (biased, orig)
            }
            _ => unreachable!("the sigmoid router has a bias"),
        };
        let mut order: Vec<usize> = (0..e).collect();
        order.sort_by(|&a, &b| rank[b].total_cmp(&rank[a]).then(a.cmp(&b)));
        let picked = &order[..k];
        let raw: Vec<f64> = picked.iter().map(|&i| weight[i]).collect();
        let sum: f64 = raw.iter().sum();
        let scaled: Vec<f64> = match h.rule {
            MoeRouter::Softmax { renormalize: true } => raw.iter().map(|r| r / sum).collect(),
            MoeRouter::Softmax { .. } => raw,
            MoeRouter::SigmoidBias {
                renormalize,
                scaling_factor,
            } => {
                let sf = scaling_factor as f64;
                if renormalize && k > 1 {
                    raw.iter().map(|r| r / (sum + 1e-20) * sf).collect()
                } else {
                    raw.iter().map(|r| r * sf).collect()
                }
            }
        };
        ids.extend(picked.iter().map(|&i| i as u32));
        scores.extend(scaled.iter().map(|&v| v as f32));
    }
    (ids, scores)
}

/// The all-f32 block: routed experts plus the shared one, before the one rounding.
fn reference(h: &HostBlock, x: &[f32], ids: &[u32], scores: &[f32]) -> Vec<f32> {
    let tokens = x.len() / h.experts.din;
    let mut out = dense_reference_f32(&h.experts, x, ids, scores);
    if let Some(s) = &h.shared {
        let own = dense_reference_f32(s, x, &vec![0; tokens], &vec![1.0; tokens]);
        out.iter_mut().zip(own).for_each(|(o, v)| *o += v);
    }
    out
}

/// Runs the block on `dev` for `tokens` tokens (on `path`, or the batch's) and checks it
/// against the reference with the bounds of the path that ran.
fn check(
    dev: &Device,
    h: &HostBlock,
    block: &MoeBlock,
    s: u64,
    tokens: usize,
    path: Option<MoeBlockPath>,
    what: &str,
) {
    let din = h.experts.din;
    let mut state = s.wrapping_add(tokens as u64);
    let x: Vec<f32> = weights(&mut state, tokens * din)
        .iter()
        .map(|&v| bf16(v))
        .collect();
    let xt = Tensor::from_f32(dev, DType::Bf16, &[tokens, din], &x).unwrap();
    let mut out = poisoned(dev, DType::Bf16, &[tokens, din]);
    let ran = ops::moe_block_on(dev, &xt, block, path, &mut out).unwrap();
    let want_path = path.unwrap_or(MoeBlockPath::for_batch(tokens, h.k));
    assert_eq!(ran.path, want_path, "{what}: {} ran", ran.path.name());
    assert!(
        ran.launches.iter().all(|r| !r.is_fallback()),
        "{what}: a launch took the fallback: {:?}",
        ran.launches
    );
    let got = out.to_f32_vec().unwrap();
    let (ids, scores) = route(h, &device_logits(dev, h, &xt));
    let want = rounded_like(&reference(h, &x, &ids, &scores), &got);
    assert!(
        want.iter().any(|&v| v != 0.0),
        "{what}: an all-zero reference"
    );
    let (nrms, nmax) = deviation(&got, &want);
    let (b_rms, b_max) = if ran.path == MoeBlockPath::Fused {
        FUSED
    } else {
        GATHER
    };
    eprintln!(
        "{what} T{tokens} {} on {}: nrms {nrms:.3e} nmax {nmax:.3e}",
        ran.path.name(),
        dev.name()
    );
    assert!(
        nrms < b_rms && nmax < b_max,
        "{what} T{tokens} {} on {}: nrms {nrms:.3e} nmax {nmax:.3e} (bounds {b_rms:e}, {b_max:e})",
        ran.path.name(),
        dev.name()
    );
}

/// Qwen3-MoE's SwiGLU with a renormalized softmax, Gemma's GeGLU under a plain softmax with
/// 6-bit down, Nemotron-H's relu² with the sigmoid router and its relu² shared expert, and
/// SwiGLU experts beside a SwiGLU shared expert (8-bit).
const SHAPES: [Shape; 4] = [
    (
        "swiglu softmax renorm",
        8,
        4,
        128,
        64,
        MoeActivation::SwiGlu,
        4,
        4,
        MoeRouter::Softmax { renormalize: true },
        None,
    ),
    (
        "geglu softmax (4,6)",
        8,
        2,
        128,
        64,
        MoeActivation::GeGlu,
        4,
        6,
        MoeRouter::Softmax { renormalize: false },
        None,
    ),
    (
        "relu2 sigmoid+bias, relu2 shared",
        8,
        4,
        128,
        64,
        MoeActivation::Relu2,
        4,
        4,
        MoeRouter::SigmoidBias {
            renormalize: true,
            scaling_factor: 2.5,
        },
        Some((MoeActivation::Relu2, 96)),
    ),
    (
        "swiglu (8,8), swiglu shared",
        8,
        2,
        128,
        64,
        MoeActivation::SwiGlu,
        8,
        8,
        MoeRouter::Softmax { renormalize: true },
        Some((MoeActivation::SwiGlu, 64)),
    ),
];

#[test]
fn moe_block_matches_the_dense_reference_on_every_path() {
    let s = seed("moe_block_matches_the_dense_reference_on_every_path");
    for dev in ragged_sim_devices() {
        let started = std::time::Instant::now();
        // Every shape and path on the cpu and hardware GPUs. lavapipe's module builds (~8 s
        // to over a minute each) take the 4-bit shapes; the sim's thread per lane the
        // richest one (relu², sigmoid router, shared expert) at one and four tokens.
        // moe_act's parity cases cover GeGLU on both.
        let sim = dev.backend() == Backend::Sim;
        let software = dev.gpu().is_some_and(|g| g.is_software());
        for (i, shape) in SHAPES.iter().enumerate() {
            let four_bit = shape.6 == 4 && shape.7 == 4;
            if (software && !four_bit) || (sim && i != 2) {
                continue;
            }
            let h = host_block(s ^ i as u64, shape);
            let block = upload(&dev, &h);
            // One token: fused; four: gather; 64 slots: sorted gather (T 16 at K 4).
            check(&dev, &h, &block, s, 1, None, shape.0);
            check(&dev, &h, &block, s, 4, None, shape.0);
            if i == 0 && !sim {
                check(&dev, &h, &block, s, 64 / h.k, None, shape.0);
            }
            if !sim {
                // The fused kernels take a batch too, and the gather chain one token.
                check(&dev, &h, &block, s, 4, Some(MoeBlockPath::Fused), shape.0);
                check(&dev, &h, &block, s, 1, Some(MoeBlockPath::Gather), shape.0);
            }
        }
        eprintln!("{}: {:.1} s", dev.name(), started.elapsed().as_secs_f64());
    }
}

#[test]
fn the_batch_picks_the_path() {
    assert_eq!(MoeBlockPath::for_batch(1, 8), MoeBlockPath::Fused);
    assert_eq!(MoeBlockPath::for_batch(4, 8), MoeBlockPath::Gather);
    assert_eq!(MoeBlockPath::for_batch(7, 8), MoeBlockPath::Gather);
    assert_eq!(MoeBlockPath::for_batch(8, 8), MoeBlockPath::GatherSorted);
    assert_eq!(MoeBlockPath::for_batch(512, 2), MoeBlockPath::GatherSorted);
}

#[test]
fn host_routing_matches_the_routers_own() {
    let s = seed("host_routing_matches_the_routers_own");
    let dev = Device::cpu();
    let h = host_block(s, &SHAPES[2]);
    let block = upload(&dev, &h);
    let (tokens, din) = (4, h.experts.din);
    let mut state = s;
    let x: Vec<f32> = weights(&mut state, tokens * din)
        .iter()
        .map(|&v| bf16(v))
        .collect();
    let xt = Tensor::from_f32(&dev, DType::Bf16, &[tokens, din], &x).unwrap();
    let (ids, scores) = route(&h, &device_logits(&dev, &h, &xt));
    for path in [MoeBlockPath::Fused, MoeBlockPath::Gather] {
        let mut own = poisoned(&dev, DType::Bf16, &[tokens, din]);
        let mut routed = poisoned(&dev, DType::Bf16, &[tokens, din]);
        ops::moe_block_on(&dev, &xt, &block, Some(path), &mut own).unwrap();
        ops::moe_block_routed(&dev, &xt, &block, &ids, &scores, Some(path), &mut routed).unwrap();
        let (nrms, _) = deviation(&routed.to_f32_vec().unwrap(), &own.to_f32_vec().unwrap());
        assert!(
            nrms < 1e-3,
            "{}: host routing differs: nrms {nrms:e}",
            path.name()
        );
    }
}

#[test]
fn moe_block_refuses_bad_inputs_before_any_launch() {
    let s = seed("moe_block_refuses_bad_inputs_before_any_launch");
    let dev = Device::cpu();
    let h = host_block(s, &SHAPES[2]);
    let (e, din) = (h.experts.experts, h.experts.din);
    let router = || QuantizedWeight::upload(&dev, &h.router).unwrap();
    let experts = || upload_experts(&dev, &h.experts).unwrap();
    let bias = |n: usize| Some(Tensor::from_f32(&dev, DType::F32, &[n], &vec![0.0; n]).unwrap());
    let sigmoid = MoeRouter::SigmoidBias {
        renormalize: true,
        scaling_factor: 1.0,
    };
    let gate = |rule, correction_bias| MoeGate {
        weight: router(),
        rule,
        correction_bias,
    };
    // Construction: K out of 1..=E, the bias with the wrong router or of the wrong shape, a
    // router of other width, gated experts or shared expert without up, a shared expert of
    // another width.
    assert_invalid(
        MoeBlock::new(gate(sigmoid, bias(e)), e + 1, experts(), None),
        "K > E",
    );
    assert_invalid(
        MoeBlock::new(gate(sigmoid, bias(e)), 0, experts(), None),
        "K = 0",
    );
    let softmax = MoeRouter::Softmax { renormalize: true };
    assert_invalid(
        MoeBlock::new(gate(softmax, bias(e)), 2, experts(), None),
        "bias on softmax",
    );
    assert_invalid(
        MoeBlock::new(gate(sigmoid, None), 2, experts(), None),
        "sigmoid without bias",
    );
    assert_invalid(
        MoeBlock::new(gate(sigmoid, bias(e - 1)), 2, experts(), None),
        "bias [E-1]",
    );
    let narrow = layer(
        s,
        e,
        din / 2,
        64,
        MoeActivation::SwiGlu,
        4,
        4,
        32,
        DType::Bf16,
    );
    assert_invalid(
        MoeBlock::new(
            gate(sigmoid, bias(e)),
            2,
            upload_experts(&dev, &narrow).unwrap(),
            None,
        ),
        "router of another Din",
    );
    let gated = layer(s, e, din, 64, MoeActivation::SwiGlu, 4, 4, 32, DType::Bf16);
    let q = |t: &AffineTensor| QuantizedWeight::upload(&dev, t).unwrap();
    assert_invalid(
        MoeExperts::new(
            e,
            MoeActivation::SwiGlu,
            q(&gated.first),
            None,
            q(&gated.down),
        ),
        "gated experts without up",
    );
    assert_invalid(
        SharedExpert::new(MoeActivation::GeGlu, q(&gated.first), None, q(&gated.down)),
        "gated shared expert without up",
    );
    let other = layer(
        s,
        1,
        din / 2,
        64,
        MoeActivation::Relu2,
        4,
        4,
        32,
        DType::Bf16,
    );
    let shared = SharedExpert::new(MoeActivation::Relu2, q(&other.first), None, q(&other.down));
    assert_invalid(
        MoeBlock::new(gate(sigmoid, bias(e)), 2, experts(), Some(shared.unwrap())),
        "shared expert of another Din",
    );
    // Calls: x of another width or dtype, out of another shape or dtype, host routing with
    // an id ≥ E or lengths that disagree — each refused with out untouched.
    let block = upload(&dev, &h);
    let x = |cols: usize, dtype| {
        Tensor::from_f32(&dev, dtype, &[2, cols], &vec![0.5; 2 * cols]).unwrap()
    };
    let calls: [(&str, Tensor, DType, Vec<usize>); 4] = [
        (
            "x of another width",
            x(din + 32, DType::Bf16),
            DType::Bf16,
            vec![2, din + 32],
        ),
        (
            "x u32",
            Tensor::zeros(&dev, DType::U32, &[2, din]).unwrap(),
            DType::Bf16,
            vec![2, din],
        ),
        (
            "out of another dtype",
            x(din, DType::Bf16),
            DType::F16,
            vec![2, din],
        ),
        (
            "out of another shape",
            x(din, DType::Bf16),
            DType::Bf16,
            vec![3, din],
        ),
    ];
    for (what, xt, out_dtype, out_shape) in calls {
        let mut out = poisoned(&dev, out_dtype, &out_shape);
        assert_invalid(ops::moe_block(&dev, &xt, &block, &mut out), what);
        assert!(untouched(&out), "{what}: a refused call wrote out");
    }
    let xt = x(din, DType::Bf16);
    let k = h.k;
    let mut ids: Vec<u32> = (0..2 * k as u32).collect();
    let scores = vec![0.25; 2 * k];
    ids[k + 1] = e as u32;
    let mut out = poisoned(&dev, DType::Bf16, &[2, din]);
    match ops::moe_block_routed(&dev, &xt, &block, &ids, &scores, None, &mut out) {
        Err(PortError::ExpertOutOfRange { position, id, .. }) => {
            assert_eq!((position, id), (k + 1, e as u32))
        }
        other => panic!("an expert id ≥ E: expected ExpertOutOfRange, got {other:?}"),
    }
    ids[k + 1] = 0;
    assert_invalid(
        ops::moe_block_routed(&dev, &xt, &block, &ids[1..], &scores[1..], None, &mut out),
        "ids not K per token",
    );
    assert_invalid(
        ops::moe_block_routed(&dev, &xt, &block, &ids, &scores[1..], None, &mut out),
        "scores of another length",
    );
    assert!(untouched(&out), "a refused call wrote out");
}
