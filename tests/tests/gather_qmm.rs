//! `gather_qmm` through `ops::gather_qmm*` (spec §13): the MoE chain built from it (gate and up
//! through `gather_qmm_topk`, SwiGLU, down through `gather_qmm`, the score-weighted K-sum)
//! against spec §7.9's all-f32 dense reference at the spec's model shapes, at the fallback
//! chain's budget; the `sorted` hint, the sort → gather → unsort path, rows per tile and rows
//! per block giving the same bits as one slot per block, for f32, f16 and bf16 on every
//! backend present (the sim at waves 4, 8, 32 and 64 with ragged blocks); device ids past E or
//! L giving zero rows; bad inputs refused before any launch with the output untouched. Outputs
//! start poisoned inside guard sentinels, and both are checked after every run.

use kiln::math::kernels::gather_qmm::GatherQmmParams;
use kiln::math::kernels::qlinear::scale_code;
use kiln::ops::{self, GatherTiling, MoeActivation, QuantizedWeight, StackedExperts};
use kiln::parity::{GUARD, GUARD_BYTE, POISON_BYTE};
use kiln::quant::{pack_le_words, quantize, AffineFormat, AffineTensor};
use kiln::{Backend, DType, Device, PortError, Tensor};
use kiln_tests::moe_layer::{bf16, bits, dense_reference, deviation, layer, routing, weights};
use kiln_tests::{poisoned, ragged_sim_devices, seed, test_devices, untouched};

/// An output of `shape` poisoned (all-ones elements: NaN in every float dtype) inside guards.
fn guarded_out(dev: &Device, dtype: DType, shape: &[usize]) -> Tensor {
    Tensor::guarded(dev, dtype, shape, GUARD, GUARD_BYTE, POISON_BYTE).unwrap()
}

/// `t`'s values once its guards are intact and no element is left poisoned.
fn checked(t: &Tensor, what: &str) -> Vec<f32> {
    let all = t.to_bytes_with_guards().unwrap();
    let (lo, body_len) = (t.guard_bytes(), t.byte_len());
    let guards = all[..lo].iter().chain(&all[lo + body_len..]);
    assert!(
        guards.into_iter().all(|&b| b == GUARD_BYTE),
        "{what}: a write outside the output"
    );
    let size = t.dtype().size();
    let body = &all[lo..lo + body_len];
    let unwritten = body
        .chunks(size)
        .filter(|e| e.iter().all(|&b| b == POISON_BYTE))
        .count();
    assert_eq!(unwritten, 0, "{what}: {unwritten} elements never written");
    t.to_f32_vec().unwrap()
}

fn stacked(dev: &Device, experts: usize, w: &AffineTensor) -> StackedExperts {
    StackedExperts::new(experts, QuantizedWeight::upload(dev, w).unwrap()).unwrap()
}

/// `silu(g)·u` of two stored outputs, rounded to bf16 (the chain's stored activation).
fn swiglu(g: &[f32], u: &[f32]) -> Vec<f32> {
    g.iter()
        .zip(u)
        .map(|(&g, &u)| bf16(g / (1.0 + (-g).exp()) * u))
        .collect()
}

