//! Paged attention (issue 7): the three kernels' parity on every backend, the decode dispatch
//! and the host plan, the shape sweep on the cpu backend, and refusals of bad inputs.

use kiln::parity::{kernel_dtypes, run_matrix_with, SimBlocks};

/// The sims take the cases in turns (each case at one wave), as in parity.rs.
#[test]
fn paged_kernels_match_their_references_on_every_backend() {
    let devs = kiln_tests::test_devices();
    let seed = kiln_tests::seed("paged parity");
    let kernels = kiln_tests::PAGED_KERNELS;
    let outcomes = kiln_tests::run_beside_sims(&devs, &|_| kernel_dtypes(&kernels), seed, |sims| {
        run_matrix_with(sims, &kernels, seed, SimBlocks::RotateWaves)
    });
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
    let sims = devs
        .iter()
        .filter(|d| d.backend() == kiln::Backend::Sim)
        .count();
    let runners = devs.len() - sims + usize::from(sims > 0);
    let decode_cases = kiln::reference::cases::paged_cases::sim_cases().len();
    let merge_cases = kiln::reference::cases::paged_attention_merge_states::cases(DType::F32).len();
    assert_eq!(
        outcomes.len(),
        runners * (decode_cases * 3 * 2 + merge_cases)
    );
    assert!(
        failed.is_empty(),
        "{} of {} paged parity cases failed",
        failed.len(),
        outcomes.len()
    );
}

use kiln::math::Element;
use kiln::paged::{
    choose_arm, paged_decode, paged_decode_planned, paged_decode_with, plan_decode, BlockTable,
    DecodeArm, DecodePolicy, DecodeRun, DeviceDecodePlan, KvGeometry, PageTable, PlanConfig,
    PlanError, ARM_ENV, MAX_CHUNKS,
};
use kiln::rng::Rng;
use kiln::{ops, DType, Device, KernelId, PortError, SimConfig, Tensor};
use kiln_tests::assert_invalid;

/// One request of a test batch: `visible` tokens from entry `offset` of its first page.
#[derive(Clone, Copy, Debug)]
struct Req {
    visible: usize,
    offset: usize,
}

fn req(visible: usize, offset: usize) -> Req {
    Req { visible, offset }
}

/// A batch laid out in a scattered pool, with its inputs in host memory.
struct Batch {
    hq: usize,
    hkv: usize,
    d: usize,
    ps: usize,
    num_blocks: usize,
    table: PageTable,
    q: Vec<f32>,
    /// Pool values as stored (rounded to the pool dtype), widened.
    k: Vec<f32>,
    v: Vec<f32>,
}

fn batch(
    rng: &mut Rng,
    hq: usize,
    hkv: usize,
    d: usize,
    ps: usize,
    reqs: &[Req],
    dtype: DType,
) -> Batch {
    let pages: Vec<usize> = reqs
        .iter()
        .map(|r| {
            if r.visible == 0 {
                0
            } else {
                (r.offset + r.visible).div_ceil(ps)
            }
        })
        .collect();
    let total: usize = pages.iter().sum();
    let num_blocks = total + 2;
    // Rows handed out in a shuffled order so a wrong row index reads the wrong values.
    let mut rows: Vec<i32> = (0..num_blocks as i32).collect();
    for i in (1..rows.len()).rev() {
        rows.swap(i, (rng.uniform() * (i + 1) as f64) as usize % (i + 1));
    }
    let mut table = PageTable {
        indptr: vec![0],
        ..Default::default()
    };
    for (r, &p) in reqs.iter().zip(&pages) {
        table.indices.extend(rows.drain(..p));
        table.indptr.push(table.indices.len() as i32);
        table.last_page_len.push(if p == 0 {
            0
        } else {
            (r.offset + r.visible - (p - 1) * ps) as i32
        });
        table
            .first_page_offset
            .push(if p == 0 { 0 } else { r.offset as i32 });
    }
    let round = |x: f64| match dtype {
        DType::F16 => kiln::math::F16::from_f32(x as f32).to_f32(),
        DType::Bf16 => kiln::math::Bf16::from_f32(x as f32).to_f32(),
        _ => x as f32,
    };
    let n = num_blocks * ps * hkv * d;
    Batch {
        hq,
        hkv,
        d,
        ps,
        num_blocks,
        q: (0..reqs.len() * hq * d)
            .map(|_| rng.normal() as f32)
            .collect(),
        k: (0..n).map(|_| round(rng.normal())).collect(),
        v: (0..n).map(|_| round(rng.normal())).collect(),
        table,
    }
}

