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
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().cmd {
        Cmd::Devices => {
            for d in kiln::devices() {
                let state = if d.available { "available" } else { "absent" };
                println!("{:<5} {state:<9} {}", d.backend.name(), d.detail);
            }
        }
    }
    Ok(())
}
