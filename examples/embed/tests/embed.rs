//! The embedded decode step on every host backend and on wgpu (lavapipe in CI), and on CUDA
//! with graph capture where a GPU is present: eager steps repeat bit for bit, replays equal the
//! eager step, and nothing is allocated once warm.

use kiln::Backend;

fn required() -> Vec<Backend> {
    std::env::var("KILN_REQUIRE_BACKENDS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| Backend::parse(s.trim()))
        .collect()
}

#[test]
fn the_embedded_step_runs_on_every_present_backend() {
    for b in Backend::ALL {
        if let Some(why) = kiln::unavailable_reason(b) {
            assert!(
                !required().contains(&b),
                "required backend {b} is absent: {why}"
            );
            eprintln!("skipped {b}: {why}");
            continue;
        }
        let r = kiln_embed_example::run(b, 2, 100).unwrap_or_else(|e| panic!("{b}: {e}"));
        eprintln!("{b}: {r:?}");
        assert_eq!(r.steady_allocations, 0);
        if b == Backend::Cuda {
            assert_eq!(r.replays, 100);
        }
    }
}
