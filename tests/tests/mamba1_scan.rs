//! `ops::mamba1_selective_scan` (spec §12) on every backend here: random sequences against the
//! recurrence in f64 written here from the spec, a sequence split in two with the state carried
//! equal bit for bit to the whole, bf16 within the error of the bf16 graph scan it replaces,
//! and the refusals as typed invalid-input errors that leave the outputs untouched.

use kiln::math::kernels::mamba1_selective_scan::Mamba1ScanParams;
use kiln::math::{Bf16, Element, F16};
use kiln::ops;
use kiln::rng::Rng;
use kiln::{DType, Device, Tensor};
use kiln_tests::{poisoned, refused, POISON};

/// One scan's inputs as f32 values already rounded to the activation dtype (`a` and the state
/// f32), drawn by spec §12's laws.
struct Scan {
    dims: [usize; 4],
    x: Vec<f32>,
    dt: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    a: Vec<f32>,
    d: Vec<f32>,
    state: Option<Vec<f32>>,
}

fn draw<T: Element>(rng: &mut Rng, dims: [usize; 4], carried: bool) -> Scan {
    let [bt, len, dm, n] = dims;
    let mut u = |lo: f64, hi: f64, count: usize, round: bool| -> Vec<f32> {
        (0..count)
            .map(|_| {
                let v = (lo + (hi - lo) * rng.uniform()) as f32;
                if round {
                    T::from_f32(v).to_f32()
                } else {
                    v
                }
            })
            .collect()
    };
    Scan {
        dims,
        x: u(-1.0, 1.0, bt * len * dm, true),
        dt: u(0.05, 0.55, bt * len * dm, true),
        b: u(-1.0, 1.0, bt * len * n, true),
        c: u(-1.0, 1.0, bt * len * n, true),
        a: u(-1.5, -0.5, dm * n, false),
        d: u(-1.0, 1.0, dm, true),
        state: carried.then(|| u(-0.5, 0.5, bt * dm * n, false)),
    }
}

/// The recurrence of spec §12 in f64: `(y, final state)`.
fn recurrence(s: &Scan) -> (Vec<f64>, Vec<f64>) {
    let [bt, len, dm, n] = s.dims;
    let mut y = vec![0.0; bt * len * dm];
    let mut state: Vec<f64> = match &s.state {
        Some(v) => v.iter().map(|&v| v as f64).collect(),
        None => vec![0.0; bt * dm * n],
    };
    for b in 0..bt {
        for t in 0..len {
            for ch in 0..dm {
                let at = (b * len + t) * dm + ch;
                let (x, dt) = (s.x[at] as f64, s.dt[at] as f64);
                let mut acc = s.d[ch] as f64 * x;
                for k in 0..n {
                    let st = &mut state[(b * dm + ch) * n + k];
                    let bc = (b * len + t) * n + k;
                    *st = (dt * s.a[ch * n + k] as f64).exp() * *st + dt * x * s.b[bc] as f64;
                    acc += *st * s.c[bc] as f64;
                }
                y[at] = acc;
            }
        }
    }
    (y, state)
}

/// `(y, final state)` through the op on `dev` in `dtype`.
fn run(dev: &Device, dtype: DType, s: &Scan) -> (Vec<f32>, Vec<f32>) {
    let [bt, len, dm, n] = s.dims;
    let t = |shape: &[usize], v: &[f32], dt: DType| Tensor::from_f32(dev, dt, shape, v).unwrap();
    let x = t(&[bt, len, dm], &s.x, dtype);
    let dt = t(&[bt, len, dm], &s.dt, dtype);
    let b = t(&[bt, len, n], &s.b, dtype);
    let c = t(&[bt, len, n], &s.c, dtype);
    let a = t(&[dm, n], &s.a, DType::F32);
    let d = t(&[dm], &s.d, dtype);
    let state_in = s.state.as_ref().map(|v| t(&[bt, dm, n], v, DType::F32));
    let mut y = poisoned(dev, dtype, &[bt, len, dm]);
    let mut state_out = poisoned(dev, DType::F32, &[bt, dm, n]);
    ops::mamba1_selective_scan(
        dev,
        &x,
        &dt,
        &b,
        &c,
        &a,
        &d,
        state_in.as_ref(),
        &mut y,
        &mut state_out,
    )
    .unwrap();
    let (y, state) = (y.to_f32_vec().unwrap(), state_out.to_f32_vec().unwrap());
    for v in y.iter().chain(&state) {
        assert!(
            v.is_finite() && *v != POISON,
            "{}: an output unwritten",
            dev.name()
        );
    }
    (y, state)
}

