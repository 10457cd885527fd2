//! One validation path for every entry (issue #20): shape products that overflow, pools of a
//! dtype no kernel reads, non-finite scales, malformed paged tables and v2 plans that do not
//! cover their requests are typed errors on the ops, on `kiln::launch` (port and fallback) and
//! on every decode arm — never a panic, a fault after launch or a wrong answer.

use kiln::launch::{default_params, launch, set_param, Arg, Mode};
use kiln::paged::{
    paged_decode_with, plan_decode, DecodeArm, DecodePlan, DecodePolicy, PageTable, PlanConfig,
};
use kiln::rng::Rng;
use kiln::{ops, DType, Device, KernelId, PortError, Tensor};
use kiln_tests::{assert_invalid, untouched};

/// An f32 tensor of `shape` holding the shared poison.
fn poisoned(dev: &Device, shape: &[usize]) -> Tensor {
    kiln_tests::poisoned(dev, DType::F32, shape)
}

fn i32s(dev: &Device, v: &[i32]) -> Tensor {
    Tensor::from_slice(dev, &[v.len()], v).unwrap()
}

fn host_devices() -> Vec<Device> {
    vec![Device::cpu(), Device::sim(8).unwrap()]
}

/// Case 4: a shape whose element count or byte count wraps is refused where the tensor is made.
#[test]
fn case4_shape_products_that_overflow_are_refused() {
    let dev = Device::cpu();
    for shape in [
        vec![(1usize << 63) + 1, 2],
        vec![4, (1usize << 62) + 1, 2],
        vec![1usize << 33, 1usize << 31, 1, 1],
        vec![usize::MAX, usize::MAX],
    ] {
        for dtype in [DType::F32, DType::U8] {
            assert!(
                Tensor::zeros(&dev, dtype, &shape).is_err(),
                "zeros {dtype:?} {shape:?}"
            );
            assert!(
                Tensor::guarded(&dev, dtype, &shape, 1, 0, 0).is_err(),
                "guarded {dtype:?} {shape:?}"
            );
        }
        let small = Tensor::zeros(&dev, DType::F32, &[2]).unwrap();
        assert!(small.reshape(&shape).is_err(), "reshape to {shape:?}");
        assert!(small.view(0, &shape).is_err(), "view as {shape:?}");
    }
    // A guard so large its bytes wrap.
    assert!(Tensor::guarded(&dev, DType::F32, &[2], usize::MAX / 2, 0, 0).is_err());
}

/// The smallest batch: one request of `visible` tokens over `pages` pages of 2 tokens.
fn one_request(pages: usize, visible: usize) -> PageTable {
    PageTable {
        indices: (0..pages as i32).collect(),
        indptr: vec![0, pages as i32],
        last_page_len: vec![(visible - (pages - 1) * 2) as i32],
        first_page_offset: vec![0],
    }
}

fn policy() -> DecodePolicy {
    DecodePolicy {
        concurrent_blocks: Some(1),
        v2_min_tokens: usize::MAX,
        target_blocks: 2,
        pages_per_chunk: Some(1),
    }
}

