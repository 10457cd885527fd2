//! Bad input is a typed error before any launch (`PortError::is_invalid_input`: dtype, shape,
//! parameter) — never a panic or a wrong answer; dtype and shape refusals are structured.

use kiln::launch::{default_params, launch, set_param, Arg, Mode};
use kiln::{ops, DType, Device, KernelId, PortError, Tensor};

fn t(dev: &Device, dtype: DType, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    if dtype.is_float() {
        Tensor::from_f32(dev, dtype, shape, &vec![1.0; n]).unwrap()
    } else {
        Tensor::zeros(dev, dtype, shape).unwrap()
    }
}

fn invalid(r: Result<kiln::Ran, PortError>, needle: &str) {
    match r {
        Err(e) if e.is_invalid_input() => {
            let msg = e.to_string();
            assert!(
                msg.starts_with("[fused_add_rms_norm]") && msg.contains(needle),
                "message `{msg}` should name the kernel and mention `{needle}`"
            )
        }
        other => panic!("expected an invalid-input error mentioning `{needle}`, got {other:?}"),
    }
}

#[test]
fn dtype_and_shape_refusals_are_structured() {
    let dev = Device::cpu();
    let f = [DType::F32; 4];
    let mixed = [DType::F32, DType::F32, DType::Bf16, DType::F32];
    assert_eq!(
        norm(&dev, &[2, 8], &[2, 8], &[8], &[2, 8], mixed, 1e-6),
        Err(PortError::DtypeMismatch {
            kernel: "fused_add_rms_norm",
            buffer: "weight",
            expected: DType::F32,
            got: DType::Bf16,
        })
    );
    assert!(matches!(
        norm(&dev, &[2, 8], &[2, 8], &[8], &[2, 8], [DType::U32; 4], 1e-6),
        Err(PortError::UnsupportedDtype {
            kernel: "fused_add_rms_norm",
            got: DType::U32,
            ..
        })
    ));
    assert!(matches!(
        norm(&dev, &[2, 8], &[2, 8], &[7], &[2, 8], f, 1e-6),
        Err(PortError::Shape {
            kernel: "fused_add_rms_norm",
            error: kiln::math::ShapeError::Mismatch {
                what: "weight length",
                got: 7,
                want: 8
            }
        })
    ));
    let x = t(&dev, DType::F32, &[2, 8]);
    assert_eq!(
        x.reshape(&[3, 5]).map(|_| ()),
        Err(PortError::ShapeMismatch {
            kernel: "Tensor::reshape",
            buffer: "shape",
            expected: vec![2, 8],
            got: vec![3, 5],
        })
    );
}

#[test]
fn an_output_overlapping_another_buffer_is_refused() {
    let dev = Device::cpu();
    let whole = t(&dev, DType::F32, &[4, 8]);
    let (x, w) = (whole.view(0, &[2, 8]).unwrap(), t(&dev, DType::F32, &[8]));
    let mut r = t(&dev, DType::F32, &[2, 8]);
    // `out` covers rows 1..3 of the allocation `x` reads rows 0..2 of.
    let mut out = whole.view(8, &[2, 8]).unwrap();
    invalid(
        ops::fused_add_rms_norm(&dev, &x, &mut r, &w, 1e-6, &mut out),
        "overlaps",
    );
    // Disjoint views of one allocation are fine.
    let mut out = whole.view(16, &[2, 8]).unwrap();
    ops::fused_add_rms_norm(&dev, &x, &mut r, &w, 1e-6, &mut out).unwrap();
}

fn norm(
    dev: &Device,
    x: &[usize],
    r: &[usize],
    w: &[usize],
    o: &[usize],
    dts: [DType; 4],
    eps: f32,
) -> Result<kiln::Ran, PortError> {
    let (x, mut r, w, mut o) = (
        t(dev, dts[0], x),
        t(dev, dts[1], r),
        t(dev, dts[2], w),
        t(dev, dts[3], o),
    );
    ops::fused_add_rms_norm(dev, &x, &mut r, &w, eps, &mut o)
}

#[test]
fn add_rms_norm_refuses_bad_shapes_dtypes_and_params_on_every_host_backend() {
    const F: [DType; 4] = [DType::F32; 4];
    for dev in [Device::cpu(), Device::sim(8).unwrap()] {
        invalid(
            norm(&dev, &[2, 8], &[2, 7], &[8], &[2, 8], F, 1e-6),
            "residual",
        );
        invalid(
            norm(&dev, &[2, 8], &[2, 8], &[7], &[2, 8], F, 1e-6),
            "weight length",
        );
        invalid(
            norm(&dev, &[2, 8], &[2, 8], &[2, 4], &[2, 8], F, 1e-6),
            "weight",
        );
        invalid(norm(&dev, &[2, 8], &[2, 8], &[8], &[16], F, 1e-6), "out");
        invalid(norm(&dev, &[2, 0], &[2, 0], &[0], &[2, 0], F, 1e-6), "dim");
        invalid(norm(&dev, &[0, 8], &[0, 8], &[8], &[0, 8], F, 1e-6), "rows");
        invalid(norm(&dev, &[], &[], &[1], &[], F, 1e-6), "axis");
        invalid(
            norm(
                &dev,
                &[2, 8],
                &[2, 8],
                &[8],
                &[2, 8],
                [DType::F32, DType::F32, DType::Bf16, DType::F32],
                1e-6,
            ),
            "bf16",
        );
        invalid(
            norm(&dev, &[2, 8], &[2, 8], &[8], &[2, 8], [DType::U32; 4], 1e-6),
            "not supported",
        );
        invalid(norm(&dev, &[2, 8], &[2, 8], &[8], &[2, 8], F, -1.0), "eps");
        invalid(
            norm(&dev, &[2, 8], &[2, 8], &[8], &[2, 8], F, f32::NAN),
            "eps",
        );
    }
}

#[test]
fn the_generic_launch_refuses_wrong_arity_access_and_params() {
    let dev = Device::cpu();
    let k = KernelId::FusedAddRmsNorm;
    let (x, mut r, w, mut o) = (
        t(&dev, DType::F32, &[2, 8]),
        t(&dev, DType::F32, &[2, 8]),
        t(&dev, DType::F32, &[8]),
        t(&dev, DType::F32, &[2, 8]),
    );
    let p = default_params(k);
    let r1 = launch(
        &dev,
        k,
        &p,
        &mut [Arg::In(&x), Arg::Out(&mut r), Arg::In(&w)],
        Mode::Auto,
    );
    invalid(r1, "3 tensors");
    // `residual` is written by the kernel: passing it as an input is refused.
    let r2 = launch(
        &dev,
        k,
        &p,
        &mut [Arg::In(&x), Arg::In(&x), Arg::In(&w), Arg::Out(&mut o)],
        Mode::Auto,
    );
    invalid(r2, "residual");
    let r3 = launch(
        &dev,
        k,
        &p[..1],
        &mut [Arg::In(&x), Arg::Out(&mut r), Arg::In(&w), Arg::Out(&mut o)],
        Mode::Auto,
    );
    invalid(r3, "param words");
    let mut p = default_params(k);
    assert!(
        matches!(
            set_param(k, &mut p, "dim", "4"),
            Err(PortError::InvalidShape { .. })
        ),
        "shape params are bound, not set"
    );
    assert!(matches!(
        set_param(k, &mut p, "nope", "4"),
        Err(PortError::InvalidShape { .. })
    ));
    assert!(matches!(
        set_param(k, &mut p, "eps", "abc"),
        Err(PortError::InvalidShape { .. })
    ));
    set_param(k, &mut p, "eps", "1e-5").unwrap();
}
