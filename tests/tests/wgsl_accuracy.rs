//! Per-element accuracy of the WGSL kernels as the adapter's driver compiles them (lavapipe in
//! CI, Vulkan on the H200), where the parity test's nrms/nmax would hide a few bad elements:
//!
//! - `fused_rope_qk_append` f32, heads of 128 and 256 (and 96 of 128 rotated), at positions
//!   spread over everything the kernel accepts (0 to `i32::MAX`), against the f64 reference of
//!   spec §4's f32 angle contract, each element within the bound that sinf/cosf's 1.5 ulp and
//!   the rotation's roundings give (the cpu port's error is printed beside it);
//! - `fused_xielu` f32, f16 and bf16 over its whole input range (large negative inputs, the
//!   output's zero crossing, NaN and infinities included), each element within one ulp of the
//!   per-op chain of spec §10 (the engine's reference), and the cpu port bit for bit; where a
//!   subnormal input, intermediate or result changes the chain the adapter may flush it
//!   (Vulkan allows it), and the chain with every value flushed is held to the same bound.
//!
//! The precise libm functions themselves are checked per element on the adapter by
//! `tests/tests/wgsl_libm.rs`.

use kiln::math::kernels::fused_rope_qk_append::{FusedRopeQkAppend, RopeAppendParams};
use kiln::math::kernels::fused_xielu::XieluParams;
use kiln::math::{Bf16, Element, KernelDef, F16};
use kiln::ops::{self, KvLayout, Rope};
use kiln::{DType, Device, Tensor};

/// xorshift64*: inputs are reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn uniform(&mut self, lo: f64, hi: f64) -> f32 {
        (lo + (hi - lo) * self.unit()) as f32
    }
}

// ---------------------------------------------------------------------------------------------
// RoPE

const HEADS_Q: usize = 2;
const HEADS_KV: usize = 1;
/// Tokens per launch: positions `base..base + 8`.
const TOKENS: usize = 8;

/// Per element, |got − reference| in units u of the last place of `m = |x1| + |x2|` (the pair
/// the element is rotated from; u ≥ m·2^-24). sinf/cosf of the contract's angle are within
/// 1.5 ulp (`wgsl_libm`), at most 1.5·2^-24 absolute, so they cost |x1|·1.5·2^-24 +
/// |x2|·1.5·2^-24 ≤ 1.5 u; the two products round by at most half an ulp of |x1| and |x2|
/// (1 u together; a fused product rounds once less) and the result by half of its own (0.5 u).
const ROPE_BOUND: f64 = 3.0;

/// One RoPE configuration: head width, rotated dims (0: all), pairing, frequency base.
struct RopeCase {
    dim: usize,
    dims: usize,
    traditional: bool,
    base: f32,
}

/// The spec's accepted positions, `0..=i32::MAX`, at `TOKENS` consecutive positions from each
/// base: both ends, the powers of two where f32 stops holding every integer (2^24) and where
/// the issue saw drift (2^17), then uniform and log-uniform random bases.
fn position_bases(rng: &mut Rng) -> Vec<i32> {
    let last = i32::MAX - TOKENS as i32 + 1;
    let mut v = vec![
        0,
        (1 << 17) - 4,
        (1 << 20) + 3,
        (1 << 24) - 4,
        (1 << 24) + 1,
        (1 << 30) - 3,
        1 << 30,
        last - 1000,
        last,
    ];
    for _ in 0..12 {
        v.push((rng.unit() * last as f64) as i32);
    }
    for _ in 0..8 {
        v.push(2f64.powf(rng.uniform(4.0, 31.0) as f64).min(last as f64) as i32);
    }
    v
}

/// The dims of each Q/K head that rotate.
fn rotated_dims(c: &RopeCase) -> usize {
    if c.dims == 0 {
        c.dim
    } else {
        c.dims
    }
}

