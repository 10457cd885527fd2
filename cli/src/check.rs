//! `kiln check <kernel>`: the kernel author's loop, in seconds. Translates the kernel to WGSL
//! for every dtype × variant and validates each module with naga (what the wgpu port needs),
//! then runs its parity cases on the cpu (a block of one thread) and on the sim at waves 4, 8,
//! 32 and 64, each at several block sizes (`SimBlocks::Every`), so a body that assumed a wave
//! or a block size fails here with the kernel source's file and line.

use kiln::parity::{base_seed, devices_for, run_matrix_with, SimBlocks};
use kiln::{Backend, DType, KernelId};
use kiln_shaders_wgsl::{translate, validate, KernelSpec, Sources, Variant, KILN_MATH_SRC};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// The kernel, by its name in the kernel list.
    kernel: String,
    /// kiln-math's `src/` directory to translate (default: the tree this kiln was built from).
    #[arg(long)]
    src: Option<PathBuf>,
    /// Base seed (also `KILN_SEED`); fresh by default and printed.
    #[arg(long)]
    seed: Option<u64>,
}

/// Translates every dtype × variant of `kernel` and validates each module with naga; returns
/// the modules checked, or the first refusal as one message.
fn check_wgsl(src: &Sources, kernel: KernelId) -> Result<usize, String> {
    let spec = KernelSpec::of(kernel);
    let mut modules = 0;
    for &dt in spec.dtypes {
        for v in Variant::ALL {
            // As `generate_all`: f16 storage changes only f16 modules (and fixed-f16 buffers).
            if dt != DType::F16 && v.f16_storage && !spec.has_fixed_f16() {
                continue;
            }
            let m = translate(src, &spec, dt, v).map_err(|e| e.to_string())?;
            validate(&m)?;
            modules += 1;
        }
    }
    Ok(modules)
}

pub fn main(a: Args) -> anyhow::Result<()> {
    let kernel = KernelId::from_name(&a.kernel).ok_or_else(|| {
        let names: Vec<&str> = KernelId::ALL.iter().map(|k| k.name()).collect();
        anyhow::anyhow!(
            "unknown kernel `{}` (kernels: {})",
            a.kernel,
            names.join(", ")
        )
    })?;
    let started = Instant::now();
    let mut failed = false;

    let dir = a.src.unwrap_or_else(|| PathBuf::from(KILN_MATH_SRC));
    let sources = Sources::load(&dir).map_err(|e| {
        anyhow::anyhow!(
            "kiln-math's sources at {} do not load: {e} (pass --src <shared-kernel-math/src>)",
            dir.display()
        )
    })?;
    match check_wgsl(&sources, kernel) {
        Ok(n) => println!(
            "wgsl   {n} modules translated and validated by naga ({:.1} s)",
            started.elapsed().as_secs_f64()
        ),
        Err(e) => {
            println!("wgsl   FAIL {e}");
            failed = true;
        }
    }

    let host = Instant::now();
    let (devs, skipped) = devices_for(&[Backend::Cpu, Backend::Sim]);
    if let Some((b, why)) = skipped.first() {
        anyhow::bail!("{b} does not open: {why}");
    }
    let seed = a.seed.unwrap_or_else(base_seed);
    // One thread per device: the sim spends its time starting lane threads, which the cores
    // do side by side; seeds come from the run's label, so the split changes no input.
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let runs: Vec<_> = devs
            .iter()
            .map(|d| {
                s.spawn(move || {
                    run_matrix_with(std::slice::from_ref(d), &[kernel], seed, SimBlocks::Every)
                })
            })
            .collect();
        runs.into_iter()
            .flat_map(|r| r.join().expect("a parity run panicked"))
            .collect()
    });
    let bad: Vec<_> = outcomes.iter().filter(|o| !o.pass).collect();
    let mut blocks: BTreeMap<(Backend, u32), BTreeSet<u32>> = BTreeMap::new();
    for o in &outcomes {
        blocks
            .entry((o.backend, o.wave))
            .or_default()
            .insert(o.block.unwrap_or(0));
    }
    println!(
        "host   {} runs, {} failed ({:.1} s, seed {seed})",
        outcomes.len(),
        bad.len(),
        host.elapsed().as_secs_f64()
    );
    for ((b, w), ks) in &blocks {
        let ks: Vec<String> = ks.iter().map(u32::to_string).collect();
        println!("       {b} wave {w}: blocks {}", ks.join(", "));
    }
    for o in &bad {
        println!(
            "       FAIL {} {} wave {} block {} [{}] (replay: --seed {seed}): {}",
            o.dtype.name(),
            o.backend,
            o.wave,
            o.block.map_or("?".to_string(), |b| b.to_string()),
            o.case,
            o.failures.join("; ")
        );
    }
    failed |= !bad.is_empty() || outcomes.is_empty();
    println!(
        "{} {} in {:.1} s",
        kernel.name(),
        if failed { "FAILED" } else { "passed" },
        started.elapsed().as_secs_f64()
    );
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
