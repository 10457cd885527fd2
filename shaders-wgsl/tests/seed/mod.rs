//! The seed of a test's random inputs: `KILN_SEED`, or fresh and printed for a replay.

pub fn seed(test: &str) -> u64 {
    let s = std::env::var("KILN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("{test}: seed {s} (replay with KILN_SEED={s})");
    s
}
