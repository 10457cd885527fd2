//! The fallback: forced by `KILN_FORCE_FALLBACK`, requested by `Mode::FallbackOnly`, taken on a
//! refusal; and the refusal kinds of `select_port`. One test per binary touches the environment.

use kiln::launch::{default_params, launch, Arg, FallbackReason, Mode, Path};
use kiln::ports::{ports, select_port, KernelPorts, Slot};
use kiln::{ops, Backend, DType, Device, KernelId, PortError, Tensor};

fn inputs(dev: &Device, dtype: DType) -> (Tensor, Tensor, Tensor, Tensor) {
    let mut rng = kiln::rng::Rng::new(kiln_tests::seed("fallback"));
    let mut v = |n: usize| (0..n).map(|_| rng.normal() as f32).collect::<Vec<_>>();
    (
        Tensor::from_f32(dev, dtype, &[3, 96], &v(288)).unwrap(),
        Tensor::from_f32(dev, dtype, &[3, 96], &v(288)).unwrap(),
        Tensor::from_f32(dev, dtype, &[96], &v(96)).unwrap(),
        Tensor::zeros(dev, dtype, &[3, 96]).unwrap(),
    )
}

#[test]
fn forced_and_requested_fallbacks_run_the_reference_chain_and_say_so() {
    let dev = Device::cpu();
    let k = KernelId::FusedAddRmsNorm;
    let (x, mut r, w, mut o) = inputs(&dev, DType::F32);
    let (mut r2, mut o2) = (
        Tensor::from_bytes(&dev, DType::F32, &[3, 96], &r.to_bytes().unwrap()).unwrap(),
        Tensor::zeros(&dev, DType::F32, &[3, 96]).unwrap(),
    );

    let ran = ops::fused_add_rms_norm(&dev, &x, &mut r, &w, 1e-6, &mut o).unwrap();
    assert_eq!(
        ran.path,
        Path::Port {
            backend: Backend::Cpu,
            wave: 1
        }
    );
    let ran = launch(
        &dev,
        k,
        &default_params(k),
        &mut [
            Arg::In(&x),
            Arg::Out(&mut r2),
            Arg::In(&w),
            Arg::Out(&mut o2),
        ],
        Mode::FallbackOnly,
    )
    .unwrap();
    assert_eq!(ran.path, Path::Fallback(FallbackReason::Requested));
    // The port and the reference chain agree (f32: residual exactly, normed to the spec bound).
    assert_eq!(r.to_vec::<f32>().unwrap(), r2.to_vec::<f32>().unwrap());
    let (a, b) = (o.to_vec::<f32>().unwrap(), o2.to_vec::<f32>().unwrap());
    let (nrms, nmax) = kiln::parity::normalized_deviation(
        &a.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        &b.iter().map(|&v| v as f64).collect::<Vec<_>>(),
    );
    assert!(nrms < 1e-6 && nmax < 1e-5, "nrms {nrms} nmax {nmax}");

    // SAFETY: the only test in this binary that reads or writes the environment.
    unsafe {
        std::env::set_var(
            "KILN_FORCE_FALLBACK",
            "some_other_kernel, fused_add_rms_norm",
        )
    };
    let ran = ops::fused_add_rms_norm(&dev, &x, &mut r, &w, 1e-6, &mut o).unwrap();
    assert_eq!(ran.path, Path::Fallback(FallbackReason::Forced));
    unsafe { std::env::set_var("KILN_FORCE_FALLBACK", "all") };
    assert!(ops::fused_add_rms_norm(&dev, &x, &mut r, &w, 1e-6, &mut o)
        .unwrap()
        .is_fallback());
    unsafe { std::env::remove_var("KILN_FORCE_FALLBACK") };
    assert!(!ops::fused_add_rms_norm(&dev, &x, &mut r, &w, 1e-6, &mut o)
        .unwrap()
        .is_fallback());
}

#[test]
fn select_port_says_why_there_is_no_port() {
    let dev = Device::cpu();
    let absent = KernelPorts {
        kernel: KernelId::FusedAddRmsNorm,
        cpu: Slot::Absent("test: no cpu port".into()),
        sim: Slot::Absent("test".into()),
        cuda: Slot::Absent("test".into()),
        rocm: Slot::Absent("test".into()),
        wgpu: Slot::Absent("test".into()),
    };
    match select_port(&absent, &dev, DType::F32) {
        Err(
            e @ PortError::NoPort {
                backend: Backend::Cpu,
                ..
            },
        ) => {
            assert!(e.is_fallback());
            assert!(e.to_string().contains("test: no cpu port"));
        }
        other => panic!("expected NoPort, got {other:?}"),
    }
    // The real table: cpu and sim ports for every dtype the list names; the cpu port is wave 1.
    for &k in KernelId::ALL {
        for &d in k.dtypes() {
            let p = select_port(ports(k), &dev, d).unwrap();
            assert_eq!(
                (p.kernel, p.dtype, p.backend, p.wave),
                (k, d, Backend::Cpu, Some(1))
            );
            for w in [1, 4, 8, 32, 64] {
                assert!(kiln::has_port(ports(k), &Device::sim(w).unwrap(), d));
            }
        }
        // Every GPU slot is either present or says why not.
        for b in [Backend::Cuda, Backend::Rocm, Backend::Wgpu] {
            if let Slot::Absent(why) = ports(k).slot(b) {
                assert!(!why.is_empty());
            }
        }
    }
}
