//! The precise functions of `libm_wgsl` as one table of sweeps (function, input range, edge
//! cases, bound in ulps against an f64 reference), shared by the host test (`libm.rs`: the
//! functions as Rust) and the device test (kiln-tests' `tests/tests/wgsl_libm.rs`: the
//! functions as translated WGSL, compiled by the adapter's driver), so both hold every function
//! to the same bound.

#![allow(dead_code)] // not every test binary that includes this module uses all of it

use kiln_shaders_wgsl::libm_wgsl as m;
use std::f32::consts::{FRAC_1_SQRT_2, FRAC_PI_2, FRAC_PI_4, PI, SQRT_2};

/// xorshift64*: inputs are reproducible from the printed seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    /// Uniform over the f32 bit patterns in `[lo, hi]` (log-uniform in magnitude: every
    /// binade of the range is met, down to the subnormals where the range holds zero).
    pub fn pattern(&mut self, lo: f32, hi: f32) -> f32 {
        let pick = |r: &mut Rng, a: u32, b: u32| a + (r.next() % (b as u64 - a as u64 + 1)) as u32;
        if lo >= 0.0 {
            return f32::from_bits(pick(self, lo.to_bits(), hi.to_bits()));
        }
        if hi <= 0.0 {
            return f32::from_bits(
                pick(self, hi.abs().to_bits(), lo.abs().to_bits()) | 0x8000_0000,
            );
        }
        if self.next() & 1 == 0 {
            f32::from_bits(pick(self, 0, hi.to_bits()))
        } else {
            f32::from_bits(pick(self, 0, (-lo).to_bits()) | 0x8000_0000)
        }
    }
}

/// The f32 just below `x` (x > 0).
pub fn below(x: f32) -> f32 {
    f32::from_bits(x.to_bits() - 1)
}

/// |got − want| in ulps of the f32 nearest `want` (subnormal spacing below the normal range);
/// a NaN or infinity must be met exactly.
pub fn ulps(got: f32, want: f64) -> f64 {
    if want.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    // An exact value past f32::MAX by half an ulp or more is an infinity in f32.
    let w = want as f32;
    if w.is_infinite() || got.is_infinite() {
        return if got == w { 0.0 } else { f64::INFINITY };
    }
    let e = if w == 0.0 {
        -149
    } else {
        (w.abs().to_bits() >> 23) as i32 - 150
    };
    let ulp = 2f64.powi(e.max(-149));
    (got as f64 - want).abs() / ulp
}

/// A precise function of `libm_wgsl`, as kernel code calls it (`libm::<name>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Div,
    Sqrt,
    Exp,
    Expm1,
    Exp2,
    Log,
    Log1p,
    Log2,
    Log10,
    Tanh,
    Sin,
    Cos,
    Trunc,
    Floor,
    Ceil,
    Round,
    Fabs,
    Copysign,
    Fmax,
    Fmin,
}

impl Func {
    /// Every public function of `libm_wgsl` (the ones `libm::*` calls translate to).
    pub const ALL: [Func; 20] = [
        Func::Div,
        Func::Sqrt,
        Func::Exp,
        Func::Expm1,
        Func::Exp2,
        Func::Log,
        Func::Log1p,
        Func::Log2,
        Func::Log10,
        Func::Tanh,
        Func::Sin,
        Func::Cos,
        Func::Trunc,
        Func::Floor,
        Func::Ceil,
        Func::Round,
        Func::Fabs,
        Func::Copysign,
        Func::Fmax,
        Func::Fmin,
    ];

