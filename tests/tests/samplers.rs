//! Samplers: Philox known answers, distributions by chi-square (p = 1e-6), exact tokens on
//! decided rows with a fixed key, identical tokens on every backend, edge rows.
//!
//! The big distribution tests run on the cpu backend (rows are independent draws: the Philox
//! counter includes the row); the sim covers the structural checks at small shapes.

use kiln::reference::gumbel_max_sample as gumbel_ref;
use kiln::reference::sampling as sampling_ref;
use kiln::rng::Rng;
use kiln::{ops, DType, Device, Tensor};
use kiln_math::kernels::gumbel_max_sample::{bound_index, noise_bound, quotient_bound, BOUNDS};
use kiln_math::random::{gumbel_noise, mul_wide_u64, mulhilo32, philox4x32_10, uniform_open};
use kiln_tests::stats::{chi_square, normalise};

fn softmax(logits: &[f64], temperature: f64) -> Vec<f64> {
    let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = logits
        .iter()
        .map(|&l| {
            if l == f64::NEG_INFINITY {
                0.0
            } else {
                ((l - m) / temperature).exp()
            }
        })
        .collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

/// Logits as stored in `dtype`, read back as f64.
fn stored(dtype: DType, logits: &[f32]) -> Vec<f64> {
    let t = Tensor::from_f32(&Device::cpu(), dtype, &[logits.len()], logits).unwrap();
    t.to_f32_vec().unwrap().iter().map(|&v| v as f64).collect()
}

fn to_u32(t: &Tensor) -> Vec<u32> {
    t.to_vec::<u32>().unwrap()
}

#[test]
fn philox_matches_the_known_answers() {
    let kat: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
        (
            [0; 4],
            [0; 2],
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
        ),
        (
            [!0; 4],
            [!0; 2],
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
        ),
        // Spec §5's worked example: key (1, 2), row 0, elements 0..3.
        (
            [0; 4],
            [1, 2],
            [0x0598de3a, 0x98d2802e, 0x270f8f9e, 0xeab709d3],
        ),
    ];
    for (ctr, key, want) in kat {
        assert_eq!(
            philox4x32_10(ctr, key),
            want,
            "kiln-math philox, ctr {ctr:x?} key {key:x?}"
        );
        assert_eq!(sampling_ref::philox(ctr, key), want, "reference philox");
    }
    // The example's uniforms and Gumbel noise.
    let words = philox4x32_10([0; 4], [1, 2]);
    let u_want = [0.02186, 0.59696, 0.15258, 0.91686];
    let g_want = [-1.3410, 0.6618, -0.6313, 2.4441];
    for k in 0..4 {
        let u = uniform_open(words[k]);
        assert!((u as f64 - u_want[k]).abs() < 1e-5, "u[{k}] = {u}");
        let g = gumbel_noise(words[k]);
        assert!((g as f64 - g_want[k]).abs() < 1e-4, "g[{k}] = {g}");
    }
}

#[test]
fn mulhilo_matches_64_bit_products() {
    let seed = kiln_tests::seed("mulhilo");
    let mut rng = Rng::new(seed);
    let edge = [
        0u32,
        1,
        0xffff,
        0x10000,
        0xffff_ffff,
        0x8000_0000,
        0xD251_1F53,
    ];
    let mut pairs: Vec<(u32, u32)> = edge
        .iter()
        .flat_map(|&a| edge.iter().map(move |&b| (a, b)))
        .collect();
    pairs.extend((0..100_000).map(|_| (rng.next_u64() as u32, (rng.next_u64() >> 32) as u32)));
    for (a, b) in pairs {
        let p = a as u64 * b as u64;
        assert_eq!(
            mulhilo32(a, b),
            ((p >> 32) as u32, p as u32),
            "{a:#x} * {b:#x}"
        );
        assert_eq!(mul_wide_u64(a, b), mulhilo32(a, b), "wide {a:#x} * {b:#x}");
    }
}

