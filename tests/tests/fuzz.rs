//! Fuzzing every kernel of the list (the launcher every op goes through) on the cpu and the
//! sim: parity cases with random inputs, some made invalid (a dimension changed, an index table
//! redrawn at random, a param set to a random value). Each launch must end, without a panic,
//! either refused as invalid input before anything ran or with the reference's answer.
//! Bounded by time; the seed is printed and `KILN_SEED` replays it.

use kiln::case::{Case, Fill};
use kiln::launch::{args_in_list_order, default_params, launch, set_param, Mode};
use kiln::math::Access;
use kiln::parity::{cases, draw, run_case};
use kiln::rng::Rng;
use kiln::{DType, Device, KernelId, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The fuzz loop's time budget (the test's bound in a debug build on two cores).
const BUDGET: Duration = Duration::from_secs(60);
/// A launch that takes longer than this is a hang.
const HANG: Duration = Duration::from_secs(60);

fn pick<T: Clone>(rng: &mut Rng, v: &[T]) -> T {
    v[(rng.next_u64() % v.len() as u64) as usize].clone()
}

/// Whether `values` is an index table or id list (small integers), which may be redrawn at
/// random; other exact lists (packed scale bits) would become NaNs the checks cannot compare.
fn is_index_table(values: &[f64]) -> bool {
    values
        .iter()
        .all(|v| v.fract() == 0.0 && v.abs() < (1 << 20) as f64)
}

/// Random entries in and beyond the range of index table `values`.
fn redraw(values: &[f64]) -> Fill {
    let lo = values.iter().cloned().fold(0.0, f64::min);
    let hi = values.iter().cloned().fold(1.0, f64::max);
    Fill::Uniform {
        lo: lo - 2.0,
        hi: 2.0 * hi + 3.0,
    }
}

/// `fill` for a buffer of `n` elements: an index table redrawn, other exact lists repeated.
fn resized(fill: &Fill, n: usize) -> Fill {
    match fill {
        Fill::Values(v) if is_index_table(v) || v.is_empty() => redraw(v),
        Fill::Values(v) => Fill::Values(v.iter().cycle().take(n).cloned().collect()),
        f => f.clone(),
    }
}

/// `case` with at most one thing changed at random; says what changed.
fn mutate(case: &Case, rng: &mut Rng) -> (Case, String) {
    let mut c = case.clone();
    match rng.next_u64() % 8 {
        0..=2 => (c, "as drawn".into()),
        3..=5 => {
            let b = (rng.next_u64() % c.shapes.len() as u64) as usize;
            if c.shapes[b].is_empty() {
                return (c, "as drawn".into());
            }
            let d = (rng.next_u64() % c.shapes[b].len() as u64) as usize;
            let was = c.shapes[b][d];
            let to = pick(
                rng,
                &[0, 1, was.saturating_sub(1), was + 1, 2 * was, was + 7],
            );
            c.shapes[b][d] = to;
            let n = c.shapes[b].iter().product();
            c.fill[b] = resized(&c.fill[b], n);
            (c, format!("buffer {b} dim {d}: {was} -> {to}"))
        }
        6 => {
            let tables: Vec<usize> = (0..c.fill.len())
                .filter(|&b| matches!(&c.fill[b], Fill::Values(v) if is_index_table(v)))
                .collect();
            if tables.is_empty() {
                return (c, "as drawn".into());
            }
            let b = pick(rng, &tables);
            if let Fill::Values(v) = &c.fill[b] {
                c.fill[b] = redraw(v);
            }
            (c, format!("buffer {b} redrawn at random"))
        }
        _ => {
            if c.params.is_empty() {
                return (c, "as drawn".into());
            }
            let p = (rng.next_u64() % c.params.len() as u64) as usize;
            let v = pick(
                rng,
                &[
                    "0",
                    "1",
                    "-1",
                    "3",
                    "1000000",
                    "4294967295",
                    "1e30",
                    "nan",
                    "inf",
                    "-0.5",
                ],
            );
            c.params[p].1 = v.to_string();
            let what = format!("param {} = {v}", c.params[p].0);
            (c, what)
        }
    }
}

/// Launches `case` through the port; `Ok(true)` when the launch ran, `Ok(false)` when it was
/// refused as invalid input; `Err` for any other outcome.
fn launch_case(
    dev: &Device,
    k: KernelId,
    dt: DType,
    case: &Case,
    seed: u64,
) -> Result<bool, String> {
    let mut params = default_params(k);
    for (name, value) in &case.params {
        if let Err(e) = set_param(k, &mut params, name, value) {
            return if e.is_invalid_input() {
                Ok(false)
            } else {
                Err(e.to_string())
            };
        }
    }
    let mut rng = Rng::new(seed);
    let mut tensors = Vec::new();
    for ((d, shape), fill) in k.buffers().iter().zip(&case.shapes).zip(&case.fill) {
        let bt = d.elem.resolve(dt);
        let n = shape
            .iter()
            .try_fold(1usize, |a, &x| a.checked_mul(x))
            .unwrap_or(0);
        let bytes = if d.access == Access::Write {
            vec![0u8; n * bt.size()]
        } else {
            draw(bt, n, fill, &mut rng)
        };
        match Tensor::from_bytes(dev, bt, shape, &bytes) {
            Ok(t) => tensors.push(t),
            Err(e) if e.is_invalid_input() => return Ok(false),
            Err(e) => return Err(e.to_string()),
        }
    }
    let mut args = args_in_list_order(k, &mut tensors);
    match launch(dev, k, &params, &mut args, Mode::PortOnly) {
        Ok(_) => Ok(true),
        Err(e) if e.is_invalid_input() => Ok(false),
        Err(e) => Err(format!("not refused as invalid input: {e}")),
    }
}

