//! The filtered sampler (`ops::rejection_sample`, spec §6) on both of its paths — one block
//! per row, and the row cut into sorted segments: the truncated law by chi-square (p = 1e-6),
//! exact tokens on decided rows with a fixed key against the host's run of spec §6.2, tokens
//! inside the support on every backend, and refusals.

use kiln::ops::RejectionPath;
use kiln::reference::sampling as sampling_ref;
use kiln::rng::Rng;
use kiln::{ops, DType, Device, Tensor};
use kiln_math::random::uniform_open;
use kiln_tests::stats::{chi_square, normalise};

/// Both paths at `vocab`: the segmented one in the segments the op cuts such a row into, or in
/// segments of 16 where that is a single segment.
fn paths(vocab: usize) -> [RejectionPath; 2] {
    let seg_len = ops::rejection_seg_len(vocab);
    let seg_len = if seg_len >= vocab { 16 } else { seg_len };
    [
        RejectionPath::OneBlock,
        RejectionPath::Segmented { seg_len },
    ]
}

/// Every device of `devs` on both paths, but the sims other than wave 32 on one block only:
/// the sim runs each lane as a thread, and `kiln check` and the parity test take the
/// segmented kernels through every wave.
fn on_paths(devs: Vec<Device>, vocab: usize) -> Vec<(Device, RejectionPath)> {
    devs.into_iter()
        .flat_map(|d| {
            let both = d.backend() != kiln::Backend::Sim || d.wave() == 32;
            let n = if both { 2 } else { 1 };
            paths(vocab)[..n]
                .iter()
                .map(move |&p| (d.clone(), p))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The support the filters keep on `probs` (spec §6.1), jointly on the untempered row.
fn kept(probs: &[f32], f: ops::SamplingFilters) -> Vec<bool> {
    let v = probs.len();
    let total: f64 = probs.iter().map(|&p| p as f64).sum();
    let p_max = probs.iter().cloned().fold(0.0f32, f32::max);
    let mut sorted: Vec<f32> = probs.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    (0..v)
        .map(|i| {
            let p = probs[i];
            let mut keep = p > 0.0;
            if f.top_k >= 1 && (f.top_k as usize) < v {
                keep &= p >= sorted[f.top_k as usize - 1];
            }
            if f.top_p > 0.0 && f.top_p < 1.0 {
                let above: f64 = probs.iter().filter(|&&q| q > p).map(|&q| q as f64).sum();
                keep &= above <= f.top_p as f64 * total;
            }
            if f.min_p > 0.0 && f.min_p < 1.0 {
                keep &= p >= f.min_p * p_max;
            }
            keep
        })
        .collect()
}

/// The exact law of the sampled token: `draw` truncated to the kept support, renormalised.
fn truncated_law(probs: &[f32], draw: &[f32], f: ops::SamplingFilters) -> Vec<f64> {
    let keep = kept(probs, f);
    let w: Vec<f64> = draw
        .iter()
        .zip(&keep)
        .map(|(&d, &k)| if k { d as f64 } else { 0.0 })
        .collect();
    let s: f64 = w.iter().sum();
    w.iter().map(|x| x / s).collect()
}

/// `(probs, probs_draw)` from logits at temperature `t`.
fn probs_pair(logits: &[f64], t: f64) -> (Vec<f32>, Vec<f32>) {
    let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let p = normalise(&logits.iter().map(|l| (l - m).exp()).collect::<Vec<_>>());
    let d = normalise(
        &logits
            .iter()
            .map(|l| ((l - m) / t).exp())
            .collect::<Vec<_>>(),
    );
    (p, d)
}

struct Sampled {
    ids: Vec<u32>,
    accepted: Vec<u32>,
    rounds: Vec<u32>,
}

/// One call over `rows` rows of `probs`/`draw` on `path`, row `r` with `filters[r]`.
fn run_rejection(
    dev: &Device,
    probs: &[f32],
    draw: &[f32],
    filters: &[ops::SamplingFilters],
    key: [u32; 2],
    path: RejectionPath,
) -> Sampled {
    let rows = filters.len();
    let vocab = probs.len() / rows;
    let pt = Tensor::from_f32(dev, DType::F32, &[rows, vocab], probs).unwrap();
    let dt = Tensor::from_f32(dev, DType::F32, &[rows, vocab], draw).unwrap();
    let mut ids = Tensor::zeros(dev, DType::U32, &[rows]).unwrap();
    let mut accepted = Tensor::zeros(dev, DType::U32, &[rows]).unwrap();
    let mut rounds = Tensor::zeros(dev, DType::U32, &[rows]).unwrap();
    let ran = ops::rejection_sample_on(
        dev,
        &pt,
        &dt,
        filters,
        key,
        path,
        &mut ids,
        &mut accepted,
        &mut rounds,
    )
    .unwrap();
    assert!(!ran.is_fallback(), "{} ran the fallback", dev.name());
    let to_u32 = |t: &Tensor| t.to_vec::<u32>().unwrap();
    Sampled {
        ids: to_u32(&ids),
        accepted: to_u32(&accepted),
        rounds: to_u32(&rounds),
    }
}

fn filters(top_k: u32, top_p: f32, min_p: f32) -> ops::SamplingFilters {
    ops::SamplingFilters {
        top_k,
        top_p,
        min_p,
    }
}

/// Row configurations a batch mixes: (name, filters, temperature of `probs_draw`). Every filter
/// alone and in combination, no filter, and top-k = V (off).
fn mixed_configs(vocab: usize) -> Vec<(&'static str, ops::SamplingFilters, f64)> {
    vec![
        ("none, T 0.8", filters(0, 1.0, 0.0), 0.8),
        ("top-k 7, T 1.2", filters(7, 1.0, 0.0), 1.2),
        ("top-p 0.9, T 1", filters(0, 0.9, 0.0), 1.0),
        ("min-p 0.05, T 1.5", filters(0, 1.0, 0.05), 1.5),
        ("top-k 20 + top-p 0.95, T 0.7", filters(20, 0.95, 0.0), 0.7),
        ("top-p 0.9 + min-p 0.05, T 1.5", filters(0, 0.9, 0.05), 1.5),
        (
            "top-k 12 + top-p 0.8 + min-p 0.01, T 1.3",
            filters(12, 0.8, 0.01),
            1.3,
        ),
        ("top-k V (off), T 1", filters(vocab as u32, 1.0, 0.0), 1.0),
    ]
}

/// A batch of `rows` rows cycling over `configs`, row `r` from `logits(r)` at its
/// configuration's temperature: `(probs, probs_draw, filters)`.
fn mixed_batch(
    configs: &[(&str, ops::SamplingFilters, f64)],
    rows: usize,
    mut logits: impl FnMut(usize) -> Vec<f64>,
) -> (Vec<f32>, Vec<f32>, Vec<ops::SamplingFilters>) {
    let (mut probs, mut draw, mut fs) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rows {
        let (_, f, t) = configs[r % configs.len()];
        let (p, d) = probs_pair(&logits(r), t);
        probs.extend(p);
        draw.extend(d);
        fs.push(f);
    }
    (probs, draw, fs)
}

#[test]
fn rejection_mixed_rows_follow_their_truncated_laws() {
    let seed = kiln_tests::seed("rejection mixed chi-square");
    let mut rng = Rng::new(seed);
    let vocab = 100;
    let logits: Vec<f64> = (0..vocab).map(|_| rng.normal() * 1.5).collect();
    let configs = mixed_configs(vocab);
    for (dev, path) in on_paths(kiln_tests::test_devices(), vocab) {
        // Per launch and configuration: 2500 rows × 400 launches (10^6 draws) on the cpu;
        // 250 × 20 on the GPU ports (lavapipe runs a launch of 2000 rows in about a second).
        // The sim checks exact rows only (below).
        // The segmented path sorts a row's segments each launch: a quarter of the launches on
        // the cpu (2.5·10^5 draws per configuration).
        let one_block = path == RejectionPath::OneBlock;
        let (per_config, launches) = match dev.backend() {
            kiln::Backend::Cpu if one_block => (2500, 400),
            kiln::Backend::Cpu => (2500, 100),
            kiln::Backend::Sim => continue,
            _ => (250, 20),
        };
        let rows = per_config * configs.len();
        let (probs, draw, fs) = mixed_batch(&configs, rows, |_| logits.clone());
        let mut counts = vec![vec![0u64; vocab]; configs.len()];
        let mut max_rounds = vec![0u32; configs.len()];
        for _ in 0..launches {
            let key = [rng.next_u64() as u32, rng.next_u64() as u32];
            let s = run_rejection(&dev, &probs, &draw, &fs, key, path);
            for r in 0..rows {
                let c = r % configs.len();
                assert_eq!(
                    s.accepted[r],
                    1,
                    "{}: {} did not converge",
                    dev.name(),
                    configs[c].0
                );
                max_rounds[c] = max_rounds[c].max(s.rounds[r]);
                counts[c][s.ids[r] as usize] += 1;
            }
        }
        for (c, (name, f, _)) in configs.iter().enumerate() {
            let law = truncated_law(
                &probs[c * vocab..][..vocab],
                &draw[c * vocab..][..vocab],
                *f,
            );
            let (stat, df, crit) = chi_square(&counts[c], &law);
            eprintln!(
                "rejection {} {path:?} {name}: chi2 {stat:.1} df {df} critical {crit:.1}, {} draws, max rounds {}",
                dev.name(),
                counts[c].iter().sum::<u64>(),
                max_rounds[c]
            );
            assert!(
                stat < crit,
                "rejection {} {path:?} {name}: chi-square {stat:.1} >= {crit:.1} (df {df})",
                dev.name()
            );
        }
    }
}

/// The host's run of spec §6.2 on one row, in f64 sums: `(token, accepted, rounds)` and whether
/// the row is decided — every round's CDF target at least 1e-5 of the proposal mass from a
/// cumulative boundary and every top-p test at least 1e-5 of the row's mass from its
/// threshold, so f32 sums in any order take the same decisions.
fn host_rejection(
    probs: &[f32],
    draw: &[f32],
    f: ops::SamplingFilters,
    key: [u32; 2],
    row: u32,
) -> ((u32, u32, u32), bool) {
    let v = probs.len();
    let (mut p_max, mut arg) = (f32::NEG_INFINITY, 0usize);
    for (i, &p) in probs.iter().enumerate() {
        if p > p_max {
            (p_max, arg) = (p, i);
        }
    }
    if p_max.is_nan() || p_max <= 0.0 {
        return ((arg as u32, 1, 0), true);
    }
    let total: f64 = probs.iter().map(|&p| p as f64).sum();
    let top_k_on = f.top_k >= 1 && (f.top_k as usize) < v;
    let top_p_on = f.top_p > 0.0 && f.top_p < 1.0;
    // The kernel's floor: one float below min_p · p_max (both f32), so `p > low` keeps p ≥ it.
    let mut low = 0.0f32;
    if f.min_p > 0.0 && f.min_p < 1.0 && (f.min_p * p_max).to_bits() > 0 {
        low = f32::from_bits((f.min_p * p_max).to_bits() - 1);
    }
    let mut high = p_max;
    let target_p = f.top_p as f64 * total;
    let mut decided = true;
    for round in 0..32u32 {
        let eligible: Vec<usize> = (0..v).filter(|&i| probs[i] > low).collect();
        let mass: f64 = eligible.iter().map(|&i| draw[i] as f64).sum();
        let u = uniform_open(sampling_ref::philox([round, 0, row, 0], key)[0]) as f64;
        let goal = u * mass;
        let (mut cum, mut pick) = (0.0f64, None);
        for &i in &eligible {
            decided &= (cum - goal).abs() >= 1e-5 * mass;
            cum += draw[i] as f64;
            if pick.is_none() && cum > goal {
                pick = Some(i);
            }
        }
        decided &= (cum - goal).abs() >= 1e-5 * mass;
        let cand = pick.unwrap_or(arg);
        let pivot0 = probs[cand];
        let top = pivot0.max(high);
        let pivot1 = f32::from_bits(((pivot0.to_bits() as u64 + top.to_bits() as u64) / 2) as u32);
        let mut fails = |pivot: f32| {
            let above: Vec<f64> = probs
                .iter()
                .filter(|&&p| p > pivot)
                .map(|&p| p as f64)
                .collect();
            let mass_above: f64 = above.iter().sum();
            if top_p_on {
                decided &= (mass_above - target_p).abs() >= 1e-5 * total;
            }
            (top_k_on && above.len() >= f.top_k as usize) || (top_p_on && mass_above > target_p)
        };
        if !(top_k_on || top_p_on) || !fails(pivot0) {
            return ((cand as u32, 1, round + 1), decided);
        }
        if fails(pivot1) {
            low = pivot1;
        } else {
            (low, high) = (pivot0, pivot1);
        }
    }
    ((arg as u32, 0, 32), decided)
}

#[test]
fn rejection_mixed_rows_match_the_host_on_decided_rows_on_every_backend() {
    let seed = kiln_tests::seed("rejection fixed key");
    let mut rng = Rng::new(seed);
    let key = [rng.next_u64() as u32, rng.next_u64() as u32];
    // 64 x 5003 on the cpu; a smaller batch on every backend.
    for (rows, vocab, all) in [(64usize, 5003usize, false), (16, 777, true)] {
        let configs = mixed_configs(vocab);
        let (mut probs, draw, fs) = mixed_batch(&configs, rows, |_| {
            (0..vocab).map(|_| rng.normal() * 2.0).collect()
        });
        // The last row has no mass: index 0, accepted, no rounds.
        probs[(rows - 1) * vocab..].fill(0.0);
        let want: Vec<_> = (0..rows)
            .map(|r| {
                let row = |x: &[f32]| x[r * vocab..][..vocab].to_vec();
                host_rejection(&row(&probs), &row(&draw), fs[r], key, r as u32)
            })
            .collect();
        let decided = want.iter().filter(|w| w.1).count();
        eprintln!("{rows}x{vocab}: {decided} of {rows} rows decided");
        assert!(
            decided >= rows * 3 / 4,
            "only {decided} of {rows} rows decided"
        );
        assert_eq!(want[rows - 1], ((0, 1, 0), true));
        let devs = if all {
            kiln_tests::test_devices()
        } else {
            vec![Device::cpu()]
        };
        for (dev, path) in on_paths(devs, vocab) {
            let s = run_rejection(&dev, &probs, &draw, &fs, key, path);
            for (r, &((id, ok, used), clear)) in want.iter().enumerate() {
                if clear {
                    let got = (s.ids[r], s.accepted[r], s.rounds[r]);
                    assert_eq!(
                        got,
                        (id, ok, used),
                        "{} {path:?} row {r} ({})",
                        dev.name(),
                        configs[r % configs.len()].0
                    );
                }
            }
        }
    }
}

#[test]
fn rejection_tokens_stay_in_the_support_on_every_backend() {
    let seed = kiln_tests::seed("rejection support");
    let mut rng = Rng::new(seed);
    let (rows, vocab) = (8usize, 300usize);
    let configs = mixed_configs(vocab);
    let (probs, draw, fs) = mixed_batch(&configs, rows, |_| {
        (0..vocab).map(|_| rng.normal() * 2.0).collect()
    });
    for (dev, path) in on_paths(kiln_tests::test_devices(), vocab) {
        // The sim runs every lane as a thread: one key there.
        let keys = if dev.backend() == kiln::Backend::Sim {
            1
        } else {
            3
        };
        for _ in 0..keys {
            let key = [rng.next_u64() as u32, rng.next_u64() as u32];
            let s = run_rejection(&dev, &probs, &draw, &fs, key, path);
            for r in 0..rows {
                let keep = kept(&probs[r * vocab..][..vocab], fs[r]);
                assert_eq!(s.accepted[r], 1, "{} {path:?} row {r}", dev.name());
                assert!(s.rounds[r] >= 1 && s.rounds[r] <= 32);
                assert!(
                    keep[s.ids[r] as usize],
                    "{} {path:?} row {r}: token {} outside the support",
                    dev.name(),
                    s.ids[r]
                );
            }
        }
    }
}

#[test]
fn rejection_refuses_a_bad_filter_row_by_row_and_value() {
    let dev = Device::cpu();
    let (rows, vocab) = (3usize, 4usize);
    let probs = vec![0.25f32; rows * vocab];
    let pt = Tensor::from_f32(&dev, DType::F32, &[rows, vocab], &probs).unwrap();
    let mut ids = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
    let mut acc = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
    let mut rounds = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
    let good = ops::SamplingFilters::default();
    let bad = [
        (filters(5, 1.0, 0.0), "top_k is 5"),
        (filters(0, 0.0, 0.0), "top_p is 0"),
        (filters(0, 1.5, 0.0), "top_p is 1.5"),
        (filters(0, -0.5, 0.0), "top_p is -0.5"),
        (filters(0, f32::NAN, 0.0), "top_p is NaN"),
        (filters(0, 1.0, 1.0), "min_p is 1"),
        (filters(0, 1.0, -0.1), "min_p is -0.1"),
        (filters(0, 1.0, f32::NAN), "min_p is NaN"),
    ];
    let mut run = |fs: &[ops::SamplingFilters]| {
        ops::rejection_sample(&dev, &pt, &pt, fs, [1, 2], &mut ids, &mut acc, &mut rounds)
    };
    for (f, what) in bad {
        // The bad row last, after good ones: the error names it.
        let e = run(&[good, filters(4, 0.5, 0.1), f]).unwrap_err();
        assert!(e.is_invalid_input(), "{f:?}: {e}");
        let msg = e.to_string();
        assert!(
            msg.contains("filters row 2") && msg.contains(what),
            "{f:?}: `{msg}` should name row 2 and `{what}`"
        );
    }
    // k = V and top_p = 1 are the filters' off values, not errors; one filter row per row.
    run(&[filters(4, 1.0, 0.0); 3]).unwrap();
    let e = run(&[good; 2]).unwrap_err();
    assert!(e.is_invalid_input(), "{e}");
}

#[test]
fn rejection_refuses_a_segmentation_out_of_range() {
    let dev = Device::cpu();
    let (rows, vocab) = (2usize, 5000usize);
    let probs = vec![1.0f32 / vocab as f32; rows * vocab];
    let pt = Tensor::from_f32(&dev, DType::F32, &[rows, vocab], &probs).unwrap();
    let mut ids = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
    let mut acc = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
    let mut rounds = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
    let fs = [ops::SamplingFilters::default(); 2];
    for (seg_len, what) in [
        (0, "seg_len is 0"),
        (3, "seg_len is 3"),
        (2048, "seg_len is 2048"),
        (2, "2500 segments"),
    ] {
        let path = RejectionPath::Segmented { seg_len };
        let e = ops::rejection_sample_on(
            &dev,
            &pt,
            &pt,
            &fs,
            [1, 2],
            path,
            &mut ids,
            &mut acc,
            &mut rounds,
        )
        .unwrap_err();
        assert!(e.is_invalid_input(), "{seg_len}: {e}");
        assert!(
            e.to_string().contains(what),
            "{seg_len}: `{e}` should say `{what}`"
        );
    }
}

#[test]
fn rejection_takes_the_segmented_path_for_large_vocabularies_on_a_gpu() {
    for dev in kiln_tests::test_devices() {
        let gpu = dev.gpu().is_some();
        let segmented = |seg_len| {
            if gpu {
                RejectionPath::Segmented { seg_len }
            } else {
                RejectionPath::OneBlock
            }
        };
        let name = dev.name();
        assert_eq!(
            ops::rejection_path(&dev, 1000),
            RejectionPath::OneBlock,
            "{name}"
        );
        assert_eq!(ops::rejection_path(&dev, 128_256), segmented(512), "{name}");
        assert_eq!(
            ops::rejection_path(&dev, 152_064),
            segmented(1024),
            "{name}"
        );
        // Past 1024 segments of 1024 the row goes back to one block.
        assert_eq!(
            ops::rejection_path(&dev, 1 << 20),
            segmented(1024),
            "{name}"
        );
        let past = ops::rejection_path(&dev, (1 << 20) + 1);
        assert_eq!(past, RejectionPath::OneBlock, "{name}");
    }
    // The scratch holds the filters, then the segments' three sums per entry and their stats.
    let path = RejectionPath::Segmented { seg_len: 512 };
    assert!(ops::rejection_scratch_bytes(8, 128_256, path) >= 8 * 251 * (3 * 512 + 4) * 4);
}

#[test]
fn rejection_with_filters_on_the_device_draws_what_the_checked_call_draws() {
    let seed = kiln_tests::seed("rejection filters on the device");
    let mut rng = Rng::new(seed);
    let (rows, vocab) = (8usize, 5000usize);
    let configs = mixed_configs(vocab);
    let (probs, draw, fs) = mixed_batch(&configs, rows, |_| {
        (0..vocab).map(|_| rng.normal() * 2.0).collect()
    });
    let key = [rng.next_u64() as u32, rng.next_u64() as u32];
    let words: Vec<f32> = fs.iter().flat_map(ops::SamplingFilters::words).collect();
    for dev in kiln_tests::test_devices() {
        if dev.backend() == kiln::Backend::Sim {
            continue;
        }
        for path in paths(vocab) {
            let want = run_rejection(&dev, &probs, &draw, &fs, key, path);
            let tensor =
                |x: &[f32], shape: &[usize]| Tensor::from_f32(&dev, DType::F32, shape, x).unwrap();
            let (pt, dt) = (
                tensor(&probs, &[rows, vocab]),
                tensor(&draw, &[rows, vocab]),
            );
            let filters = tensor(&words, &[rows, 3]);
            let mut out: Vec<Tensor> = (0..3)
                .map(|_| Tensor::zeros(&dev, DType::U32, &[rows]).unwrap())
                .collect();
            let [ids, accepted, used] = &mut out[..] else {
                unreachable!()
            };
            ops::rejection_sample_words(&dev, &pt, &dt, &filters, key, path, ids, accepted, used)
                .unwrap();
            let got: Vec<Vec<u32>> = out.iter().map(|t| t.to_vec::<u32>().unwrap()).collect();
            assert_eq!(
                got,
                [want.ids, want.accepted, want.rounds],
                "{} {path:?}",
                dev.name()
            );
        }
    }
}
