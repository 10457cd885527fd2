//! Every kernel × dtype × available backend against the reference chain.

use kiln::parity::run_matrix;
use kiln::KernelId;

#[test]
fn every_kernel_matches_its_reference_on_every_backend() {
    let devs = kiln_tests::test_devices();
    let outcomes = run_matrix(&devs, KernelId::ALL, kiln_tests::seed("parity"));
    let failed: Vec<_> = outcomes.iter().filter(|o| !o.pass).collect();
    for o in &failed {
        eprintln!(
            "FAIL {} {} {} wave {} case {} seed {}: {}",
            o.kernel.name(),
            o.dtype.name(),
            o.backend,
            o.wave,
            o.case,
            o.seed,
            o.failures.join("; ")
        );
    }
    assert!(!outcomes.is_empty());
    assert!(
        failed.is_empty(),
        "{} of {} parity cases failed",
        failed.len(),
        outcomes.len()
    );
}
