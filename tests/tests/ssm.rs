//! The `ssm_update` op over typed tensors: every packed input read in the dtype it is stored in
//! (one process switching `A_log` between f32 and bf16 gets each right: no port may read one as
//! the other), and spec §8's refusals as typed errors before any launch.

use kiln::math::kernels::ssm_update::SsmUpdateParams;
use kiln::math::Element;
use kiln::ops::{ssm_update, TimeStepLimits};
use kiln::rng::Rng;
use kiln::{reference, DType, Device, PortError, Tensor};
use kiln_tests::{assert_invalid, POISON};

/// One update's inputs as host f32 values, each exactly representable in bf16 (so storing one
/// as f32 or as bf16 holds the same numbers).
struct Inputs {
    batch: usize,
    heads: usize,
    head_dim: usize,
    groups: usize,
    state_dim: usize,
    x: Vec<f32>,
    a_log: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    d: Vec<f32>,
    dt: Vec<f32>,
    dt_bias: Vec<f32>,
    state: Vec<f32>,
}

fn bf16_exact(v: f64) -> f32 {
    kiln::math::Bf16::from_f32(v as f32).to_f32()
}

fn inputs(
    rng: &mut Rng,
    batch: usize,
    heads: usize,
    head_dim: usize,
    groups: usize,
    state_dim: usize,
) -> Inputs {
    let mut draw = |n: usize, f: &mut dyn FnMut(&mut Rng) -> f64| -> Vec<f32> {
        (0..n).map(|_| bf16_exact(f(rng))).collect()
    };
    let bc = batch * groups * state_dim;
    let rows = batch * heads * head_dim;
    Inputs {
        batch,
        heads,
        head_dim,
        groups,
        state_dim,
        x: draw(rows, &mut |r| r.normal()),
        a_log: draw(heads, &mut |r| r.uniform() * 16f64.ln()),
        b: draw(bc, &mut |r| r.normal()),
        c: draw(bc, &mut |r| r.normal()),
        d: draw(heads, &mut |r| 0.5 + r.uniform()),
        dt: draw(batch * heads, &mut |r| r.normal()),
        dt_bias: draw(heads, &mut |r| -3.0 + 2.0 * r.uniform()),
        state: draw(rows * state_dim, &mut |r| r.normal()),
    }
}

fn tensor(dev: &Device, dtype: DType, shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_f32(dev, dtype, shape, v).unwrap()
}

/// Runs the op with `a_log` stored as `a_log_dtype` (the other inputs f32); returns `out` and
/// `state_out`.
fn run(
    dev: &Device,
    i: &Inputs,
    a_log_dtype: DType,
    limits: TimeStepLimits,
) -> Result<(Vec<f32>, Vec<f32>), PortError> {
    let (b, h, dh, g, ds) = (i.batch, i.heads, i.head_dim, i.groups, i.state_dim);
    let x = tensor(dev, DType::F32, &[b, 1, h, dh], &i.x);
    let a_log = tensor(dev, a_log_dtype, &[h], &i.a_log);
    let bt = tensor(dev, DType::F32, &[b, 1, g, ds], &i.b);
    let ct = tensor(dev, DType::F32, &[b, 1, g, ds], &i.c);
    // D as long as the inputs hold it (a refusal test makes it H + 1).
    let d = tensor(dev, DType::F32, &[i.d.len()], &i.d);
    let dt = tensor(dev, DType::F32, &[b, 1, h], &i.dt);
    let dt_bias = tensor(dev, DType::F32, &[h], &i.dt_bias);
    let state = tensor(dev, DType::F32, &[b, h, dh, ds], &i.state);
    let mut out = tensor(dev, DType::F32, &[b, 1, h, dh], &vec![POISON; b * h * dh]);
    let mut state_out = tensor(
        dev,
        DType::F32,
        &[b, h, dh, ds],
        &vec![POISON; i.state.len()],
    );
    ssm_update(
        dev,
        limits,
        &x,
        &a_log,
        &bt,
        &ct,
        &d,
        &dt,
        &dt_bias,
        &state,
        &mut out,
        &mut state_out,
    )?;
    Ok((out.to_f32_vec()?, state_out.to_f32_vec()?))
}

