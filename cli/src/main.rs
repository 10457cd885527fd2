//! `kiln`: the command-line face of the engine.

mod args;
mod bench;
mod check;
mod convert;
mod decode_bench;
mod generate;
mod parity;
mod ports;
mod run;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kiln",
    version,
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
    /// Every kernel × dtype × backend: present or absent (with the reason), reachable here or not.
    Ports {
        #[arg(long)]
        json: bool,
    },
    /// Runs the parity matrix: every kernel × dtype × backend against the reference chain.
    Parity(parity::Args),
    /// Runs one kernel on tensors from a safetensors file and writes every output buffer.
    Run(run::Args),
    /// Bandwidth of every kernel × dtype × bench shape against the device's copy bandwidth.
    // Boxed: its many options would size every variant.
    Bench(Box<bench::Args>),
    /// A kernel author's check: WGSL for every dtype × variant validated by naga, then parity
    /// on the cpu and on the sim at waves 4, 8, 32, 64 and several block sizes.
    Check(check::Args),
    /// Generates text with a GGUF model (Llama architecture) or an MLX model directory through
    /// kiln's ops, streamed to stdout.
    Generate(generate::Args),
    /// Writes a Llama GGUF as an MLX model directory (quantized tensors repacked exactly).
    Convert(convert::Args),
}

/// Prints an error as its chain of causes on one line and exits 1: returning it from `main`
/// would print a backtrace whenever `RUST_BACKTRACE` is set, for an ordinary bad input too.
fn main() -> std::process::ExitCode {
    match run(Cli::parse().cmd) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Devices => {
            for d in kiln::devices() {
                let state = if d.available { "available" } else { "absent" };
                let wave = d.wave.map(|w| format!("wave {w}")).unwrap_or_default();
                println!("{:<5} {state:<9} {wave:<8} {}", d.backend.name(), d.detail);
            }
            Ok(())
        }
        Cmd::Ports { json } => ports::print(json),
        Cmd::Parity(a) => parity::main(a),
        Cmd::Run(a) => run::main(a),
        Cmd::Bench(a) => bench::main(*a),
        Cmd::Check(a) => check::main(a),
        Cmd::Generate(a) => generate::main(a),
        Cmd::Convert(a) => convert::main(a),
    }
}