#[test]
fn the_gather_chain_matches_the_dense_f32_reference_at_model_shapes() {
    let s = seed("the_gather_chain_matches_the_dense_f32_reference_at_model_shapes");
    // (name, E, K, tokens, Din, Dff, gate/up bits, down bits, sorted prefill). Every expert is
    // routed to (E = K at the Qwen3 shapes), as in tests/tests/moe.rs; the 320/192 case also
    // runs four tokens through the sort → gather → unsort path.
    let shapes = [
        ("qwen3-30b-a3b (4,4)", 8, 8, 1, 2048, 768, 4, 4, false),
        ("qwen3-30b-a3b (8,8)", 8, 8, 1, 2048, 768, 8, 8, false),
        ("qwen3-30b-a3b (4,6)", 8, 8, 1, 2048, 768, 4, 6, false),
        ("320/192 K4", 6, 4, 1, 320, 192, 4, 4, false),
        ("320/192 K4, 4 tokens sorted", 6, 4, 4, 320, 192, 4, 4, true),
    ];
    // The sim's one thread per lane is too slow at these shapes; the parity cases and the
    // invariance test run it at small ones.
    let devices: Vec<Device> = test_devices()
        .into_iter()
        .filter(|d| d.backend() != Backend::Sim)
        .collect();
    for (i, &(name, e, k, tokens, din, dff, fb, db, sorted)) in shapes.iter().enumerate() {
        let act = MoeActivation::SwiGlu;
        let l = layer(s ^ i as u64, e, din, dff, act, fb, db, 64, DType::Bf16);
        let mut state = s.wrapping_add(i as u64);
        let x: Vec<f32> = weights(&mut state, tokens * din)
            .iter()
            .map(|&v| bf16(v))
            .collect();
        let (ids, scores) = routing(&mut state, tokens, k, e);
        let want = dense_reference(&l, &x, &ids, &scores);
        assert!(want.iter().any(|&v| v != 0.0), "{name}: a zero reference");
        for dev in &devices {
            let got = gather_chain(dev, &l, &x, &ids, &scores, sorted);
            let (nrms, nmax) = deviation(&got, &want);
            eprintln!("{name} on {}: nrms {nrms:.3e} nmax {nmax:.3e}", dev.name());
            assert!(
                nrms < 5e-2 && nmax < 2e-1,
                "{name} on {}: nrms {nrms:.3e} (bound 5e-2), nmax {nmax:.3e} (bound 2e-1)",
                dev.name()
            );
        }
    }
}

/// The MoE layer as the unfused chain runs it over `gather_qmm` for bf16 `x [T, Din]`: gate and
/// up per slot (sorted by expert first when `sorted`), SwiGLU stored in bf16, down per slot,
/// then `Σ_k bf16(score·d)` in f32 rounded to bf16 once.
fn gather_chain(
    dev: &Device,
    l: &kiln_tests::moe_layer::Layer,
    x: &[f32],
    ids: &[u32],
    scores: &[f32],
    sorted: bool,
) -> Vec<f32> {
    let tokens = x.len() / l.din;
    let (slots, k) = (ids.len(), ids.len() / tokens);
    let gate = stacked(dev, l.experts, &l.first);
    let up = stacked(dev, l.experts, l.up.as_ref().unwrap());
    let down = stacked(dev, l.experts, &l.down);
    let xt = Tensor::from_f32(dev, DType::Bf16, &[tokens, l.din], x).unwrap();
    // `ops::gather_qmm` over slots in `order` (the identity unless sorted), rows put back in
    // slot order.
    let token_of: Vec<u32> = (0..slots).map(|s| (s / k) as u32).collect();
    let project = |lhs: &Tensor, lhs_idx: &[u32], w: &StackedExperts, n: usize| -> Vec<f32> {
        let mut out = guarded_out(dev, DType::Bf16, &[slots, n]);
        if sorted {
            let (order, rhs) = ops::gather_sort(ids);
            let lhs_sorted: Vec<u32> = order.iter().map(|&o| lhs_idx[o as usize]).collect();
            let mut out_sorted = guarded_out(dev, DType::Bf16, &[slots, n]);
            let ran =
                ops::gather_qmm(dev, lhs, &lhs_sorted, &rhs, w, true, &mut out_sorted).unwrap();
            assert!(!ran.is_fallback());
            checked(&out_sorted, "sorted rows");
            ops::scatter_unsort(&out_sorted, &order, &mut out).unwrap();
        } else if lhs_idx == token_of.as_slice() {
            let ran = ops::gather_qmm_topk(dev, lhs, ids, w, &mut out).unwrap();
            assert!(!ran.is_fallback());
        } else {
            let ran = ops::gather_qmm(dev, lhs, lhs_idx, ids, w, false, &mut out).unwrap();
            assert!(!ran.is_fallback());
        }
        checked(&out, "gather_qmm")
    };
    let g = project(&xt, &token_of, &gate, l.dff);
    let u = project(&xt, &token_of, &up, l.dff);
    let act = Tensor::from_f32(dev, DType::Bf16, &[slots, l.dff], &swiglu(&g, &u)).unwrap();
    let per_slot: Vec<u32> = (0..slots as u32).collect();
    let d = project(&act, &per_slot, &down, l.din);
    (0..tokens * l.din)
        .map(|i| {
            let (t, h) = (i / l.din, i % l.din);
            let sum: f32 = (0..k)
                .map(|j| bf16(bf16(scores[t * k + j]) * d[(t * k + j) * l.din + h]))
                .sum();
            bf16(sum)
        })
        .collect()
}