fn to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&v| v as f64).collect()
}

#[test]
fn random_scans_match_the_recurrence_on_every_backend() {
    let seed = kiln_tests::seed("mamba1 scans");
    let mut rng = Rng::new(seed);
    // Spec §12's N 8/16/32 at Dm 24, a padded N 5 over two blocks of channels, fresh and carried.
    let shapes = [
        ([2, 7, 24, 16], true),
        ([1, 3, 70, 5], false),
        ([2, 1, 24, 32], true),
        ([1, 9, 24, 8], false),
    ];
    for dev in kiln_tests::test_devices() {
        for dtype in [DType::F32, DType::F16, DType::Bf16] {
            for &(dims, carried) in &shapes {
                let s = match dtype {
                    DType::F32 => draw::<f32>(&mut rng, dims, carried),
                    DType::F16 => draw::<F16>(&mut rng, dims, carried),
                    _ => draw::<Bf16>(&mut rng, dims, carried),
                };
                let (want_y, want_state) = recurrence(&s);
                let (y, state) = run(&dev, dtype, &s);
                let e_y = kiln::parity::max_rel(&to_f64(&y), &want_y);
                let e_s = kiln::parity::max_rel(&to_f64(&state), &want_state);
                eprintln!(
                    "{} {} {dims:?} carried {carried}: max_rel y {e_y:.2e} state {e_s:.2e}",
                    dev.name(),
                    dtype.name()
                );
                // Spec §12: f32 below 1e-5; a 16-bit y within a few roundings of its dtype.
                let y_bound = match dtype {
                    DType::F32 => 1e-5,
                    DType::F16 => 2e-3,
                    _ => 1.6e-2,
                };
                assert!(
                    e_y < y_bound,
                    "{} {}: y max_rel {e_y:e}",
                    dev.name(),
                    dtype.name()
                );
                assert!(
                    e_s < 1e-5,
                    "{} {}: state max_rel {e_s:e}",
                    dev.name(),
                    dtype.name()
                );
            }
        }
    }
}

#[test]
fn a_sequence_split_in_two_equals_the_whole_bit_for_bit() {
    let seed = kiln_tests::seed("mamba1 split sequence");
    let mut rng = Rng::new(seed);
    for dev in kiln_tests::test_devices() {
        for dtype in [DType::F32, DType::Bf16] {
            let whole = draw::<Bf16>(&mut rng, [2, 7, 40, 16], true);
            let [bt, _, dm, n] = whole.dims;
            let part = |from: usize, to: usize, state: Option<Vec<f32>>| {
                let cut = |v: &[f32], w: usize| -> Vec<f32> {
                    (0..bt)
                        .flat_map(|b| v[(b * 7 + from) * w..(b * 7 + to) * w].to_vec())
                        .collect()
                };
                Scan {
                    dims: [bt, to - from, dm, n],
                    x: cut(&whole.x, dm),
                    dt: cut(&whole.dt, dm),
                    b: cut(&whole.b, n),
                    c: cut(&whole.c, n),
                    a: whole.a.clone(),
                    d: whole.d.clone(),
                    state,
                }
            };
            let (y_all, s_all) = run(&dev, dtype, &whole);
            let (y0, s0) = run(&dev, dtype, &part(0, 3, whole.state.clone()));
            let (y1, s1) = run(&dev, dtype, &part(3, 7, Some(s0)));
            let joined: Vec<f32> = (0..bt)
                .flat_map(|b| {
                    let mut row = y0[b * 3 * dm..(b + 1) * 3 * dm].to_vec();
                    row.extend_from_slice(&y1[b * 4 * dm..(b + 1) * 4 * dm]);
                    row
                })
                .collect();
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&joined),
                bits(&y_all),
                "{} {}: y",
                dev.name(),
                dtype.name()
            );
            assert_eq!(
                bits(&s1),
                bits(&s_all),
                "{} {}: state",
                dev.name(),
                dtype.name()
            );
            eprintln!("{} {}: 3 + 4 tokens == 7 tokens", dev.name(), dtype.name());
        }
    }
}