/// Case 1: a KV pool of a dtype the kernels have no instance for is refused on every arm, the
/// gather fallback included (it used to read the bytes as bf16).
#[test]
fn case1_integer_pools_are_refused_on_every_arm() {
    for dev in host_devices() {
        let q = Tensor::from_f32(&dev, DType::F32, &[1, 1, 2], &[1.0, 2.0]).unwrap();
        for dtype in [DType::U8, DType::U32, DType::I32] {
            let k = Tensor::zeros(&dev, dtype, &[1, 2, 1, 2]).unwrap();
            let v = Tensor::zeros(&dev, dtype, &[1, 2, 1, 2]).unwrap();
            let table = one_request(1, 2);
            for arm in [
                None,
                Some(DecodeArm::V1),
                Some(DecodeArm::V2),
                Some(DecodeArm::Fallback),
            ] {
                let mut out = poisoned(&dev, &[1, 1, 2]);
                let r = paged_decode_with(&dev, &q, &k, &v, &table, 0.0, &mut out, &policy(), arm);
                assert!(
                    matches!(r, Err(PortError::UnsupportedDtype { got, .. }) if got == dtype),
                    "{} {dtype:?} pool, arm {arm:?}: {r:?}",
                    dev.name()
                );
                assert!(untouched(&out));
            }
            let bt = table.to_block_table(&table.validate(1, 1, 2).unwrap());
            let mut out = poisoned(&dev, &[1, 1, 2]);
            assert_invalid(
                ops::paged_attention_decode(&dev, &q, &k, &v, &bt, 0.0, &mut out),
                "v1 op, integer pool",
            );
        }
    }
}

/// Case 5: the gather fallback refuses a non-finite scale, as the kernel arms do.
#[test]
fn case5_non_finite_scales_are_refused_on_every_arm() {
    let dev = Device::cpu();
    let q = Tensor::from_f32(&dev, DType::F32, &[1, 1, 2], &[1.0, 2.0]).unwrap();
    let k = Tensor::from_f32(&dev, DType::F32, &[1, 2, 1, 2], &[1.0; 4]).unwrap();
    let table = one_request(1, 2);
    for scale in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        for arm in [
            Some(DecodeArm::V1),
            Some(DecodeArm::V2),
            Some(DecodeArm::Fallback),
        ] {
            let mut out = poisoned(&dev, &[1, 1, 2]);
            assert_invalid(
                paged_decode_with(&dev, &q, &k, &k, &table, scale, &mut out, &policy(), arm),
                &format!("scale {scale}, arm {arm:?}"),
            );
            assert!(untouched(&out));
        }
    }
}

/// Inputs of a raw v1 launch: 2 sequences over a pool of 4 rows of 2 tokens, 1 head of 2.
struct V1 {
    q: Tensor,
    pool: Tensor,
}

fn v1_inputs(dev: &Device) -> V1 {
    let pool: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
    V1 {
        q: Tensor::from_f32(dev, DType::F32, &[2, 1, 2], &[0.5, -1.0, 1.5, 0.25]).unwrap(),
        pool: Tensor::from_f32(dev, DType::F32, &[4, 2, 1, 2], &pool).unwrap(),
    }
}

fn launch_v1(
    dev: &Device,
    x: &V1,
    tables: [&[i32]; 4],
    mode: Mode,
    out: &mut Tensor,
) -> Result<kiln::Ran, PortError> {
    let [rows, offsets, starts, lens] = tables.map(|t| i32s(dev, t));
    launch(
        dev,
        KernelId::PagedAttentionDecode,
        &default_params(KernelId::PagedAttentionDecode),
        &mut [
            Arg::In(&x.q),
            Arg::In(&x.pool),
            Arg::In(&x.pool),
            Arg::In(&rows),
            Arg::In(&offsets),
            Arg::In(&starts),
            Arg::In(&lens),
            Arg::Out(out),
        ],
        mode,
    )
}

