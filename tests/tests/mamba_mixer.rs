//! The rest of the single-token Mamba2 mixer as ops: the conv step's state carried across
//! tokens is the causal conv of the whole sequence (checked against a direct f64 convolution,
//! not the step's reference), the gated norm's optional gate, and the refusals of both as typed
//! errors before any launch.

use kiln::ops::{causal_conv1d_update, gated_rms_norm};
use kiln::rng::Rng;
use kiln::{DType, Device, PortError, Tensor};
use kiln_tests::{assert_invalid, POISON};

fn tensor(dev: &Device, shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_f32(dev, DType::F32, shape, v).unwrap()
}

fn draw(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.normal() as f32).collect()
}

fn silu(v: f64) -> f64 {
    v / (1.0 + (-v).exp())
}

#[test]
fn conv_steps_carrying_their_state_are_the_causal_conv_of_the_sequence() {
    let seed = kiln::parity::base_seed();
    eprintln!("seed {seed} (replay with KILN_SEED={seed})");
    let mut rng = Rng::new(seed);
    let (batch, channels, k, tokens) = (2, 37, 4, 6);
    let weight = draw(&mut rng, channels * k);
    let bias = draw(&mut rng, channels);
    let xs: Vec<Vec<f32>> = (0..tokens)
        .map(|_| draw(&mut rng, batch * channels))
        .collect();
    for dev in [Device::cpu(), Device::sim(8).unwrap()] {
        let (w, bt) = (
            tensor(&dev, &[channels, k, 1], &weight),
            tensor(&dev, &[channels], &bias),
        );
        let state_shape = [batch, k - 1, channels];
        let mut state = tensor(&dev, &state_shape, &vec![0.0; batch * (k - 1) * channels]);
        for (t, x) in xs.iter().enumerate() {
            let xt = tensor(&dev, &[batch, 1, channels], x);
            let mut out = tensor(&dev, &[batch, 1, channels], &vec![POISON; x.len()]);
            let mut next = tensor(&dev, &state_shape, &vec![POISON; state.numel()]);
            causal_conv1d_update(&dev, &xt, &w, Some(&bt), &state, &mut out, &mut next).unwrap();
            let got = out.to_f32_vec().unwrap();
            // y_t = silu(bias + Σ_j w[j] · x_{t − (k−1) + j}), with zeros before the first token.
            for b in 0..batch {
                for c in 0..channels {
                    let mut acc = bias[c] as f64;
                    for j in 0..k {
                        if let Some(src) = (t + j).checked_sub(k - 1) {
                            acc += weight[c * k + j] as f64 * xs[src][b * channels + c] as f64;
                        }
                    }
                    let (g, want) = (got[b * channels + c] as f64, silu(acc));
                    assert!(
                        (g - want).abs() <= 1e-5 * (1.0 + want.abs()),
                        "{}: token {t} row {b} channel {c}: {g} vs {want}",
                        dev.name()
                    );
                }
            }
            state = next;
        }
        // The final state holds the last k − 1 tokens, bit for bit.
        let last = state.to_f32_vec().unwrap();
        for j in 0..k - 1 {
            for b in 0..batch {
                let row = &last[(b * (k - 1) + j) * channels..][..channels];
                let token = &xs[tokens - (k - 1) + j][b * channels..][..channels];
                assert_eq!(row, token, "{}: state row {j} of batch {b}", dev.name());
            }
        }
    }
}