/// One projection of `e` experts `[n, c]` at `bits` (group size 32, bf16 scales) from `seed`.
fn projection(seed: u64, e: usize, n: usize, c: usize, bits: u32) -> AffineTensor {
    let mut state = seed;
    let format = AffineFormat::new(bits, 32, DType::Bf16).unwrap();
    quantize(&weights(&mut state, e * n * c), e * n, c, format).unwrap()
}

/// `lhs [rows, c]` in `dtype` from `state`.
fn lhs_values(state: &mut u64, rows: usize, c: usize) -> Vec<f32> {
    weights(state, rows * c)
}

/// Runs `gather_qmm_tiled` on `dev` and returns `out`'s values (guards and writes checked).
#[allow(clippy::too_many_arguments)]
fn run(
    dev: &Device,
    lhs: &Tensor,
    lhs_idx: &[u32],
    rhs_idx: &[u32],
    w: &StackedExperts,
    tiling: GatherTiling,
) -> Vec<f32> {
    let mut out = guarded_out(dev, lhs.dtype(), &[lhs_idx.len(), w.rows()]);
    let ran = ops::gather_qmm_tiled(dev, lhs, lhs_idx, rhs_idx, w, tiling, &mut out).unwrap();
    assert!(!ran.is_fallback(), "{}: the fallback ran", dev.name());
    checked(&out, &format!("{tiling:?} on {}", dev.name()))
}

/// The spec's f64 reference of one launch, through `kiln::reference`.
fn reference(
    lhs: &Tensor,
    lhs_idx: &[u32],
    rhs_idx: &[u32],
    w: &AffineTensor,
    e: usize,
) -> Vec<f32> {
    let (l, c) = (lhs.shape()[0], lhs.shape()[1]);
    let n = w.rows() / e;
    let p = GatherQmmParams {
        slots: lhs_idx.len() as u32,
        lhs_rows: l as u32,
        experts: e as u32,
        cols: c as u32,
        rows: n as u32,
        group_size: w.format().group_size(),
        scale_dtype: scale_code(w.format().scale_dtype()),
        ..GatherQmmParams::default()
    };
    let x = lhs.to_f32_vec().unwrap();
    let (scales, biases) = (
        pack_le_words(w.scales_bytes()),
        pack_le_words(w.biases_bytes()),
    );
    let mut out = vec![0f32; lhs_idx.len() * n];
    kiln::reference::gather_qmm::gather_qmm(
        &p,
        w.format().bits(),
        &x,
        lhs_idx,
        rhs_idx,
        w.w_q(),
        &scales,
        &biases,
        &mut out,
    );
    out
}