    /// The function's name in `libm` and `libm_wgsl`.
    pub fn name(self) -> &'static str {
        match self {
            Func::Div => "div_ieee",
            Func::Sqrt => "sqrtf",
            Func::Exp => "expf",
            Func::Expm1 => "expm1f",
            Func::Exp2 => "exp2f",
            Func::Log => "logf",
            Func::Log1p => "log1pf",
            Func::Log2 => "log2f",
            Func::Log10 => "log10f",
            Func::Tanh => "tanhf",
            Func::Sin => "sinf",
            Func::Cos => "cosf",
            Func::Trunc => "truncf",
            Func::Floor => "floorf",
            Func::Ceil => "ceilf",
            Func::Round => "roundf",
            Func::Fabs => "fabsf",
            Func::Copysign => "copysignf",
            Func::Fmax => "fmaxf",
            Func::Fmin => "fminf",
        }
    }

    /// Its arguments (1 or 2).
    pub fn arity(self) -> usize {
        match self {
            Func::Div | Func::Copysign | Func::Fmax | Func::Fmin => 2,
            _ => 1,
        }
    }

    /// `libm_wgsl`'s function run on the host (`b` is ignored by one-argument functions).
    pub fn host(self, a: f32, b: f32) -> f32 {
        match self {
            Func::Div => m::div_ieee(a, b),
            Func::Sqrt => m::sqrtf(a),
            Func::Exp => m::expf(a),
            Func::Expm1 => m::expm1f(a),
            Func::Exp2 => m::exp2f(a),
            Func::Log => m::logf(a),
            Func::Log1p => m::log1pf(a),
            Func::Log2 => m::log2f(a),
            Func::Log10 => m::log10f(a),
            Func::Tanh => m::tanhf(a),
            Func::Sin => m::sinf(a),
            Func::Cos => m::cosf(a),
            Func::Trunc => m::truncf(a),
            Func::Floor => m::floorf(a),
            Func::Ceil => m::ceilf(a),
            Func::Round => m::roundf(a),
            Func::Fabs => m::fabsf(a),
            Func::Copysign => m::copysignf(a, b),
            Func::Fmax => m::fmaxf(a, b),
            Func::Fmin => m::fminf(a, b),
        }
    }

    /// The exact value in f64 (Rust's f32 semantics for `max`/`min`: a NaN operand loses).
    pub fn reference(self, a: f32, b: f32) -> f64 {
        let (x, y) = (a as f64, b as f64);
        match self {
            Func::Div => x / y,
            Func::Sqrt => x.sqrt(),
            Func::Exp => x.exp(),
            Func::Expm1 => x.exp_m1(),
            Func::Exp2 => x.exp2(),
            Func::Log => x.ln(),
            Func::Log1p => x.ln_1p(),
            Func::Log2 => x.log2(),
            Func::Log10 => x.log10(),
            Func::Tanh => x.tanh(),
            Func::Sin => x.sin(),
            Func::Cos => x.cos(),
            Func::Trunc => x.trunc(),
            Func::Floor => x.floor(),
            Func::Ceil => x.ceil(),
            Func::Round => x.round(),
            Func::Fabs => x.abs(),
            Func::Copysign => x.copysign(y),
            Func::Fmax => x.max(y),
            Func::Fmin => x.min(y),
        }
    }

    /// The function a result must equal bit for bit, where there is one: `expm1f` is the
    /// `libm` crate's (the per-op chain of xIELU, spec §10, calls it on every other port, and
    /// near its zero crossings one ulp of `expm1` is thousands of ulps of the output).
    pub fn bits_of(self) -> Option<fn(f32) -> f32> {
        match self {
            Func::Expm1 => Some(libm::expm1f),
            _ => None,
        }
    }
}

/// One sweep: uniform random inputs on `[lo, hi]` (both arguments of a two-argument function)
/// plus the edge cases, each within `max_ulps` of the f64 reference.
pub struct Sweep {
    pub func: Func,
    pub lo: f32,
    pub hi: f32,
    pub max_ulps: f64,
    pub extra: Vec<f32>,
}

/// Inputs every sweep adds: zeros, infinities, NaN, subnormals, the normal range's ends.
pub const EDGES: [f32; 17] = [
    0.0,
    -0.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
    1e-45,
    -1e-45,
    1e-40,
    f32::MAX,
    f32::MIN,
    1.0,
    -1.0,
    0.5,
    -0.5,
    2.0,
];