/// The outputs `(q, k, v)` of one launch on `dev`.
fn rope_run(dev: &Device, c: &RopeCase, qkv: &[f32], base: i32) -> [Vec<f32>; 3] {
    let width = (HEADS_Q + 2 * HEADS_KV) * c.dim;
    let x = Tensor::from_f32(dev, DType::F32, &[1, TOKENS, width], qkv).unwrap();
    let mut q = Tensor::zeros(dev, DType::F32, &[1, HEADS_Q, TOKENS, c.dim]).unwrap();
    let kv = [1, HEADS_KV, TOKENS, c.dim];
    let mut k = Tensor::zeros(dev, DType::F32, &kv).unwrap();
    let mut v = Tensor::zeros(dev, DType::F32, &kv).unwrap();
    let rope = Rope {
        dims: c.dims as u32,
        base: c.base,
        scale: 1.0,
        traditional: c.traditional,
    };
    ops::fused_rope_qk_append(
        dev,
        &x,
        rope,
        base,
        KvLayout::DenseSlab,
        &mut q,
        &mut k,
        &mut v,
    )
    .unwrap_or_else(|e| panic!("{}: rope at base {base}: {e}", dev.name()));
    [q, k, v].map(|t| t.to_f32_vec().unwrap())
}

/// The engine's reference (spec §4: f32 angle, rotation in f64, rounded once).
fn rope_reference(c: &RopeCase, qkv: &[f32], base: i32) -> [Vec<f32>; 3] {
    let width = (HEADS_Q + 2 * HEADS_KV) * c.dim;
    let mut p = RopeAppendParams {
        log2_base: (c.base as f64).log2() as f32,
        rope_dims: c.dims as u32,
        position_base: base,
        traditional: c.traditional as u32,
        ..Default::default()
    };
    let kv = [1, HEADS_KV, TOKENS, c.dim];
    FusedRopeQkAppend::bind(
        &mut p,
        &[&[1, TOKENS, width], &[1, HEADS_Q, TOKENS, c.dim], &kv, &kv],
    )
    .unwrap();
    let mut q = vec![0.0; HEADS_Q * TOKENS * c.dim];
    let mut k = vec![0.0; HEADS_KV * TOKENS * c.dim];
    let mut v = k.clone();
    kiln::reference::fused_rope_qk_append::fused_rope_qk_append(&p, qkv, &mut q, &mut k, &mut v);
    [q, k, v]
}

/// The worst element of one port against the reference, as (error in units of the pair's
/// last place, position, description).
#[derive(Default)]
struct RopeWorst {
    err: f64,
    position: i64,
    what: String,
    /// Elements over the bound (or, for V, not bit-exact).
    over: usize,
    /// The lowest position with an element over the bound.
    first_over: Option<i64>,
}

impl RopeWorst {
    fn add(
        &mut self,
        c: &RopeCase,
        qkv: &[f32],
        base: i32,
        got: &[Vec<f32>; 3],
        want: &[Vec<f32>; 3],
    ) {
        let width = (HEADS_Q + 2 * HEADS_KV) * c.dim;
        let rotated = rotated_dims(c);
        let half = rotated / 2;
        for (which, (g, w)) in got.iter().zip(want).enumerate() {
            for (idx, (&g, &w)) in g.iter().zip(w).enumerate() {
                let i = idx % c.dim;
                let t = idx / c.dim % TOKENS;
                let h = idx / (c.dim * TOKENS);
                let slot = [h, HEADS_Q + h, HEADS_Q + HEADS_KV + h][which];
                let head = &qkv[t * width + slot * c.dim..][..c.dim];
                let err = if which == 2 || i >= rotated {
                    // V and the unrotated tail of Q/K are copied.
                    if g.to_bits() == w.to_bits() {
                        0.0
                    } else {
                        f64::INFINITY
                    }
                } else {
                    let (i1, i2) = if c.traditional {
                        (i & !1, (i & !1) + 1)
                    } else {
                        (i % half, i % half + half)
                    };
                    let m = head[i1].abs() + head[i2].abs();
                    let unit = 2f64.powi((m.to_bits() >> 23) as i32 - 150);
                    (g as f64 - w as f64).abs() / unit
                };
                if err.is_nan() || err > ROPE_BOUND {
                    self.over += 1;
                    let at = base as i64 + t as i64;
                    self.first_over = Some(self.first_over.map_or(at, |p| p.min(at)));
                }
                if err.is_nan() || err > self.err {
                    self.err = err;
                    self.position = base as i64 + t as i64;
                    self.what = format!(
                        "{} head {h} dim {i} at position {}: {g:e}, reference {w:e}",
                        ["q", "k", "v"][which],
                        self.position
                    );
                }
            }
        }
    }
}

