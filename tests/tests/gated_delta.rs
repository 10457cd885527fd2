//! `ops::gated_delta_step` (Qwen3-Next's Gated DeltaNet, spec §14) on every backend here:
//! random inputs (printed seeds) against an f64 recurrence written here from the op's docs,
//! the chain-parity variant's promise (a `T`-step launch equals `T` one-step launches bit for
//! bit, f16 and bf16), the mask's semantics (a masked step leaves the state alone and writes
//! zeros), and the refusals as typed invalid-input errors that leave the outputs untouched.

use kiln::math::kernels::gated_delta_step::GatedDeltaParams;
use kiln::math::{Bf16, Element, F16};
use kiln::ops;
use kiln::rng::Rng;
use kiln::{DType, Device, Tensor};
use kiln_tests::{poisoned, refused, POISON};

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::Bf16];

/// `v` rounded to `dtype` (the value a tensor of that dtype holds).
fn round(dtype: DType, v: f64) -> f32 {
    match dtype {
        DType::F16 => F16::from_f32(v as f32).to_f32(),
        DType::Bf16 => Bf16::from_f32(v as f32).to_f32(),
        _ => v as f32,
    }
}

/// A launch's geometry and its inputs as host values already rounded to the dtype.
#[derive(Clone)]
struct Inputs {
    dtype: DType,
    /// `[B, T, Hk, Hv, Dk, Dv]`.
    dims: [usize; 6],
    per_key: bool,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    g: Vec<f32>,
    beta: Vec<f32>,
    state: Vec<f32>,
}

fn inputs(rng: &mut Rng, dtype: DType, dims: [usize; 6], per_key: bool) -> Inputs {
    let [b, t, hk, hv, dk, dv] = dims;
    let unit = (dk as f64).sqrt().recip();
    let mut draw = |n: usize, f: &dyn Fn(&mut Rng) -> f64| -> Vec<f32> {
        (0..n).map(|_| round(dtype, f(rng))).collect()
    };
    let gates = if per_key { b * t * hv * dk } else { b * t * hv };
    Inputs {
        dtype,
        dims,
        per_key,
        q: draw(b * t * hk * dk, &|r| unit * r.normal()),
        k: draw(b * t * hk * dk, &|r| unit * r.normal()),
        v: draw(b * t * hv * dv, &|r| r.normal()),
        g: draw(gates, &|r| 0.8 + 0.2 * r.uniform()),
        beta: draw(b * t * hv, &|r| r.uniform()),
        state: draw(b * hv * dv * dk, &|r| r.normal()),
    }
}

impl Inputs {
    /// Steps `t0..t1` of every batch (the state unchanged).
    fn steps(&self, t0: usize, t1: usize) -> Inputs {
        let [b, t, hk, hv, dk, dv] = self.dims;
        let cut = |x: &[f32], per_step: usize| -> Vec<f32> {
            (0..b)
                .flat_map(|bi| x[(bi * t + t0) * per_step..(bi * t + t1) * per_step].to_vec())
                .collect()
        };
        let gate_step = if self.per_key { hv * dk } else { hv };
        Inputs {
            dims: [b, t1 - t0, hk, hv, dk, dv],
            q: cut(&self.q, hk * dk),
            k: cut(&self.k, hk * dk),
            v: cut(&self.v, hv * dv),
            g: cut(&self.g, gate_step),
            beta: cut(&self.beta, hv),
            ..self.clone()
        }
    }
}

/// The recurrence in f64 (the op's docs): `y` and the final state, rounded to the dtype where
/// a tensor stores them, the state after every step with `chain_parity`.
fn recurrence(i: &Inputs, mask: Option<&[u32]>, chain_parity: bool) -> (Vec<f64>, Vec<f64>) {
    let [b, t, hk, hv, dk, dv] = i.dims;
    let mut y = vec![0.0; b * t * hv * dv];
    let mut state: Vec<f64> = i.state.iter().map(|&s| s as f64).collect();
    for bi in 0..b {
        for h in 0..hv {
            let kh = h / (hv / hk);
            for d in 0..dv {
                let s = &mut state[((bi * hv + h) * dv + d) * dk..][..dk];
                for ti in 0..t {
                    let step = bi * t + ti;
                    let head = step * hv + h;
                    if mask.is_some_and(|m| m[step] == 0) {
                        continue;
                    }
                    let key = |x: &[f32], c: usize| x[(step * hk + kh) * dk + c] as f64;
                    for (c, sc) in s.iter_mut().enumerate() {
                        *sc *= i.g[if i.per_key { head * dk + c } else { head }] as f64;
                    }
                    let kv: f64 = (0..dk).map(|c| s[c] * key(&i.k, c)).sum();
                    let delta = (i.v[head * dv + d] as f64 - kv) * i.beta[head] as f64;
                    for (c, sc) in s.iter_mut().enumerate() {
                        *sc += key(&i.k, c) * delta;
                    }
                    let out: f64 = (0..dk).map(|c| s[c] * key(&i.q, c)).sum();
                    y[head * dv + d] = round(i.dtype, out) as f64;
                    if chain_parity {
                        s.iter_mut().for_each(|sc| *sc = round(i.dtype, *sc) as f64);
                    }
                }
            }
        }
    }
    let state = state.iter().map(|&s| round(i.dtype, s) as f64).collect();
    (y, state)
}

