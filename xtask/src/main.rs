//! `cargo xtask <command>`: project automation that is plain Rust, not shell.
//!
//! - `kernels [--check]`: builds every device artifact the engine embeds (or checks that the
//!   committed ones are fresh).

mod hip;

use std::process::ExitCode;

/// One build step of `kernels`: builds its artifacts, or with `true` checks they are fresh.
type Step = fn(bool) -> Result<(), String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("kernels") => {
            let check = args.iter().any(|a| a == "--check");
            let steps: &[(&str, Step)] = &[("hip", hip::kernels)];
            for (name, step) in steps {
                if let Err(e) = step(check) {
                    eprintln!("xtask kernels: {name}: {e}");
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: cargo xtask kernels [--check]");
            ExitCode::FAILURE
        }
    }
}
