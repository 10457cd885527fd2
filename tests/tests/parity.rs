//! Every kernel × dtype × available backend against the reference chain. The sims take a
//! kernel's cases in turns (each case at one wave), so every wave runs every kernel at a quarter
//! of the cost; `kiln parity --backend sim` and `kiln check` run every case at every wave.

use kiln::parity::{kernel_dtypes, max_rel, normalized_deviation, run_matrix_with, SimBlocks};
use kiln::KernelId;
use std::collections::BTreeSet;

#[test]
fn every_kernel_matches_its_reference_on_every_backend() {
    let devs = kiln_tests::test_devices();
    let seed = kiln_tests::seed("parity");
    let listed = |dev: &kiln::Device| -> Vec<KernelId> {
        kiln_tests::parity_kernels(dev)
            .into_iter()
            .filter(|k| !kiln_tests::PAGED_KERNELS.contains(k))
            .collect()
    };
    let outcomes =
        kiln_tests::run_beside_sims(&devs, &|dev| kernel_dtypes(&listed(dev)), seed, |sims| {
            let Some(first) = sims.first() else {
                return Vec::new();
            };
            let kernels = listed(first);
            let ran = run_matrix_with(sims, &kernels, seed, SimBlocks::RotateWaves);
            // Every kernel with a case per sim ran at every wave.
            for &k in &kernels {
                let waves: BTreeSet<u32> = ran
                    .iter()
                    .filter(|o| o.kernel == k)
                    .map(|o| o.wave)
                    .collect();
                let runs = ran.iter().filter(|o| o.kernel == k).count();
                assert!(
                    waves.len() == sims.len() || runs < sims.len(),
                    "{} ran {runs} sim cases at waves {waves:?} of {} sims",
                    k.name(),
                    sims.len()
                );
            }
            ran
        });
    // One line per outcome (shown with --nocapture): the device runs' parity table.
    for o in &outcomes {
        eprintln!(
            "{} {} {} wave {} block {} [{}] nrms {:.3e} (< {:e}) nmax {:.3e} (< {:e}) {}",
            o.kernel.name(),
            o.dtype.name(),
            o.backend,
            o.wave,
            o.block.map_or("-".to_string(), |b| b.to_string()),
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
            "FAIL {} {} {} wave {} block {} case {} seed {}: {}",
            o.kernel.name(),
            o.dtype.name(),
            o.backend,
            o.wave,
            o.block.map_or("-".to_string(), |b| b.to_string()),
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

#[test]
fn kiln_check_runs_every_case_at_every_sim_block() {
    use kiln::parity::sim_blocks;
    let devs = [kiln::Device::sim(8).unwrap()];
    let k = KernelId::FusedSiluMul;
    let outcomes = run_matrix_with(
        &devs,
        &[k],
        kiln_tests::seed("sim blocks"),
        SimBlocks::Every,
    );
    let mut blocks: Vec<u32> = outcomes.iter().filter_map(|o| o.block).collect();
    blocks.sort_unstable();
    blocks.dedup();
    // fused_silu_mul prefers one block for every case, so the sweep is exactly sim_blocks.
    use kiln::math::kernels::fused_silu_mul::{FusedSiluMul, SiluMulParams};
    use kiln::math::KernelDef;
    let preferred = FusedSiluMul::launch(&SiluMulParams::default()).block;
    assert_eq!(blocks, sim_blocks(&kiln::SimConfig::new(8), preferred));
    assert!(blocks.iter().any(|b| b % 32 != 0), "{blocks:?}");
    for o in &outcomes {
        assert!(
            o.pass,
            "block {:?} {}: {}",
            o.block,
            o.case,
            o.failures.join("; ")
        );
    }
}

#[test]
fn matching_infinities_and_nans_deviate_by_nothing() {
    let want = [1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 2.0];
    let got = [1.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 2.0];
    // Scale: sqrt((1² + 2²) / 5) = 1 over the finite references; one element off by 0.5.
    let (nrms, nmax) = normalized_deviation(&got, &want);
    assert!((nmax - 0.5).abs() < 1e-12, "nmax {nmax}");
    assert!((nrms - (0.25f64 / 5.0).sqrt()).abs() < 1e-12, "nrms {nrms}");
    assert!((max_rel(&got, &want) - 0.25).abs() < 1e-12);
}

#[test]
fn a_non_finite_element_beside_anything_else_fails() {
    for (g, w) in [
        (f64::INFINITY, 1.0),
        (1.0, f64::INFINITY),
        (f64::INFINITY, f64::NEG_INFINITY),
        (f64::NAN, 1.0),
        (f64::NAN, f64::INFINITY),
    ] {
        let (nrms, nmax) = normalized_deviation(&[0.0, g], &[0.0, w]);
        assert!(nrms.is_nan() && nmax.is_nan(), "{g} vs {w}: {nrms} {nmax}");
        assert!(max_rel(&[0.0, g], &[0.0, w]).is_nan(), "{g} vs {w}");
    }
}