fn tensor(dev: &Device, dtype: DType, shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_f32(dev, dtype, shape, v).unwrap()
}

/// The op's `y` and `state_out` (poisoned before, checked written after).
fn run(
    dev: &Device,
    i: &Inputs,
    mask: Option<&Tensor>,
    chain_parity: bool,
) -> (Vec<f32>, Vec<f32>) {
    let [b, t, hk, hv, dk, dv] = i.dims;
    let dt = i.dtype;
    let keys = [b, t, hk, dk];
    let gate: Vec<usize> = if i.per_key {
        vec![b, t, hv, dk]
    } else {
        vec![b, t, hv]
    };
    let state_shape = [b, hv, dv, dk];
    let mut y = poisoned(dev, dt, &[b, t, hv, dv]);
    let mut state_out = poisoned(dev, dt, &state_shape);
    ops::gated_delta_step(
        dev,
        &tensor(dev, dt, &keys, &i.q),
        &tensor(dev, dt, &keys, &i.k),
        &tensor(dev, dt, &[b, t, hv, dv], &i.v),
        &tensor(dev, dt, &gate, &i.g),
        &tensor(dev, dt, &[b, t, hv], &i.beta),
        mask,
        &tensor(dev, dt, &state_shape, &i.state),
        chain_parity,
        &mut y,
        &mut state_out,
    )
    .unwrap();
    let (y, state) = (y.to_f32_vec().unwrap(), state_out.to_f32_vec().unwrap());
    for (what, out) in [("y", &y), ("state_out", &state)] {
        assert!(
            out.iter().all(|v| v.is_finite() && *v != POISON),
            "{}: an element of {what} unwritten or non-finite",
            dev.name()
        );
    }
    (y, state)
}

/// The linear-layer budgets of spec §0.2 (nrms, nmax).
fn budget(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F32 => (1e-5, 1e-4),
        DType::F16 => (2e-3, 1.2e-2),
        _ => (1.6e-2, 7e-2),
    }
}

fn within(what: &str, got: &[f32], want: &[f64], dtype: DType) {
    let got: Vec<f64> = got.iter().map(|&g| g as f64).collect();
    let (nrms, nmax) = kiln::parity::normalized_deviation(&got, want);
    let (rb, mb) = budget(dtype);
    eprintln!("{what}: nrms {nrms:.2e} nmax {nmax:.2e}");
    assert!(
        nrms < rb && nmax < mb,
        "{what}: nrms {nrms:e} nmax {nmax:e}"
    );
}

/// Bit patterns, so a comparison is bitwise (and a NaN would not pass as equal to itself).
fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn random_inputs_match_the_f64_recurrence_on_every_backend() {
    let mut rng = Rng::new(kiln_tests::seed("gated_delta random inputs"));
    // [B, T, Hk, Hv, Dk, Dv]: one step, Hv/Hk 2 with a per-Dk gate, Dk 37 (no wave's multiple).
    let shapes: [([usize; 6], bool); 3] = [
        ([1, 1, 2, 4, 16, 3], false),
        ([2, 3, 1, 2, 8, 5], true),
        ([1, 2, 1, 1, 37, 2], false),
    ];
    let mask = [1u32, 0, 1, 1, 1, 0];
    for dev in kiln_tests::test_devices() {
        for dtype in DTYPES {
            for &(dims, per_key) in &shapes {
                let i = inputs(&mut rng, dtype, dims, per_key);
                let [b, t, ..] = dims;
                let m = &mask[..b * t];
                let mask_t = Tensor::from_slice(&dev, &[b, t], m).unwrap();
                for chain in [false, true] {
                    for with_mask in [false, true] {
                        let mt = with_mask.then_some(&mask_t);
                        let (y, state) = run(&dev, &i, mt, chain);
                        let (wy, ws) = recurrence(&i, with_mask.then_some(m), chain);
                        let what = format!(
                            "{} {} {dims:?} per_key {per_key} chain {chain} mask {with_mask}",
                            dev.name(),
                            dtype.name()
                        );
                        within(&format!("{what} y"), &y, &wy, dtype);
                        within(&format!("{what} state"), &state, &ws, dtype);
                    }
                }
            }
        }
    }
}