#[test]
fn gated_norm_without_a_gate_is_the_grouped_rms_norm() {
    let seed = kiln::parity::base_seed();
    eprintln!("seed {seed} (replay with KILN_SEED={seed})");
    let mut rng = Rng::new(seed);
    let (rows, dim, groups, eps) = (3, 48, 4, 1e-5f32);
    let (y, gate, weight) = (
        draw(&mut rng, rows * dim),
        draw(&mut rng, rows * dim),
        draw(&mut rng, dim),
    );
    for dev in [Device::cpu(), Device::sim(4).unwrap()] {
        let (yt, gt, wt) = (
            tensor(&dev, &[rows, dim], &y),
            tensor(&dev, &[rows, dim], &gate),
            tensor(&dev, &[dim], &weight),
        );
        for gated in [false, true] {
            let mut out = tensor(&dev, &[rows, dim], &vec![POISON; rows * dim]);
            let g = gated.then_some(&gt);
            gated_rms_norm(&dev, &yt, g, &wt, groups, eps, &mut out).unwrap();
            let got = out.to_f32_vec().unwrap();
            let len = dim / groups;
            for (n, group) in got.chunks(len).enumerate() {
                let h: Vec<f64> = (n * len..(n + 1) * len)
                    .map(|i| y[i] as f64 * if gated { silu(gate[i] as f64) } else { 1.0 })
                    .collect();
                let ms = h.iter().map(|v| v * v).sum::<f64>() / len as f64;
                let inv = 1.0 / (ms + eps as f64).sqrt();
                for (i, &o) in group.iter().enumerate() {
                    let want = weight[(n * len + i) % dim] as f64 * h[i] * inv;
                    assert!(
                        (o as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                        "{}: gated {gated}, group {n} element {i}: {o} vs {want}",
                        dev.name()
                    );
                }
            }
        }
    }
}

/// One conv step over zero inputs of these shapes (the state `[B, rows, C]`).
fn conv(dev: &Device, x: &[usize], w: &[usize], state: &[usize]) -> Result<(), PortError> {
    let zeros = |s: &[usize]| tensor(dev, s, &vec![0.0; s.iter().product()]);
    let (xt, wt, st) = (zeros(x), zeros(w), zeros(state));
    let bias = zeros(&[w[0]]);
    let (mut out, mut next) = (zeros(x), zeros(state));
    causal_conv1d_update(dev, &xt, &wt, Some(&bias), &st, &mut out, &mut next).map(|_| ())
}

#[test]
fn bad_shapes_are_typed_errors() {
    let dev = Device::cpu();
    assert!(conv(&dev, &[2, 8], &[8, 4], &[2, 3, 8]).is_ok());
    assert_invalid(conv(&dev, &[2, 8], &[8, 5], &[2, 4, 8]), "kernel width 5");
    assert_invalid(conv(&dev, &[2, 8], &[8, 1], &[2, 0, 8]), "kernel width 1");
    assert_invalid(
        conv(&dev, &[2, 8], &[8, 4], &[2, 2, 8]),
        "state of k - 2 rows",
    );
    assert_invalid(
        conv(&dev, &[2, 8], &[9, 4], &[2, 3, 8]),
        "weight of C + 1 channels",
    );
    assert_invalid(
        conv(&dev, &[2, 8], &[8, 4], &[1, 3, 8]),
        "state of another batch",
    );
    assert_invalid(conv(&dev, &[2, 2, 8], &[8, 4], &[2, 3, 8]), "two tokens");
    // A weight of another dtype than x.
    let x = tensor(&dev, &[1, 8], &[0.0; 8]);
    let w16 = Tensor::from_f32(&dev, DType::F16, &[8, 4], &[0.0; 32]).unwrap();
    let st = tensor(&dev, &[1, 3, 8], &[0.0; 24]);
    let (mut out, mut next) = (
        tensor(&dev, &[1, 8], &[0.0; 8]),
        tensor(&dev, &[1, 3, 8], &[0.0; 24]),
    );
    assert_invalid(
        causal_conv1d_update(&dev, &x, &w16, None, &st, &mut out, &mut next),
        "an f16 weight with f32 x",
    );

    let y = tensor(&dev, &[2, 12], &[0.0; 24]);
    let w = tensor(&dev, &[12], &[1.0; 12]);
    let mut out = tensor(&dev, &[2, 12], &[0.0; 24]);
    for (groups, what) in [(5, "12 elements in 5 groups"), (0, "no groups")] {
        assert_invalid(
            gated_rms_norm(&dev, &y, None, &w, groups, 1e-5, &mut out),
            what,
        );
    }
    let short_gate = tensor(&dev, &[2, 11], &[0.0; 22]);
    assert_invalid(
        gated_rms_norm(&dev, &y, Some(&short_gate), &w, 2, 1e-5, &mut out),
        "a gate of another shape",
    );
    assert_invalid(
        gated_rms_norm(&dev, &y, None, &w, 2, -1.0, &mut out),
        "negative eps",
    );
}