/// Draws `draws` tokens from one logits row (repeated over rows, fresh key per launch) on the
/// cpu and returns the counts per token.
fn gumbel_counts(
    logits: &[f32],
    dtype: DType,
    temperature: f32,
    draws: usize,
    seed: u64,
) -> Vec<u64> {
    let dev = Device::cpu();
    let vocab = logits.len();
    let rows = 20_000usize;
    let data: Vec<f32> = (0..rows).flat_map(|_| logits.iter().copied()).collect();
    let t = Tensor::from_f32(&dev, dtype, &[rows, vocab], &data).unwrap();
    let mut index = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
    let mut counts = vec![0u64; vocab];
    let mut rng = Rng::new(seed);
    for _ in 0..draws.div_ceil(rows) {
        let key = [rng.next_u64() as u32, rng.next_u64() as u32];
        let ran = ops::gumbel_max_sample(&dev, &t, key, temperature, &mut index).unwrap();
        assert!(!ran.is_fallback());
        for i in to_u32(&index) {
            counts[i as usize] += 1;
        }
    }
    counts
}

#[test]
fn gumbel_draws_follow_the_softmax() {
    let seed = kiln_tests::seed("gumbel chi-square");
    let mut rng = Rng::new(seed);
    // Peaked + bimodal with masked tokens at T 0.5; a random flat-ish row at T 1.5 in bf16.
    let mut bimodal: Vec<f32> = (0..64)
        .map(|i| -((i as f32 - 12.0).powi(2)).min((i as f32 - 50.0).powi(2)) / 40.0)
        .collect();
    for i in [3, 17, 40, 63] {
        bimodal[i] = f32::NEG_INFINITY;
    }
    let flat: Vec<f32> = (0..100).map(|_| rng.normal() as f32 * 0.5).collect();
    let peaked: Vec<f32> = (0..32)
        .map(|i| if i == 7 { 4.0 } else { rng.normal() as f32 })
        .collect();
    for (name, logits, dtype, t) in [
        ("bimodal masked", bimodal, DType::F32, 0.5f32),
        ("flat", flat, DType::Bf16, 1.5),
        ("peaked", peaked, DType::F16, 0.5),
    ] {
        let counts = gumbel_counts(&logits, dtype, t, 1_000_000, rng.next_u64());
        let probs = softmax(&stored(dtype, &logits), t as f64);
        let (stat, df, crit) = chi_square(&counts, &probs);
        eprintln!("gumbel {name}: chi2 {stat:.1} df {df} critical {crit:.1}");
        assert!(
            stat < crit,
            "gumbel {name}: chi-square {stat:.1} >= {crit:.1} (df {df})"
        );
    }
}

#[test]
fn gumbel_a_separated_row_never_draws_the_loser() {
    let dev = Device::cpu();
    let rows = 10_000;
    let data: Vec<f32> = (0..rows).flat_map(|_| [0.0f32, 100.0, 0.0]).collect();
    let t = Tensor::from_f32(&dev, DType::F32, &[rows, 3], &data).unwrap();
    let mut index = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
    ops::gumbel_max_sample(&dev, &t, [9, 9], 1.0, &mut index).unwrap();
    assert!(to_u32(&index).iter().all(|&i| i == 1));
}

/// The host recomputation: f64 `argmax(logit / T + g)` and the winner's lead over the runner-up.
fn host_gumbel(logits: &[f64], t: f64, key: [u32; 2], row: u32) -> (u32, f64) {
    let mut c: Vec<(f64, u32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            let u = gumbel_ref::uniform(key, row, i as u32) as f64;
            (l / t - (-u.ln()).ln(), i as u32)
        })
        .collect();
    c.sort_by(|a, b| b.0.total_cmp(&a.0));
    (c[0].1, c[0].0 - c[1].0)
}

