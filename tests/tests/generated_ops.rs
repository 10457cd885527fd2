//! The op launchers generated from the kernel list (`kiln::ops::kernel`) bind buffers by the
//! list's names in the list's order: an input passed where an output goes does not compile, and
//! two inputs swapped at a call are refused by the kernel's shape binding before any launch.

use kiln::math::kernels::fused_add3_layer_norm::Add3LayerNormParams;
use kiln::math::kernels::fused_add_rms_norm::AddRmsNormParams;
use kiln::{ops, DType, Device, PortError, Tensor};

fn filled(dev: &Device, shape: &[usize], v: f32) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_slice(dev, shape, &vec![v; n]).unwrap()
}

fn refused(r: Result<kiln::Ran, PortError>, what: &str) {
    match r {
        Err(e) if e.is_invalid_input() => eprintln!("{what}: refused: {e}"),
        other => panic!("{what}: expected an invalid-input refusal, got {other:?}"),
    }
}

#[test]
fn swapped_inputs_of_the_add_rms_norm_launcher_are_refused() {
    let dev = Device::cpu();
    let p = AddRmsNormParams {
        eps: 1e-5,
        ..Default::default()
    };
    let (x, weight) = (filled(&dev, &[2, 8], 1.0), filled(&dev, &[8], 1.0));
    let mut residual = filled(&dev, &[2, 8], 0.5);
    let mut out = filled(&dev, &[2, 8], 0.0);
    // In list order the call runs and writes the normalized rows.
    ops::kernel::fused_add_rms_norm(&dev, &p, &x, &mut residual, &weight, &mut out).unwrap();
    assert!(out
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .all(|v| (v - 1.0).abs() < 1e-5));
    // `weight` and `x` swapped: both are inputs, so it compiles; the binding refuses it.
    refused(
        ops::kernel::fused_add_rms_norm(&dev, &p, &weight, &mut residual, &x, &mut out),
        "x <-> weight",
    );
}

#[test]
fn swapped_inputs_of_the_add3_layer_norm_launcher_are_refused() {
    let dev = Device::cpu();
    let p = Add3LayerNormParams {
        eps: 1e-5,
        ..Default::default()
    };
    let rows = |v| filled(&dev, &[3, 16], v);
    let (attn, mlp, residual) = (rows(0.1), rows(0.2), rows(0.3));
    let (weight, bias) = (filled(&dev, &[16], 1.0), filled(&dev, &[16], 0.0));
    let (mut x_out, mut h_out) = (rows(0.0), rows(0.0));
    ops::kernel::fused_add3_layer_norm(
        &dev, &p, &attn, &mlp, &residual, &weight, &bias, &mut x_out, &mut h_out,
    )
    .unwrap();
    assert!(x_out
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .all(|v| (v - 0.6).abs() < 1e-6));
    // `weight` passed as `mlp` and `mlp` as `weight`.
    refused(
        ops::kernel::fused_add3_layer_norm(
            &dev, &p, &attn, &weight, &residual, &mlp, &bias, &mut x_out, &mut h_out,
        ),
        "mlp <-> weight",
    );
}

#[test]
fn a_launcher_refuses_a_tensor_of_another_dtype() {
    let dev = Device::cpu();
    let p = AddRmsNormParams {
        eps: 1e-5,
        ..Default::default()
    };
    let x = filled(&dev, &[2, 8], 1.0);
    let weight = Tensor::zeros(&dev, DType::Bf16, &[8]).unwrap();
    let mut residual = filled(&dev, &[2, 8], 0.5);
    let mut out = filled(&dev, &[2, 8], 0.0);
    refused(
        ops::kernel::fused_add_rms_norm(&dev, &p, &x, &mut residual, &weight, &mut out),
        "bf16 weight with f32 rows",
    );
}
