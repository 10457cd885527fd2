//! The wgpu backend on the adapter found here (Mesa lavapipe in CI): every module variant
//! passes its first parity case, the wave is the subgroup size, grids wider than a dispatch
//! dimension fold, and an out-of-bounds view access is a typed kernel fault.

use kiln::gpu::{GpuBuf, GpuLaunch};
use kiln::parity::kernel_dtypes;
use kiln::{ports, select_port, DType, Device, DeviceError, KernelId, Mode, PortError, Tensor};
use std::collections::HashSet;

/// Every kernel × dtype pair the parity test runs on `dev`.
fn pairs(dev: &Device) -> Vec<(KernelId, DType)> {
    kernel_dtypes(&kiln_tests::parity_kernels(dev))
}

/// The module file `dev` runs `k` × `dt` from.
fn module_file(dev: &Device, k: KernelId, dt: DType) -> Option<&'static str> {
    dev.gpu().and_then(|g| g.module_file(k, dt))
}

#[test]
fn every_module_variant_passes_parity() {
    let Some(default) = kiln_tests::wgpu_device() else {
        return;
    };
    let seed = kiln_tests::seed("wgpu variants");
    // The parity test runs the default device's modules. A variant runs only the pairs whose
    // module no device before it ran: f32 and bf16 have no f16-storage form, so without f16
    // storage they repeat the modules of the variant with it.
    let mut ran: HashSet<&'static str> = pairs(&default)
        .into_iter()
        .filter_map(|(k, dt)| module_file(&default, k, dt))
        .collect();
    // Each kernel meets one variant per run, picked by the seed: a variant changes how
    // constructs translate, not which kernel they are in, and every module is another LLVM
    // build on lavapipe (all three variants' modules took ~1400 s of CI's two cores). Over
    // runs every kernel meets every variant; the seed names the turn to replay.
    let variants = [(true, false), (false, true), (false, false)];
    let turn = |k: KernelId, v: usize| {
        let index = KernelId::ALL.iter().position(|&x| x == k).unwrap_or(0);
        (index + v + (seed % variants.len() as u64) as usize).is_multiple_of(variants.len())
    };
    for (v, (subgroups, f16)) in variants.into_iter().enumerate() {
        let open = || {
            kiln::wgpu::open_with(kiln::wgpu::Options {
                subgroups,
                f16,
                ..kiln::wgpu::Options::ALL
            })
        };
        let dev = open().expect("wgpu opens");
        let all = pairs(&dev);
        let new: Vec<(KernelId, DType)> = all
            .iter()
            .copied()
            .filter(|&(k, _)| turn(k, v))
            .filter(|&(k, dt)| module_file(&dev, k, dt).is_none_or(|f| ran.insert(f)))
            .collect();
        eprintln!(
            "variant subgroups={subgroups} f16={f16}: {} (wave {}): {} of {} kernel × dtype \
             pairs run a module not run before, in this run's turn",
            dev.name(),
            dev.wave(),
            new.len(),
            all.len()
        );
        assert!(!new.is_empty(), "a variant that runs no module of its own");
        // A variant changes the translation, not the shapes: its first case covers it, and
        // each further case's block is another LLVM build on lavapipe (a cold run of the first
        // and last cases took 978 s here).
        let outcomes =
            kiln_tests::run_pairs_spread(&kiln_tests::workers(&dev, open), &new, seed, &|c, _| {
                c == 0
            });
        assert!(!outcomes.is_empty());
        for o in &outcomes {
            assert!(
                o.pass,
                "{} {} subgroups={subgroups} f16={f16} case {} seed {}: {}",
                o.kernel.name(),
                o.dtype.name(),
                o.case,
                o.seed,
                o.failures.join("; ")
            );
        }
    }
}

#[test]
fn the_wave_is_the_adapters_subgroup_size() {
    let Some(dev) = kiln_tests::wgpu_device() else {
        return;
    };
    eprintln!("wgpu: {} wave {}", dev.name(), dev.wave());
    if dev.name().contains("llvmpipe") {
        assert_eq!(dev.wave(), 8, "lavapipe runs subgroups of 8");
    }
    assert!(dev.wave().is_power_of_two() && dev.wave() >= 4);
}

