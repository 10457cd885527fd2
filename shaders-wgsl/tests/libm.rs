//! The precise functions `libm::*` calls translate to, run on the host against f64 references:
//! errors in units in the last place of the f32 result, over a random sweep and edge cases.

use kiln_shaders_wgsl::libm_wgsl as m;
use std::f32::consts::{FRAC_1_SQRT_2, FRAC_PI_2, FRAC_PI_4, PI, SQRT_2};

/// The f32 just below `x` (x > 0).
fn below(x: f32) -> f32 {
    f32::from_bits(x.to_bits() - 1)
}

/// xorshift64*: inputs are reproducible from the printed seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
}

fn seed() -> u64 {
    let s = std::env::var("KILN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("libm: seed {s} (replay with KILN_SEED={s})");
    s
}

/// |got − want| in ulps of the f32 nearest `want` (subnormal spacing below the normal range).
fn ulps(got: f32, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if want.is_infinite() || got.is_infinite() {
        return if got as f64 == want {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let w = want as f32;
    let e = if w == 0.0 {
        -149
    } else {
        (w.abs().to_bits() >> 23) as i32 - 150
    };
    let ulp = 2f64.powi(e.max(-149));
    (got as f64 - want).abs() / ulp
}

fn check(
    name: &str,
    f: fn(f32) -> f32,
    r: fn(f64) -> f64,
    lo: f32,
    hi: f32,
    max_ulps: f64,
    extra: &[f32],
) {
    let mut rng = Rng(seed());
    let mut worst = (0.0f64, 0.0f32);
    let inputs: Vec<f32> = (0..200_000)
        .map(|_| rng.uniform(lo, hi))
        .chain(extra.iter().copied())
        .collect();
    for x in inputs {
        let e = ulps(f(x), r(x as f64));
        if e > worst.0 {
            worst = (e, x);
        }
    }
    eprintln!(
        "{name}: worst {:.3} ulp at {:e} on [{lo}, {hi}]",
        worst.0, worst.1
    );
    assert!(
        worst.0 <= max_ulps,
        "{name}: {:.3} ulp at x = {:e} ({:#010x})",
        worst.0,
        worst.1,
        worst.1.to_bits()
    );
}

#[test]
fn sqrt_is_correctly_rounded() {
    let mut rng = Rng(seed());
    for _ in 0..1_000_000 {
        let x = f32::from_bits((rng.next() >> 33) as u32 & 0x7fff_ffff);
        let got = m::sqrtf(x);
        let want = (x as f64).sqrt() as f32;
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "sqrtf({x:e}) = {got:e}, want {want:e}"
        );
    }
    assert!(m::sqrtf(-1.0).is_nan());
    assert_eq!(m::sqrtf(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(m::sqrtf(f32::INFINITY), f32::INFINITY);
}

#[test]
fn exp_and_log_family() {
    check(
        "expf",
        m::expf,
        f64::exp,
        -103.0,
        88.7,
        1.5,
        &[0.0, -0.0, 1e-30, 88.72, -87.3, -100.0],
    );
    check(
        "expm1f",
        m::expm1f,
        f64::exp_m1,
        -20.0,
        88.0,
        1.5,
        &[1e-10, -1e-10, 0.3465, -0.3466, 0.5, -0.7],
    );
    check("expm1f small", m::expm1f, f64::exp_m1, -0.5, 0.5, 1.5, &[]);
    check(
        "logf",
        m::logf,
        f64::ln,
        1e-38,
        3e38,
        1.5,
        &[1.0, 0.5, 2.0, 1e-45, SQRT_2, FRAC_1_SQRT_2],
    );
    check("logf near 1", m::logf, f64::ln, 0.5, 2.0, 1.5, &[]);
    check(
        "log1pf",
        m::log1pf,
        f64::ln_1p,
        -0.999,
        1e6,
        2.0,
        &[1e-8, -1e-8, 1e-4, -0.5],
    );
    check(
        "exp2f",
        m::exp2f,
        f64::exp2,
        -149.0,
        127.9,
        1.5,
        &[0.5, -0.5, 10.0],
    );
    check(
        "tanhf",
        m::tanhf,
        f64::tanh,
        -10.0,
        10.0,
        2.5,
        &[1e-5, -1e-5, 0.01, 9.5],
    );
    assert_eq!(m::expf(f32::NEG_INFINITY), 0.0);
    assert_eq!(m::expf(f32::INFINITY), f32::INFINITY);
    assert!(m::logf(-1.0).is_nan());
    assert_eq!(m::logf(0.0), f32::NEG_INFINITY);
}

#[test]
fn sin_and_cos_are_accurate_at_large_angles() {
    // RoPE angles reach position × frequency ≈ 131071 rad; the spec asks 2e-6 absolute there.
    for (f, r, name) in [
        (
            m::sinf as fn(f32) -> f32,
            f64::sin as fn(f64) -> f64,
            "sinf",
        ),
        (m::cosf, f64::cos, "cosf"),
    ] {
        check(
            name,
            f,
            r,
            -3.2,
            3.2,
            1.5,
            &[0.0, -0.0, below(FRAC_PI_4), FRAC_PI_4, FRAC_PI_2, PI],
        );
        check(
            name,
            f,
            r,
            -131_072.0,
            131_072.0,
            2.0,
            &[131_071.0, 65_535.5, 102_943.71],
        );
        check(name, f, r, -3e38, 3e38, 2.0, &[f32::MAX, 1e10, 1e20]);
        let mut rng = Rng(seed());
        let mut worst = 0.0f64;
        for _ in 0..200_000 {
            let x = rng.uniform(0.0, 131_072.0);
            worst = worst.max((f(x) as f64 - r(x as f64)).abs());
        }
        eprintln!("{name}: worst absolute error {worst:e} on [0, 131072]");
        assert!(worst < 2e-7, "{name}: {worst:e}");
        assert!(f(f32::INFINITY).is_nan() && f(f32::NAN).is_nan());
    }
}

#[test]
fn rounding_functions_are_exact() {
    let mut rng = Rng(seed());
    for _ in 0..200_000 {
        let x = f32::from_bits(rng.next() as u32);
        if x.is_nan() {
            continue;
        }
        let xd = x as f64;
        assert_eq!(m::truncf(x) as f64, xd.trunc(), "trunc {x:e}");
        assert_eq!(m::floorf(x) as f64, xd.floor(), "floor {x:e}");
        assert_eq!(m::ceilf(x) as f64, xd.ceil(), "ceil {x:e}");
        assert_eq!(m::roundf(x) as f64, xd.round(), "round {x:e}");
    }
    assert_eq!(m::roundf(2.5), 3.0);
    assert_eq!(m::roundf(-2.5), -3.0);
    assert_eq!(m::roundf(0.49999997), 0.0);
}