#[test]
fn gumbel_decided_rows_match_the_host_with_a_fixed_key() {
    let seed = kiln_tests::seed("gumbel fixed key");
    let mut rng = Rng::new(seed);
    let dev = Device::cpu();
    let (rows, vocab) = (48usize, 5003usize);
    for (dtype, t) in [
        (DType::F32, 1.0f32),
        (DType::F32, 0.7),
        (DType::Bf16, 1.3),
        (DType::F16, 0.9),
    ] {
        let logits: Vec<f32> = (0..rows * vocab)
            .map(|_| rng.normal() as f32 * 2.0)
            .collect();
        let key = [rng.next_u64() as u32, rng.next_u64() as u32];
        let lt = Tensor::from_f32(&dev, dtype, &[rows, vocab], &logits).unwrap();
        let mut index = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
        ops::gumbel_max_sample(&dev, &lt, key, t, &mut index).unwrap();
        let got = to_u32(&index);
        let host = stored(dtype, &logits);
        let mut decided = 0;
        for r in 0..rows {
            let (want, lead) = host_gumbel(&host[r * vocab..][..vocab], t as f64, key, r as u32);
            if lead >= 1e-4 {
                decided += 1;
                assert_eq!(got[r], want, "{} T {t} row {r}", dtype.name());
            }
        }
        assert!(
            decided >= rows * 9 / 10,
            "only {decided} of {rows} rows decided"
        );
    }
}

#[test]
fn the_noise_table_bounds_the_noise_of_every_word() {
    // The noise reads the top 23 bits of a word: every value of them, against its table entry.
    let mut worst = f32::INFINITY;
    let mut used = vec![false; BOUNDS];
    for v in 0..1u32 << 23 {
        // The table index reads only bits the noise reads too.
        let w = v << 9;
        let j = bound_index(w) as usize;
        assert!(j < BOUNDS, "word {w:#x}: entry {j} of {BOUNDS}");
        used[j] = true;
        let (g, bound) = (gumbel_noise(w), noise_bound(j as u32));
        assert!(g <= bound, "word {w:#x}: noise {g} above its bound {bound}");
        worst = worst.min(bound - g);
    }
    eprintln!("smallest slack of the noise table: {worst:e}");
    // The first level's all-ones entry is never read: those words index the second level.
    let unused: Vec<usize> = (0..BOUNDS).filter(|&j| !used[j]).collect();
    assert_eq!(unused, [BOUNDS / 2 - 1], "table entries no word reads");
}

#[test]
fn the_quotient_bound_is_above_every_rounded_quotient() {
    let seed = kiln_tests::seed("quotient bound");
    let mut rng = Rng::new(seed);
    let mut pairs: Vec<(f32, f32)> = Vec::new();
    for _ in 0..200_000 {
        // Logits and temperatures over their whole range, subnormal quotients included.
        let x = f32::from_bits(rng.next_u64() as u32);
        let t = f32::from_bits((rng.next_u64() as u32) & 0x7fff_ffff);
        pairs.push((x, t.max(f32::MIN_POSITIVE)));
        let scale = (rng.uniform() * 8.0 - 4.0) as f32;
        pairs.push(((rng.normal() * 10.0) as f32, 10f32.powf(scale)));
    }
    for (x, t) in pairs {
        // The kernel bounds nothing where `1/T` is subnormal.
        if !(x.is_finite() && t.is_finite() && 1.0 / t >= f32::MIN_POSITIVE) {
            continue;
        }
        let bound = quotient_bound(x * (1.0 / t));
        let q = x / t;
        // A Vulkan `/` may be 2.5 ulp away from the rounded quotient: the bound covers 3 ulp.
        let mut far = q;
        for _ in 0..3 {
            far = f32::from_bits(if far >= 0.0 {
                far.to_bits() + 1
            } else {
                far.to_bits() - 1
            });
        }
        if q.is_finite() && far.is_finite() {
            assert!(far <= bound, "x {x:e} / t {t:e} = {q:e}: bound {bound:e}");
        } else if q == f32::INFINITY {
            assert_eq!(bound, f32::INFINITY, "x {x:e} / t {t:e}");
        }
    }
}