#[test]
fn grids_wider_than_a_dispatch_dimension_fold() {
    let Some(dev) = kiln_tests::wgpu_device() else {
        return;
    };
    let seed = kiln_tests::seed("wgpu fold");
    // 70 000 rows: one block per row, more than 65 535 workgroups in x.
    let (rows, dim) = (70_000usize, 8usize);
    let mut rng = kiln::rng::Rng::new(seed);
    let x: Vec<f32> = (0..rows * dim).map(|_| rng.normal() as f32).collect();
    let r: Vec<f32> = (0..rows * dim).map(|_| rng.normal() as f32).collect();
    let w: Vec<f32> = (0..dim).map(|_| rng.normal() as f32).collect();
    let run = |d: &Device| {
        let xt = Tensor::from_f32(d, DType::F32, &[rows, dim], &x).unwrap();
        let mut rt = Tensor::from_f32(d, DType::F32, &[rows, dim], &r).unwrap();
        let wt = Tensor::from_f32(d, DType::F32, &[dim], &w).unwrap();
        let mut out = Tensor::zeros(d, DType::F32, &[rows, dim]).unwrap();
        let ran = kiln::ops::fused_add_rms_norm(d, &xt, &mut rt, &wt, 1e-6, &mut out).unwrap();
        assert!(!ran.is_fallback(), "{ran:?}");
        (rt.to_f32_vec().unwrap(), out.to_f32_vec().unwrap())
    };
    let (gr, go) = run(&dev);
    let (wr, wo) = run(&Device::cpu());
    assert_eq!(gr, wr, "the residual sum is exact");
    for (i, (g, w)) in go.iter().zip(&wo).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "row {} col {}: {g} vs {w}",
            i / dim,
            i % dim
        );
    }
}

#[test]
fn an_out_of_bounds_view_access_is_a_kernel_fault() {
    let Some(dev) = kiln_tests::wgpu_device() else {
        return;
    };
    let g = dev.gpu().expect("a GPU device").clone();
    let kernel = KernelId::FusedAddRmsNorm;
    let port = select_port(ports::ports(kernel), &dev, DType::F32).unwrap();
    // Params say a row of 64 but every buffer holds 4 elements: the body reads past them.
    let mut params = kiln::launch::default_params(kernel);
    params[0] = 1;
    params[1] = 64;
    let mems: Vec<_> = (0..4).map(|_| g.alloc(16).unwrap()).collect();
    let bufs: Vec<GpuBuf> = mems
        .iter()
        .map(|m| GpuBuf {
            mem: m.as_ref(),
            offset: 0,
            len: 4,
            dtype: DType::F32,
        })
        .collect();
    let block = dev.wave() * 2;
    let l = GpuLaunch {
        kernel,
        dtype: DType::F32,
        params: &params,
        bufs: &bufs,
        grid: [1, 1, 1],
        block,
        shared: kiln::math::shared_bytes_total(block, dev.wave(), 0),
    };
    // The launch only enqueues; the fault surfaces at the synchronisation.
    match g.launch(port, &l).and_then(|()| g.sync()) {
        Err(DeviceError::KernelFault {
            kernel: k,
            backend,
            block,
            detail: message,
            state,
        }) => {
            eprintln!("fault: {message}");
            assert_eq!(k, kernel.name());
            assert_eq!(backend, kiln::Backend::Wgpu);
            assert_eq!(block, Some([0, 0, 0]));
            assert_eq!(state, kiln::DeviceState::Usable);
            assert!(message.contains("out of bounds of `x`"), "{message}");
        }
        other => panic!("expected a kernel fault, got {other:?}"),
    }
    // The device is still usable afterwards.
    let t = Tensor::from_f32(&dev, DType::F32, &[2, 4], &[1.0; 8]).unwrap();
    let mut r = Tensor::from_f32(&dev, DType::F32, &[2, 4], &[0.0; 8]).unwrap();
    let w = Tensor::from_f32(&dev, DType::F32, &[4], &[1.0; 4]).unwrap();
    let mut o = Tensor::zeros(&dev, DType::F32, &[2, 4]).unwrap();
    let res: Result<_, PortError> = kiln::launch(
        &dev,
        kernel,
        &kiln::launch::default_params(kernel),
        &mut [
            kiln::Arg::In(&t),
            kiln::Arg::Out(&mut r),
            kiln::Arg::In(&w),
            kiln::Arg::Out(&mut o),
        ],
        Mode::PortOnly,
    );
    res.unwrap();
    let got = o.to_f32_vec().unwrap();
    assert!(got.iter().all(|v| (v - 1.0).abs() < 1e-5), "{got:?}");
}