/// Spec §12's comparison: the graph scan the kernel replaces, every op rounded to bf16 (`A` in
/// bf16 as the graph holds it), `y` of each step summed in f32.
fn bf16_graph_scan(s: &Scan) -> Vec<f64> {
    let r = |v: f32| Bf16::from_f32(v).to_f32();
    let [bt, len, dm, n] = s.dims;
    let mut y = vec![0.0; bt * len * dm];
    let mut state = vec![0.0f32; bt * dm * n];
    for b in 0..bt {
        for t in 0..len {
            for ch in 0..dm {
                let at = (b * len + t) * dm + ch;
                let (x, dt) = (s.x[at], s.dt[at]);
                let dx = r(dt * x);
                let mut acc = 0.0f32;
                for k in 0..n {
                    let bc = (b * len + t) * n + k;
                    let st = &mut state[(b * dm + ch) * n + k];
                    let decay = r(r(dt * r(s.a[ch * n + k])).exp());
                    *st = r(r(*st * decay) + r(dx * s.b[bc]));
                    acc += *st * s.c[bc];
                }
                y[at] = r(r(acc) + r(s.d[ch] * x)) as f64;
            }
        }
    }
    y
}

fn rms_error(got: &[f64], want: &[f64]) -> f64 {
    let sq: f64 = got.iter().zip(want).map(|(g, w)| (g - w) * (g - w)).sum();
    (sq / want.len() as f64).sqrt()
}

#[test]
fn bf16_scan_is_within_the_bf16_graph_scan_error() {
    let seed = kiln_tests::seed("mamba1 bf16 against the graph scan");
    let mut rng = Rng::new(seed);
    // Spec §12: Bt 1, L 64, Dm 24, N 16, fresh.
    let mut s = draw::<Bf16>(&mut rng, [1, 64, 24, 16], false);
    // Both scans read the same A (the graph's bf16 values).
    s.a = s.a.iter().map(|&v| Bf16::from_f32(v).to_f32()).collect();
    let (exact, _) = recurrence(&s);
    let graph = rms_error(&bf16_graph_scan(&s), &exact);
    for dev in kiln_tests::test_devices() {
        let (y, _) = run(&dev, DType::Bf16, &s);
        let kernel = rms_error(&to_f64(&y), &exact);
        eprintln!(
            "{}: bf16 RMS error {kernel:.3e}, graph scan {graph:.3e}",
            dev.name()
        );
        assert!(kernel <= graph, "{}: {kernel:e} > {graph:e}", dev.name());
    }
}

/// Shapes of `x`, `b`, `a`, `d`, `state_in` (None: fresh), `y`, `state_out`, and the dtypes of
/// the activations and of `a`.
struct Bad<'a> {
    x: &'a [usize],
    b: &'a [usize],
    a: &'a [usize],
    d: &'a [usize],
    state_in: Option<&'a [usize]>,
    y: &'a [usize],
    state_out: &'a [usize],
    dtype: DType,
    a_dtype: DType,
}

const GOOD: Bad<'static> = Bad {
    x: &[1, 3, 8],
    b: &[1, 3, 4],
    a: &[8, 4],
    d: &[8],
    state_in: Some(&[1, 8, 4]),
    y: &[1, 3, 8],
    state_out: &[1, 8, 4],
    dtype: DType::F32,
    a_dtype: DType::F32,
};