#[test]
fn gumbel_split_counts_follow_the_spec_rule() {
    // Spec §5's examples, then the edges: large batches take one split, small vocabularies
    // at most one per chunk of 1024.
    for (rows, vocab, want) in [
        (1, 152_064, 64),
        (4, 152_064, 16),
        (8, 152_064, 8),
        (1, 32_768, 32),
        (64, 152_064, 1),
        (1000, 152_064, 1),
        (1, 1024, 1),
        (1, 2048, 2),
        (1, 3000, 2),
        (2, 5003, 4),
    ] {
        assert_eq!(ops::gumbel_splits(rows, vocab), want, "{rows} x {vocab}");
    }
}

/// The op's split on a device: the spec's rule on the host ports (they cannot say how many
/// blocks they hold); on a GPU the most splits whose blocks fit one wave of its resident blocks
/// — never fewer splits than the rule, never more than a row's chunks or 64.
#[test]
fn gumbel_splits_on_a_device_fill_one_wave_of_its_resident_blocks() {
    for dev in kiln_tests::test_devices() {
        for (rows, vocab) in [
            (1, 152_064),
            (8, 152_064),
            (64, 152_064),
            (64, 128_256),
            (3, 5003),
        ] {
            let rule = ops::gumbel_splits(rows, vocab);
            let got = ops::gumbel_splits_on(&dev, DType::F32, rows, vocab);
            let label = format!(
                "{}: {rows} x {vocab}: {got} splits (rule {rule})",
                dev.name()
            );
            match ops::gumbel_resident_blocks(&dev, DType::F32, rows, vocab) {
                None => assert_eq!(got, rule, "{label}"),
                Some(resident) => {
                    let cap = vocab.div_ceil(1024).min(64);
                    assert!(got >= rule && got <= cap, "{label}");
                    // One wave, unless the rule alone exceeds it; one split more would not fit.
                    assert!(
                        rows * got <= resident || got == rule,
                        "{label}, {resident} resident"
                    );
                    assert!(
                        got == cap || rows * (got + 1) > resident,
                        "{label}, {resident} resident"
                    );
                }
            }
            eprintln!("{label}");
        }
    }
}

/// Tokens of one launch with `splits` blocks per row (0: the op's rule).
fn gumbel_tokens(dev: &Device, logits: &Tensor, key: [u32; 2], t: f32, splits: usize) -> Vec<u32> {
    let mut index = Tensor::zeros(dev, DType::U32, &[logits.shape()[0]]).unwrap();
    let ran = if splits == 0 {
        ops::gumbel_max_sample(dev, logits, key, t, &mut index)
    } else {
        ops::gumbel_max_sample_split(dev, logits, key, t, splits, &mut index)
    }
    .unwrap();
    assert!(!ran.is_fallback(), "{} ran the fallback", dev.name());
    to_u32(&index)
}

