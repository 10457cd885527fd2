//! What an engine embedding kiln relies on: views over its own memory, sub-views, scratch that
//! is reused so a warm step allocates nothing, a block table kept on the device, typed errors,
//! and `Device::best`.

use kiln::paged::{
    paged_attention_decode_resident, paged_decode_with, BlockTable, DecodeArm, DecodePolicy,
    DeviceBlockTable, KvGeometry, PageTable,
};
use kiln::{ops, Backend, DType, Device, DeviceError, KernelId, PortError, Tensor};

fn seq(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 61) as f32 * scale - 1.0)
        .collect()
}

#[test]
fn an_op_on_the_engines_host_memory_writes_there_and_matches_kilns_own_tensors() {
    for dev in kiln_tests::test_devices() {
        if dev.gpu().is_some() {
            continue; // host memory backs host devices only (the GPU case is the example's)
        }
        let (rows, dim) = (3, 40);
        // The engine's arena: x, residual, weight, out back to back in one Vec.
        let mut arena = vec![f32::NAN; 3 * rows * dim + dim];
        arena[..rows * dim].copy_from_slice(&seq(rows * dim, 0.03));
        arena[rows * dim..2 * rows * dim].copy_from_slice(&seq(rows * dim, 0.01));
        arena[2 * rows * dim..2 * rows * dim + dim].copy_from_slice(&seq(dim, 0.02));
        // SAFETY: `arena` outlives every view below and nothing else touches it meanwhile.
        let whole = unsafe {
            Tensor::from_host_ptr(
                &dev,
                arena.as_mut_ptr() as *mut u8,
                DType::F32,
                &[arena.len()],
            )
        }
        .unwrap();
        let x = whole.view(0, &[rows, dim]).unwrap();
        let mut residual = whole.view(rows * dim, &[rows, dim]).unwrap();
        let w = whole.view(2 * rows * dim, &[dim]).unwrap();
        let mut out = whole.view(2 * rows * dim + dim, &[rows, dim]).unwrap();
        ops::fused_add_rms_norm(&dev, &x, &mut residual, &w, 1e-5, &mut out).unwrap();

        let own = |v: &[f32], shape: &[usize]| Tensor::from_slice(&dev, shape, v).unwrap();
        let x2 = own(&seq(rows * dim, 0.03), &[rows, dim]);
        let mut r2 = own(&seq(rows * dim, 0.01), &[rows, dim]);
        let w2 = own(&seq(dim, 0.02), &[dim]);
        let mut o2 = Tensor::zeros(&dev, DType::F32, &[rows, dim]).unwrap();
        ops::fused_add_rms_norm(&dev, &x2, &mut r2, &w2, 1e-5, &mut o2).unwrap();
        drop((x, residual, w, out, whole));
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&arena[2 * rows * dim + dim..]),
            bits(&o2.to_vec::<f32>().unwrap()),
            "{}",
            dev.name()
        );
        assert_eq!(
            bits(&arena[rows * dim..2 * rows * dim]),
            bits(&r2.to_vec::<f32>().unwrap())
        );
    }
}

#[test]
fn views_are_bounds_checked_and_share_their_bytes() {
    let dev = Device::cpu();
    let t = Tensor::from_slice(&dev, &[4, 4], &seq(16, 1.0)).unwrap();
    assert!(t.view(12, &[2, 4]).is_err(), "past the end");
    assert!(t.view(usize::MAX, &[1]).is_err(), "offset overflow");
    assert!(t.view_bytes(2, DType::F32, &[1]).is_err(), "misaligned");
    let mut row = t.view(4, &[4]).unwrap();
    row.write(&[9.0f32; 4]).unwrap();
    assert_eq!(&t.to_vec::<f32>().unwrap()[4..8], &[9.0; 4]);
    assert!(row.overlaps(&t) && !row.overlaps(&t.view(8, &[4]).unwrap()));
    let words = t.view_bytes(16, DType::U32, &[4]).unwrap();
    assert_eq!(words.to_vec::<u32>().unwrap(), vec![9.0f32.to_bits(); 4]);
    // SAFETY: a null pointer is refused before anything is read.
    let null = unsafe { Tensor::from_host_ptr(&dev, std::ptr::null_mut(), DType::F32, &[4]) };
    assert!(null.is_err());
}