#[test]
fn rope_is_within_the_f32_angle_contract_at_every_accepted_position() {
    let Some(dev) = kiln_tests::wgpu_device() else {
        return;
    };
    let cpu = Device::cpu();
    let mut rng = Rng(kiln_tests::seed("wgsl_accuracy rope"));
    let cases = [
        RopeCase {
            dim: 128,
            dims: 0,
            traditional: false,
            base: 10_000.0,
        },
        RopeCase {
            dim: 256,
            dims: 0,
            traditional: true,
            base: 1_000_000.0,
        },
        // A rotated half of 48: the frequency's `p / (R/2)` is no exact power-of-two division.
        RopeCase {
            dim: 128,
            dims: 96,
            traditional: false,
            base: 500_000.0,
        },
    ];
    let mut failed = Vec::new();
    for c in &cases {
        let bases = position_bases(&mut rng);
        let (mut on_cpu, mut on_dev) = (RopeWorst::default(), RopeWorst::default());
        let width = (HEADS_Q + 2 * HEADS_KV) * c.dim;
        for &base in &bases {
            let qkv: Vec<f32> = (0..TOKENS * width)
                .map(|_| rng.uniform(-2.0, 2.0))
                .collect();
            let want = rope_reference(c, &qkv, base);
            on_cpu.add(c, &qkv, base, &rope_run(&cpu, c, &qkv, base), &want);
            on_dev.add(c, &qkv, base, &rope_run(&dev, c, &qkv, base), &want);
        }
        let label = format!(
            "rope D {} R {} {} base {:e}, {} windows of {TOKENS} positions in 0..=i32::MAX",
            c.dim,
            rotated_dims(c),
            if c.traditional {
                "interleaved"
            } else {
                "half-split"
            },
            c.base,
            bases.len()
        );
        for (port, w) in [("cpu", &on_cpu), (dev.name(), &on_dev)] {
            let first = w
                .first_over
                .map_or(String::new(), |p| format!(", the first at position {p}"));
            eprintln!(
                "{label}: {port}: worst {:.3} units of the pair's last place ({}), {} over {ROPE_BOUND}{first}",
                w.err, w.what, w.over
            );
        }
        // Only the WGSL is held to the contract here: the cpu port's frequency comes from the
        // `libm` crate's exp2f, which is not correctly rounded, so at positions near 2^31 one
        // ulp of it moves the angle by a tenth of a radian (printed above for comparison).
        if on_dev.over > 0 {
            failed.push(format!(
                "{label}: {}: {} elements over {ROPE_BOUND}, worst {:.3}: {}",
                dev.name(),
                on_dev.over,
                on_dev.err,
                on_dev.what
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// xIELU

/// xIELU's inputs: random bit patterns over every finite f32, both signs (large negative
/// inputs included); dense sweeps of the negative branch, of the region where its output
/// crosses zero for usual parameters and of the neighbourhood of 0 and ε; special values.
fn xielu_inputs(rng: &mut Rng) -> Vec<f32> {
    let mut v = Vec::new();
    while v.len() < 8192 {
        let x = f32::from_bits(rng.next() as u32);
        if x.is_finite() {
            v.push(x);
        }
    }
    v.extend((0..8192).map(|_| rng.uniform(-20.0, 0.0)));
    v.extend((0..8192).map(|_| rng.uniform(-4.0, -0.25)));
    v.extend((0..4096).map(|_| rng.uniform(-2e-3, 2e-3)));
    v.extend((0..2048).map(|_| rng.uniform(-3e-6, 1e-6)));
    v.extend((0..2048).map(|_| rng.uniform(1e-30, 8.0) * [-1.0, 1.0][rng.next() as usize & 1]));
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-45,
        -1e-45,
        f32::MAX,
        f32::MIN,
        -1e-6,
        -1.000_000_1e-6,
        -0.999_999_9e-6,
        -0.5,
        -0.500_000_06,
        -17.0,
        -18.714_973,
        -88.72,
        -1e30,
        65504.0,
        -65504.0,
        3.4e38,
    ]);
    v
}

/// The sign bit and the exponent field of `dtype`'s bits.
fn sign_and_exponent(dtype: DType) -> (u32, u32) {
    match dtype {
        DType::F32 => (0x8000_0000, 0x7f80_0000),
        DType::F16 => (0x8000, 0x7c00),
        _ => (0x8000, 0x7f80),
    }
}

/// The ulps between two values of one dtype given as bits (`bits`: 16 or 32), NaN equal to NaN
/// and to nothing else, −0 equal to +0.
fn ulp_distance(a: u32, b: u32, dtype: DType) -> u64 {
    let (sign, exp_mask) = sign_and_exponent(dtype);
    let nan = |x: u32| (x & !sign) > exp_mask;
    match (nan(a), nan(b)) {
        (true, true) => return 0,
        (false, false) => {}
        _ => return u64::MAX,
    }
    let ordered = |x: u32| {
        if x & sign != 0 {
            -((x & !sign) as i64)
        } else {
            x as i64
        }
    };
    ordered(a).abs_diff(ordered(b))
}

/// The reference's output bits for `xs` (rounded to `T` first, as the tensors are).
fn xielu_reference<T: Element>(p: &XieluParams, xs: &[f32]) -> Vec<u32> {
    let x: Vec<T> = xs.iter().map(|&v| T::from_f32(v)).collect();
    let mut out = x.clone();
    kiln::reference::fused_xielu::fused_xielu(p, &x, &mut out);
    let host = Tensor::from_slice(&Device::cpu(), &[out.len()], &out).unwrap();
    words(&host.to_bytes().unwrap(), T::DTYPE)
}

fn words(bytes: &[u8], dtype: DType) -> Vec<u32> {
    match dtype.size() {
        4 => bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        _ => bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes(c.try_into().unwrap()) as u32)
            .collect(),
    }
}

/// The per-op chain of spec §10 as an adapter that flushes f32 subnormals computes it (Vulkan's
/// default float controls allow it and NVIDIA's driver does): the input, every op's f32 result
/// and every value rounded to `T` flushed to zero of its sign. f16's subnormals are normal f32
/// values, never flushed. An intermediate counts, not only the input and the result: bf16
/// `x = 0x00ff` (just under 2^-125) makes `x·0.5` subnormal, and the chain's final rounding
/// carries it up to the smallest normal, 0x0080, where the adapter's flushed product gives 0.
fn xielu_flushed_reference<T: Element>(p: &XieluParams, xs: &[f32]) -> Vec<u32> {
    let keeps_subnormals = T::DTYPE == DType::F16;
    let ftz = |v: f32| {
        if v.is_subnormal() {
            0.0f32.copysign(v)
        } else {
            v
        }
    };
    // An f32 op's result, flushed, rounded to `T`, and flushed again where `T` is f32-ranged.
    let round = |v: f32| {
        let r = T::from_f32(ftz(v)).to_f32();
        if keeps_subnormals {
            r
        } else {
            ftz(r)
        }
    };
    let (alpha_p, alpha_n) = (round(p.alpha_p), round(p.alpha_n));
    let (beta, eps) = (round(p.beta), round(p.eps));
    xs.iter()
        .map(|&v| {
            let x = round(v);
            let positive = round(alpha_p * round(x * x));
            let clamped = if x.is_nan() || x < eps { x } else { eps };
            let negative = round(round(round(libm::expm1f(clamped)) - x) * alpha_n);
            let branch = if x > 0.0 { positive } else { negative };
            // A value of `T` already: the conversion is exact.
            T::from_f32(round(branch + round(x * beta))).to_bits32()
        })
        .collect()
}

/// The output bits of `ops::fused_xielu` on `dev`.
fn xielu_run(dev: &Device, dtype: DType, p: &XieluParams, xs: &[f32]) -> Vec<u32> {
    let x = Tensor::from_f32(dev, dtype, &[xs.len()], xs).unwrap();
    let mut out = Tensor::zeros(dev, dtype, &[xs.len()]).unwrap();
    ops::fused_xielu(dev, &x, p.alpha_p, p.alpha_n, p.beta, p.eps, &mut out)
        .unwrap_or_else(|e| panic!("{}: xielu {}: {e}", dev.name(), dtype.name()));
    words(&out.to_bytes().unwrap(), dtype)
}

#[test]
fn xielu_is_within_one_ulp_of_the_per_op_chain_over_its_whole_range() {
    let Some(dev) = kiln_tests::wgpu_device() else {
        return;
    };
    let cpu = Device::cpu();
    let mut rng = Rng(kiln_tests::seed("wgsl_accuracy xielu"));
    let xs = xielu_inputs(&mut rng);
    // Apertus' values, a set with a negative β and a wide clamp, and a random set.
    let params = [
        (0.7936, 1.2931, 0.5, -1e-6),
        (2.5, 0.31, -0.25, -0.5),
        (
            rng.uniform(0.05, 3.0),
            rng.uniform(0.05, 3.0),
            rng.uniform(-1.0, 1.0),
            -rng.uniform(1e-7, 1.0),
        ),
    ];
    let mut failed = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        for &(alpha_p, alpha_n, beta, eps) in &params {
            let p = XieluParams {
                n: xs.len() as u32,
                alpha_p,
                alpha_n,
                beta,
                eps,
            };
            let (want, want_flushed) = match dtype {
                DType::F32 => (
                    xielu_reference::<f32>(&p, &xs),
                    xielu_flushed_reference::<f32>(&p, &xs),
                ),
                DType::F16 => (
                    xielu_reference::<F16>(&p, &xs),
                    xielu_flushed_reference::<F16>(&p, &xs),
                ),
                _ => (
                    xielu_reference::<Bf16>(&p, &xs),
                    xielu_flushed_reference::<Bf16>(&p, &xs),
                ),
            };
            let label = format!(
                "xielu {} (α_p {alpha_p}, α_n {alpha_n}, β {beta}, ε {eps:e}), {} inputs",
                dtype.name(),
                xs.len()
            );
            for (port, got, bound) in [
                ("cpu", xielu_run(&cpu, dtype, &p, &xs), 0),
                (dev.name(), xielu_run(&dev, dtype, &p, &xs), 1),
            ] {
                let (mut worst, mut over, mut flushed) = ((0u64, 0usize), 0, 0);
                for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    let mut d = ulp_distance(g, w, dtype);
                    // The device may flush where a subnormal (input, intermediate or result)
                    // changes the chain.
                    let subnormal = want_flushed[i] != w;
                    if d > bound && port != "cpu" && subnormal {
                        let df = ulp_distance(g, want_flushed[i], dtype);
                        if df <= bound {
                            flushed += 1;
                            d = df;
                        }
                    }
                    if d > bound {
                        over += 1;
                    }
                    if d > worst.0 {
                        worst = (d, i);
                    }
                }
                let (d, i) = worst;
                let at = format!("x = {:e}: {:#x}, chain {:#x}", xs[i], got[i], want[i]);
                eprintln!(
                    "{label}: {port}: worst {d} ulp ({at}), {over} over {bound}, \
                     {flushed} as flushed subnormals"
                );
                if over > 0 {
                    failed.push(format!(
                        "{label}: {port}: {over} elements over {bound} ulp, worst {d} at {at}"
                    ));
                }
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The flushing adapter's chain on the host: bf16 `x = 0x00ff` with Apertus' β = 0.5 (seen on
/// NVIDIA's Vulkan driver, seed 1796651772960275199) rounds a subnormal `x·β` up to the
/// smallest normal, which a flushed product gives as 0; away from subnormals the flushed chain
/// is the chain.
#[test]
fn the_flushed_chain_flushes_intermediates_and_only_subnormals() {
    let p = XieluParams {
        n: 1,
        alpha_p: 0.7936,
        alpha_n: 1.2931,
        beta: 0.5,
        eps: -1e-6,
    };
    let x = [Bf16(0x00ff).to_f32()];
    assert_eq!(xielu_reference::<Bf16>(&p, &x), [0x0080]);
    assert_eq!(xielu_flushed_reference::<Bf16>(&p, &x), [0x0000]);
    let mut rng = Rng(kiln_tests::seed("wgsl_accuracy flushed chain"));
    let xs: Vec<f32> = (0..4096).map(|_| rng.uniform(-20.0, 20.0)).collect();
    assert_eq!(
        xielu_flushed_reference::<f32>(&p, &xs),
        xielu_reference::<f32>(&p, &xs)
    );
    assert_eq!(
        xielu_flushed_reference::<F16>(&p, &xs),
        xielu_reference::<F16>(&p, &xs)
    );
    assert_eq!(
        xielu_flushed_reference::<Bf16>(&p, &xs),
        xielu_reference::<Bf16>(&p, &xs)
    );
}
