//! `kiln`: the command-line face of the engine.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kiln",
    about = "Fused LLM-inference kernels, written once in Rust, on every backend."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Backends on this machine, and why any is absent.
    Devices,
    /// Bandwidth of every kernel × dtype × bench shape against the device's copy bandwidth.
    Bench {
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
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Devices => {
            for d in kiln::devices() {
                let state = if d.available { "available" } else { "absent" };
                println!("{:<5} {state:<9} {}", d.backend.name(), d.detail);
            }
        }
        Cmd::Bench {
            backend,
            json,
            csv,
            runs,
        } => {
            let b = kiln::Backend::parse(&backend)
                .ok_or_else(|| anyhow::anyhow!("unknown backend `{backend}`"))?;
            let dev = kiln::Device::open(b)?;
            let mut opts = kiln_benches::BenchOptions::for_device(&dev);
            opts.runs = runs.unwrap_or(opts.runs);
            let report = kiln_benches::run(&dev, &opts)?;
            if json {
                println!("{}", report.json());
            } else {
                print!("{}", report.table());
            }
            if let Some(path) = csv {
                std::fs::write(&path, report.csv())?;
            }
        }
    }
    Ok(())
}
