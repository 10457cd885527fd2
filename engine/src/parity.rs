//! The parity harness: every kernel × dtype × device against the reference chain, with the
//! metrics of spec §0.2, fresh seeded inputs, poisoned outputs and guard sentinels.

use crate::catalog::entry;
use crate::host::HostData;
use crate::launch::{args_in_list_order, default_params, launch, set_param, Mode};
use crate::rng::{derive_seed, Rng};
use crate::{Backend, Device, DeviceKind, PortError, SimConfig, Tensor};
use kiln_math::{Access, DType, Element, KernelId};

/// Elements of guard on each side of every written buffer.
pub const GUARD: usize = 16;
/// Byte the guards hold; any change is a write outside the buffer.
pub const GUARD_BYTE: u8 = 0x5A;
/// Byte write-only outputs are poisoned with (all-ones is a NaN in every float dtype that no
/// arithmetic produces); an element still all-ones after the launch was never written.
pub const POISON_BYTE: u8 = 0xFF;

pub use crate::case::{Case, Check, Fill};

/// The result of one case on one device.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The kernel run.
    pub kernel: KernelId,
    /// Its instantiation's dtype.
    pub dtype: DType,
    /// The device's backend.
    pub backend: Backend,
    /// The device's wave width.
    pub wave: u32,
    /// Threads per block the host backends ran it with (1 on the cpu, the emulator's block on
    /// the sim); `None` on a GPU, whose launcher picks the block.
    pub block: Option<u32>,
    /// The case's label.
    pub case: String,
    /// The seed the inputs were drawn with (rerun with it to reproduce).
    pub seed: u64,
    /// Normalized RMS deviation of the tolerance-checked output with the largest one (0 when
    /// none).
    pub nrms: f64,
    /// That output's normalized max deviation, or the largest `max_rel` of the `MaxRel`-checked
    /// outputs (0 when none).
    pub nmax: f64,
    /// The bound `nrms` is held to (0 when none).
    pub tol_nrms: f64,
    /// The bound `nmax` is held to (0 when none).
    pub tol_nmax: f64,
    /// Whether every check, guard and poison test passed.
    pub pass: bool,
    /// What failed, one line each (empty on a pass).
    pub failures: Vec<String>,
}

/// `nrms` and `nmax` of spec §0.2 (`want` is the reference), in f64, scaled by the finite
/// references: an element equal to its reference (infinities included, NaN beside NaN) deviates
/// by 0, any other pair with a non-finite member makes both results NaN.
pub fn normalized_deviation(got: &[f64], want: &[f64]) -> (f64, f64) {
    let n = want.len().max(1) as f64;
    let scale = (want
        .iter()
        .filter(|w| w.is_finite())
        .map(|w| w * w)
        .sum::<f64>()
        / n)
        .sqrt()
        .max(1e-20);
    let mut sq = 0.0;
    let mut max = 0.0f64;
    for (g, w) in got.iter().zip(want) {
        if agrees(*g, *w) {
            continue;
        }
        let d = (g - w).abs();
        if !d.is_finite() {
            return (f64::NAN, f64::NAN);
        }
        sq += d * d;
        max = max.max(d);
    }
    ((sq / n).sqrt() / scale, max / scale)
}

/// Whether `got` is its reference `want` exactly, an infinity of the same sign or NaN beside NaN
/// (a kernel that overflows where the reference overflows agrees with it).
fn agrees(got: f64, want: f64) -> bool {
    got == want || (got.is_nan() && want.is_nan())
}

/// `max_rel` of spec §0.2: `max|got − want| / max(1e-6, max|want|)` over finite references;
/// an element that agrees with its reference (equal, or NaN beside NaN) deviates by 0, any
/// other pair with a non-finite member makes the result NaN.
pub fn max_rel(got: &[f64], want: &[f64]) -> f64 {
    let scale = want
        .iter()
        .filter(|w| w.is_finite())
        .fold(0.0f64, |m, w| m.max(w.abs()))
        .max(1e-6);
    let mut worst = 0.0f64;
    for (g, w) in got.iter().zip(want) {
        if agrees(*g, *w) {
            continue;
        }
        let d = (g - w).abs();
        if !d.is_finite() {
            return f64::NAN;
        }
        worst = worst.max(d);
    }
    worst / scale
}

/// The parity cases of a kernel at a dtype.
pub fn cases(kernel: KernelId, dtype: DType) -> Vec<Case> {
    (entry(kernel).cases)(dtype)
}