/// Case 6: `kiln::launch` (port and fallback, cpu and sim) checks the paged tables as the ops
/// do: non-monotone offsets, negative starts, rows outside the pool and windows past a
/// sequence's rows are refused before anything runs.
#[test]
fn case6_raw_launches_check_paged_tables() {
    for dev in host_devices() {
        let x = v1_inputs(&dev);
        let good: [&[i32]; 4] = [&[0, 1, 2, 3], &[0, 2, 4], &[0, 1], &[4, 3]];
        let bad: [(&str, [&[i32]; 4]); 6] = [
            (
                "non-monotone offsets",
                [good[0], &[0, 3, 2], good[2], good[3]],
            ),
            ("offsets from 1", [good[0], &[1, 2, 4], good[2], good[3]]),
            ("negative start", [good[0], good[1], &[-1, 0], good[3]]),
            ("negative length", [good[0], good[1], good[2], &[-4, 3]]),
            (
                "row outside the pool",
                [&[0, 1, 2, 9], good[1], good[2], good[3]],
            ),
            ("window past the rows", [good[0], good[1], &[0, 2], good[3]]),
        ];
        for mode in [Mode::Auto, Mode::PortOnly, Mode::FallbackOnly] {
            for (what, tables) in bad {
                let mut out = poisoned(&dev, &[2, 1, 2]);
                assert_invalid(
                    launch_v1(&dev, &x, tables, mode, &mut out),
                    &format!("{} {mode:?}: {what}", dev.name()),
                );
                assert!(untouched(&out), "{what}: out was written");
            }
            let mut out = poisoned(&dev, &[2, 1, 2]);
            launch_v1(&dev, &x, good, mode, &mut out).unwrap();
            assert!(!untouched(&out));
        }
        // The merge: o_indptr must start at 0, not decrease and end within the partials.
        let v_in = Tensor::from_f32(&dev, DType::F32, &[2, 1, 2], &[1.0; 4]).unwrap();
        let lse_in = Tensor::from_f32(&dev, DType::F32, &[2, 1], &[0.0; 2]).unwrap();
        for (what, o) in [("[2, 1]", &[2, 1][..]), ("[0, 3]", &[0, 3][..])] {
            let o_indptr = i32s(&dev, o);
            let (mut v_out, mut lse_out) = (poisoned(&dev, &[1, 1, 2]), poisoned(&dev, &[1, 1]));
            assert_invalid(
                launch(
                    &dev,
                    KernelId::PagedAttentionMergeStates,
                    &default_params(KernelId::PagedAttentionMergeStates),
                    &mut [
                        Arg::In(&v_in),
                        Arg::In(&lse_in),
                        Arg::In(&o_indptr),
                        Arg::Out(&mut v_out),
                        Arg::Out(&mut lse_out),
                    ],
                    Mode::Auto,
                ),
                &format!("merge o_indptr {what}"),
            );
            assert!(untouched(&v_out));
        }
    }
}

/// `softmax(scale · q·k) · v` over `tokens` of 1 head of 2, straight from spec §9.1.
fn attention(q: [f32; 2], kv: &[[f32; 2]], scale: f64) -> [f64; 2] {
    let s: Vec<f64> = kv
        .iter()
        .map(|k| scale * (q[0] as f64 * k[0] as f64 + q[1] as f64 * k[1] as f64))
        .collect();
    let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
    let z: f64 = w.iter().sum();
    let mut o = [0.0; 2];
    for (wi, k) in w.iter().zip(kv) {
        o[0] += wi / z * k[0] as f64;
        o[1] += wi / z * k[1] as f64;
    }
    o
}

fn v2_partial(
    dev: &Device,
    q: &Tensor,
    pool: &Tensor,
    table: &PageTable,
    plan: &DecodePlan,
    out_v: &mut Tensor,
    out_lse: &mut Tensor,
) -> Result<kiln::Ran, PortError> {
    ops::paged_attention_decode_v2_partial(dev, q, pool, pool, table, plan, 0.0, out_v, out_lse)
}