#[test]
fn a_chain_parity_block_equals_its_single_steps_bit_for_bit() {
    let mut rng = Rng::new(kiln_tests::seed("gated_delta chain parity"));
    let dims = [2, 4, 1, 2, 24, 3];
    for dev in kiln_tests::test_devices() {
        for dtype in [DType::F16, DType::Bf16, DType::F32] {
            for per_key in [false, true] {
                let i = inputs(&mut rng, dtype, dims, per_key);
                let (block_y, block_state) = run(&dev, &i, None, true);
                let (b, t, per_step) = (dims[0], dims[1], dims[3] * dims[5]);
                let mut state = i.state.clone();
                for ti in 0..t {
                    let one = Inputs {
                        state,
                        ..i.steps(ti, ti + 1)
                    };
                    let (y, s) = run(&dev, &one, None, true);
                    // Without chain parity a single step is the same launch.
                    assert_eq!(bits(&run(&dev, &one, None, false).0), bits(&y));
                    for bi in 0..b {
                        let at = (bi * t + ti) * per_step;
                        assert_eq!(
                            bits(&block_y[at..at + per_step]),
                            bits(&y[bi * per_step..(bi + 1) * per_step]),
                            "{} {}: y of step {ti}, batch {bi}",
                            dev.name(),
                            dtype.name()
                        );
                    }
                    state = s;
                }
                assert_eq!(
                    bits(&block_state),
                    bits(&state),
                    "{} {}: state",
                    dev.name(),
                    dtype.name()
                );
                eprintln!(
                    "{} {} per_key {per_key}: {t} steps bit-identical",
                    dev.name(),
                    dtype.name()
                );
            }
        }
    }
}

#[test]
fn a_masked_step_keeps_the_state_and_writes_zeros() {
    let mut rng = Rng::new(kiln_tests::seed("gated_delta mask"));
    let dims = [1, 4, 1, 2, 12, 5];
    for dev in kiln_tests::test_devices() {
        for dtype in DTYPES {
            let i = inputs(&mut rng, dtype, dims, false);
            // All masked, as u32 words and as bytes: the state passes through, y is zero.
            let none_words = Tensor::from_slice(&dev, &[1, 4], &[0u32; 4]).unwrap();
            let none_bytes = Tensor::from_slice(&dev, &[1, 4], &[0u8; 4]).unwrap();
            for m in [&none_words, &none_bytes] {
                for chain in [false, true] {
                    let (y, state) = run(&dev, &i, Some(m), chain);
                    assert!(
                        y.iter().all(|&v| v == 0.0),
                        "{}: y of masked steps",
                        dev.name()
                    );
                    assert_eq!(bits(&state), bits(&i.state), "{}: masked state", dev.name());
                }
            }
            // Steps 1 and 3 masked equal a launch over steps 0 and 2 alone, in both variants.
            let words = Tensor::from_slice(&dev, &[1, 4], &[1u32, 0, 1, 0]).unwrap();
            let bytes = Tensor::from_slice(&dev, &[1, 4], &[1u8, 0, 7, 0]).unwrap();
            let kept = {
                let (a, b) = (i.steps(0, 1), i.steps(2, 3));
                Inputs {
                    dims: [1, 2, 1, 2, 12, 5],
                    q: [a.q, b.q].concat(),
                    k: [a.k, b.k].concat(),
                    v: [a.v, b.v].concat(),
                    g: [a.g, b.g].concat(),
                    beta: [a.beta, b.beta].concat(),
                    ..i.clone()
                }
            };
            let per_step = 2 * 5;
            for chain in [false, true] {
                let (want_y, want_state) = run(&dev, &kept, None, chain);
                for m in [&words, &bytes] {
                    let (y, state) = run(&dev, &i, Some(m), chain);
                    assert_eq!(bits(&state), bits(&want_state), "{}: state", dev.name());
                    assert_eq!(bits(&y[..per_step]), bits(&want_y[..per_step]));
                    assert_eq!(
                        bits(&y[2 * per_step..3 * per_step]),
                        bits(&want_y[per_step..])
                    );
                    let masked = [&y[per_step..2 * per_step], &y[3 * per_step..]].concat();
                    assert!(masked.iter().all(|&v| v == 0.0), "{}: masked y", dev.name());
                }
            }
            eprintln!("{} {}: masks hold", dev.name(), dtype.name());
        }
    }
}

/// Shapes of `q, k, v, g, beta, state_in, y, state_out` and the dtype of `k`.
struct Shapes<'a> {
    q: &'a [usize],
    k: &'a [usize],
    v: &'a [usize],
    g: &'a [usize],
    beta: &'a [usize],
    state: &'a [usize],
    y: &'a [usize],
    k_dtype: DType,
}