/// Correctly rounded: within half an ulp of the exact value (f64's own error is far below the
/// margin).
const CORRECT: f64 = 0.500_001;

/// Every sweep of every function. The bounds are what the host meets (`libm.rs`) and what a
/// device must meet (`tests/tests/wgsl_libm.rs`).
pub fn sweeps() -> Vec<Sweep> {
    let s = |func, lo, hi, max_ulps, extra: &[f32]| Sweep {
        func,
        lo,
        hi,
        max_ulps,
        extra: extra.to_vec(),
    };
    vec![
        // `Block::div_exact`: correctly rounded by integer long division in every case (RoPE's
        // `p / (R/2)` among the extras).
        s(Func::Div, -1e6, 1e6, CORRECT, &[1.0, 3.0, 47.0, 48.0, 96.0]),
        s(Func::Div, 0.0, 64.0, CORRECT, &[]),
        // Integer square root: correctly rounded.
        s(
            Func::Sqrt,
            0.0,
            3e38,
            CORRECT,
            &[1e-38, 4.0, 2.0, 1e-42, 0.25],
        ),
        s(Func::Sqrt, 0.0, 4.0, CORRECT, &[]),
        // Two-part ln2 reduction and a degree-9 Taylor polynomial in f32: 0.94 ulp on the host;
        // the margin is for a driver that fuses the polynomial's products.
        s(
            Func::Exp,
            -103.0,
            88.7,
            1.5,
            &[
                1e-30,
                88.72,
                88.722_84,
                88.722_85,
                -87.3,
                -100.0,
                -103.972_09,
            ],
        ),
        s(Func::Exp, -1.0, 1.0, 1.5, &[]),
        // FreeBSD's algorithm (< 1 ulp, 0.78 measured); held to libm's bits as well (`bits_of`).
        s(
            Func::Expm1,
            -20.0,
            88.0,
            1.0,
            &[
                1e-10, -1e-10, 0.3465, -0.3466, 0.5, -0.7, 88.72, -18.7, -1e-6, 2.9e-8, -2.9e-8,
            ],
        ),
        s(Func::Expm1, -0.5, 0.5, 1.0, &[]),
        s(Func::Expm1, -1e-3, 0.0, 1.0, &[]),
        // Correctly rounded, the rounding decided in integers (README: exp2f).
        s(
            Func::Exp2,
            -151.0,
            129.0,
            CORRECT,
            &[-149.5, -126.5, 127.99, -150.0, -149.0, 1e-9, -1e-9],
        ),
        s(Func::Exp2, -1.0, 1.0, CORRECT, &[]),
        // fdlibm-style core in f32: 0.85 ulp on the host; the margin is for fused products and a
        // device `/` (2.5 ulp) inside the polynomial, where it is scaled down by s².
        s(
            Func::Log,
            1e-38,
            3e38,
            1.5,
            &[SQRT_2, FRAC_1_SQRT_2, 1e-42, 1.000_000_1, 0.999_999_94],
        ),
        s(Func::Log, 0.5, 2.0, 1.5, &[]),
        // logf's core at f = x, or ln(1 + x_hi) plus a small quotient: 1.11 ulp on the host.
        s(
            Func::Log1p,
            -0.999,
            1e6,
            2.0,
            &[
                1e-8,
                -1e-8,
                1e-4,
                -1e-4,
                2.5e-4,
                -2.5e-4,
                -0.29,
                0.414,
                -0.999_999_94,
            ],
        ),
        s(Func::Log1p, -0.3, 0.5, 2.0, &[]),
        s(Func::Log1p, -1e-3, 1e-3, 2.0, &[]),
        // logf (≤ 1.5 ulp) times a rounded log2(e) (0.5 ulp more): 1.69 measured on the host.
        s(Func::Log2, 1e-38, 3e38, 2.0, &[SQRT_2, 1e-42, 1.000_000_1]),
        s(Func::Log2, 0.5, 2.0, 2.0, &[]),
        // logf's result times a rounded log10(e): 2.08 ulp measured over every positive f32.
        s(Func::Log10, 1e-38, 3e38, 2.5, &[SQRT_2, 1e-42, 10.0, 0.1]),
        s(Func::Log10, 0.5, 2.0, 2.5, &[]),
        // t / (t + 2) with t = expm1(2|x|): three roundings and expm1's error; 2.25 on the host.
        s(
            Func::Tanh,
            -10.0,
            10.0,
            2.5,
            &[1e-5, -1e-5, 0.01, 9.5, 9.0, -9.0, 2.5e-4, -2.5e-4],
        ),
        s(Func::Tanh, -0.5, 0.5, 2.5, &[]),
        // Near ±π the result is small and the reduction's rounding shows: up to 1.55 ulp was
        // measured on the host.
        s(
            Func::Sin,
            -3.2,
            3.2,
            2.0,
            &[below(FRAC_PI_4), FRAC_PI_4, FRAC_PI_2, PI, -PI],
        ),
        s(
            Func::Sin,
            -131_072.0,
            131_072.0,
            2.0,
            &[131_071.0, 65_535.5, 102_943.71],
        ),
        s(Func::Sin, -3e38, 3e38, 2.0, &[1e10, 1e20, 2_147_483_600.0]),
        s(
            Func::Cos,
            -3.2,
            3.2,
            2.0,
            &[below(FRAC_PI_4), FRAC_PI_4, FRAC_PI_2, PI, -PI],
        ),
        s(
            Func::Cos,
            -131_072.0,
            131_072.0,
            2.0,
            &[131_071.0, 65_535.5, 102_943.71],
        ),
        s(Func::Cos, -3e38, 3e38, 2.0, &[1e10, 1e20, 2_147_483_600.0]),
        // The rounding functions and the sign/min/max functions are exact.
        s(Func::Trunc, -1e7, 1e7, 0.0, &[2.5, -2.5, 8_388_607.5]),
        s(Func::Floor, -1e7, 1e7, 0.0, &[2.5, -2.5, -0.3]),
        s(Func::Ceil, -1e7, 1e7, 0.0, &[2.5, -2.5, 0.3]),
        s(
            Func::Round,
            -1e7,
            1e7,
            0.0,
            &[2.5, -2.5, 0.499_999_97, -0.499_999_97, 8_388_607.5],
        ),
        s(Func::Fabs, -3e38, 3e38, 0.0, &[]),
        s(Func::Copysign, -10.0, 10.0, 0.0, &[]),
        s(Func::Fmax, -10.0, 10.0, 0.0, &[]),
        s(Func::Fmin, -10.0, 10.0, 0.0, &[]),
    ]
}