/// Case 2: a v2 plan must list each request's tiles exactly once, in range and in request
/// order; a plan that drops, repeats or misplaces a tile, or one cached from an earlier step
/// whose requests have since grown, is refused on the op and on a raw launch. A good plan gives
/// the spec's attention.
#[test]
fn case2_v2_plans_must_cover_every_tile_once() {
    let seed = kiln_tests::seed("v2 plan coverage");
    let mut rng = Rng::new(seed);
    eprintln!("seed {seed}");
    let dev = Device::cpu();
    // Two requests: 2 pages (4 tokens) and 1 page (2 tokens), pages of 2, one chunk per page.
    let kv: Vec<[f32; 2]> = (0..6)
        .map(|_| [rng.normal() as f32, rng.normal() as f32])
        .collect();
    let flat: Vec<f32> = kv.iter().flatten().copied().collect();
    let pool = Tensor::from_f32(&dev, DType::F32, &[3, 2, 1, 2], &flat).unwrap();
    let qv = [
        rng.normal() as f32,
        rng.normal() as f32,
        rng.normal() as f32,
        rng.normal() as f32,
    ];
    let q = Tensor::from_f32(&dev, DType::F32, &[2, 1, 2], &qv).unwrap();
    let table = PageTable {
        indices: vec![0, 1, 2],
        indptr: vec![0, 2, 3],
        last_page_len: vec![2, 2],
        first_page_offset: vec![0, 0],
    };
    let cfg = PlanConfig {
        target_blocks: 4,
        pages_per_chunk: Some(1),
    };
    let good = plan_decode(&[2, 1], 1, 1, 2, cfg).unwrap();
    assert_eq!(good.request_indices, vec![0, 0, 1]);
    let with = |r: &[i32], t: &[i32], o: &[i32], merge_free: bool| DecodePlan {
        request_indices: r.to_vec(),
        kv_tile_indices: t.to_vec(),
        o_indptr: o.to_vec(),
        merge_free,
        ..good.clone()
    };
    let bad = [
        ("a dropped tile", with(&[0, 1], &[0, 0], &[0, 1, 2], true)),
        (
            "a repeated tile",
            with(&[0, 0, 1], &[0, 0, 0], &[0, 2, 3], false),
        ),
        (
            "a misplaced tile",
            with(&[0, 1, 0], &[0, 0, 1], &[0, 2, 3], false),
        ),
        (
            "a tile past its request",
            with(&[0, 0, 1], &[0, 2, 0], &[0, 2, 3], false),
        ),
        (
            "o_indptr off by one",
            with(&[0, 0, 1], &[0, 1, 0], &[0, 1, 3], false),
        ),
        (
            "a stale plan (request 0 had one page)",
            plan_decode(&[1, 1], 1, 1, 2, cfg).unwrap(),
        ),
    ];
    for (what, plan) in &bad {
        let c = plan.chunks();
        let (mut out_v, mut out_lse) = (poisoned(&dev, &[c, 1, 2]), poisoned(&dev, &[c, 1]));
        assert_invalid(
            v2_partial(&dev, &q, &pool, &table, plan, &mut out_v, &mut out_lse),
            &format!("op: {what}"),
        );
        assert!(untouched(&out_v));
        // The same chunk list on a raw launch (o_indptr is the merge's, not this kernel's).
        if *what == "o_indptr off by one" {
            continue;
        }
        let t: Vec<Tensor> = [
            &table.indices,
            &table.indptr,
            &table.last_page_len,
            &table.first_page_offset,
            &plan.request_indices,
            &plan.kv_tile_indices,
        ]
        .iter()
        .map(|v| i32s(&dev, v))
        .collect();
        let k = KernelId::PagedAttentionDecodeV2Partial;
        let mut words = default_params(k);
        set_param(k, &mut words, "pages_per_chunk", "1").unwrap();
        let mut args = vec![Arg::In(&q), Arg::In(&pool), Arg::In(&pool)];
        args.extend(t.iter().map(Arg::In));
        args.push(Arg::Out(&mut out_v));
        args.push(Arg::Out(&mut out_lse));
        for mode in [Mode::Auto, Mode::FallbackOnly] {
            assert_invalid(
                launch(&dev, k, &words, &mut args, mode),
                &format!("launch {mode:?}: {what}"),
            );
        }
        drop(args);
        assert!(untouched(&out_v));
    }
    // The good plan: partials, then the merge, give the spec's attention for both requests.
    let (mut out_v, mut out_lse) = (poisoned(&dev, &[3, 1, 2]), poisoned(&dev, &[3, 1]));
    v2_partial(&dev, &q, &pool, &table, &good, &mut out_v, &mut out_lse).unwrap();
    let (mut out, mut lse) = (poisoned(&dev, &[2, 1, 2]), poisoned(&dev, &[2, 1]));
    ops::paged_attention_merge_states(&dev, &out_v, &out_lse, &good.o_indptr, &mut out, &mut lse)
        .unwrap();
    let got = out.to_f32_vec().unwrap();
    let scale = 1.0 / 2f64.sqrt();
    let want = [
        attention([qv[0], qv[1]], &kv[0..4], scale),
        attention([qv[2], qv[3]], &kv[4..6], scale),
    ];
    for (r, w) in want.iter().enumerate() {
        for d in 0..2 {
            let g = got[r * 2 + d] as f64;
            assert!(
                (g - w[d]).abs() <= 1e-5 * (1.0 + w[d].abs()),
                "seed {seed}: request {r} dim {d}: {g} vs the spec's {}",
                w[d]
            );
        }
    }
}

