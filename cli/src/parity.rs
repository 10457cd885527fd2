//! `kiln parity`.

use kiln::parity::{base_seed, devices_for, run_matrix, Outcome};
use kiln::Backend;
use serde_json::json;
use std::collections::BTreeMap;

#[derive(clap::Args)]
pub struct Args {
    /// Backends to test (comma-separated); default: every backend that opens here.
    #[arg(long)]
    backend: Option<String>,
    /// Only these kernels (comma-separated names).
    #[arg(long)]
    kernel: Option<String>,
    /// Base seed (also `KILN_SEED`); fresh by default and printed.
    #[arg(long)]
    seed: Option<u64>,
    #[arg(long)]
    json: bool,
}

/// The worst case of one kernel × dtype × backend × wave.
struct Row<'a> {
    cases: Vec<&'a Outcome>,
}

impl Row<'_> {
    fn pass(&self) -> bool {
        self.cases.iter().all(|o| o.pass)
    }
    fn worst(&self) -> &Outcome {
        self.cases
            .iter()
            .copied()
            .max_by(|a, b| {
                (a.nrms / a.tol_nrms.max(1e-300)).total_cmp(&(b.nrms / b.tol_nrms.max(1e-300)))
            })
            .expect("a row has cases")
    }
}

pub fn main(a: Args) -> anyhow::Result<()> {
    let backends = match &a.backend {
        Some(s) => crate::args::parse_backends(s)?,
        None => Backend::ALL.to_vec(),
    };
    let kernels = crate::args::parse_kernels(a.kernel.as_deref())?;
    let (devs, skipped) = devices_for(&backends);
    let explicit = a.backend.is_some();
    for (b, why) in &skipped {
        eprintln!("skipped {b}: {why}");
    }
    if explicit && !skipped.is_empty() {
        anyhow::bail!("a requested backend is absent");
    }
    let seed = a.seed.unwrap_or_else(base_seed);
    eprintln!("seed {seed} (replay with --seed {seed})");
    let outcomes = run_matrix(&devs, &kernels, seed);
    let mut rows: BTreeMap<(&str, &str, Backend, u32), Row> = BTreeMap::new();
    for o in &outcomes {
        rows.entry((o.kernel.name(), o.dtype.name(), o.backend, o.wave))
            .or_insert(Row { cases: vec![] })
            .cases
            .push(o);
    }
    if a.json {
        let v: Vec<_> = rows
            .iter()
            .map(|((k, d, b, w), r)| {
                let o = r.worst();
                let failures: Vec<String> =
                    r.cases.iter().filter(|c| !c.pass).map(|c| format!("{} (seed {}): {}", c.case, c.seed, c.failures.join("; "))).collect();
                json!({"kernel": k, "dtype": d, "backend": b.name(), "wave": w, "cases": r.cases.len(),
                       "nrms": o.nrms, "nmax": o.nmax, "tol_nrms": o.tol_nrms, "tol_nmax": o.tol_nmax,
                       "pass": r.pass(), "seed": seed, "failures": failures})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{:<24} {:<5} {:<7} {:>4} {:>5} {:>10} {:>10} {:>9} {:>9}  result",
            "kernel", "dtype", "backend", "wave", "cases", "nrms", "nmax", "tol_nrms", "tol_nmax"
        );
        for ((k, d, b, w), r) in &rows {
            let o = r.worst();
            let verdict = if r.pass() { "pass" } else { "FAIL" };
            println!(
                "{k:<24} {d:<5} {:<7} {w:>4} {:>5} {:>10.3e} {:>10.3e} {:>9.1e} {:>9.1e}  {verdict}",
                b.name(),
                r.cases.len(),
                o.nrms,
                o.nmax,
                o.tol_nrms,
                o.tol_nmax
            );
            for c in r.cases.iter().filter(|c| !c.pass) {
                println!(
                    "    {} (seed {}): {}",
                    c.case,
                    c.seed,
                    c.failures.join("; ")
                );
            }
        }
    }
    let failed = outcomes.iter().filter(|o| !o.pass).count();
    eprintln!("{} passed, {failed} failed", outcomes.len() - failed);
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
