//! The cuda backend: its port table comes from the embedded PTX, and a trapping kernel is a
//! typed error that leaves the process alive.

use kiln::launch::{default_params, launch_with_short_views, Arg};
use kiln::ports::{ports, Slot};
use kiln::{Backend, DType, DeviceError, KernelId, PortError, Tensor};

#[test]
fn every_kernel_and_dtype_has_a_cuda_port_built_for_warp_32() {
    for &k in KernelId::ALL {
        let Slot::Present(p) = &ports(k).cuda else {
            panic!("{}: no cuda ports (run `cargo xtask kernels`)", k.name());
        };
        for &dt in k.dtypes() {
            let port = p
                .iter()
                .find(|p| p.dtype == dt)
                .unwrap_or_else(|| panic!("{} {}: no cuda port", k.name(), dt.name()));
            assert_eq!(port.wave, Some(32), "{} {}", k.name(), dt.name());
        }
    }
}

/// A body that reads past a view traps: KernelFault on every backend, then (on cuda, whose
/// context a trap destroys) a typed error on the next call instead of a crash or a hang.
#[test]
fn an_out_of_bounds_view_access_is_a_kernel_fault() {
    for dev in kiln_tests::test_devices() {
        let (rows, dim) = (2, 64);
        let x = Tensor::from_f32(&dev, DType::F32, &[rows, dim], &vec![0.5; rows * dim]).unwrap();
        let mut r =
            Tensor::from_f32(&dev, DType::F32, &[rows, dim], &vec![0.25; rows * dim]).unwrap();
        let w = Tensor::from_f32(&dev, DType::F32, &[dim], &vec![1.0; dim]).unwrap();
        let mut out = Tensor::zeros(&dev, DType::F32, &[rows, dim]).unwrap();
        let k = KernelId::FusedAddRmsNorm;
        let mut args = [
            Arg::In(&x),
            Arg::Out(&mut r),
            Arg::In(&w),
            Arg::Out(&mut out),
        ];
        // `x` shortened to one row: the second block reads past its view.
        let err = launch_with_short_views(
            &dev,
            k,
            &default_params(k),
            &mut args,
            &[dim, rows * dim, dim, rows * dim],
        )
        .expect_err("reading past a view must fail");
        eprintln!("{} wave {}: {err}", dev.backend(), dev.wave());
        assert!(
            matches!(err, PortError::Device(DeviceError::KernelFault { .. })),
            "{}: {err:?}",
            dev.backend()
        );
        if dev.backend() == Backend::Cuda {
            let again = Tensor::zeros(&dev, DType::F32, &[4]).map(|_| ());
            let err = again.expect_err("the context is lost after a trap");
            eprintln!("cuda after the fault: {err}");
            assert!(err.to_string().contains("unusable"), "{err}");
        }
    }
}
