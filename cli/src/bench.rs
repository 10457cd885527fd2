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
}

pub fn main(a: Args) -> anyhow::Result<()> {
    let b = kiln::Backend::parse(&a.backend)
        .ok_or_else(|| anyhow::anyhow!("unknown backend `{}`", a.backend))?;
    let dev = kiln::Device::open(b)?;
    let mut opts = kiln_benches::BenchOptions::for_device(&dev);
    opts.runs = a.runs.unwrap_or(opts.runs);
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