#[test]
fn timestamp_queries_time_launches_and_copies() {
    let Some(dev) = kiln_tests::wgpu_device() else {
        return;
    };
    let g = dev.gpu().expect("a GPU device").clone();
    let w = g
        .as_any()
        .downcast_ref::<kiln::wgpu::WgpuDevice>()
        .expect("a wgpu device");
    let kernel = KernelId::FusedAddRmsNorm;
    let (rows, dim) = (256usize, 4096usize);
    let port = select_port(ports::ports(kernel), &dev, DType::F32).unwrap();
    let mut params = kiln::launch::default_params(kernel);
    params[0] = rows as u32;
    params[1] = dim as u32;
    let bytes = rows * dim * 4;
    let mems: Vec<_> = [bytes, bytes, dim * 4, bytes]
        .iter()
        .map(|&n| g.alloc(n).unwrap())
        .collect();
    let lens = [rows * dim, rows * dim, dim, rows * dim];
    let bufs: Vec<GpuBuf> = mems
        .iter()
        .zip(lens)
        .map(|(m, len)| GpuBuf {
            mem: m.as_ref(),
            offset: 0,
            len,
            dtype: DType::F32,
        })
        .collect();
    let block = 256u32.min(g.max_block()) / dev.wave() * dev.wave();
    let l = GpuLaunch {
        kernel,
        dtype: DType::F32,
        params: &params,
        bufs: &bufs,
        grid: [rows as u32, 1, 1],
        block,
        shared: kiln::math::shared_bytes_total(block, dev.wave(), 0),
    };
    // Two launches a pass: the passes between the first and the last carry no timestamps.
    let two = [GpuLaunch { ..l }, l];
    let t = w.time_launches(port, &two, 3).unwrap();
    eprintln!(
        "fused_add_rms_norm f32 {rows}x{dim} on {} ({:?}): {t:?} s per launch",
        dev.name(),
        w.timer()
    );
    assert_eq!(t.len(), 3);
    assert!(t.iter().all(|s| s.is_finite() && *s > 0.0), "{t:?}");
    let copy = w
        .time_copy(mems[3].as_ref(), mems[0].as_ref(), bytes, 3)
        .unwrap();
    eprintln!("copy of {bytes} bytes: {copy:?} s");
    assert!(copy.iter().all(|s| s.is_finite() && *s > 0.0), "{copy:?}");
}

/// `kiln bench` and `kiln bench --paged` on wgpu, one small case each, with the adapter's
/// timer and with the host clock: every row has a positive, finite time.
#[test]
fn the_bench_drivers_run_with_either_timer() {
    let Some(_) = kiln_tests::wgpu_device() else {
        return;
    };
    for timestamps in [true, false] {
        let dev = kiln::wgpu::open_with(kiln::wgpu::Options {
            timestamps,
            ..kiln::wgpu::Options::ALL
        })
        .expect("wgpu opens");
        let g = dev.gpu().expect("a GPU device").clone();
        let timer = g
            .as_any()
            .downcast_ref::<kiln::wgpu::WgpuDevice>()
            .expect("a wgpu device")
            .timer();
        if !timestamps {
            assert_eq!(timer, kiln::wgpu::Timer::HostClock);
            assert!(dev.name().contains("host-timed"), "{}", dev.name());
        }
        // The parity shapes only: the model shapes would take lavapipe minutes.
        let small: Vec<String> = kiln::parity::cases(KernelId::FusedRopeQkAppend, DType::F32)
            .into_iter()
            .map(|c| c.label)
            .collect();
        let opts = kiln_benches::BenchOptions {
            kernels: vec![KernelId::FusedRopeQkAppend],
            dtypes: Vec::new(),
            shapes: small.clone(),
            runs: 2,
            copy_bytes: 1 << 20,
            // A few input sets, so a pass launches the kernel several times.
            max_rotation_bytes: 1 << 20,
            issue: kiln::timing::Issue::Replayed,
        };
        let report = kiln_benches::run(&dev, &opts).unwrap();
        eprint!("{timer:?}\n{}", report.table());
        assert!(report.copy.gbps.is_finite() && report.copy.gbps > 0.0);
        assert_eq!(
            report.rows.len(),
            KernelId::FusedRopeQkAppend
                .dtypes()
                .iter()
                .map(|&dt| {
                    kiln::parity::bench_cases(KernelId::FusedRopeQkAppend, dt)
                        .iter()
                        .filter(|c| small.iter().any(|s| c.label.contains(s.as_str())))
                        .count()
                })
                .sum::<usize>()
        );
        for r in &report.rows {
            assert!(r.copies >= 2, "{r:?}");
            assert!(r.median_us.is_finite() && r.median_us > 0.0, "{r:?}");
        }
        let cfg = kiln_benches::paged::PagedBenchConfig {
            contexts: vec![96],
            batches: vec![2],
            heads_q: 4,
            heads_kv: 2,
            head_dim: 64,
            page_size: 16,
            min_runs: 2,
            min_time: std::time::Duration::ZERO,
            ..Default::default()
        };
        let mut t = kiln::timing::time_copy(&dev, 1 << 20, 3).unwrap();
        t.sort_by(f64::total_cmp);
        let copy = (1 << 20) as f64 / t[1];
        let rows = kiln_benches::paged::run_paged_decode(&dev, &cfg, copy, |_| {}).unwrap();
        assert_eq!(rows.len(), cfg.arms.len());
        for r in &rows {
            eprintln!("{}", r.csv(&cfg));
            assert!(r.seconds.is_finite() && r.seconds > 0.0, "{r:?}");
            assert!(r.pct_of_copy.is_finite() && r.pct_of_copy > 0.0, "{r:?}");
            let planned = r.arm != kiln::paged::DecodeArm::Fallback;
            assert_eq!(r.step_seconds > 0.0, planned, "{r:?}");
        }
    }
}