impl Batch {
    fn b(&self) -> usize {
        self.table.batch()
    }

    /// The expected output in f64, straight from the spec: request r's visible token i is entry
    /// `offset + i` counted from its first page.
    fn expected(&self, scale: f64) -> Vec<f64> {
        let (hq, hkv, d, ps) = (self.hq, self.hkv, self.d, self.ps);
        let mut out = vec![0.0; self.b() * hq * d];
        for r in 0..self.b() {
            let pages = &self.table.indices
                [self.table.indptr[r] as usize..self.table.indptr[r + 1] as usize];
            let visible = if pages.is_empty() {
                0
            } else {
                (pages.len() - 1) * ps + self.table.last_page_len[r] as usize
                    - self.table.first_page_offset[r] as usize
            };
            let offset = self.table.first_page_offset[r] as usize;
            for h in 0..hq {
                let kvh = h / (hq / hkv);
                let qr = &self.q[(r * hq + h) * d..(r * hq + h + 1) * d];
                let at = |i: usize| {
                    let e = offset + i;
                    ((pages[e / ps] as usize * ps + e % ps) * hkv + kvh) * d
                };
                let s: Vec<f64> = (0..visible)
                    .map(|i| {
                        scale
                            * (0..d)
                                .map(|j| qr[j] as f64 * self.k[at(i) + j] as f64)
                                .sum::<f64>()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                for (i, x) in s.iter().enumerate() {
                    let w = (x - m).exp() / z;
                    for j in 0..d {
                        out[(r * hq + h) * d + j] += w * self.v[at(i) + j] as f64;
                    }
                }
            }
        }
        out
    }

    fn tensors(&self, dev: &Device, dtype: DType) -> (Tensor, Tensor, Tensor, Tensor) {
        let pool = [self.num_blocks, self.ps, self.hkv, self.d];
        let qs = [self.b(), self.hq, 1, self.d];
        (
            Tensor::from_f32(dev, DType::F32, &qs, &self.q).unwrap(),
            Tensor::from_f32(dev, dtype, &pool, &self.k).unwrap(),
            Tensor::from_f32(dev, dtype, &pool, &self.v).unwrap(),
            // Poisoned with NaN so an unwritten element shows.
            Tensor::from_f32(dev, DType::F32, &qs, &vec![f32::NAN; self.q.len()]).unwrap(),
        )
    }
}

fn max_rel(got: &[f32], want: &[f64]) -> f64 {
    let g: Vec<f64> = got.iter().map(|&x| x as f64).collect();
    kiln::parity::max_rel(&g, want)
}

fn bound(dtype: DType) -> f64 {
    if dtype == DType::F32 {
        2e-3
    } else {
        2e-2
    }
}

/// The device's policy for the batch in `q`, `k`, `v`, with pages per chunk pinned or not.
fn policy(dev: &Device, q: &Tensor, k: &Tensor, v: &Tensor, ppc: Option<usize>) -> DecodePolicy {
    let geo = KvGeometry::of(KernelId::PagedAttentionDecode, q, k, v).unwrap();
    DecodePolicy {
        pages_per_chunk: ppc,
        ..DecodePolicy::for_device(dev, &geo)
    }
}

/// Runs one batch through `arm` and checks it against the f64 expectation; empty requests must
/// be exactly zero.
fn check_arm(
    dev: &Device,
    bt: &Batch,
    dtype: DType,
    arm: DecodeArm,
    ppc: Option<usize>,
    label: &str,
) {
    check_dispatch(dev, bt, dtype, Some(arm), ppc, label);
}

/// As [`check_arm`], with `None` letting the dispatch choose (the choice must carry a reason).
fn check_dispatch(
    dev: &Device,
    bt: &Batch,
    dtype: DType,
    arm: Option<DecodeArm>,
    ppc: Option<usize>,
    label: &str,
) {
    let (q, k, v, mut out) = bt.tensors(dev, dtype);
    let pol = policy(dev, &q, &k, &v, ppc);
    let run = paged_decode_with(dev, &q, &k, &v, &bt.table, 0.0, &mut out, &pol, arm)
        .unwrap_or_else(|e| panic!("{label} {arm:?}: {e}"));
    if run.arm != DecodeArm::Fallback {
        check_planned(dev, bt, (&q, &k, &v), &out, pol, arm, &run, label);
    }
    assert_eq!(run.arm, arm.unwrap_or(run.arm), "{label}");
    assert!(!run.reason.is_empty(), "{label}");
    let arm = run.arm;
    if let (Some(p), Some(want)) = (&run.plan, ppc) {
        assert_eq!(p.pages_per_chunk, want, "{label}");
    }
    let got = out.to_f32_vec().unwrap();
    let want = bt.expected(1.0 / (bt.d as f64).sqrt());
    let rel = max_rel(&got, &want);
    assert!(
        rel < bound(dtype),
        "{label} {} {}: max_rel {rel:.3e}",
        arm.name(),
        dtype.name()
    );
    let row = bt.hq * bt.d;
    for r in 0..bt.b() {
        if bt.table.indptr[r] == bt.table.indptr[r + 1] {
            assert!(
                got[r * row..(r + 1) * row].iter().all(|&x| x == 0.0),
                "{label}: empty request {r} not exactly zero"
            );
        }
    }
}

/// The same batch planned once on the device (`DeviceDecodePlan`, the decode driver's path):
/// the dispatch's arm and plan, and bit for bit the host-table run's output.
#[allow(clippy::too_many_arguments)]
fn check_planned(
    dev: &Device,
    bt: &Batch,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    host_out: &Tensor,
    pol: DecodePolicy,
    arm: Option<DecodeArm>,
    run: &DecodeRun,
    label: &str,
) {
    let geo = KvGeometry::of(KernelId::PagedAttentionDecode, q, k, v).unwrap();
    let mut plan = DeviceDecodePlan::with_policy(dev, geo, bt.table.indices.len(), pol).unwrap();
    let choice = plan.write_with(dev, &bt.table, k, arm).unwrap();
    assert_eq!((choice.arm, &choice.plan), (run.arm, &run.plan), "{label}");
    let mut out = Tensor::from_f32(dev, DType::F32, q.shape(), &vec![f32::NAN; q.numel()]).unwrap();
    paged_decode_planned(dev, q, k, v, &plan, 0.0, &mut out)
        .unwrap_or_else(|e| panic!("{label} planned {}: {e}", run.arm.name()));
    let bits = |t: &Tensor| -> Vec<u32> {
        t.to_f32_vec()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect()
    };
    assert_eq!(
        bits(&out),
        bits(host_out),
        "{label} planned {}",
        run.arm.name()
    );
}

/// Every head dim, GQA 1:1 / 4:1 / 8:1, both page sizes, page-boundary lengths, windows with a
/// first-page offset, mixed batches with an empty request: v1, v2 and the fallback on the cpu.
#[test]
fn every_arm_matches_the_f64_reference_on_the_cpu_sweep() {
    let dev = Device::cpu();
    let mut rng = Rng::new(kiln_tests::seed("paged sweep"));
    let mut count = 0;
    for d in [64, 80, 96, 128, 256] {
        for (hq, hkv) in [(4, 4), (8, 2), (16, 2)] {
            for ps in [16, 32] {
                let reqs = [
                    req(2 * ps, 0),
                    req(ps + 1, 0),
                    req(0, 0),
                    req(3 * ps - 5, 5),
                    req(1, ps - 1),
                    req(5 * ps + 3, 3),
                ];
                for dtype in [DType::F32, DType::F16, DType::Bf16] {
                    let nb = 1 + (d + hq + ps) % reqs.len();
                    let bt = batch(&mut rng, hq, hkv, d, ps, &reqs[..nb.max(3)], dtype);
                    let label = format!("d{d} hq{hq} hkv{hkv} ps{ps} b{}", bt.b());
                    check_arm(&dev, &bt, dtype, DecodeArm::V1, None, &label);
                    check_arm(&dev, &bt, dtype, DecodeArm::V2, Some(1 + count % 3), &label);
                    check_arm(&dev, &bt, dtype, DecodeArm::Fallback, None, &label);
                    check_dispatch(&dev, &bt, dtype, None, None, &label);
                    count += 1;
                }
            }
        }
    }
    assert_eq!(count, 5 * 3 * 2 * 3);
}

/// Pages per chunk 1, 2, 3, 4, 7, 16, 64 over a batch of 1 to 8 requests with mixed lengths.
#[test]
fn v2_matches_at_every_pages_per_chunk_and_batch_size() {
    let dev = Device::cpu();
    let mut rng = Rng::new(kiln_tests::seed("paged ppc"));
    let lens = [300, 17, 0, 64, 129, 1, 500, 33];
    for b in 1..=8 {
        let reqs: Vec<Req> = lens[..b]
            .iter()
            .enumerate()
            .map(|(i, &l)| req(l, if l > 0 { i % 16 } else { 0 }))
            .collect();
        for dtype in [DType::F32, DType::F16] {
            let bt = batch(&mut rng, 8, 1, 128, 16, &reqs, dtype);
            for ppc in [1, 2, 3, 4, 7, 16, 64] {
                check_arm(
                    &dev,
                    &bt,
                    dtype,
                    DecodeArm::V2,
                    Some(ppc),
                    &format!("b{b} ppc{ppc}"),
                );
            }
        }
    }
}

#[test]
fn the_env_override_forces_each_arm_and_auto_picks_one() {
    let dev = Device::cpu();
    let mut rng = Rng::new(kiln_tests::seed("paged env"));
    let bt = batch(
        &mut rng,
        8,
        2,
        64,
        16,
        &[req(100, 3), req(0, 0), req(40, 0)],
        DType::F16,
    );
    let want = bt.expected(0.125);
    for (env, arm) in [
        ("v1", Some(DecodeArm::V1)),
        ("v2", Some(DecodeArm::V2)),
        ("fallback", Some(DecodeArm::Fallback)),
        ("auto", None),
    ] {
        std::env::set_var(ARM_ENV, env);
        let (q, k, v, mut out) = bt.tensors(&dev, DType::F16);
        let run = paged_decode(&dev, &q, &k, &v, &bt.table, 0.0, &mut out);
        std::env::remove_var(ARM_ENV);
        let run = run.unwrap();
        if let Some(arm) = arm {
            assert_eq!(run.arm, arm);
            assert!(run.reason.contains(ARM_ENV), "{}", run.reason);
        }
        assert!(!run.reason.is_empty());
        eprintln!("{ARM_ENV}={env}: {} ({})", run.arm.name(), run.reason);
        assert!(max_rel(&out.to_f32_vec().unwrap(), &want) < 2e-2);
    }
    std::env::set_var(ARM_ENV, "v3");
    let (q, k, v, mut out) = bt.tensors(&dev, DType::F16);
    let bad = paged_decode(&dev, &q, &k, &v, &bt.table, 0.0, &mut out);
    std::env::remove_var(ARM_ENV);
    assert!(
        bad.as_ref().is_err_and(PortError::is_invalid_input),
        "{bad:?}"
    );
}

/// Auto's choice follows the measured policy: v1 when its blocks fill the device or the
/// context is short, v2 when v1 under-fills it on a long context.
#[test]
fn auto_prefers_v2_only_when_v1_underfills_a_long_context() {
    let dev = Device::cpu();
    let geo = KvGeometry {
        batch: 1,
        heads_q: 8,
        heads_kv: 1,
        head_dim: 128,
        num_blocks: 1024,
        page_size: 32,
        pool_dtype: DType::F16,
    };
    let span = |visible: usize| kiln::paged::RequestSpan {
        pages: 0..visible.div_ceil(32),
        first_offset: 0,
        visible,
    };
    let p = DecodePolicy {
        concurrent_blocks: Some(4),
        v2_min_tokens: 2048,
        target_blocks: 8,
        pages_per_chunk: None,
    };
    let long = choose_arm(&dev, &geo, &[span(16384)], &p, None).unwrap();
    assert_eq!(long.arm, DecodeArm::V2, "{}", long.reason);
    assert!(long.plan.unwrap().blocks >= 8);
    let short = choose_arm(&dev, &geo, &[span(1024)], &p, None).unwrap();
    assert_eq!(short.arm, DecodeArm::V1, "{}", short.reason);
    let full = choose_arm(
        &dev,
        &KvGeometry { batch: 4, ..geo },
        &[span(16384), span(1), span(1), span(1)],
        &p,
        None,
    )
    .unwrap();
    assert_eq!(full.arm, DecodeArm::V1, "{}", full.reason);
    let unmeasured = DecodePolicy {
        concurrent_blocks: None,
        ..p
    };
    assert_eq!(
        choose_arm(&dev, &geo, &[span(16384)], &unmeasured, None)
            .unwrap()
            .arm,
        DecodeArm::V1
    );
}

#[test]
fn the_plan_reaches_its_target_and_keeps_chunks_within_the_grid_limit() {
    let cfg = |target| PlanConfig {
        target_blocks: target,
        pages_per_chunk: None,
    };
    // 8 KV heads × 1 group: 8 blocks per chunk; 512 pages want 64 chunks for 512 blocks.
    let p = plan_decode(&[512], 32, 8, 128, cfg(512)).unwrap();
    assert!(p.blocks >= 512, "{p:?}");
    assert_eq!(p.pages_per_chunk, 8);
    assert!(!p.merge_free);
    // A larger pages-per-chunk would miss the target.
    assert!(
        plan_decode(
            &[512],
            32,
            8,
            128,
            PlanConfig {
                target_blocks: 512,
                pages_per_chunk: Some(9)
            }
        )
        .unwrap()
        .blocks
            < 512
    );
    // Empty requests still get one chunk; short ones give a merge-free plan.
    let p = plan_decode(&[0, 1, 2], 8, 8, 64, cfg(1)).unwrap();
    assert_eq!(p.request_indices, vec![0, 1, 2]);
    assert!(p.merge_free);
    assert_eq!(p.o_indptr, vec![0, 1, 2, 3]);
    // A huge batch of long requests: the floor keeps chunks ≤ MAX_CHUNKS.
    let pages = vec![4096; 64];
    let p = plan_decode(&pages, 8, 8, 64, cfg(usize::MAX)).unwrap();
    assert!(p.chunks() <= MAX_CHUNKS, "{}", p.chunks());
    assert!(p.pages_per_chunk >= (64 * 4096usize).div_ceil(MAX_CHUNKS - 64));
    // Typed refusals.
    assert_eq!(
        plan_decode(&[], 8, 8, 64, cfg(1)),
        Err(PlanError::NoRequests)
    );
    assert!(matches!(
        plan_decode(&[4], 6, 4, 64, cfg(1)),
        Err(PlanError::HeadsNotDivisible { .. })
    ));
    assert_eq!(
        plan_decode(
            &[4],
            8,
            8,
            64,
            PlanConfig {
                target_blocks: 1,
                pages_per_chunk: Some(0)
            }
        ),
        Err(PlanError::ZeroPagesPerChunk)
    );
    assert!(matches!(
        plan_decode(
            &[70000],
            8,
            8,
            64,
            PlanConfig {
                target_blocks: 1,
                pages_per_chunk: Some(1)
            }
        ),
        Err(PlanError::TooManyChunks { .. })
    ));
}

/// Malformed tables and shapes are refused before any launch: the output keeps its poison.
#[test]
fn bad_inputs_are_invalid_shape_before_any_launch() {
    let dev = Device::cpu();
    let mut rng = Rng::new(kiln_tests::seed("paged bad"));
    let bt = batch(
        &mut rng,
        8,
        2,
        64,
        16,
        &[req(40, 0), req(20, 2)],
        DType::F32,
    );
    let (q, k, v, mut out) = bt.tensors(&dev, DType::F32);
    let untouched = |out: &Tensor| out.to_f32_vec().unwrap().iter().all(|x| x.is_nan());
    let run = |t: &PageTable, out: &mut Tensor| {
        paged_decode_with(
            &dev,
            &q,
            &k,
            &v,
            t,
            0.0,
            out,
            &policy(&dev, &q, &k, &v, None),
            Some(DecodeArm::V2),
        )
    };

    let mut t = bt.table.clone();
    t.indptr[1] = t.indptr[2] + 1;
    assert_invalid(run(&t, &mut out), "indptr not monotone");
    let mut t = bt.table.clone();
    t.indices[1] = bt.num_blocks as i32;
    assert_invalid(run(&t, &mut out), "row outside the pool");
    let mut t = bt.table.clone();
    t.indices[0] = -1;
    assert_invalid(run(&t, &mut out), "negative row");
    let mut t = bt.table.clone();
    t.last_page_len[0] = 17;
    assert_invalid(run(&t, &mut out), "last page longer than a page");
    let mut t = bt.table.clone();
    t.first_page_offset[1] = 16;
    assert_invalid(run(&t, &mut out), "first-page offset past the page");
    let mut t = bt.table.clone();
    t.indptr.pop();
    assert_invalid(run(&t, &mut out), "indptr too short");
    assert!(untouched(&out));

    // v1's block table: a visible length past the sequence's rows, rows outside the pool.
    let spans = bt.table.validate(2, bt.num_blocks, 16).unwrap();
    let good = bt.table.to_block_table(&spans);
    let mut t: BlockTable = good.clone();
    t.visible_lens[0] += 100;
    assert_invalid(
        ops::paged_attention_decode(&dev, &q, &k, &v, &t, 0.0, &mut out),
        "visible beyond the block table",
    );
    let mut t = good.clone();
    t.rows[0] = 1 << 20;
    assert_invalid(
        ops::paged_attention_decode(&dev, &q, &k, &v, &t, 0.0, &mut out),
        "v1 row outside the pool",
    );
    let mut t = good.clone();
    t.row_offsets[1] = -1;
    assert_invalid(
        ops::paged_attention_decode(&dev, &q, &k, &v, &t, 0.0, &mut out),
        "v1 offsets not monotone",
    );
    assert!(untouched(&out));

    // Hq % Hkv != 0: 8 query heads over a pool of 3 KV heads.
    let pool3 = Tensor::zeros(&dev, DType::F32, &[bt.num_blocks, 16, 3, 64]).unwrap();
    assert_invalid(
        paged_decode(&dev, &q, &pool3, &pool3, &bt.table, 0.0, &mut out),
        "Hq % Hkv != 0",
    );
    assert_invalid(
        ops::paged_attention_decode(&dev, &q, &pool3, &pool3, &good, 0.0, &mut out),
        "v1 Hq % Hkv != 0",
    );

    // The v2 op with an inconsistent plan, the merge with a bad o_indptr.
    let mut plan = plan_decode(
        &[3, 2],
        8,
        2,
        64,
        PlanConfig {
            target_blocks: 1,
            pages_per_chunk: Some(1),
        },
    )
    .unwrap();
    plan.kv_tile_indices[0] = 9;
    let mut pv = Tensor::zeros(&dev, DType::F32, &[plan.chunks(), 8, 64]).unwrap();
    let mut pl = Tensor::zeros(&dev, DType::F32, &[plan.chunks(), 8]).unwrap();
    assert_invalid(
        ops::paged_attention_decode_v2_partial(
            &dev, &q, &k, &v, &bt.table, &plan, 0.0, &mut pv, &mut pl,
        ),
        "tile past its request",
    );
    let mut lse = Tensor::zeros(&dev, DType::F32, &[2, 8]).unwrap();
    assert_invalid(
        ops::paged_attention_merge_states(&dev, &pv, &pl, &[0, 3, 2], &mut out, &mut lse),
        "o_indptr not monotone",
    );
    assert_invalid(
        ops::paged_attention_merge_states(&dev, &pv, &pl, &[0, 3, 99], &mut out, &mut lse),
        "o_indptr past the partials",
    );
    assert!(untouched(&out));
}

/// The dispatch's arms on the emulator too (wave 8 and 32): v2 with a merge, v1, the fallback.
#[test]
fn every_arm_matches_on_the_sim() {
    let mut rng = Rng::new(kiln_tests::seed("paged sim dispatch"));
    let bt = batch(
        &mut rng,
        4,
        1,
        64,
        16,
        &[req(37, 5), req(0, 0)],
        DType::Bf16,
    );
    for wave in [8, 32] {
        let dev = Device::sim(wave).unwrap();
        for arm in DecodeArm::ALL {
            check_arm(
                &dev,
                &bt,
                DType::Bf16,
                arm,
                Some(1),
                &format!("sim wave {wave}"),
            );
        }
    }
}

/// Both sweeps of `decode_attention` at every emulated wave and several block sizes: head dims
/// of whole slices (the two-pass sweep, from blocks of one lane per slice up: 24 at block 4)
/// and not (100: the strided sweep), query-head groups of 1, 3 and 4 and two groups per KV
/// head, windows, an empty request and tokens that end inside a sub-chunk.
#[test]
fn both_sweeps_match_at_every_wave_block_and_head_dim() {
    let mut rng = Rng::new(kiln_tests::seed("paged sweeps"));
    // (wave, block, head dim, Hq, Hkv, pool dtype)
    let shapes = [
        (4, 4, 24, 2, 2, DType::F32),
        (4, 12, 64, 8, 2, DType::F16),
        (8, 8, 64, 6, 2, DType::Bf16),
        (8, 24, 100, 8, 1, DType::F16),
        (16, 16, 128, 4, 1, DType::F32),
        (16, 48, 100, 6, 2, DType::F16),
        (32, 32, 128, 8, 1, DType::F16),
        (32, 96, 256, 4, 2, DType::Bf16),
        (32, 128, 80, 16, 2, DType::F32),
        (64, 64, 96, 8, 2, DType::F16),
        (64, 128, 24, 4, 4, DType::F16),
    ];
    for (wave, block, d, hq, hkv, dtype) in shapes {
        let dev = Device::sim_with(SimConfig {
            block: Some(block),
            ..SimConfig::new(wave)
        })
        .unwrap();
        let bt = batch(
            &mut rng,
            hq,
            hkv,
            d,
            16,
            &[req(45, 3), req(0, 0), req(7, 9), req(33, 0)],
            dtype,
        );
        let label = format!("sim wave {wave} block {block} d{d} hq{hq} hkv{hkv}");
        check_arm(&dev, &bt, dtype, DecodeArm::V1, None, &label);
        check_arm(&dev, &bt, dtype, DecodeArm::V2, Some(1), &label);
    }
}

/// With the device's round size known, the plan fills one round rather than spilling a few
/// blocks into a second: 1024 pages over 8 KV heads on 264 resident blocks (an H200 holding 2
/// partial blocks per multiprocessor) is 32 chunks of 32 pages (256 blocks), not 34 of 31.
#[test]
fn the_plan_fills_whole_rounds_of_the_device() {
    let cfg = |target| PlanConfig {
        target_blocks: target,
        pages_per_chunk: None,
    };
    let p = plan_decode(&[1024], 32, 8, 128, cfg(264)).unwrap();
    assert_eq!(
        (p.pages_per_chunk, p.chunks(), p.blocks),
        (32, 32, 256),
        "{p:?}"
    );
    // Two rounds' worth of blocks still make whole rounds: 8 requests of 1024 pages.
    let p = plan_decode(&[1024; 8], 32, 8, 128, cfg(264)).unwrap();
    assert!(p.blocks <= 264, "{} blocks", p.blocks);
    // A small device splits less.
    let p = plan_decode(&[1024], 32, 8, 128, cfg(16)).unwrap();
    assert_eq!(p.chunks(), 2, "{p:?}");
}

/// A pool past 2^32 elements: rows whose element offset exceeds `u32::MAX` must be read from
/// there, not from the offset wrapped to 32 bits (which here holds other, known values). The
/// f16 pools are zero tensors whose untouched pages stay unallocated (2 × 8.6 GB reserved, a
/// few pages written), so the cpu and the sim run it in CI; a GPU backend runs it where its
/// memory allows, and says when it does not.
#[test]
fn a_pool_past_2_32_elements_is_addressed_in_64_bits() {
    let (hq, hkv, d, ps) = (4usize, 1usize, 64usize, 16usize);
    let row_elems = ps * hkv * d;
    let num_blocks = (1usize << 32) / row_elems + 8;
    assert!(num_blocks * row_elems > u32::MAX as usize);
    let mut rng = Rng::new(kiln_tests::seed("paged 64-bit pool"));
    // Request 0 reads the last rows (offsets past 2^32) and one low row; request 1 a window of
    // one high row.
    let high = |k: usize| (num_blocks - 1 - k) as i32;
    let table = PageTable {
        indices: vec![high(0), 3, high(2), high(1)],
        indptr: vec![0, 3, 4],
        last_page_len: vec![9, 16],
        first_page_offset: vec![2, 5],
    };
    let rows: Vec<i32> = table.indices.clone();
    // f16 pools: 8.6 GB each. Values as stored (rounded to f16), widened.
    let f16 = |x: f64| kiln::math::F16::from_f32(x as f32);
    let mut values = std::collections::HashMap::new();
    for &r in &rows {
        let k: Vec<f32> = (0..row_elems).map(|_| f16(rng.normal()).to_f32()).collect();
        let v: Vec<f32> = (0..row_elems).map(|_| f16(rng.normal()).to_f32()).collect();
        values.insert(r, (k, v));
    }
    let q: Vec<f32> = (0..2 * hq * d).map(|_| rng.normal() as f32).collect();
    let bt = Batch {
        hq,
        hkv,
        d,
        ps,
        num_blocks,
        table,
        q,
        k: Vec::new(),
        v: Vec::new(),
    };
    let want = expected_sparse(&bt, &values, 1.0 / (d as f64).sqrt());

    let mut devs = vec![Device::cpu(), Device::sim(32).unwrap()];
    devs.extend(
        kiln_tests::test_devices()
            .into_iter()
            .filter(|d| d.gpu().is_some() && d.backend() != kiln::Backend::Wgpu),
    );
    for dev in devs {
        let pool = [num_blocks, ps, hkv, d];
        let (mut k, mut v) = match (
            Tensor::zeros(&dev, DType::F16, &pool),
            Tensor::zeros(&dev, DType::F16, &pool),
        ) {
            (Ok(k), Ok(v)) => (k, v),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!(
                    "{}: skipped, the 2^32-element pools do not fit: {e}",
                    dev.name()
                );
                continue;
            }
        };
        let bytes = |x: &[f32]| {
            x.iter()
                .flat_map(|&f| f16(f as f64).0.to_le_bytes())
                .collect::<Vec<u8>>()
        };
        for (&r, (kr, vr)) in &values {
            let at = r as usize * row_elems;
            k.write_bytes_at(2 * at, &bytes(kr)).unwrap();
            v.write_bytes_at(2 * at, &bytes(vr)).unwrap();
            // Where a 32-bit offset would land, other values.
            if at > u32::MAX as usize {
                let wrapped = 2 * (at % (1usize << 32));
                k.write_bytes_at(wrapped, &bytes(&vec![3.0; row_elems]))
                    .unwrap();
                v.write_bytes_at(wrapped, &bytes(&vec![-7.0; row_elems]))
                    .unwrap();
            }
        }
        let qs = [2, hq, 1, d];
        let qt = Tensor::from_f32(&dev, DType::F32, &qs, &bt.q).unwrap();
        for arm in [DecodeArm::V1, DecodeArm::V2] {
            let mut out = Tensor::from_f32(&dev, DType::F32, &qs, &[f32::NAN; 8 * 64]).unwrap();
            let run = paged_decode_with(
                &dev,
                &qt,
                &k,
                &v,
                &bt.table,
                0.0,
                &mut out,
                &policy(&dev, &qt, &k, &v, Some(1)),
                Some(arm),
            )
            .unwrap_or_else(|e| panic!("{} {arm:?}: {e}", dev.name()));
            let rel = max_rel(&out.to_f32_vec().unwrap(), &want);
            eprintln!("{} {}: max_rel {rel:.3e}", dev.name(), run.arm.name());
            assert!(
                rel < 2e-2,
                "{} {}: max_rel {rel:.3e}",
                dev.name(),
                arm.name()
            );
        }
    }
}

/// [`Batch::expected`] for a pool given only by the rows the table names.
fn expected_sparse(
    bt: &Batch,
    rows: &std::collections::HashMap<i32, (Vec<f32>, Vec<f32>)>,
    scale: f64,
) -> Vec<f64> {
    let (hq, hkv, d, ps) = (bt.hq, bt.hkv, bt.d, bt.ps);
    let mut out = vec![0.0; bt.b() * hq * d];
    for r in 0..bt.b() {
        let pages = &bt.table.indices[bt.table.indptr[r] as usize..bt.table.indptr[r + 1] as usize];
        let first = bt.table.first_page_offset[r] as usize;
        let visible = (pages.len() - 1) * ps + bt.table.last_page_len[r] as usize - first;
        for h in 0..hq {
            let kvh = h / (hq / hkv);
            let qr = &bt.q[(r * hq + h) * d..(r * hq + h + 1) * d];
            let entry = |i: usize, side: usize| {
                let e = first + i;
                let (k, v) = &rows[&pages[e / ps]];
                let at = ((e % ps) * hkv + kvh) * d;
                if side == 0 {
                    &k[at..at + d]
                } else {
                    &v[at..at + d]
                }
            };
            let s: Vec<f64> = (0..visible)
                .map(|i| {
                    let k = entry(i, 0);
                    scale * (0..d).map(|j| qr[j] as f64 * k[j] as f64).sum::<f64>()
                })
                .collect();
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
            for (i, x) in s.iter().enumerate() {
                let v = entry(i, 1);
                for j in 0..d {
                    out[(r * hq + h) * d + j] += (x - m).exp() / z * v[j] as f64;
                }
            }
        }
    }
    out
}