/// The shapes a kernel is benchmarked at (its reference module's model shapes, or its parity
/// cases).
pub fn bench_cases(kernel: KernelId, dtype: DType) -> Vec<Case> {
    (entry(kernel).bench_cases)(dtype)
}

/// The base seed: `KILN_SEED` if set, else fresh from the clock.
pub fn base_seed() -> u64 {
    std::env::var("KILN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// `n` values of `dtype` drawn as `fill` says, as little-endian bytes (zeros for outputs).
pub fn draw(dtype: DType, n: usize, fill: &Fill, rng: &mut Rng) -> Vec<u8> {
    if let Fill::Packed { dtype: packed, of } = fill {
        assert_eq!(dtype, DType::U32, "a Fill::Packed buffer holds u32 words");
        return draw(*packed, n * 4 / packed.size(), of, rng);
    }
    if let Fill::Ternary = fill {
        assert_eq!(dtype, DType::U32, "a Fill::Ternary buffer holds u32 words");
        let code = |rng: &mut Rng| ((3.0 * rng.uniform()) as u32).min(2);
        let word = |rng: &mut Rng| (0..16).fold(0u32, |w, j| w | (code(rng) << (2 * j)));
        return (0..n).flat_map(|_| word(rng).to_le_bytes()).collect();
    }
    if let Fill::Values(v) = fill {
        assert_eq!(
            v.len(),
            n,
            "a Fill::Values list must hold one value per element"
        );
    }
    let mut sample = |i: usize| match *fill {
        Fill::Normal { mean, std } => mean + std * rng.normal(),
        Fill::Uniform { lo, hi } => lo + (hi - lo) * rng.uniform(),
        Fill::Values(ref v) => v[i],
        Fill::Output | Fill::Packed { .. } | Fill::Ternary => 0.0,
    };
    let mut out = Vec::with_capacity(n * dtype.size());
    for i in 0..n {
        let v = sample(i);
        match dtype {
            DType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            DType::F16 => {
                out.extend_from_slice(&kiln_math::F16::from_f32(v as f32).0.to_le_bytes())
            }
            DType::Bf16 => {
                out.extend_from_slice(&kiln_math::Bf16::from_f32(v as f32).0.to_le_bytes())
            }
            DType::U32 => out.extend_from_slice(&(v.floor().max(0.0) as u32).to_le_bytes()),
            DType::I32 => out.extend_from_slice(&(v.floor() as i32).to_le_bytes()),
            DType::U8 => out.push(v.floor().clamp(0.0, 255.0) as u8),
        }
    }
    out
}

/// Element `i` of little-endian `bytes` as (value, ordered integer for ulp distance).
fn element(dtype: DType, bytes: &[u8], i: usize) -> (f64, i64) {
    let s = dtype.size();
    let b = &bytes[i * s..(i + 1) * s];
    let ord16 = |u: u16| {
        if u & 0x8000 != 0 {
            -((u & 0x7fff) as i64)
        } else {
            u as i64
        }
    };
    match dtype {
        DType::F32 => {
            let u = u32::from_le_bytes(b.try_into().unwrap());
            let ord = if u & 0x8000_0000 != 0 {
                -((u & 0x7fff_ffff) as i64)
            } else {
                u as i64
            };
            (f32::from_bits(u) as f64, ord)
        }
        DType::F16 => {
            let u = u16::from_le_bytes(b.try_into().unwrap());
            (kiln_math::F16(u).to_f32() as f64, ord16(u))
        }
        DType::Bf16 => {
            let u = u16::from_le_bytes(b.try_into().unwrap());
            (kiln_math::Bf16(u).to_f32() as f64, ord16(u))
        }
        DType::U32 => {
            let u = u32::from_le_bytes(b.try_into().unwrap());
            (u as f64, u as i64)
        }
        DType::I32 => {
            let u = i32::from_le_bytes(b.try_into().unwrap());
            (u as f64, u as i64)
        }
        DType::U8 => (b[0] as f64, b[0] as i64),
    }
}

fn bytes_of(d: &HostData, n: usize) -> &[u8] {
    // SAFETY: the u64 storage holds at least n bytes.
    unsafe { std::slice::from_raw_parts(d.words.as_ptr() as *const u8, n) }
}

/// Runs one case on `dev` through its port (never the fallback) and checks every output.
pub fn run_case(dev: &Device, kernel: KernelId, dtype: DType, case: &Case, seed: u64) -> Outcome {
    run_case_as(dev, kernel, dtype, case, seed, Infinities::Exact)
}

/// As [`run_case`], for inputs that hold NaN or ±Inf: an output element and its reference that
/// are both non-finite agree whichever of NaN or ±Inf each is (the contract of
/// docs/non-finite.md fixes where outputs are non-finite, not which non-finite value).
pub fn run_case_non_finite(
    dev: &Device,
    kernel: KernelId,
    dtype: DType,
    case: &Case,
    seed: u64,
) -> Outcome {
    run_case_as(dev, kernel, dtype, case, seed, Infinities::AnyNonFinite)
}

/// How a non-finite output is compared with a non-finite reference.
#[derive(Clone, Copy, PartialEq)]
enum Infinities {
    /// The same infinity, or NaN beside NaN.
    Exact,
    /// Any non-finite value beside any non-finite value.
    AnyNonFinite,
}

fn run_case_as(
    dev: &Device,
    kernel: KernelId,
    dtype: DType,
    case: &Case,
    seed: u64,
    infinities: Infinities,
) -> Outcome {
    let mut o = Outcome {
        kernel,
        dtype,
        backend: dev.backend(),
        wave: dev.wave(),
        block: None,
        case: case.label.clone(),
        seed,
        nrms: 0.0,
        nmax: 0.0,
        tol_nrms: 0.0,
        tol_nmax: 0.0,
        pass: false,
        failures: Vec::new(),
    };
    o.block = match dev.kind() {
        DeviceKind::Cpu => Some(1),
        DeviceKind::Sim(cfg) => cfg
            .block
            .or_else(|| preferred_block(kernel, case).map(|b| cfg.preferred_block(b))),
        DeviceKind::Gpu(_) => None,
    };
    match check_case(dev, kernel, dtype, case, seed, infinities, &mut o) {
        Ok(()) => o.pass = o.failures.is_empty(),
        Err(e) => o.failures.push(e.to_string()),
    }
    o
}

fn check_case(
    dev: &Device,
    kernel: KernelId,
    dtype: DType,
    case: &Case,
    seed: u64,
    infinities: Infinities,
    o: &mut Outcome,
) -> Result<(), PortError> {
    let desc = kernel.buffers();
    assert_eq!(
        case.shapes.len(),
        desc.len(),
        "case {} of {} has the wrong buffer count",
        case.label,
        kernel.name()
    );
    let mut rng = Rng::new(seed);
    let mut params = default_params(kernel);
    for (name, value) in &case.params {
        set_param(kernel, &mut params, name, value)?;
    }
    // Inputs, the reference's copies, and the device tensors (written buffers guarded).
    let mut reference = Vec::new();
    let mut tensors = Vec::new();
    for ((d, shape), fill) in desc.iter().zip(&case.shapes).zip(&case.fill) {
        let bt = d.elem.resolve(dtype);
        let n: usize = shape.iter().product();
        let input = if d.access == Access::Write {
            vec![0u8; n * bt.size()]
        } else {
            draw(bt, n, fill, &mut rng)
        };
        let mut words = vec![0u64; input.len().div_ceil(8).max(1)];
        // SAFETY: the u64 storage holds at least input.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                input.as_ptr(),
                words.as_mut_ptr() as *mut u8,
                input.len(),
            )
        };
        reference.push(HostData { words, len: n });
        let t = match d.access {
            Access::Read => Tensor::from_bytes(dev, bt, shape, &input)?,
            Access::ReadWrite => {
                let mut t = Tensor::guarded(dev, bt, shape, GUARD, GUARD_BYTE, 0)?;
                t.write_bytes(&input)?;
                t
            }
            Access::Write => Tensor::guarded(dev, bt, shape, GUARD, GUARD_BYTE, POISON_BYTE)?,
        };
        tensors.push(t);
    }
    // The oracle: the reference chain on host copies, with the params the kernel binds.
    let mut bound = params.clone();
    {
        let shapes: Vec<&[usize]> = case.shapes.iter().map(Vec::as_slice).collect();
        (entry(kernel).bind)(&mut bound, &shapes)
            .map_err(|e| PortError::invalid(kernel, e.to_string()))?;
    }
    let inst = entry(kernel)
        .instances
        .iter()
        .find(|i| i.dtype == dtype)
        .expect("listed dtype");
    (inst.reference)(&bound, &mut reference);

    launch(
        dev,
        kernel,
        &params,
        &mut args_in_list_order(kernel, &mut tensors),
        Mode::PortOnly,
    )?;

    for (((d, t), want), &check) in desc.iter().zip(&tensors).zip(&reference).zip(&case.checks) {
        let check = check.on(dev.backend());
        if check == Check::None {
            continue;
        }
        let bt = t.dtype();
        let all = t.to_bytes_with_guards()?;
        let g = t.guard_bytes();
        let n = t.numel();
        let mut body = all[g..g + n * bt.size()].to_vec();
        if all[..g]
            .iter()
            .chain(&all[g + body.len()..])
            .any(|&b| b != GUARD_BYTE)
        {
            o.failures.push(format!(
                "`{}`: a guard word changed (write outside the buffer)",
                d.name
            ));
        }
        let want = bytes_of(want, n * bt.size());
        if d.access == Access::Write {
            let s = bt.size();
            let poisoned = |bytes: &[u8], i: usize| {
                bytes[i * s..(i + 1) * s].iter().all(|&b| b == POISON_BYTE)
            };
            // An integer output may legitimately hold all-ones (a u32::MAX padding id) where
            // the reference does too; the value checks below still compare it.
            let unwritten = (0..n)
                .filter(|&i| poisoned(&body, i) && !poisoned(want, i))
                .count();
            if unwritten > 0 {
                o.failures.push(format!(
                    "`{}`: {unwritten} of {n} elements never written",
                    d.name
                ));
            }
        }
        if infinities == Infinities::AnyNonFinite && bt.is_float() {
            let s = bt.size();
            for i in 0..n {
                if !element(bt, &body, i).0.is_finite() && !element(bt, want, i).0.is_finite() {
                    body[i * s..(i + 1) * s].copy_from_slice(&want[i * s..(i + 1) * s]);
                }
            }
        }
        let body = &body[..];
        match check {
            Check::None | Check::ExactOn { .. } | Check::Agree { .. } => {}
            Check::MostlyExact { min_frac } => {
                let off = (0..n)
                    .filter(|&i| element(bt, body, i).1 != element(bt, want, i).1)
                    .count();
                if off as f64 > (1.0 - min_frac) * n as f64 {
                    o.failures.push(format!(
                        "`{}`: {off} of {n} elements differ from the reference (at most {:.0}% allowed)",
                        d.name,
                        (1.0 - min_frac) * 100.0
                    ));
                }
            }
            Check::Exact => {
                let off = (0..n)
                    .filter(|&i| element(bt, body, i).1 != element(bt, want, i).1)
                    .count();
                if off > 0 {
                    o.failures.push(format!(
                        "`{}`: {off} of {n} elements differ from the reference",
                        d.name
                    ));
                }
            }
            Check::Ulp { max_frac } => {
                let (mut one, mut worst) = (0usize, 0i64);
                for i in 0..n {
                    let dist = (element(bt, body, i).1 - element(bt, want, i).1).abs();
                    one += (dist == 1) as usize;
                    worst = worst.max(dist);
                }
                if worst > 1 || one as f64 > max_frac * n as f64 {
                    o.failures.push(format!(
                        "`{}`: {one} of {n} elements 1 ulp off (at most {:.1}% allowed), worst {worst} ulp",
                        d.name,
                        max_frac * 100.0
                    ));
                }
            }
            Check::Tolerance { nrms, nmax } => {
                let got: Vec<f64> = (0..n)
                    .map(|i| element(bt, body, i).0 as f32 as f64)
                    .collect();
                let exp: Vec<f64> = (0..n)
                    .map(|i| element(bt, want, i).0 as f32 as f64)
                    .collect();
                let (r, m) = normalized_deviation(&got, &exp);
                if r.is_nan() || m.is_nan() || r > o.nrms || o.tol_nrms == 0.0 {
                    o.nrms = r;
                    o.nmax = m;
                    o.tol_nrms = nrms;
                    o.tol_nmax = nmax;
                }
                if !(r < nrms && m < nmax) {
                    o.failures.push(format!(
                        "`{}`: nrms {r:.3e} (< {nrms:e}), nmax {m:.3e} (< {nmax:e})",
                        d.name
                    ));
                }
            }
            Check::MaxRel { bound } => {
                let got: Vec<f64> = (0..n).map(|i| element(bt, body, i).0).collect();
                let exp: Vec<f64> = (0..n).map(|i| element(bt, want, i).0).collect();
                let rel = max_rel(&got, &exp);
                if rel.is_nan() || rel > o.nmax || o.tol_nmax == 0.0 {
                    o.nmax = rel;
                    o.tol_nmax = bound;
                }
                // NaN fails too.
                if rel.partial_cmp(&bound) != Some(std::cmp::Ordering::Less) {
                    o.failures
                        .push(format!("`{}`: max_rel {rel:.3e} (< {bound:e})", d.name));
                }
            }
        }
    }
    Ok(())
}

