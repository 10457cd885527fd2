//! `kiln bench`.

#[derive(clap::Args)]
pub struct Args {
    /// cpu, sim, cuda, rocm or wgpu.
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the rows as CSV to this file.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
    /// Timed passes per shape (default: 50 on a GPU, 5 on the host).
    #[arg(long)]
    runs: Option<usize>,
    /// Paged decode instead: the v1/v2 crossover and the rows of contexts 1K–32K × batch
    /// 1, 4, 8 (D 128, Hq 32, Hkv 8, f16 pool) for v1, v2 and the fallback, as CSV.
    #[arg(long)]
    paged: bool,
    /// Only these kernels (comma-separated names).
    #[arg(long)]
    kernel: Option<String>,
}

fn paged(dev: &kiln::Device) -> anyhow::Result<()> {
    use kiln_benches::paged::{crossover, run_paged_decode, PagedBenchConfig, PagedBenchRow};
    // Bytes read per second of a 256 MiB device copy, median of 20, measured in this run.
    let mut t = kiln::timing::time_copy(dev, 256 << 20, 20)?;
    t.sort_by(f64::total_cmp);
    let copy = (256 << 20) as f64 / t[t.len() / 2];
    println!(
        "# {} copy: {:.1} GB/s read (256 MiB, median of 20)",
        dev.name(),
        copy / 1e9
    );
    let (points, from) = crossover(dev, &[1024, 2048, 4096, 8192, 16384, 32768])?;
    println!("# crossover (batch 1, Hq 8, Hkv 1, D 128, f16): context,v1_s,v2_s");
    for p in &points {
        println!("# {},{:.4e},{:.4e}", p.context, p.v1_seconds, p.v2_seconds);
    }
    println!("# v2 faster from context: {from:?}");
    let cfg = PagedBenchConfig::default();
    println!("{}", PagedBenchRow::CSV_HEADER);
    run_paged_decode(dev, &cfg, copy, |r| println!("{}", r.csv(&cfg)))?;
    Ok(())
}

pub fn main(a: Args) -> anyhow::Result<()> {
    let b = kiln::Backend::parse(&a.backend)
        .ok_or_else(|| anyhow::anyhow!("unknown backend `{}`", a.backend))?;
    let dev = kiln::Device::open(b)?;
    if a.paged {
        return paged(&dev);
    }
    let mut opts = kiln_benches::BenchOptions::for_device(&dev);
    opts.runs = a.runs.unwrap_or(opts.runs);
    opts.kernels = crate::parse_kernels(a.kernel.as_deref())?;
    let report = kiln_benches::run(&dev, &opts)?;
    if a.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.table());
    }
    if let Some(path) = a.csv {
        std::fs::write(&path, report.csv())?;
    }
    Ok(())
}
