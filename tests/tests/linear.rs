//! `linear` through its generated launcher: bad shapes are typed invalid-input errors found
//! before any launch (the output is left untouched), and the body is correct for block sizes
//! other than the preferred one (fewer waves than a block's rows, waves that own no row).

use kiln::{ops, DType, Device, SimConfig, Tensor};
use kiln_math::kernels::linear::LinearParams;

/// Sentinel the refused launches must leave in `y`.
const UNTOUCHED: f32 = 7.0;

fn filled(dev: &Device, shape: &[usize], v: f32) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f32(dev, DType::F32, shape, &vec![v; n]).unwrap()
}

fn params(has_bias: u32) -> LinearParams {
    LinearParams {
        has_bias,
        ..LinearParams::default()
    }
}

/// Launches `linear` with these shapes and expects an `InvalidShape` refusal with `y` intact.
fn refused(what: &str, p: &LinearParams, x: &[usize], w: &[usize], bias: &[usize], y: &[usize]) {
    let dev = Device::cpu();
    let (x, w, bias) = (
        filled(&dev, x, 1.0),
        filled(&dev, w, 1.0),
        filled(&dev, bias, 1.0),
    );
    let mut y = filled(&dev, y, UNTOUCHED);
    match ops::kernel::linear(&dev, p, &x, &w, &bias, &mut y) {
        Err(e) if e.is_invalid_input() => {
            assert!(e.to_string().starts_with("[linear]"), "{e}");
            eprintln!("{what}: refused: {e}");
        }
        other => panic!("{what}: expected an invalid-input refusal, got {other:?}"),
    }
    assert!(
        y.to_f32_vec().unwrap().iter().all(|&v| v == UNTOUCHED),
        "{what}: a refused launch wrote y"
    );
}

#[test]
fn linear_refuses_bad_shapes_before_any_launch() {
    let p = params(0);
    refused("M = 9", &p, &[9, 16], &[4, 16], &[1], &[9, 4]);
    refused("M = 0", &p, &[0, 16], &[4, 16], &[1], &[0, 4]);
    refused("K of w 15, of x 16", &p, &[2, 16], &[4, 15], &[1], &[2, 4]);
    refused("K = 0", &p, &[2, 0], &[4, 0], &[1], &[2, 4]);
    refused("N = 0", &p, &[2, 16], &[0, 16], &[1], &[2, 0]);
    refused("y [2, 5] for N = 4", &p, &[2, 16], &[4, 16], &[1], &[2, 5]);
    refused("y [3, 4] for M = 2", &p, &[2, 16], &[4, 16], &[1], &[3, 4]);
    refused("y flat", &p, &[2, 16], &[4, 16], &[1], &[8]);
    refused("x one-dimensional", &p, &[16], &[4, 16], &[1], &[1, 4]);
    refused(
        "w three-dimensional",
        &p,
        &[2, 16],
        &[4, 16, 1],
        &[1],
        &[2, 4],
    );
    refused("empty bias", &p, &[2, 16], &[4, 16], &[0], &[2, 4]);
    let pb = params(1);
    refused(
        "bias [1] with has_bias",
        &pb,
        &[2, 16],
        &[4, 16],
        &[1],
        &[2, 4],
    );
    refused("bias [5] for N = 4", &pb, &[2, 16], &[4, 16], &[5], &[2, 4]);
    refused("bias [1, 4]", &pb, &[2, 16], &[4, 16], &[1, 4], &[2, 4]);
    refused(
        "has_bias = 2",
        &params(2),
        &[2, 16],
        &[4, 16],
        &[4],
        &[2, 4],
    );
}

#[test]
fn linear_refuses_swapped_x_and_w() {
    // x [2, 16] and w [5, 16] swapped: M becomes 5 and N 2, so y [2, 5] no longer fits.
    let dev = Device::cpu();
    let x = filled(&dev, &[2, 16], 1.0);
    let w = filled(&dev, &[5, 16], 1.0);
    let bias = filled(&dev, &[1], 0.0);
    let mut y = filled(&dev, &[2, 5], UNTOUCHED);
    ops::kernel::linear(&dev, &params(0), &x, &w, &bias, &mut y).unwrap();
    assert!(y.to_f32_vec().unwrap().iter().all(|&v| v == 16.0));
    let mut y = filled(&dev, &[2, 5], UNTOUCHED);
    match ops::kernel::linear(&dev, &params(0), &w, &x, &bias, &mut y) {
        Err(e) if e.is_invalid_input() => eprintln!("swapped: refused: {e}"),
        other => panic!("swapped x and w: expected an invalid-input refusal, got {other:?}"),
    }
    assert!(y.to_f32_vec().unwrap().iter().all(|&v| v == UNTOUCHED));
    // Nine rows of x: refused, saying the limit.
    let x9 = filled(&dev, &[9, 16], 1.0);
    let mut y = filled(&dev, &[9, 5], UNTOUCHED);
    match ops::kernel::linear(&dev, &params(0), &x9, &w, &bias, &mut y) {
        Err(e) if e.is_invalid_input() => assert!(e.to_string().contains("at most 8"), "{e}"),
        other => panic!("M = 9: expected an invalid-input refusal, got {other:?}"),
    }
}

/// Small exactly representable values: every port's f32 sum is exact, so results are exact.
fn int_data(n: usize, salt: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + salt * 3) % 9) as f32 - 4.0)
        .collect()
}

#[test]
fn linear_is_exact_at_any_block_and_wave() {
    // (m, k, n, has_bias): chunked and element-wise rows, N short of and past a block's rows.
    let shapes = [
        (1, 64, 8, true),
        (3, 40, 13, false),
        (8, 37, 9, true),
        (2, 1, 1, true),
    ];
    // (wave, block) on the sim: one wave owning all rows, waves sharing them unevenly, more
    // waves than rows; then the cpu.
    let devices: Vec<(String, Device)> = [(1, 1), (1, 3), (2, 6), (4, 4), (4, 12), (8, 8), (8, 80)]
        .into_iter()
        .map(|(wave, block)| {
            let cfg = SimConfig {
                block: Some(block),
                ..SimConfig::new(wave)
            };
            let label = format!("sim wave {wave} block {block}");
            (label, Device::sim_with(cfg).unwrap())
        })
        .chain([("cpu".to_string(), Device::cpu())])
        .collect();
    for (m, k, n, has_bias) in shapes {
        let (xs, ws, bs) = (int_data(m * k, 1), int_data(n * k, 2), int_data(n, 3));
        let want: Vec<f32> = (0..m * n)
            .map(|i| {
                let (r, c) = (i / n, i % n);
                let dot: f32 = (0..k).map(|j| xs[r * k + j] * ws[c * k + j]).sum();
                dot + if has_bias { bs[c] } else { 0.0 }
            })
            .collect();
        for (label, dev) in &devices {
            let x = Tensor::from_f32(dev, DType::F32, &[m, k], &xs).unwrap();
            let w = Tensor::from_f32(dev, DType::F32, &[n, k], &ws).unwrap();
            let bias = if has_bias {
                Tensor::from_f32(dev, DType::F32, &[n], &bs).unwrap()
            } else {
                filled(dev, &[1], 1e9)
            };
            let mut y = filled(dev, &[m, n], f32::NAN);
            ops::kernel::linear(dev, &params(has_bias as u32), &x, &w, &bias, &mut y)
                .unwrap_or_else(|e| panic!("{label} {m}x{k}->{n}: {e}"));
            assert_eq!(
                y.to_f32_vec().unwrap(),
                want,
                "{label} {m}x{k}->{n} bias {has_bias}"
            );
        }
    }
}