#[test]
fn gumbel_tokens_are_identical_on_every_backend_and_split_count() {
    let seed = kiln_tests::seed("gumbel backends");
    let mut rng = Rng::new(seed);
    let (rows, vocab) = (6usize, 5003usize);
    let mut logits: Vec<f32> = (0..rows * vocab)
        .map(|_| rng.normal() as f32 * 2.0)
        .collect();
    // Row 3 all −inf (→ 0); row 4 one finite logit at the end; row 5 a two-way exact tie
    // far above the noise in different chunks (→ the lower index, whatever splits hold them).
    logits[3 * vocab..4 * vocab].fill(f32::NEG_INFINITY);
    logits[4 * vocab..5 * vocab].fill(f32::NEG_INFINITY);
    logits[5 * vocab - 1] = 0.0;
    logits[5 * vocab + 2000] = 1e30;
    logits[5 * vocab + 4000] = 1e30;
    let key = [rng.next_u64() as u32, rng.next_u64() as u32];
    // One split, the rule's (4 here), two, more splits than chunks (empty splits), the most.
    let split_counts = [1usize, 0, 2, 8, 64];
    for dtype in [DType::F32, DType::Bf16] {
        let mut want: Option<Vec<u32>> = None;
        for dev in kiln_tests::test_devices() {
            let lt = Tensor::from_f32(&dev, dtype, &[rows, vocab], &logits).unwrap();
            for splits in split_counts {
                // The sim spawns a thread per lane: 64 splits of 6 rows take it a minute.
                if splits == 64 && dev.backend() == kiln::Backend::Sim {
                    continue;
                }
                let got = gumbel_tokens(&dev, &lt, key, 0.8, splits);
                let at = format!("{} {} splits {splits}", dev.name(), dtype.name());
                assert_eq!(got[3], 0, "{at}: all −inf row");
                assert_eq!(got[4], vocab as u32 - 1, "{at}: single finite logit");
                assert_eq!(got[5], 2000, "{at}: exact tie goes to the lower index");
                match &want {
                    None => want = Some(got),
                    Some(w) => assert_eq!(&got, w, "{at} differs from cpu with one split"),
                }
            }
        }
    }
}

#[test]
fn gumbel_refuses_bad_input() {
    let dev = Device::cpu();
    let lt = Tensor::from_f32(&dev, DType::F32, &[2, 8], &[0.0; 16]).unwrap();
    let mut index = Tensor::zeros(&dev, DType::U32, &[2]).unwrap();
    for t in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let e = ops::gumbel_max_sample(&dev, &lt, [1, 2], t, &mut index).unwrap_err();
        assert!(e.is_invalid_input(), "T {t}: {e}");
    }
    for splits in [0, 65] {
        let e =
            ops::gumbel_max_sample_split(&dev, &lt, [1, 2], 1.0, splits, &mut index).unwrap_err();
        assert!(e.is_invalid_input(), "splits {splits}: {e}");
    }
    let mut short = Tensor::zeros(&dev, DType::U32, &[3]).unwrap();
    for splits in [1, 2] {
        let e =
            ops::gumbel_max_sample_split(&dev, &lt, [1, 2], 1.0, splits, &mut short).unwrap_err();
        assert!(e.is_invalid_input(), "{e}");
    }
}

/// Host draw from a distribution by inverse CDF on an f64 uniform.
fn host_draw(probs: &[f32], rng: &mut Rng) -> u32 {
    let total: f64 = probs.iter().map(|&p| p as f64).sum();
    let target = rng.uniform() * total;
    let mut cum = 0.0;
    for (i, &p) in probs.iter().enumerate() {
        cum += p as f64;
        if cum > target {
            return i as u32;
        }
    }
    (probs.len() - 1) as u32
}

struct Verify {
    target: Tensor,
    draft: Tensor,
    draft_tokens: Tensor,
}

/// `rows` copies of one verify step: target laws `p[j]`, draft laws `q[j]`, and per row fresh
/// draft tokens drawn on the host from `q[j]`.
fn verify_batch(
    dev: &Device,
    p: &[Vec<f32>],
    q: &[Vec<f32>],
    rows: usize,
    rng: &mut Rng,
) -> Verify {
    let (n, v) = (q.len(), p[0].len());
    let target: Vec<f32> = (0..rows)
        .flat_map(|_| p.iter().flatten().copied())
        .collect();
    let draft: Vec<f32> = (0..rows)
        .flat_map(|_| q.iter().flatten().copied())
        .collect();
    let tokens: Vec<u32> = (0..rows * n).map(|k| host_draw(&q[k % n], rng)).collect();
    Verify {
        target: Tensor::from_f32(dev, DType::F32, &[rows, n + 1, v], &target).unwrap(),
        draft: Tensor::from_f32(dev, DType::F32, &[rows, n, v], &draft).unwrap(),
        draft_tokens: Tensor::from_slice(dev, &[rows, n], &tokens).unwrap(),
    }
}

