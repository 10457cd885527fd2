//! Every kernel × dtype × available backend against the reference chain.

use kiln::parity::run_matrix;
use kiln::KernelId;

#[test]
fn every_kernel_matches_its_reference_on_every_backend() {
    let devs = kiln_tests::test_devices();
    let outcomes = run_matrix(&devs, KernelId::ALL, kiln_tests::seed("parity"));
    // One line per outcome (shown with --nocapture): the device runs' parity table.
    for o in &outcomes {
        eprintln!(
            "{} {} {} wave {} [{}] nrms {:.3e} (< {:e}) nmax {:.3e} (< {:e}) {}",
            o.kernel.name(),
            o.dtype.name(),
            o.backend,
            o.wave,
            o.case,
            o.nrms,
            o.tol_nrms,
            o.nmax,
            o.tol_nmax,
            if o.pass { "pass" } else { "FAIL" }
        );
    }
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