/// The devices a parity run covers for `backends`: the cpu, the sim at waves 4, 8, 32 and 64,
/// and every other backend that opens here. Backends that cannot open are returned with why.
pub fn devices_for(backends: &[Backend]) -> (Vec<Device>, Vec<(Backend, String)>) {
    let mut devs = Vec::new();
    let mut skipped = Vec::new();
    for &b in backends {
        match b {
            Backend::Sim => {
                for w in [4, 8, 32, 64] {
                    devs.push(Device::sim_with(SimConfig::new(w)).expect("valid sim wave"));
                }
            }
            _ => match Device::open(b) {
                Ok(d) => devs.push(d),
                Err(e) => skipped.push((b, e.to_string())),
            },
        }
    }
    (devs, skipped)
}

/// Which blocks the sim runs each case at (a sim device with a fixed `block` runs only that).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimBlocks {
    /// One of [`sim_blocks`] per case, rotating with the case, dtype and wave, so a matrix run
    /// covers every block size at the cost of one run per case.
    Rotate,
    /// [`SimBlocks::Rotate`], and of the sims among the devices only one runs each case: a
    /// kernel's runs take the sims' waves in turn, so each wave runs every kernel with many
    /// runs (CI's parity test, where the sim's thread per lane is most of the time).
    RotateWaves,
    /// Every one of [`sim_blocks`] for every case (`kiln check`).
    Every,
}