fn refused_shapes(what: &str, s: Bad) {
    let dev = Device::cpu();
    let z = |shape: &[usize], dt: DType| Tensor::zeros(&dev, dt, shape).unwrap();
    let (x, dt, b, c) = (
        z(s.x, s.dtype),
        z(s.x, s.dtype),
        z(s.b, s.dtype),
        z(s.b, s.dtype),
    );
    let (a, d) = (z(s.a, s.a_dtype), z(s.d, s.dtype));
    let state_in = s.state_in.map(|shape| z(shape, DType::F32));
    let mut y = poisoned(&dev, s.dtype, s.y);
    let mut state_out = poisoned(&dev, DType::F32, s.state_out);
    let r = ops::mamba1_selective_scan(
        &dev,
        &x,
        &dt,
        &b,
        &c,
        &a,
        &d,
        state_in.as_ref(),
        &mut y,
        &mut state_out,
    );
    refused(what, &[&y, &state_out], r);
}

#[test]
fn bad_shapes_and_dtypes_are_typed_errors_before_any_launch() {
    let n33 = Bad {
        b: &[1, 3, 33],
        a: &[8, 33],
        state_in: Some(&[1, 8, 33]),
        state_out: &[1, 8, 33],
        ..GOOD
    };
    refused_shapes("N 33", n33);
    let n0 = Bad {
        b: &[1, 3, 0],
        a: &[8, 0],
        state_in: None,
        state_out: &[1, 8, 0],
        ..GOOD
    };
    refused_shapes("N 0", n0);
    let l0 = Bad {
        x: &[1, 0, 8],
        b: &[1, 0, 4],
        y: &[1, 0, 8],
        ..GOOD
    };
    refused_shapes("L 0", l0);
    refused_shapes(
        "2-d x",
        Bad {
            x: &[3, 8],
            y: &[3, 8],
            ..GOOD
        },
    );
    refused_shapes(
        "b of another length",
        Bad {
            b: &[1, 2, 4],
            ..GOOD
        },
    );
    refused_shapes("a of other columns", Bad { a: &[8, 5], ..GOOD });
    refused_shapes("a of other channels", Bad { a: &[7, 4], ..GOOD });
    refused_shapes("d of 7 channels", Bad { d: &[7], ..GOOD });
    refused_shapes(
        "y of another shape",
        Bad {
            y: &[1, 3, 9],
            ..GOOD
        },
    );
    refused_shapes(
        "a state of another batch",
        Bad {
            state_in: Some(&[2, 8, 4]),
            ..GOOD
        },
    );
    refused_shapes(
        "state_out of N 5",
        Bad {
            state_out: &[1, 8, 5],
            ..GOOD
        },
    );
    refused_shapes(
        "an f16 a",
        Bad {
            a_dtype: DType::F16,
            ..GOOD
        },
    );
    refused_shapes(
        "a bf16 a for bf16 x",
        Bad {
            dtype: DType::Bf16,
            a_dtype: DType::Bf16,
            ..GOOD
        },
    );

    // fresh is 0 or 1 through the raw launcher.
    let dev = Device::cpu();
    let z = |shape: &[usize]| Tensor::zeros(&dev, DType::F32, shape).unwrap();
    let (x, b, a, d, st) = (
        z(GOOD.x),
        z(GOOD.b),
        z(GOOD.a),
        z(GOOD.d),
        z(GOOD.state_out),
    );
    let mut y = poisoned(&dev, DType::F32, GOOD.y);
    let mut state_out = poisoned(&dev, DType::F32, GOOD.state_out);
    let p = Mamba1ScanParams {
        fresh: 2,
        ..Default::default()
    };
    let r = ops::kernel::mamba1_selective_scan(
        &dev,
        &p,
        &x,
        &x,
        &b,
        &b,
        &a,
        &d,
        &st,
        &mut y,
        &mut state_out,
    );
    refused("fresh 2", &[&y, &state_out], r);
}