fn run_verify(
    dev: &Device,
    b: &Verify,
    rule: ops::AcceptRule,
    key: [u32; 2],
) -> (Vec<u32>, Vec<u32>) {
    let (rows, n1) = (b.target.shape()[0], b.target.shape()[1]);
    let mut tokens = Tensor::zeros(dev, DType::U32, &[rows, n1]).unwrap();
    let mut emitted = Tensor::zeros(dev, DType::U32, &[rows]).unwrap();
    let ran = ops::speculative_accept(
        dev,
        &b.target,
        &b.draft,
        &b.draft_tokens,
        rule,
        key,
        &mut tokens,
        &mut emitted,
    )
    .unwrap();
    assert!(!ran.is_fallback(), "{} ran the fallback", dev.name());
    (to_u32(&tokens), to_u32(&emitted))
}

fn random_law(v: usize, spread: f64, rng: &mut Rng) -> Vec<f32> {
    normalise(
        &(0..v)
            .map(|_| (rng.normal() * spread).exp())
            .collect::<Vec<_>>(),
    )
}

#[test]
fn speculative_emitted_tokens_follow_the_target_law() {
    let seed = kiln_tests::seed("speculative law");
    let mut rng = Rng::new(seed);
    let dev = Device::cpu();
    let (n, v, rows) = (2usize, 30usize, 20_000usize);
    let p: Vec<Vec<f32>> = (0..=n).map(|_| random_law(v, 1.2, &mut rng)).collect();
    let q: Vec<Vec<f32>> = (0..n).map(|_| random_law(v, 1.2, &mut rng)).collect();
    let exp_accept: f64 = p[0]
        .iter()
        .zip(&q[0])
        .map(|(&a, &b)| (a as f64).min(b as f64))
        .sum();
    for rule in [ops::AcceptRule::Stochastic, ops::AcceptRule::SamplerMatch] {
        let (mut first, mut second) = (vec![0u64; v], vec![0u64; v]);
        let mut accepted_first = 0u64;
        let mut total = 0u64;
        for _ in 0..1_000_000 / rows {
            let batch = verify_batch(&dev, &p, &q, rows, &mut rng);
            let drafts = to_u32(&batch.draft_tokens);
            let key = [rng.next_u64() as u32, rng.next_u64() as u32];
            let (tokens, emitted) = run_verify(&dev, &batch, rule, key);
            for r in 0..rows {
                let e = emitted[r] as usize;
                assert!((1..=n + 1).contains(&e));
                let row = &tokens[r * (n + 1)..][..n + 1];
                // Accepted drafts are the drafts; the tail is padding.
                assert_eq!(&row[..e - 1], &drafts[r * n..][..e - 1]);
                assert!(row[e..].iter().all(|&t| t == u32::MAX));
                first[row[0] as usize] += 1;
                if e >= 2 {
                    accepted_first += 1;
                    second[row[1] as usize] += 1;
                }
                total += 1;
            }
        }
        let to_f64 = |x: &[f32]| x.iter().map(|&a| a as f64).collect::<Vec<_>>();
        for (what, counts, law) in [
            ("first", &first, to_f64(&p[0])),
            ("second", &second, to_f64(&p[1])),
        ] {
            let (stat, df, crit) = chi_square(counts, &law);
            eprintln!(
                "speculative {rule:?} {what} token: chi2 {stat:.1} df {df} critical {crit:.1}"
            );
            assert!(
                stat < crit,
                "{rule:?} {what} token: chi-square {stat:.1} >= {crit:.1}"
            );
        }
        // Stochastic accepts with Σ min(p, q); sampler-match with Σ p·q.
        let want = match rule {
            ops::AcceptRule::Stochastic => exp_accept,
            _ => p[0]
                .iter()
                .zip(&q[0])
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum(),
        };
        let sd = (want * (1.0 - want) / total as f64).sqrt();
        let got = accepted_first as f64 / total as f64;
        eprintln!("speculative {rule:?}: first-draft acceptance {got:.5}, law {want:.5}");
        assert!(
            (got - want).abs() < 5.0 * sd,
            "{rule:?}: acceptance {got} vs {want} (sd {sd:.2e})"
        );
    }
}