fn pool_batch(dev: &Device) -> (Tensor, Tensor, Tensor, PageTable) {
    let (b, hq, hkv, d, pages, ps) = (2, 4, 2, 32, 8, 8);
    let q = Tensor::from_slice(dev, &[b, hq, d], &seq(b * hq * d, 0.01)).unwrap();
    let n = pages * ps * hkv * d;
    let k = Tensor::from_slice(dev, &[pages, ps, hkv, d], &seq(n, 0.02)).unwrap();
    let v = Tensor::from_slice(dev, &[pages, ps, hkv, d], &seq(n, 0.03)).unwrap();
    let table = PageTable {
        indices: vec![3, 0, 5, 6, 1, 2, 7],
        indptr: vec![0, 3, 7],
        last_page_len: vec![5, 8],
        first_page_offset: vec![2, 0],
    };
    (q, k, v, table)
}

#[test]
fn a_warm_decode_step_allocates_nothing() {
    for dev in kiln_tests::test_devices() {
        let (q, k, v, table) = pool_batch(&dev);
        let logits = Tensor::from_slice(&dev, &[2, 3000], &seq(6000, 0.001)).unwrap();
        let mut out = Tensor::zeros(&dev, DType::F32, q.shape()).unwrap();
        let mut tokens = Tensor::zeros(&dev, DType::U32, &[2]).unwrap();
        let geo = KvGeometry::of(KernelId::PagedAttentionDecode, &q, &k, &v).unwrap();
        let policy = DecodePolicy {
            pages_per_chunk: Some(1),
            ..DecodePolicy::for_device(&dev, &geo)
        };
        let mut step = |dev: &Device| {
            for arm in [DecodeArm::V1, DecodeArm::V2] {
                paged_decode_with(dev, &q, &k, &v, &table, 0.0, &mut out, &policy, Some(arm))
                    .unwrap();
            }
            ops::gumbel_max_sample_split(dev, &logits, [1, 2], 1.0, 3, &mut tokens).unwrap();
            dev.sync().unwrap();
        };
        step(&dev);
        let (allocs, scratch) = (dev.allocations(), dev.scratch_bytes());
        assert!(scratch > 0, "{}: the ops took no scratch", dev.name());
        for _ in 0..3 {
            step(&dev);
        }
        assert_eq!(dev.allocations(), allocs, "{}", dev.name());
        assert_eq!(dev.scratch_bytes(), scratch);
    }
}

#[test]
fn a_block_table_on_the_device_gives_the_host_tables_answer_and_is_checked_when_written() {
    for dev in kiln_tests::test_devices() {
        let (q, k, v, table) = pool_batch(&dev);
        let spans = table.validate(2, 8, 8).unwrap();
        let host: BlockTable = table.to_block_table(&spans);
        let mut want = Tensor::zeros(&dev, DType::F32, q.shape()).unwrap();
        ops::paged_attention_decode(&dev, &q, &k, &v, &host, 0.0, &mut want).unwrap();

        let mut resident = DeviceBlockTable::new(&dev, 2, 16).unwrap();
        let mut got = Tensor::zeros(&dev, DType::F32, q.shape()).unwrap();
        let unwritten = paged_attention_decode_resident(&dev, &q, &k, &v, &resident, 0.0, &mut got);
        assert!(
            unwritten.is_err_and(|e| e.is_invalid_input()),
            "{}",
            dev.name()
        );
        resident.write(&host, &k).unwrap();
        let before = dev.allocations();
        paged_attention_decode_resident(&dev, &q, &k, &v, &resident, 0.0, &mut got).unwrap();
        assert_eq!(dev.allocations(), before);
        assert_eq!(
            got.to_bytes().unwrap(),
            want.to_bytes().unwrap(),
            "{}",
            dev.name()
        );

        let mut bad = host.clone();
        bad.rows[0] = 8; // past the pool's 8 rows
        assert!(resident
            .write(&bad, &k)
            .is_err_and(|e| e.is_invalid_input()));
        // A refused table is never written: the last good one is still there.
        paged_attention_decode_resident(&dev, &q, &k, &v, &resident, 0.0, &mut got).unwrap();
        assert_eq!(got.to_bytes().unwrap(), want.to_bytes().unwrap());
    }
}

#[test]
fn an_absent_backend_is_device_unavailable_and_best_picks_a_present_one() {
    for b in [Backend::Cuda, Backend::Rocm] {
        if let Some(why) = kiln::unavailable_reason(b) {
            match Device::open(b) {
                Err(PortError::Device(DeviceError::DeviceUnavailable { backend, reason })) => {
                    assert_eq!(backend, b);
                    assert_eq!(reason, why);
                }
                other => panic!("{b}: expected DeviceUnavailable, got {other:?}"),
            }
        }
    }
    let best = Device::best();
    eprintln!("best: {}", best.name());
    assert!(kiln::unavailable_reason(best.backend()).is_none());
    if kiln::unavailable_reason(Backend::Cuda).is_none() {
        assert_eq!(best.backend(), Backend::Cuda);
    }
}
