//! The precise functions `libm::*` calls translate to, run on the host against f64 references:
//! errors in units in the last place of the f32 result, over a random sweep and edge cases.

mod accuracy;
mod reference;
mod seed;

use accuracy::{sweeps, Rng};
use kiln_shaders_wgsl::libm_wgsl as m;
use seed::seed;

#[test]
fn sqrt_is_correctly_rounded() {
    let mut rng = Rng(seed("libm"));
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

/// Every sweep of `accuracy::sweeps` (every precise function, random inputs and edge cases)
/// within its bound on the host; kiln-tests' `wgsl_libm.rs` holds the translated WGSL to the same bounds.
#[test]
fn every_function_is_within_its_bound() {
    let mut rng = Rng(seed("libm"));
    let mut failed = Vec::new();
    for s in sweeps() {
        let inputs = s.inputs(&mut rng, 200_000);
        let got: Vec<f32> = inputs.iter().map(|&(a, b)| s.func.host(a, b)).collect();
        let o = s.check(&inputs, &got);
        eprintln!(
            "{}: worst {:.3} ulp at {:e} (bound {})",
            s.label(),
            o.worst,
            o.at.0,
            s.max_ulps
        );
        if o.count > 0 {
            failed.push(format!(
                "{}: {} inputs\n  {}",
                s.label(),
                o.count,
                o.failures.join("\n  ")
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// `expm1f` is the `libm` crate's bit for bit (xIELU's per-op chain calls that one on every
/// other port), on a strided sweep of every f32 pattern.
#[test]
fn expm1f_is_libms_bit_for_bit_on_a_strided_sweep() {
    let stride = 509u32;
    let offset = (seed("libm") % stride as u64) as u32;
    let mut bad = Vec::new();
    let mut checked = 0u64;
    for b in (0..=u32::MAX - stride).step_by(stride as usize) {
        let x = f32::from_bits(b + offset);
        let (got, want) = (m::expm1f(x), libm::expm1f(x));
        checked += 1;
        if got.to_bits() != want.to_bits() && !(got.is_nan() && want.is_nan()) && bad.len() < 20 {
            bad.push(format!(
                "expm1f({x:e} = {:#010x}) = {got:e}, libm's {want:e}",
                b + offset
            ));
        }
    }
    eprintln!(
        "expm1f: {checked} patterns, {} differ from libm's",
        bad.len()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// `div_rn` (expm1f's division, in integers) is IEEE division for normal operands and
/// quotients, ties and exact quotients included.
#[test]
fn div_rn_is_correctly_rounded() {
    let mut rng = Rng(seed("libm"));
    let mut checked = 0;
    while checked < 1_000_000 {
        let a = f32::from_bits(rng.next() as u32);
        // Divisors of few significant bits make exact quotients and ties likely.
        let b = if checked % 4 == 0 {
            f32::from_bits(rng.next() as u32 & 0xfff0_0000)
        } else {
            f32::from_bits(rng.next() as u32)
        };
        let want = a / b;
        if !(a.is_normal() || a == 0.0) || !b.is_normal() || !(want.is_normal() || a == 0.0) {
            continue;
        }
        let got = m::div_rn(a, b);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{a:e} / {b:e}: {got:e}, want {want:e}"
        );
        checked += 1;
    }
    for (a, b) in [
        (1.0f32, 3.0f32),
        (-2.0, 6.5),
        (0.0, 5.0),
        (-0.0, 5.0),
        (6.0, 3.0),
        (1.0, 1.5),
    ] {
        assert_eq!(m::div_rn(a, b).to_bits(), (a / b).to_bits(), "{a} / {b}");
    }
}

/// `div_ieee` (what `Block::div_exact` translates to) is Rust's `/` bit for bit on the host,
/// whose `/` is IEEE: any bit patterns, zeros, infinities, NaNs, subnormals and overflow.
#[test]
fn div_ieee_is_rusts_division() {
    let mut rng = Rng(seed("libm div_ieee"));
    let specials = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
        3.0,
        0.5,
    ];
    let same = |a: f32, b: f32| {
        let (got, want) = (m::div_ieee(a, b), a / b);
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "{a:e} / {b:e}: {got:e}, want {want:e}"
        );
    };
    for _ in 0..1_000_000 {
        same(
            f32::from_bits(rng.next() as u32),
            f32::from_bits(rng.next() as u32),
        );
        // Operands of close exponents: quotients near 1, the common case in kernels.
        let a = f32::from_bits((rng.next() as u32 & 0x807f_ffff) | 0x3f00_0000);
        same(
            a,
            f32::from_bits((rng.next() as u32 & 0x807f_ffff) | 0x3f80_0000),
        );
        // Subnormal and smallest-normal dividends, and quotients falling into the subnormals.
        let tiny = f32::from_bits(rng.next() as u32 & 0x80ff_ffff);
        same(
            tiny,
            f32::from_bits((rng.next() as u32 & 0x87ff_ffff) | 0x3800_0000),
        );
        let small = f32::from_bits((rng.next() as u32 & 0x83ff_ffff) | 0x0080_0000);
        same(
            small,
            f32::from_bits((rng.next() as u32 & 0x83ff_ffff) | 0x4000_0000),
        );
    }
    for &a in &specials {
        for &b in &specials {
            same(a, b);
        }
    }
    // Quotients at the top of the range: just below f32::MAX, and overflowing.
    same(f32::MAX, 0.999_999_9);
    same(f32::MAX, 0.5);
    same(1e38, 1e-3);
    same(f32::MIN_POSITIVE * 4.0, 3.0);
}

/// `mul_rn` (expm1f's products, in integers) is IEEE multiplication for finite operands with
/// a finite product: normal, subnormal and zero results, ties included.
#[test]
fn mul_rn_is_correctly_rounded() {
    let mut rng = Rng(seed("libm"));
    let mut checked = 0;
    while checked < 1_000_000 {
        let (a, b) = match checked % 4 {
            // Few significant bits make exact products and ties likely.
            0 => (
                f32::from_bits(rng.next() as u32 & 0xfff0_0000),
                f32::from_bits(rng.next() as u32 & 0xfff8_0000),
            ),
            // Exponents that sum near the subnormal range.
            1 => (
                f32::from_bits((rng.next() as u32 & 0x807f_ffff) | 0x1f00_0000),
                f32::from_bits((rng.next() as u32 & 0x83ff_ffff) | 0x1c00_0000),
            ),
            _ => (
                f32::from_bits(rng.next() as u32),
                f32::from_bits(rng.next() as u32),
            ),
        };
        let want = a * b;
        if !a.is_finite() || !b.is_finite() || !want.is_finite() {
            continue;
        }
        let got = m::mul_rn(a, b);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{a:e} * {b:e}: {got:e}, want {want:e}"
        );
        checked += 1;
    }
    let tiny = f32::from_bits(1);
    for (a, b) in [
        (tiny, 0.5f32),
        (tiny, 1.5),
        (f32::from_bits(3), 0.5),
        (f32::MIN_POSITIVE, 0.999_999_94),
        (1e-30, 1e-30),
        (-0.0, 3.0),
        (2.0, -0.0),
        (1.000_000_1, 1.000_000_1),
        (f32::MAX, 0.5),
    ] {
        assert_eq!(
            m::mul_rn(a, b).to_bits(),
            (a * b).to_bits(),
            "{a:e} * {b:e}"
        );
    }
}

/// Every f32 (about 4.3e9 inputs; a minute or two in release):
/// `cargo test --release -p kiln-shaders-wgsl --test libm -- --ignored --nocapture expm1f_exhaustive`
#[test]
#[ignore]
fn expm1f_exhaustive() {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u32;
    let parts: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut bad = Vec::new();
                for b in (t..=u32::MAX).step_by(threads as usize) {
                    let x = f32::from_bits(b);
                    let (got, want) = (m::expm1f(x), libm::expm1f(x));
                    if got.to_bits() != want.to_bits()
                        && !(got.is_nan() && want.is_nan())
                        && bad.len() < 20
                    {
                        bad.push(format!(
                            "expm1f({x:e} = {b:#010x}) = {got:e}, libm's {want:e}"
                        ));
                    }
                }
                bad
            })
        })
        .collect();
    let bad: Vec<String> = parts.into_iter().flat_map(|p| p.join().unwrap()).collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn exp2f_tables_match_their_definition() {
    assert_eq!(m::EXP2_TABLE.to_vec(), reference::exp2_table());
    assert_eq!(m::EXP2_POLY.to_vec(), reference::exp2_poly());
}

/// What a sweep of exp2f saw.
#[derive(Default)]
struct Exp2Sweep {
    checked: u64,
    /// Inputs whose fast-path value lies within `EXP2_FAST_ERR`·2^-40 of a rounding midpoint
    /// (the integer path decides those).
    near_midpoint: u64,
    /// The fast path's largest error in `hi + lo`, in units of 2^-40.
    worst_fast: f64,
    failures: Vec<String>,
}

impl Exp2Sweep {
    /// exp2f and its integer path against the correctly rounded reference, bit for bit.
    fn check(&mut self, x: f32) {
        self.checked += 1;
        let want = reference::exp2_correct(x);
        let got = m::exp2f(x);
        if got.to_bits() != want.to_bits() && !(got.is_nan() && want.is_nan()) {
            self.fail(format!(
                "exp2f({x:e} = {:#010x}) = {got:e}, want {want:e}",
                x.to_bits()
            ));
        }
        let ax = x.abs();
        if ax < 2f32.powi(-26) || !(-150.0..128.0).contains(&x) || x == -150.0 {
            return;
        }
        let exact = m::exp2_exact(x);
        if exact.to_bits() != want.to_bits() {
            self.fail(format!(
                "exp2_exact({x:e} = {:#010x}) = {exact:e}, want {want:e}",
                x.to_bits()
            ));
        }
        if x < -125.0 {
            return;
        }
        let (k, hi, lo) = m::exp2_split(x);
        let y = (x as f64 - k as f64).exp2();
        let err = (hi as f64 + lo as f64 - y).abs() * 2f64.powi(40);
        self.worst_fast = self.worst_fast.max(err);
        if err > m::EXP2_FAST_ERR as f64 {
            self.fail(format!("exp2_split({x:e}): error {err:.1} units of 2^-40"));
        }
        // The last place of y: 2^-24 below 1, 2^-23 from 1 up.
        let quantum = if y < 1.0 {
            2f64.powi(-24)
        } else {
            2f64.powi(-23)
        };
        let to_mid = ((y / quantum).fract() - 0.5).abs() * quantum * 2f64.powi(40);
        if to_mid <= m::EXP2_FAST_ERR as f64 {
            self.near_midpoint += 1;
        }
    }

    fn fail(&mut self, what: String) {
        if self.failures.len() < 20 {
            self.failures.push(what);
        }
    }

    fn merge(&mut self, o: Exp2Sweep) {
        self.checked += o.checked;
        self.near_midpoint += o.near_midpoint;
        self.worst_fast = self.worst_fast.max(o.worst_fast);
        for f in o.failures {
            self.fail(f);
        }
    }

    fn report(&self, what: &str) {
        eprintln!(
            "{what}: {} inputs, fast path worst {:.2} units of 2^-40 (bound {}), {} ({:.2e}) near a midpoint",
            self.checked,
            self.worst_fast,
            m::EXP2_FAST_ERR,
            self.near_midpoint,
            self.near_midpoint as f64 / self.checked as f64
        );
        assert!(
            self.failures.is_empty(),
            "{what}:\n{}",
            self.failures.join("\n")
        );
    }
}

/// The bit patterns of every finite f32 below 128 and above −150 (larger ones are ±inf/0).
fn exp2_patterns() -> [std::ops::Range<u32>; 2] {
    [0..0x4300_0000, 0x8000_0000..0xc316_0001]
}

#[test]
fn exp2f_is_correctly_rounded_on_a_strided_sweep() {
    let stride = 251u32;
    let offset = (seed("libm") % stride as u64) as u32;
    let mut sweep = Exp2Sweep::default();
    for range in exp2_patterns() {
        for b in range.step_by(stride as usize) {
            sweep.check(f32::from_bits(b + offset));
        }
    }
    for x in [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        127.0,
        -126.0,
        -149.0,
        -149.5,
        -150.0,
        -127.5,
        1e-9,
        -1e-9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        f32::from_bits(0x42ff_ffff),
        f32::from_bits(0xc315_ffff),
        f32::from_bits(0x3280_0000),
        f32::from_bits(0xb27f_ffff),
    ] {
        sweep.check(x);
    }
    sweep.report("exp2f, every 251st pattern");
}

/// Every argument RoPE hands exp2f (spec §4: −(p / h)·log2(base)) for half-widths h ≤ 512
/// and common bases.
#[test]
fn exp2f_is_correctly_rounded_for_rope_frequencies() {
    let mut sweep = Exp2Sweep::default();
    for base in [10_000.0f64, 500_000.0, 1_000_000.0, 10_000_000.0, 100.0] {
        let log2_base = base.log2() as f32;
        for half in 1..=512u32 {
            for p in 0..half {
                let d = p as f32 / half as f32;
                sweep.check(-d * log2_base);
            }
        }
    }
    sweep.report("exp2f, RoPE frequencies");
}

/// Every f32 from −150 to 128 (about 2.25e9 inputs; a few minutes in release):
/// `cargo test --release -p kiln-shaders-wgsl --test libm -- --ignored --nocapture exp2f_exhaustive`
#[test]
#[ignore]
fn exp2f_exhaustive() {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u32;
    let mut sweep = Exp2Sweep::default();
    for range in exp2_patterns() {
        let parts: Vec<_> = (0..threads)
            .map(|t| {
                let r = range.clone();
                std::thread::spawn(move || {
                    let mut s = Exp2Sweep::default();
                    for b in r.skip(t as usize).step_by(threads as usize) {
                        s.check(f32::from_bits(b));
                    }
                    s
                })
            })
            .collect();
        for p in parts {
            sweep.merge(p.join().unwrap());
        }
    }
    sweep.report("exp2f, every pattern");
}

/// RoPE angles reach position × frequency ≈ 131071 rad and more; the spec asks 2e-6 absolute
/// there (the ulp bounds are in `every_function_is_within_its_bound`).
#[test]
fn sin_and_cos_are_accurate_at_large_angles() {
    for (f, r, name) in [
        (
            m::sinf as fn(f32) -> f32,
            f64::sin as fn(f64) -> f64,
            "sinf",
        ),
        (m::cosf, f64::cos, "cosf"),
    ] {
        let mut rng = Rng(seed("libm"));
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
    let mut rng = Rng(seed("libm"));
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