/// Case 3's paged half: a non-finite score makes the head's output row NaN and a non-finite
/// value makes its output column NaN, the same on v1, v2 (two chunks and their merge) and the
/// gather fallback, on every backend; an unattended NaN changes nothing.
#[test]
fn case3_non_finite_attention_inputs_give_the_same_nans_on_every_arm() {
    // Two query heads over one KV head of 2 dims; one request of 4 tokens over pages 1 and 2
    // of a 4-page pool (pages 0 and 3 unattended).
    let table = PageTable {
        indices: vec![1, 2],
        indptr: vec![0, 2],
        last_page_len: vec![2],
        first_page_offset: vec![0],
    };
    let q_clean = [0.5f32, -1.0, 1.5, 0.25];
    let pool_clean: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
    // Pool element of token `t` of the request (page 1 + t / 2, slot t % 2), dim `d`.
    let at = |t: usize, d: usize| ((1 + t / 2) * 2 + t % 2) * 2 + d;
    struct Poison {
        what: &'static str,
        q: Option<(usize, f32)>,
        k: Option<(usize, f32)>,
        v: Option<(usize, f32)>,
        /// Which of the 4 outputs `[head 0 d0, head 0 d1, head 1 d0, head 1 d1]` are NaN.
        nan: [bool; 4],
    }
    let cases = [
        Poison {
            what: "NaN in head 0's query",
            q: Some((1, f32::NAN)),
            k: None,
            v: None,
            nan: [true, true, false, false],
        },
        Poison {
            what: "+inf in head 1's query",
            q: Some((2, f32::INFINITY)),
            k: None,
            v: None,
            nan: [false, false, true, true],
        },
        Poison {
            what: "+inf key of token 3",
            q: None,
            k: Some((at(3, 0), f32::INFINITY)),
            v: None,
            nan: [true; 4],
        },
        Poison {
            what: "-inf key of token 0",
            q: None,
            k: Some((at(0, 1), f32::NEG_INFINITY)),
            v: None,
            nan: [true; 4],
        },
        Poison {
            what: "+inf value of token 1, dim 1",
            q: None,
            k: None,
            v: Some((at(1, 1), f32::INFINITY)),
            nan: [false, true, false, true],
        },
        Poison {
            what: "NaN value of token 2, dim 0",
            q: None,
            k: None,
            v: Some((at(2, 0), f32::NAN)),
            nan: [true, false, true, false],
        },
        Poison {
            what: "NaN key and value in unattended page 3",
            q: None,
            k: Some((14, f32::NAN)),
            v: Some((15, f32::NAN)),
            nan: [false; 4],
        },
    ];
    for dev in kiln_tests::test_devices() {
        let run = |q: &[f32], k: &[f32], v: &[f32], arm: DecodeArm| {
            let qt = Tensor::from_f32(&dev, DType::F32, &[1, 2, 2], q).unwrap();
            let kt = Tensor::from_f32(&dev, DType::F32, &[4, 2, 1, 2], k).unwrap();
            let vt = Tensor::from_f32(&dev, DType::F32, &[4, 2, 1, 2], v).unwrap();
            let mut out = poisoned(&dev, &[1, 2, 2]);
            let ran = paged_decode_with(
                &dev,
                &qt,
                &kt,
                &vt,
                &table,
                0.0,
                &mut out,
                &policy(),
                Some(arm),
            );
            ran.unwrap_or_else(|e| panic!("{} {arm:?}: {e}", dev.name()));
            out.to_f32_vec().unwrap()
        };
        let clean = run(&q_clean, &pool_clean, &pool_clean, DecodeArm::Fallback);
        for c in &cases {
            let (mut q, mut k, mut v) = (q_clean.to_vec(), pool_clean.clone(), pool_clean.clone());
            for (buf, poison) in [(&mut q, c.q), (&mut k, c.k), (&mut v, c.v)] {
                if let Some((i, x)) = poison {
                    buf[i] = x;
                }
            }
            for arm in [DecodeArm::V1, DecodeArm::V2, DecodeArm::Fallback] {
                let got = run(&q, &k, &v, arm);
                for (i, (&g, &nan)) in got.iter().zip(&c.nan).enumerate() {
                    let label = format!("{} {arm:?}, {}: output {i} = {g}", dev.name(), c.what);
                    if nan {
                        assert!(g.is_nan(), "{label}, want NaN");
                    } else {
                        assert!(g.is_finite(), "{label}, want finite");
                        if c.nan == [false; 4] {
                            assert!((g - clean[i]).abs() < 1e-5, "{label}, want {}", clean[i]);
                        }
                    }
                }
            }
        }
    }
}