#[test]
fn the_sorted_hint_and_the_tiling_never_change_a_bit() {
    let s = seed("the_sorted_hint_and_the_tiling_never_change_a_bit");
    // (activation dtype, bits): every dtype (bf16 the seeds' sorted failure), every width.
    let combos = [(DType::F32, 8), (DType::F16, 6), (DType::Bf16, 4)];
    // 4 tokens routed to 3 of 5 experts (12 slots, unsorted), experts of [14, 96]: three
    // units per row (ragged over any wave), 14 rows (ragged over rows per block 3 and 8).
    // Small: the sim at wave 64 runs each block's 192 lanes as threads.
    let (tokens, k, e, n, c) = (4, 3, 5, 14, 96);
    let devices = ragged_sim_devices();
    for (i, &(dtype, width)) in combos.iter().enumerate() {
        let w = projection(s ^ (i as u64 + 1), e, n, c, width);
        let mut state = s.wrapping_add(31 * i as u64);
        let x = lhs_values(&mut state, tokens, c);
        let (ids, _) = routing(&mut state, tokens, k, e);
        let token_of: Vec<u32> = (0..ids.len()).map(|s| (s / k) as u32).collect();
        let (order, rhs_sorted) = ops::gather_sort(&ids);
        let lhs_sorted: Vec<u32> = order.iter().map(|&o| token_of[o as usize]).collect();
        assert!(
            rhs_sorted.windows(2).all(|p| p[0] <= p[1]) && rhs_sorted != ids,
            "the routing must need sorting"
        );
        let what = format!("{} at {width} bits", dtype.name());
        for dev in &devices {
            let started = std::time::Instant::now();
            let on = format!("{what} on {}", dev.name());
            let experts = stacked(dev, e, &w);
            let lhs = Tensor::from_f32(dev, dtype, &[tokens, c], &x).unwrap();
            let base = run(dev, &lhs, &token_of, &ids, &experts, GatherTiling::UNSORTED);
            // The answer itself: the spec's reference at the linear-layer budget.
            let want = reference(&lhs, &token_of, &ids, &w, e);
            let (nrms, nmax) = deviation(&base, &want);
            let (bound_rms, bound_max) = match dtype {
                DType::F32 => (1e-5, 1e-4),
                DType::F16 => (2e-3, 1.2e-2),
                _ => (1.6e-2, 7e-2),
            };
            assert!(
                nrms < bound_rms && nmax < bound_max,
                "{on}: nrms {nrms:.3e} nmax {nmax:.3e} against the reference"
            );
            // The hint over unsorted slots: tiles of several runs, experts coming back.
            for rows_per_tile in [2, 4, 16] {
                let hinted = GatherTiling {
                    sorted: true,
                    rows_per_tile,
                    rows_per_block: 3,
                };
                let got = run(dev, &lhs, &token_of, &ids, &experts, hinted);
                assert!(
                    bits(&got) == bits(&base),
                    "{on}: the hint over unsorted slots (rows per tile {rows_per_tile}) differs"
                );
            }
            // Sorted slots without the hint, then with it at every tile and block shape.
            let plain = run(
                dev,
                &lhs,
                &lhs_sorted,
                &rhs_sorted,
                &experts,
                GatherTiling::UNSORTED,
            );
            for (rows_per_tile, rows_per_block) in [(1, 8), (3, 2), (5, 3), (16, 8)] {
                let tiling = GatherTiling {
                    sorted: true,
                    rows_per_tile,
                    rows_per_block,
                };
                let got = run(dev, &lhs, &lhs_sorted, &rhs_sorted, &experts, tiling);
                assert!(
                    bits(&got) == bits(&plain),
                    "{on}: sorted slots at {rows_per_tile} per tile, {rows_per_block} rows per \
                     block differ from one slot per block"
                );
            }
            // The prefill path: sort → gather with the hint → unsort is the unsorted answer.
            let mut sorted_out = guarded_out(dev, dtype, &[ids.len(), n]);
            ops::gather_qmm(
                dev,
                &lhs,
                &lhs_sorted,
                &rhs_sorted,
                &experts,
                true,
                &mut sorted_out,
            )
            .unwrap();
            let mut unsorted = guarded_out(dev, dtype, &[ids.len(), n]);
            ops::scatter_unsort(&sorted_out, &order, &mut unsorted).unwrap();
            let got = checked(&unsorted, &on);
            assert!(
                bits(&got) == bits(&base),
                "{on}: sort → gather_qmm(sorted) → unsort differs from the unsorted run"
            );
            eprintln!(
                "{on}: bitwise equal (nrms {nrms:.2e} against the reference), {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
}

#[test]
fn device_ids_past_e_or_l_give_zero_rows() {
    let s = seed("device_ids_past_e_or_l_give_zero_rows");
    let (rows, e, n, c) = (3, 4, 12, 64);
    let w = projection(s, e, n, c, 4);
    let mut state = s ^ 0xa5;
    let x = lhs_values(&mut state, rows, c);
    // Slot 1's expert is past E, slot 3's row past L; the tile of 4 holds both and two good runs.
    let lhs_idx = [0u32, 1, 2, 9, 1, 0];
    let rhs_idx = [2u32, 4, 2, 1, 1, 3];
    let tiling = GatherTiling {
        sorted: true,
        rows_per_tile: 4,
        rows_per_block: 5,
    };
    for dev in ragged_sim_devices() {
        let experts = stacked(&dev, e, &w);
        let lhs = Tensor::from_f32(&dev, DType::F32, &[rows, c], &x).unwrap();
        let li = Tensor::from_slice(&dev, &[6], &lhs_idx).unwrap();
        let ri = Tensor::from_slice(&dev, &[6], &rhs_idx).unwrap();
        let mut out = guarded_out(&dev, DType::F32, &[6, n]);
        ops::gather_qmm_indexed(&dev, &lhs, &li, &ri, &experts, tiling, &mut out).unwrap();
        let got = checked(&out, dev.name());
        let want = reference(&lhs, &lhs_idx, &rhs_idx, &w, e);
        for slot in 0..6 {
            let row = &got[slot * n..(slot + 1) * n];
            if slot == 1 || slot == 3 {
                assert!(
                    row.iter().all(|&v| v.to_bits() == 0),
                    "{}: slot {slot} is not zeros",
                    dev.name()
                );
            } else {
                let (nrms, _) = deviation(row, &want[slot * n..(slot + 1) * n]);
                assert!(nrms < 1e-5, "{}: slot {slot}: nrms {nrms:.3e}", dev.name());
            }
        }
    }
}

#[test]
fn gather_qmm_refuses_bad_inputs_before_any_launch() {
    let dev = Device::cpu();
    let (e, n, c) = (4, 8, 64);
    let w = projection(5, e, n, c, 4);
    let experts = stacked(&dev, e, &w);
    let lhs = Tensor::from_f32(&dev, DType::F32, &[2, c], &[0.5; 128]).unwrap();
    let tiling = GatherTiling::SORTED;
    let check = |what: &str,
                 lhs: &Tensor,
                 lhs_idx: &[u32],
                 rhs_idx: &[u32],
                 tiling: GatherTiling,
                 out_dtype: DType,
                 out_shape: &[usize],
                 want: fn(&PortError) -> bool| {
        let mut out = poisoned(&dev, out_dtype, out_shape);
        let r = ops::gather_qmm_tiled(&dev, lhs, lhs_idx, rhs_idx, &experts, tiling, &mut out);
        match r {
            Err(e) if want(&e) => eprintln!("{what}: refused: {e}"),
            other => panic!("{what}: expected a refusal, got {other:?}"),
        }
        assert!(untouched(&out), "{what}: a refused call wrote out");
    };
    let invalid: fn(&PortError) -> bool = |e| e.is_invalid_input();
    let f32_ = DType::F32;
    check(
        "expert id ≥ E",
        &lhs,
        &[0, 1],
        &[3, 4],
        tiling,
        f32_,
        &[2, n],
        |e| {
            matches!(
                e,
                PortError::ExpertOutOfRange {
                    id: 4,
                    position: 1,
                    experts: 4,
                    ..
                }
            )
        },
    );
    check(
        "lhs row ≥ L",
        &lhs,
        &[2, 0],
        &[0, 1],
        tiling,
        f32_,
        &[2, n],
        |e| {
            matches!(
                e,
                PortError::LhsRowOutOfRange {
                    row: 2,
                    position: 0,
                    rows: 2,
                    ..
                }
            ) && e.is_invalid_input()
        },
    );
    let ok = (&[0u32, 1][..], &[1u32, 2][..]);
    check(
        "index lists of other lengths",
        &lhs,
        &[0],
        ok.1,
        tiling,
        f32_,
        &[2, n],
        invalid,
    );
    check("no slots", &lhs, &[], &[], tiling, f32_, &[0, n], invalid);
    let narrow = Tensor::from_f32(&dev, DType::F32, &[2, 32], &[0.5; 64]).unwrap();
    check(
        "lhs of other columns",
        &narrow,
        ok.0,
        ok.1,
        tiling,
        f32_,
        &[2, n],
        invalid,
    );
    let flat = Tensor::from_f32(&dev, DType::F32, &[128], &[0.5; 128]).unwrap();
    check(
        "lhs not [L, C]",
        &flat,
        ok.0,
        ok.1,
        tiling,
        f32_,
        &[2, n],
        invalid,
    );
    check(
        "out of other rows",
        &lhs,
        ok.0,
        ok.1,
        tiling,
        f32_,
        &[3, n],
        invalid,
    );
    check(
        "out of other columns",
        &lhs,
        ok.0,
        ok.1,
        tiling,
        f32_,
        &[2, n + 1],
        invalid,
    );
    check(
        "out of another dtype",
        &lhs,
        ok.0,
        ok.1,
        tiling,
        DType::F16,
        &[2, n],
        invalid,
    );
    for (rows_per_tile, rows_per_block) in [(0, 8), (17, 8), (8, 0), (8, 9)] {
        let t = GatherTiling {
            sorted: true,
            rows_per_tile,
            rows_per_block,
        };
        let what = format!("rows per tile {rows_per_tile}, per block {rows_per_block}");
        check(&what, &lhs, ok.0, ok.1, t, f32_, &[2, n], invalid);
    }
    let u32_lhs = Tensor::from_slice(&dev, &[2, c], &[1u32; 128]).unwrap();
    check(
        "u32 lhs",
        &u32_lhs,
        ok.0,
        ok.1,
        tiling,
        f32_,
        &[2, n],
        invalid,
    );

    // The decode form: K per token, K ≤ E.
    let mut out = poisoned(&dev, DType::F32, &[10, n]);
    kiln_tests::assert_invalid(
        ops::gather_qmm_topk(
            &dev,
            &lhs,
            &[0, 1, 2, 3, 0, 1, 2, 3, 0, 1],
            &experts,
            &mut out,
        ),
        "K = 5 > E = 4",
    );
    kiln_tests::assert_invalid(
        ops::gather_qmm_topk(&dev, &lhs, &[0, 1, 2], &experts, &mut out),
        "3 ids for 2 tokens",
    );
    assert!(untouched(&out), "a refused decode call wrote out");

    // Weights gather_qmm does not read, or that are not E experts of equal height.
    let upload = |w: &AffineTensor| QuantizedWeight::upload(&dev, w).unwrap();
    for (what, experts, w) in [
        ("2-bit experts", 4, projection(6, 4, n, c, 2)),
        ("3-bit experts", 4, projection(6, 4, n, c, 3)),
        (
            "rows not E experts of equal height",
            3,
            projection(6, 4, n, c, 4),
        ),
        ("no experts", 0, projection(6, 4, n, c, 4)),
    ] {
        kiln_tests::assert_invalid(StackedExperts::new(experts, upload(&w)), what);
    }

    // The unsort: a permutation of the rows, of one dtype and shape.
    let rows = Tensor::from_f32(&dev, DType::F32, &[3, 2], &[1.0; 6]).unwrap();
    for (what, order, shape, dtype) in [
        (
            "order not a permutation",
            &[0u32, 0, 1][..],
            [3, 2],
            DType::F32,
        ),
        ("order past S", &[0, 3, 1][..], [3, 2], DType::F32),
        ("order of other length", &[0, 1][..], [3, 2], DType::F32),
        ("out of another shape", &[0, 1, 2][..], [2, 3], DType::F32),
        ("out of another dtype", &[0, 1, 2][..], [3, 2], DType::F16),
    ] {
        let mut out = poisoned(&dev, dtype, &shape);
        match ops::scatter_unsort(&rows, order, &mut out) {
            Err(e) if e.is_invalid_input() => eprintln!("{what}: refused: {e}"),
            other => panic!("{what}: expected a refusal, got {other:?}"),
        }
        assert!(untouched(&out), "{what}: a refused unsort wrote out");
    }
}

#[test]
fn gather_sort_is_a_stable_sort_by_expert() {
    let ids = [3u32, 1, 3, 0, 1, 3];
    let (order, sorted) = ops::gather_sort(&ids);
    assert_eq!(order, [3, 1, 4, 0, 2, 5]);
    assert_eq!(sorted, [0, 1, 1, 3, 3, 3]);
    // Every element type's rows go back to slot order (small integers: exact in each).
    let dev = Device::cpu();
    let values: Vec<f32> = (0..12).map(|v| v as f32).collect();
    for dtype in [DType::F32, DType::F16, DType::Bf16] {
        let rows = Tensor::from_f32(&dev, dtype, &[6, 2], &values).unwrap();
        let mut out = poisoned(&dev, dtype, &[6, 2]);
        ops::scatter_unsort(&rows, &order, &mut out).unwrap();
        let got = out.to_f32_vec().unwrap();
        for (i, &slot) in order.iter().enumerate() {
            let slot = slot as usize;
            assert_eq!(got[slot * 2..slot * 2 + 2], values[i * 2..i * 2 + 2]);
        }
    }
}