#[test]
fn speculative_accept_decisions_are_identical_on_every_backend() {
    let seed = kiln_tests::seed("speculative backends");
    let mut rng = Rng::new(seed);
    let (n, v, rows) = (3usize, 200usize, 6usize);
    // Draft laws close to the target so that chains run long.
    let p: Vec<Vec<f32>> = (0..=n).map(|_| random_law(v, 2.0, &mut rng)).collect();
    let q: Vec<Vec<f32>> = p[..n]
        .iter()
        .map(|pj| {
            normalise(
                &pj.iter()
                    .map(|&x| x as f64 * (1.0 + 0.3 * rng.uniform()))
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let key = [rng.next_u64() as u32, rng.next_u64() as u32];
    let tokens_seed = rng.next_u64();
    for rule in [ops::AcceptRule::Stochastic, ops::AcceptRule::Greedy] {
        let mut want: Option<(Vec<u32>, Vec<u32>)> = None;
        for dev in kiln_tests::test_devices() {
            let batch = verify_batch(&dev, &p, &q, rows, &mut Rng::new(tokens_seed));
            let (tokens, emitted) = run_verify(&dev, &batch, rule, key);
            if rule == ops::AcceptRule::Greedy {
                let argmax0 = (0..v)
                    .max_by(|&a, &b| p[0][a].total_cmp(&p[0][b]).then(b.cmp(&a)))
                    .unwrap();
                assert!(
                    tokens.chunks(n + 1).all(|r| r[0] == argmax0 as u32),
                    "{}",
                    dev.name()
                );
            }
            match &want {
                None => want = Some((tokens, emitted)),
                Some((wt, we)) => {
                    // Accept decisions read single elements: identical everywhere. The one
                    // drawn token may move only at a rounding boundary, so compare the drafts.
                    assert_eq!(&emitted, we, "{}: emitted", dev.name());
                    for r in 0..rows {
                        let e = emitted[r] as usize;
                        let exact = if rule == ops::AcceptRule::Greedy {
                            e
                        } else {
                            e - 1
                        };
                        assert_eq!(
                            &tokens[r * (n + 1)..][..exact],
                            &wt[r * (n + 1)..][..exact],
                            "{} row {r}",
                            dev.name()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn speculative_rejects_out_of_vocabulary_drafts_and_bad_shapes() {
    let dev = Device::cpu();
    let (n, v) = (2usize, 8usize);
    let target =
        Tensor::from_f32(&dev, DType::F32, &[1, n + 1, v], &vec![0.125; (n + 1) * v]).unwrap();
    let draft = Tensor::from_f32(&dev, DType::F32, &[1, n, v], &vec![0.125; n * v]).unwrap();
    let bad_tokens = Tensor::from_slice(&dev, &[1, n], &[v as u32, 3]).unwrap();
    let mut tokens = Tensor::zeros(&dev, DType::U32, &[1, n + 1]).unwrap();
    let mut emitted = Tensor::zeros(&dev, DType::U32, &[1]).unwrap();
    ops::speculative_accept(
        &dev,
        &target,
        &draft,
        &bad_tokens,
        ops::AcceptRule::Stochastic,
        [1, 2],
        &mut tokens,
        &mut emitted,
    )
    .unwrap();
    assert_eq!(to_u32(&emitted), [1]);
    assert!((to_u32(&tokens)[0] as usize) < v);
    let mut short = Tensor::zeros(&dev, DType::U32, &[1, n]).unwrap();
    let e = ops::speculative_accept(
        &dev,
        &target,
        &draft,
        &bad_tokens,
        ops::AcceptRule::Greedy,
        [1, 2],
        &mut short,
        &mut emitted,
    )
    .unwrap_err();
    assert!(e.is_invalid_input(), "{e}");
}