/// Whether `dev` is a sim that picks its block per case (one with a fixed block runs as is).
fn is_free_sim(dev: &Device) -> bool {
    matches!(dev.kind(), DeviceKind::Sim(cfg) if cfg.block.is_none())
}

/// The blocks the sim runs a kernel whose launch prefers `preferred` threads at: the emulator's
/// preferred block, one wave and three waves. A kernel is correct for any block that is a
/// multiple of the wave (the only blocks any backend launches), and three waves is a multiple
/// of neither 32 below wave 32 nor of 64 or 128 above it, so a body that assumed its launch's
/// block (`thread() % 32`, `size() / 32`) fails at one of them.
pub fn sim_blocks(cfg: &SimConfig, preferred: u32) -> Vec<u32> {
    let mut blocks = vec![cfg.preferred_block(preferred), cfg.wave, 3 * cfg.wave];
    blocks.sort_unstable();
    blocks.dedup();
    blocks
}

/// The kernel's preferred block for a case's shapes (`None` when the case does not bind: the
/// run reports why).
fn preferred_block(kernel: KernelId, case: &Case) -> Option<u32> {
    let mut words = default_params(kernel);
    for (name, value) in &case.params {
        set_param(kernel, &mut words, name, value).ok()?;
    }
    let shapes: Vec<&[usize]> = case.shapes.iter().map(Vec::as_slice).collect();
    (entry(kernel).bind)(&mut words, &shapes)
        .ok()
        .map(|l| l.block)
}