/// The f64 reference over the same values (every packed input f32).
fn expected(i: &Inputs, limits: TimeStepLimits) -> (Vec<f32>, Vec<f32>) {
    let words = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>();
    let p = SsmUpdateParams {
        groups: i.groups as u32,
        time_step_min: limits.min,
        time_step_max: limits.max,
        batch: i.batch as u32,
        heads: i.heads as u32,
        head_dim: i.head_dim as u32,
        state_dim: i.state_dim as u32,
        ..Default::default()
    };
    let mut out = vec![0f32; i.x.len()];
    let mut state_out = vec![0f32; i.state.len()];
    reference::ssm_update::ssm_update(
        &p,
        &i.x,
        &words(&i.a_log),
        &words(&i.b),
        &words(&i.c),
        &i.d,
        &words(&i.dt),
        &words(&i.dt_bias),
        &i.state,
        &mut out,
        &mut state_out,
    );
    (out, state_out)
}

/// Spec §0.2's `nmax` (the parity harness's), failing on a poisoned or non-finite element.
fn nmax(got: &[f32], want: &[f32]) -> f64 {
    assert!(
        got.iter().all(|v| v.is_finite() && *v != POISON),
        "an element unwritten or non-finite"
    );
    let wide = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
    kiln::parity::normalized_deviation(&wide(got), &wide(want)).1
}

#[test]
fn a_log_in_f32_then_bf16_in_one_process_reads_each_as_stored() {
    let seed = kiln::parity::base_seed();
    eprintln!("seed {seed} (replay with KILN_SEED={seed})");
    let mut rng = Rng::new(seed);
    let limits = TimeStepLimits {
        min: 1e-3,
        max: 100.0,
    };
    let i = inputs(&mut rng, 2, 4, 10, 2, 64);
    let (want_out, want_state) = expected(&i, limits);
    for dev in [Device::cpu(), Device::sim(8).unwrap()] {
        let (out32, state32) = run(&dev, &i, DType::F32, limits).unwrap();
        let (out16, state16) = run(&dev, &i, DType::Bf16, limits).unwrap();
        // The same numbers in either dtype: the same bits out, or one port read the other's words.
        assert_eq!(
            out32,
            out16,
            "{}: out differs between f32 and bf16 A_log",
            dev.name()
        );
        assert_eq!(state32, state16, "{}: state differs", dev.name());
        let (e_out, e_state) = (nmax(&out32, &want_out), nmax(&state32, &want_state));
        eprintln!("{}: nmax out {e_out:.2e}, state {e_state:.2e}", dev.name());
        assert!(
            e_out < 1e-4 && e_state < 1e-4,
            "{}: off the f32 budget",
            dev.name()
        );
    }
}

#[test]
fn spec_refusals_are_typed_errors() {
    let dev = Device::cpu();
    let mut rng = Rng::new(7);
    let limits = TimeStepLimits {
        min: 0.0,
        max: f32::INFINITY,
    };
    // Ds 48 and 16, and four heads in three groups.
    for (heads, groups, ds, what) in [
        (4, 2, 48, "Ds 48"),
        (4, 2, 16, "Ds 16"),
        (4, 3, 64, "4 heads in 3 groups"),
    ] {
        let i = inputs(&mut rng, 1, heads, 3, groups, ds);
        assert_invalid(run(&dev, &i, DType::F32, limits), what);
    }
    // D of length H + 1.
    let mut i = inputs(&mut rng, 1, 4, 3, 2, 32);
    i.d.push(1.0);
    assert_invalid(run(&dev, &i, DType::F32, limits), "D of length H + 1");
    // A bf16 vector of odd length is no whole number of words; NaN limits; min above max.
    let i = inputs(&mut rng, 1, 3, 2, 1, 32);
    assert_invalid(run(&dev, &i, DType::Bf16, limits), "bf16 A_log of 3 heads");
    let i = inputs(&mut rng, 1, 4, 2, 1, 32);
    assert_invalid(
        run(
            &dev,
            &i,
            DType::F32,
            TimeStepLimits {
                min: f32::NAN,
                max: 1.0,
            },
        ),
        "NaN min",
    );
    assert_invalid(
        run(&dev, &i, DType::F32, TimeStepLimits { min: 1.0, max: 0.5 }),
        "min above max",
    );
}
