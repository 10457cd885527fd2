//! The NaN/Inf contract (docs/non-finite.md): every kernel's port, on the cpu and the sim, gives
//! the reference chain's answer (the fallback arm, written from the contract) when its float
//! inputs hold NaN or ±Inf — a non-finite output beside the same non-finite value, NaN beside
//! NaN, every finite output within the case's bounds.

use kiln::case::{Case, Fill};
use kiln::math::{Access, Bf16, Element, F16};
use kiln::parity::{cases, draw, run_case_non_finite};
use kiln::rng::Rng;
use kiln::{DType, Device, KernelId};

const SPECIALS: [f64; 3] = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY];

/// Element values of `bytes` as f64, for the float dtypes.
fn values(dtype: DType, bytes: &[u8]) -> Vec<f64> {
    match dtype {
        DType::F32 => bytes
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect(),
        DType::F16 => bytes
            .chunks(2)
            .map(|b| F16(u16::from_le_bytes(b.try_into().unwrap())).to_f32() as f64)
            .collect(),
        DType::Bf16 => bytes
            .chunks(2)
            .map(|b| Bf16(u16::from_le_bytes(b.try_into().unwrap())).to_f32() as f64)
            .collect(),
        _ => unreachable!("only float buffers are poisoned"),
    }
}

/// The float inputs of `case` that a random draw fills (tables, packed and exact lists stay).
fn poisonable(k: KernelId, dt: DType, case: &Case) -> Vec<usize> {
    k.buffers()
        .iter()
        .enumerate()
        .filter(|(b, d)| {
            d.access != Access::Write
                && matches!(d.elem.resolve(dt), DType::F32 | DType::F16 | DType::Bf16)
                && matches!(case.fill[*b], Fill::Normal { .. } | Fill::Uniform { .. })
                && case.shapes[*b].iter().product::<usize>() > 0
        })
        .map(|(b, _)| b)
        .collect()
}

/// `case` with buffer `b` drawn now and one to three of its elements made NaN or ±Inf.
fn poison(k: KernelId, dt: DType, case: &Case, b: usize, rng: &mut Rng) -> (Case, String) {
    let bt = k.buffers()[b].elem.resolve(dt);
    let n: usize = case.shapes[b].iter().product();
    let mut v = values(bt, &draw(bt, n, &case.fill[b], rng));
    let mut what = Vec::new();
    for _ in 0..1 + rng.next_u64() % 3 {
        let at = (rng.next_u64() % n as u64) as usize;
        v[at] = SPECIALS[(rng.next_u64() % 3) as usize];
        what.push(format!("{}[{at}] = {}", k.buffers()[b].name, v[at]));
    }
    let mut c = case.clone();
    c.fill[b] = Fill::Values(v);
    (c, what.join(", "))
}

#[test]
fn every_kernel_meets_the_contract_on_non_finite_inputs() {
    let seed = kiln_tests::seed("non-finite");
    let mut rng = Rng::new(seed);
    let mut failures = Vec::new();
    let mut runs = 0;
    for dev in [Device::cpu(), Device::sim(8).unwrap()] {
        for &k in KernelId::ALL {
            for &dt in k.dtypes() {
                for case in cases(k, dt).iter().filter(|c| c.runs_on(dev.backend())) {
                    let inputs = poisonable(k, dt, case);
                    if inputs.is_empty() {
                        continue;
                    }
                    let b = inputs[(rng.next_u64() % inputs.len() as u64) as usize];
                    let (c, what) = poison(k, dt, case, b, &mut rng);
                    let case_seed = rng.next_u64();
                    let o = run_case_non_finite(&dev, k, dt, &c, case_seed);
                    runs += 1;
                    if !o.pass {
                        failures.push(format!(
                            "{} {} on {} [{}] {what} (case seed {case_seed}): {:?}",
                            k.name(),
                            dt.name(),
                            dev.name(),
                            c.label,
                            o.failures
                        ));
                    }
                }
            }
        }
    }
    eprintln!("seed {seed}: {runs} poisoned cases");
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {runs}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