/// The adapter's stream kernels (`kiln bench --backend wgpu --stream`, the yardstick of its
/// streaming rate) do what their rates claim: the copies copy every byte, the writes write
/// every 16-byte slot or word, the read stores nothing; each with and without wgpu's runtime
/// checks, and a launch of no workgroups is refused. The cpu has none.
#[test]
fn stream_kernels_copy_write_and_read_what_they_time() {
    use kiln::timing::{time_stream, StreamKernel};
    let cpu = Device::cpu();
    assert!(time_stream(&cpu, StreamKernel::Copy, 1 << 16, 4, true, 1)
        .unwrap()
        .is_none());
    let Some(dev) = kiln_tests::wgpu_device() else {
        return;
    };
    let g = dev.gpu().expect("a GPU device").clone();
    // Not a multiple of the grid's stride: the tails of the loops run too.
    let (bytes, groups) = (16 * (3 * 256 * 5 + 7), 3u32);
    let seed = kiln_tests::seed("stream kernels");
    let mut rng = kiln::rng::Rng::new(seed);
    let pattern: Vec<u8> = (0..bytes).map(|_| rng.next_u64() as u8).collect();
    let poison = vec![0xa5u8; bytes];
    for checked in [true, false] {
        for kernel in StreamKernel::ALL {
            let src = g.alloc(bytes).unwrap();
            let dst = g.alloc(bytes).unwrap();
            // The read kernel's sum of zeroed memory never reaches the word that makes it store.
            let input = if kernel == StreamKernel::Read {
                vec![0; bytes]
            } else {
                pattern.clone()
            };
            src.write(0, &input).unwrap();
            dst.write(0, &poison).unwrap();
            let t = g
                .time_stream(
                    kernel,
                    src.as_ref(),
                    dst.as_ref(),
                    bytes,
                    groups,
                    checked,
                    2,
                )
                .expect("wgpu has stream kernels")
                .unwrap();
            assert_eq!(t.len(), 2);
            assert!(
                t.iter().all(|s| s.is_finite() && *s > 0.0),
                "{kernel:?}: {t:?}"
            );
            let mut out = vec![0u8; bytes];
            dst.read(0, &mut out).unwrap();
            match kernel {
                StreamKernel::Copy | StreamKernel::CopyWords => {
                    assert!(out == pattern, "{kernel:?} (checks {checked}, seed {seed})")
                }
                StreamKernel::Read => assert!(out == poison, "the read kernel stored"),
                StreamKernel::Write | StreamKernel::WriteWords => {
                    // Each access's slot holds invocation `i mod stride`'s index in every word.
                    let (size, stride) = (kernel.access_bytes(), groups as usize * 256);
                    for (i, slot) in out.chunks_exact(size).enumerate() {
                        let want = ((i % stride) as u32).to_le_bytes().repeat(size / 4);
                        assert_eq!(slot, want, "{kernel:?} slot {i} (checks {checked})");
                    }
                }
            }
        }
        let src = g.alloc(bytes).unwrap();
        let none = g.time_stream(
            StreamKernel::Copy,
            src.as_ref(),
            src.as_ref(),
            bytes,
            0,
            checked,
            1,
        );
        assert!(matches!(none, Some(Err(_))), "no workgroups: {none:?}");
    }
}