const GOOD: Shapes<'static> = Shapes {
    q: &[1, 2, 2, 8],
    k: &[1, 2, 2, 8],
    v: &[1, 2, 4, 3],
    g: &[1, 2, 4],
    beta: &[1, 2, 4],
    state: &[1, 4, 3, 8],
    y: &[1, 2, 4, 3],
    k_dtype: DType::F32,
};

fn refused_shapes(what: &str, s: Shapes, mask: Option<(&[usize], DType)>) {
    let dev = Device::cpu();
    let z = |shape: &[usize], dtype| Tensor::zeros(&dev, dtype, shape).unwrap();
    let f = DType::F32;
    let mask = mask.map(|(shape, dtype)| z(shape, dtype));
    let mut y = poisoned(&dev, f, s.y);
    let mut state_out = poisoned(&dev, f, s.state);
    let r = ops::gated_delta_step(
        &dev,
        &z(s.q, f),
        &z(s.k, s.k_dtype),
        &z(s.v, f),
        &z(s.g, f),
        &z(s.beta, f),
        mask.as_ref(),
        &z(s.state, f),
        false,
        &mut y,
        &mut state_out,
    );
    refused(what, &[&y], r);
}

#[test]
fn bad_shapes_params_and_dtypes_are_typed_errors_before_any_launch() {
    use DType::{F16, F32, U32, U8};
    let bad = |what, s| refused_shapes(what, s, None);
    bad(
        "Hv 4 over Hk 3",
        Shapes {
            q: &[1, 2, 3, 8],
            k: &[1, 2, 3, 8],
            ..GOOD
        },
    );
    bad(
        "Dk 513",
        Shapes {
            q: &[1, 2, 2, 513],
            k: &[1, 2, 2, 513],
            state: &[1, 4, 3, 513],
            ..GOOD
        },
    );
    bad(
        "k of another shape",
        Shapes {
            k: &[1, 2, 2, 9],
            ..GOOD
        },
    );
    bad(
        "k in f16",
        Shapes {
            k_dtype: F16,
            ..GOOD
        },
    );
    bad(
        "3-d q",
        Shapes {
            q: &[2, 2, 8],
            ..GOOD
        },
    );
    bad(
        "T 0",
        Shapes {
            q: &[1, 0, 2, 8],
            k: &[1, 0, 2, 8],
            v: &[1, 0, 4, 3],
            g: &[1, 0, 4],
            beta: &[1, 0, 4],
            y: &[1, 0, 4, 3],
            ..GOOD
        },
    );
    bad(
        "v of another batch",
        Shapes {
            v: &[2, 2, 4, 3],
            ..GOOD
        },
    );
    bad(
        "g per Dk of the wrong width",
        Shapes {
            g: &[1, 2, 4, 7],
            ..GOOD
        },
    );
    bad(
        "g of the key heads",
        Shapes {
            g: &[1, 2, 2],
            ..GOOD
        },
    );
    bad(
        "beta per Dk",
        Shapes {
            beta: &[1, 2, 4, 8],
            ..GOOD
        },
    );
    bad(
        "state of other rows",
        Shapes {
            state: &[1, 4, 4, 8],
            ..GOOD
        },
    );
    bad(
        "y of another shape",
        Shapes {
            y: &[1, 2, 4, 4],
            ..GOOD
        },
    );
    let m = |what, mask| refused_shapes(what, GOOD, Some(mask));
    m("an f32 mask", (&[1, 2], F32));
    m("a mask of other steps", (&[1, 3], U32));
    m("a 1-d mask", (&[2], U32));
    m("a u8 mask of two bytes (not a word)", (&[1, 2], U8));

    // mask_kind and chain_parity through the raw launcher.
    let dev = Device::cpu();
    let z = |shape: &[usize]| Tensor::zeros(&dev, F32, shape).unwrap();
    let mask = Tensor::zeros(&dev, U32, &[2]).unwrap();
    for (what, p) in [
        (
            "mask_kind 3",
            GatedDeltaParams {
                mask_kind: 3,
                ..Default::default()
            },
        ),
        (
            "chain_parity 2",
            GatedDeltaParams {
                chain_parity: 2,
                ..Default::default()
            },
        ),
        (
            "a byte mask of two words",
            GatedDeltaParams {
                mask_kind: 2,
                ..Default::default()
            },
        ),
    ] {
        let mut y = poisoned(&dev, F32, GOOD.y);
        let mut state_out = poisoned(&dev, F32, GOOD.state);
        let r = ops::kernel::gated_delta_step(
            &dev,
            &p,
            &z(GOOD.q),
            &z(GOOD.k),
            &z(GOOD.v),
            &z(GOOD.g),
            &z(GOOD.beta),
            &mask,
            &z(GOOD.state),
            &mut y,
            &mut state_out,
        );
        refused(what, &[&y], r);
    }
}