impl Sweep {
    /// `n` random inputs (half uniform in value, half uniform over the bit patterns of the
    /// range, so every binade is met), then the sweep's extra inputs and [`EDGES`] with their
    /// negations and, densely, the 8 f32 on either side of each extra input, each paired with
    /// a random second argument (and, for two-argument functions, every edge against every
    /// other edge).
    pub fn inputs(&self, rng: &mut Rng, n: usize) -> Vec<(f32, f32)> {
        let mut v: Vec<(f32, f32)> = (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    (rng.uniform(self.lo, self.hi), rng.uniform(self.lo, self.hi))
                } else {
                    (rng.pattern(self.lo, self.hi), rng.pattern(self.lo, self.hi))
                }
            })
            .collect();
        for &x in self.extra.iter().chain(&EDGES) {
            for a in [x, -x] {
                v.push((a, rng.uniform(self.lo, self.hi)));
            }
        }
        for &x in &self.extra {
            for d in 1..=8u32 {
                for a in [x.to_bits().wrapping_add(d), x.to_bits().wrapping_sub(d)] {
                    v.push((f32::from_bits(a), rng.uniform(self.lo, self.hi)));
                }
            }
        }
        if self.func.arity() == 2 {
            for &a in &EDGES {
                for &b in &EDGES {
                    v.push((a, b));
                }
            }
        }
        v
    }

    /// The worst error of `got` (one result per input) in ulps, with its input, and a message
    /// for every input over the bound or (where the function has one) not bit-identical to
    /// the function it must equal.
    pub fn check(&self, inputs: &[(f32, f32)], got: &[f32]) -> Outcome {
        self.check_flushing(inputs, got, false)
    }

    /// [`Sweep::check`] on an adapter that flushes subnormals (`flushes`: Vulkan's default
    /// float controls allow it, and NVIDIA's driver does): an element whose input or result
    /// is subnormal may instead be the function of the flushed input, flushed, within the
    /// bound; such elements are counted apart and the rest held to the bound.
    pub fn check_flushing(&self, inputs: &[(f32, f32)], got: &[f32], flushes: bool) -> Outcome {
        let mut out = Outcome {
            worst: 0.0,
            at: (0.0, 0.0),
            failures: Vec::new(),
            count: 0,
            flushed: 0,
        };
        for (&(a, b), &g) in inputs.iter().zip(got) {
            let mut e = ulps(g, self.func.reference(a, b));
            if flushes && !(e <= self.max_ulps && self.bits_match(a, g)) {
                let want = flush_f64(self.func.reference(flush(a), flush(b)));
                let e_flushed = ulps(g, want);
                if e_flushed <= self.max_ulps {
                    out.flushed += 1;
                    e = e_flushed;
                    if e > out.worst {
                        out.worst = e;
                        out.at = (a, b);
                    }
                    continue;
                }
            }
            if e > out.worst || (e.is_nan() && !out.worst.is_nan()) {
                out.worst = e;
                out.at = (a, b);
            }
            let name = self.func.name();
            let args = if self.func.arity() == 2 {
                format!("{a:e}, {b:e}")
            } else {
                format!("{a:e} = {:#010x}", a.to_bits())
            };
            if e.is_nan() || e > self.max_ulps {
                out.fail(format!(
                    "{name}({args}) = {g:e}: {e:.3} ulp (bound {})",
                    self.max_ulps
                ));
            }
            if let Some(f) = self.func.bits_of() {
                let want = f(a);
                if g.to_bits() != want.to_bits() && !(g.is_nan() && want.is_nan()) {
                    out.fail(format!(
                        "{name}({args}) = {g:e} ({:#010x}), libm's is {want:e} ({:#010x})",
                        g.to_bits(),
                        want.to_bits()
                    ));
                }
            }
        }
        out
    }

    /// Whether `g` has the bits the function must equal at `a` (true where it has none).
    fn bits_match(&self, a: f32, g: f32) -> bool {
        self.func.bits_of().is_none_or(|f| {
            let want = f(a);
            g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan())
        })
    }

    /// "expf on [-103, 88.7]".
    pub fn label(&self) -> String {
        format!("{} on [{:e}, {:e}]", self.func.name(), self.lo, self.hi)
    }
}

/// What [`Sweep::check`] found.
pub struct Outcome {
    pub worst: f64,
    pub at: (f32, f32),
    /// The first few inputs that broke the bound (`count` is all of them).
    pub failures: Vec<String>,
    pub count: usize,
    /// Elements that met the bound only as the function of flushed subnormals.
    pub flushed: usize,
}

/// `x` as an adapter that flushes subnormals reads it: a subnormal becomes zero of its sign.
pub fn flush(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// A reference result as such an adapter writes it: below the normal range, zero of its sign.
pub fn flush_f64(x: f64) -> f64 {
    if x != 0.0 && x.abs() < f32::MIN_POSITIVE as f64 {
        0.0f64.copysign(x)
    } else {
        x
    }
}

impl Outcome {
    fn fail(&mut self, what: String) {
        self.count += 1;
        if self.failures.len() < 12 {
            self.failures.push(what);
        }
    }
}
