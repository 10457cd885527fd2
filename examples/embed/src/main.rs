//! `kiln-embed-example [backend..] [--replays N]`: runs the embedded decode step on each backend
//! named (default: every backend present) and prints what it measured.

use kiln::Backend;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let replays = args
        .iter()
        .position(|a| a == "--replays")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let named: Vec<Backend> = args.iter().filter_map(|a| Backend::parse(a)).collect();
    let backends = if named.is_empty() {
        Backend::ALL
            .into_iter()
            .filter(|&b| kiln::unavailable_reason(b).is_none())
            .collect()
    } else {
        named
    };
    let mut failed = false;
    for b in backends {
        match kiln_embed_example::run(b, 20, replays) {
            Ok(r) => println!(
                "{b}: {} | eager step: {:.1} us host, {:.1} us wall | graph: {} replays identical to eager, {} us host per replay, {} us wall per replay | steady-state kiln allocations: {}",
                r.device,
                r.eager_host_us,
                r.eager_step_us,
                r.replays,
                r.replay_host_us.map_or("-".into(), |v| format!("{v:.2}")),
                r.replay_step_us.map_or("-".into(), |v| format!("{v:.1}")),
                r.steady_allocations
            ),
            Err(e) => {
                eprintln!("{b}: FAILED: {e}");
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