/// Case 3's norm half: f16 add-RMSNorm of `x = [inf, 1, 2, 3]` is NaN in every element of the
/// row on the port and on the fallback (the fallback used to give `[NaN, 0, 0, 0]`), and the
/// other row is untouched by it.
#[test]
fn case3_a_non_finite_row_normalizes_to_nan_on_port_and_fallback() {
    let k = KernelId::FusedAddRmsNorm;
    for dev in kiln_tests::test_devices() {
        for mode in [Mode::PortOnly, Mode::FallbackOnly] {
            let x = Tensor::from_f32(
                &dev,
                DType::F16,
                &[2, 4],
                &[f32::INFINITY, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0],
            )
            .unwrap();
            let mut residual = Tensor::from_f32(&dev, DType::F16, &[2, 4], &[0.0; 8]).unwrap();
            let w = Tensor::from_f32(&dev, DType::F16, &[4], &[1.0; 4]).unwrap();
            let mut out = kiln_tests::poisoned(&dev, DType::F16, &[2, 4]);
            let mut p = default_params(k);
            set_param(k, &mut p, "eps", "1e-6").unwrap();
            launch(
                &dev,
                k,
                &p,
                &mut [
                    Arg::In(&x),
                    Arg::Out(&mut residual),
                    Arg::In(&w),
                    Arg::Out(&mut out),
                ],
                mode,
            )
            .unwrap_or_else(|e| panic!("{} {mode:?}: {e}", dev.name()));
            let got = out.to_f32_vec().unwrap();
            let label = format!("{} {mode:?}: {got:?}", dev.name());
            assert!(got[..4].iter().all(|v| v.is_nan()), "{label}");
            // 1/sqrt(7.5) = 0.3651…, 4/sqrt(7.5) = 1.4606… (f16 within 1e-3).
            assert!(
                (got[4] - 0.3651).abs() < 1e-3 && (got[7] - 1.4606).abs() < 1e-3,
                "{label}"
            );
        }
    }
}
