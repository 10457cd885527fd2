//! `kiln bench --decode` (models at real shapes with synthetic weights, or a GGUF file or MLX
//! directory: tok/s, GPU time and host gap per token, the per-kernel profile, peak memory, CSV
//! rows) and `kiln bench compare`.

use kiln_benches::decode::{
    compare, model_shape, run_decode_bench, utc_date, ActDtype, Checkpoint, CompareOptions,
    DecodeBenchConfig, ModelShape, RunInfo, CSV_HEADER,
};
use std::io::Write as _;

/// The decode bench's settings (flags of `kiln bench`).
pub struct DecodeSettings {
    pub models: Vec<String>,
    /// Sequences per step, one run each.
    pub batches: Vec<usize>,
    pub layers: Option<usize>,
    pub prompt_tokens: usize,
    pub decode_tokens: usize,
    pub seed: u64,
    pub graphs: bool,
    pub csv: Option<std::path::PathBuf>,
    /// The activations', residual's and KV pool's dtype.
    pub act: ActDtype,
}

/// `kiln bench compare`.
#[derive(clap::Args)]
pub struct CompareArgs {
    /// The baseline CSV.
    #[arg(long)]
    before: std::path::PathBuf,
    /// The CSV to compare with it.
    #[arg(long)]
    after: std::path::PathBuf,
    /// Pair rows measured at different commits.
    #[arg(long)]
    allow_commit_change: bool,
    /// Largest relative difference of prompt_tokens a pair may have.
    #[arg(long, default_value_t = 0.10)]
    prompt_tolerance: f64,
    /// A ratio further than this from 1 is reported as moved.
    #[arg(long, default_value_t = 0.10)]
    moved_threshold: f64,
}

/// The commit the run reports: `KILN_COMMIT`, else `git rev-parse HEAD` here, else `unknown`.
fn commit() -> String {
    if let Ok(c) = std::env::var("KILN_COMMIT") {
        return c;
    }
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

pub fn decode(dev: &kiln::Device, s: &DecodeSettings) -> anyhow::Result<()> {
    let gpu = dev.l2_bytes().is_some();
    // The roofline's bandwidth, measured in this process as `kiln bench` measures it.
    let (bytes, runs) = if gpu { (256 << 20, 20) } else { (64 << 20, 5) };
    let copy = kiln_benches::CopyBandwidth::measure(dev, bytes, runs)?;
    let info = RunInfo {
        date: utc_date(),
        commit: commit(),
        copy_gbps: Some(copy.gbps),
        seed: s.seed,
    };
    let mut rows = Vec::new();
    for name in &s.models {
        let path = std::path::Path::new(name);
        let (shape, gguf) = if name.ends_with(".gguf") || path.is_dir() {
            let config = Checkpoint::open(path)?.config()?;
            // A file's stem, a directory's whole name.
            let stem = if path.is_dir() {
                path.file_name()
            } else {
                path.file_stem()
            };
            let shape = ModelShape {
                name: stem.map_or_else(|| name.clone(), |s| s.to_string_lossy().into_owned()),
                config,
            };
            (shape, Some(std::path::PathBuf::from(name)))
        } else {
            (model_shape(name)?, None)
        };
        let full = shape.config.layers;
        for &batch in &s.batches {
            let cfg = DecodeBenchConfig {
                shape: shape.clone(),
                gguf: gguf.clone(),
                layers: s.layers,
                prompt_tokens: s.prompt_tokens,
                decode_tokens: s.decode_tokens,
                batch,
                seed: s.seed,
                graphs: s.graphs,
                act: s.act,
            };
            let report = run_decode_bench(dev, &cfg)?;
            print!("{}", report.summary(full, &info));
            if !report.memory.within_bound() {
                anyhow::bail!(
                    "{} at batch {batch}: peak device memory {} bytes exceeds the bound {}",
                    report.model,
                    report.memory.peak,
                    report.memory.bound()
                );
            }
            let row = report.csv_row(full, &info);
            println!("{CSV_HEADER}");
            println!("{row}");
            std::io::stdout().flush()?;
            rows.push(row);
        }
    }
    if let Some(path) = &s.csv {
        // Appends under one header, so runs of several models or backends share a file.
        let fresh = !path.exists() || std::fs::metadata(path)?.len() == 0;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        if fresh {
            writeln!(f, "{CSV_HEADER}")?;
        }
        for r in &rows {
            writeln!(f, "{r}")?;
        }
    }
    Ok(())
}

pub fn compare_main(a: CompareArgs) -> anyhow::Result<()> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
    };
    let o = CompareOptions {
        prompt_tolerance: a.prompt_tolerance,
        moved_threshold: a.moved_threshold,
        allow_commit_change: a.allow_commit_change,
    };
    let c = compare(&read(&a.before)?, &read(&a.after)?, o)?;
    print!("{}", c.text(&o));
    Ok(())
}