/// The devices one case runs on for `dev`: itself, or for a sim without a fixed block, the sim
/// at the blocks `plan` picks (`turn` rotates [`SimBlocks::Rotate`]).
fn case_devices(
    dev: &Device,
    kernel: KernelId,
    case: &Case,
    plan: SimBlocks,
    turn: usize,
) -> Vec<Device> {
    let DeviceKind::Sim(cfg) = dev.kind() else {
        return vec![dev.clone()];
    };
    if !is_free_sim(dev) {
        return vec![dev.clone()];
    }
    let Some(preferred) = preferred_block(kernel, case) else {
        return vec![dev.clone()];
    };
    let blocks = sim_blocks(cfg, preferred);
    let chosen = match plan {
        SimBlocks::Rotate | SimBlocks::RotateWaves => vec![blocks[turn % blocks.len()]],
        SimBlocks::Every => blocks,
    };
    chosen
        .into_iter()
        .map(|b| {
            Device::sim_with(SimConfig {
                block: Some(b),
                ..cfg.clone()
            })
            .expect("a multiple of the wave within the emulator's limit")
        })
        .collect()
}

/// Runs every case of every kernel × dtype on every device, the sim at the blocks of
/// [`SimBlocks::Rotate`].
pub fn run_matrix(devs: &[Device], kernels: &[KernelId], base: u64) -> Vec<Outcome> {
    run_matrix_with(devs, kernels, base, SimBlocks::Rotate)
}