/// One fuzz step: the launch, then (if it ran) the parity check against the reference.
fn step(dev: &Device, k: KernelId, dt: DType, case: &Case, seed: u64) -> Result<bool, String> {
    let ran = catch_unwind(AssertUnwindSafe(|| launch_case(dev, k, dt, case, seed)))
        .map_err(|_| "the launch panicked".to_string())??;
    if !ran {
        return Ok(false);
    }
    let o = catch_unwind(AssertUnwindSafe(|| run_case(dev, k, dt, case, seed)))
        .map_err(|_| "the parity check panicked".to_string())?;
    if o.pass {
        Ok(true)
    } else {
        Err(format!(
            "accepted but differs from the reference: {:?}",
            o.failures
        ))
    }
}

#[test]
fn every_kernel_on_random_valid_and_invalid_inputs_is_refused_or_right() {
    let seed = kiln_tests::seed("fuzz");
    let mut rng = Rng::new(seed);
    let devs = [Device::cpu(), Device::sim(8).unwrap()];
    let start = Instant::now();
    let (mut ran, mut refused, mut failures) = (0, 0, Vec::new());
    let mut i = 0;
    // Every kernel on both devices at least once, then on until the budget is spent.
    while i < 2 * KernelId::ALL.len() || start.elapsed() < BUDGET {
        let k = KernelId::ALL[i % KernelId::ALL.len()];
        let dev = devs[(i / KernelId::ALL.len()) % 2].clone();
        i += 1;
        let dt = pick(&mut rng, k.dtypes());
        // Model-sized cases stay off the sim here as in the parity matrix.
        let all: Vec<_> = cases(k, dt)
            .into_iter()
            .filter(|c| c.runs_on(dev.backend()))
            .collect();
        let (case, what) = mutate(&pick(&mut rng, &all), &mut rng);
        let case_seed = rng.next_u64();
        let label = format!(
            "{} {} on {} [{}] {what} (case seed {case_seed})",
            k.name(),
            dt.name(),
            dev.name(),
            case.label
        );
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(step(&dev, k, dt, &case, case_seed));
        });
        match rx.recv_timeout(HANG) {
            Ok(Ok(true)) => ran += 1,
            Ok(Ok(false)) => refused += 1,
            Ok(Err(e)) => failures.push(format!("{label}: {e}")),
            Err(_) => panic!("seed {seed}: {label}: no answer after {HANG:?} (a hang)"),
        }
    }
    eprintln!("seed {seed}: {i} launches, {ran} ran and matched, {refused} refused");
    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
    assert!(
        ran > 0 && refused > 0,
        "seed {seed}: the fuzz covers both outcomes"
    );
}

/// A Gemma gain `rnd_f16(weight_bias + w)` that overflows f16 (a fuzz draw that once failed)
/// gives the reference's infinities, on the cpu and the sim.
#[test]
fn an_f16_gain_that_overflows_agrees_with_the_reference() {
    let seed = kiln_tests::seed("overflowing gain");
    let k = KernelId::FusedAddRmsNorm;
    let mut case = cases(k, DType::F16)
        .into_iter()
        .find(|c| c.label.starts_with("gemma"))
        .expect("the Gemma case");
    for v in ["4294967295", "1e30", "-1000000"] {
        for (name, value) in case.params.iter_mut() {
            if *name == "weight_bias" {
                *value = v.to_string();
            }
        }
        for dev in [Device::cpu(), Device::sim(8).unwrap()] {
            let o = run_case(&dev, k, DType::F16, &case, seed);
            assert!(
                o.pass,
                "seed {seed}: weight_bias {v} on {}: {:?}",
                dev.name(),
                o.failures
            );
        }
    }
}

/// An empty request's last-page length and first-page offset mean nothing (a fuzz draw that
/// once failed: the reference refused a negative length the kernel and the host check ignore);
/// any values there give the reference's zero rows, on the cpu and the sim.
#[test]
fn an_empty_requests_page_lengths_are_ignored() {
    let seed = kiln_tests::seed("empty request");
    let k = KernelId::PagedAttentionDecodeV2Partial;
    let base = cases(k, DType::F16)
        .into_iter()
        .find(|c| c.label.contains("empty-in-batch"))
        .expect("the empty-request case");
    // Buffers 5 and 6 are `last_page_len` and `first_page_offset`; request 1 has no pages.
    for (lpl, fpo) in [(-7, 0), (0, -3), (40, 99), (i32::MIN, i32::MAX)] {
        let mut case = base.clone();
        for (b, v) in [(5, lpl), (6, fpo)] {
            let Fill::Values(values) = &mut case.fill[b] else {
                panic!("buffer {b} is an exact table");
            };
            values[1] = v as f64;
        }
        for dev in [Device::cpu(), Device::sim(8).unwrap()] {
            let ran = launch_case(&dev, k, DType::F16, &case, seed).expect("refused or ran");
            assert!(ran, "seed {seed}: ({lpl}, {fpo}) on {} refused", dev.name());
            let o = run_case(&dev, k, DType::F16, &case, seed);
            assert!(
                o.pass,
                "seed {seed}: ({lpl}, {fpo}) on {}: {:?}",
                dev.name(),
                o.failures
            );
        }
    }
}