/// Runs every case of every kernel × dtype on every device, the sim at the blocks `plan` says.
/// A kernel × dtype whose port a device's backend declares absent (or holds back) is skipped,
/// with the reason on stderr: the port tables, not the harness, say where a port exists.
pub fn run_matrix_with(
    devs: &[Device],
    kernels: &[KernelId],
    base: u64,
    plan: SimBlocks,
) -> Vec<Outcome> {
    run_pairs(devs, &kernel_dtypes(kernels), base, plan)
}

/// Every kernel × dtype pair of `kernels`, kernel by kernel, each in its dtype order.
pub fn kernel_dtypes(kernels: &[KernelId]) -> Vec<(KernelId, DType)> {
    kernels
        .iter()
        .flat_map(|&k| k.dtypes().iter().map(move |&dt| (k, dt)))
        .collect()
}

/// [`run_matrix_with`] over chosen pairs of a kernel and one of its dtypes, in their order;
/// each case runs with the seed and sim block the whole matrix gives it.
pub fn run_pairs(
    devs: &[Device],
    pairs: &[(KernelId, DType)],
    base: u64,
    plan: SimBlocks,
) -> Vec<Outcome> {
    run_pairs_where(devs, pairs, base, plan, &|_, _| true)
}

/// [`run_pairs`] over the cases `keep(case index, case count)` accepts (of each pair's cases;
/// the seeds are those of the whole matrix).
pub fn run_pairs_where(
    devs: &[Device],
    pairs: &[(KernelId, DType)],
    base: u64,
    plan: SimBlocks,
    keep: &dyn Fn(usize, usize) -> bool,
) -> Vec<Outcome> {
    let mut out = Vec::new();
    let sims: Vec<usize> = (0..devs.len()).filter(|&i| is_free_sim(&devs[i])).collect();
    // Per kernel, how many of its cases have gone to a sim under `RotateWaves`.
    let mut sim_turns: std::collections::HashMap<KernelId, usize> = Default::default();
    for &(k, dt) in pairs {
        let d = k.dtypes().iter().position(|&t| t == dt).unwrap_or(0);
        let all = cases(k, dt);
        let n = all.len();
        let k_cases: Vec<Case> = all
            .into_iter()
            .enumerate()
            .filter_map(|(i, case)| keep(i, n).then_some(case))
            .collect();
        // The sim each case runs on under `RotateWaves` (none chosen otherwise).
        let sim_of_case: Vec<Option<usize>> = k_cases
            .iter()
            .map(|case| {
                if plan != SimBlocks::RotateWaves || sims.is_empty() || !case.runs_on(Backend::Sim)
                {
                    return None;
                }
                let turn = sim_turns.entry(k).or_insert(0);
                *turn += 1;
                Some(sims[(*turn - 1) % sims.len()])
            })
            .collect();
        for (w, dev) in devs.iter().enumerate() {
            if let Err(e) = crate::ports::select_port(crate::ports::ports(k), dev, dt) {
                if e.is_fallback() {
                    eprintln!("skipped {} {} on {}: {e}", k.name(), dt.name(), dev.name());
                    continue;
                }
            }
            for (c, case) in k_cases.iter().enumerate() {
                if !case.runs_on(dev.backend()) {
                    continue;
                }
                if sim_of_case[c].is_some_and(|s| sims.contains(&w) && s != w) {
                    continue;
                }
                for run_on in case_devices(dev, k, case, plan, c + d + w) {
                    let block = match run_on.kind() {
                        DeviceKind::Sim(cfg) => format!("/block {}", cfg.block.unwrap_or(0)),
                        _ => String::new(),
                    };
                    let label = format!(
                        "{}/{}/{}/{}{block}/{}",
                        k.name(),
                        dt.name(),
                        run_on.backend(),
                        run_on.wave(),
                        case.label
                    );
                    out.push(run_case(&run_on, k, dt, case, derive_seed(base, &label)));
                }
            }
        }
    }
    out
}
