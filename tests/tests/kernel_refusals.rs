//! Bad shapes and params are typed invalid-input errors found before any launch, for the
//! elementwise, norm and RoPE kernels of batch 1 (the samplers' refusals are in samplers.rs).

use kiln::{ops, DType, Device, PortError, Tensor};

fn zeros(dev: &Device, shape: &[usize]) -> Tensor {
    Tensor::zeros(dev, DType::F32, shape).unwrap()
}

fn invalid(r: Result<kiln::Ran, PortError>, what: &str) {
    match r {
        Err(e) if e.is_invalid_input() => eprintln!("{what}: refused: {e}"),
        other => panic!("{what}: expected an invalid-input refusal, got {other:?}"),
    }
}

#[test]
fn xielu_refuses_mismatched_output_and_non_finite_scalars() {
    let dev = Device::cpu();
    let x = zeros(&dev, &[4, 8]);
    invalid(
        ops::fused_xielu(&dev, &x, 0.8, 0.8, 0.5, -1e-6, &mut zeros(&dev, &[32])),
        "out shape",
    );
    invalid(
        ops::fused_xielu(
            &dev,
            &x,
            f32::NAN,
            0.8,
            0.5,
            -1e-6,
            &mut zeros(&dev, &[4, 8]),
        ),
        "NaN alpha_p",
    );
    let mut bf = Tensor::zeros(&dev, DType::Bf16, &[4, 8]).unwrap();
    invalid(
        ops::fused_xielu(&dev, &x, 0.8, 0.8, 0.5, -1e-6, &mut bf),
        "mixed dtypes",
    );
}

#[test]
fn add3_layer_norm_refuses_rows_over_6656_and_bad_bias() {
    let dev = Device::cpu();
    for (dim, bias_len, what) in [
        (6657, 6657, "dim 6657"),
        (64, 3, "bias [3]"),
        (64, 64, "ok"),
    ] {
        let row = zeros(&dev, &[2, dim]);
        let w = zeros(&dev, &[dim]);
        let bias = zeros(&dev, &[bias_len]);
        let (mut xo, mut ho) = (zeros(&dev, &[2, dim]), zeros(&dev, &[2, dim]));
        let r =
            ops::fused_add3_layer_norm(&dev, &row, &row, &row, &w, &bias, 1e-5, &mut xo, &mut ho);
        if what == "ok" {
            r.unwrap();
        } else {
            invalid(r, what);
        }
    }
    // The limit itself runs.
    let dim = 6656;
    let row = Tensor::from_f32(&dev, DType::F32, &[1, dim], &vec![1.0; dim]).unwrap();
    let (mut xo, mut ho) = (zeros(&dev, &[1, dim]), zeros(&dev, &[1, dim]));
    ops::fused_add3_layer_norm(
        &dev,
        &row,
        &row,
        &row,
        &zeros(&dev, &[dim]),
        &zeros(&dev, &[1]),
        1e-5,
        &mut xo,
        &mut ho,
    )
    .unwrap();
    assert!(xo.to_f32_vec().unwrap().iter().all(|&v| v == 3.0));
}

#[test]
fn rope_refuses_odd_heads_bad_rope_dims_and_shapes() {
    let dev = Device::cpu();
    let rope = |dims| ops::Rope {
        dims,
        base: 10000.0,
        scale: 1.0,
        traditional: false,
    };
    // (head_dim, rope dims, qkv width override, position, layout, what)
    let cases: [(usize, u32, Option<usize>, i32, &str); 6] = [
        (63, 0, None, 0, "odd head_dim"),
        (64, 66, None, 0, "rope_dims > head_dim"),
        (64, 31, None, 0, "odd rope_dims"),
        (64, 0, Some(64 * 5), 0, "qkv width"),
        (64, 0, None, -1, "negative position"),
        (64, 0, None, i32::MAX, "position overflow"),
    ];
    for (d, dims, width, pos, what) in cases {
        let (hq, hkv, l) = (2usize, 1usize, 2usize);
        let qkv = zeros(&dev, &[1, l, width.unwrap_or((hq + 2 * hkv) * d)]);
        let (mut q, mut k, mut v) = (
            zeros(&dev, &[1, hq, l, d]),
            zeros(&dev, &[1, hkv, l, d]),
            zeros(&dev, &[1, hkv, l, d]),
        );
        invalid(
            ops::fused_rope_qk_append(
                &dev,
                &qkv,
                rope(dims),
                pos,
                ops::KvLayout::DenseSlab,
                &mut q,
                &mut k,
                &mut v,
            ),
            what,
        );
    }
    // Paged rows expect [B, L, Hkv, D]: the dense shape is refused when Hkv != L.
    let qkv = zeros(&dev, &[1, 3, 4 * 64]);
    let (mut q, mut k, mut v) = (
        zeros(&dev, &[1, 2, 3, 64]),
        zeros(&dev, &[1, 1, 3, 64]),
        zeros(&dev, &[1, 1, 3, 64]),
    );
    invalid(
        ops::fused_rope_qk_append(
            &dev,
            &qkv,
            rope(0),
            0,
            ops::KvLayout::PagedRows,
            &mut q,
            &mut k,
            &mut v,
        ),
        "layout 1 with dense shapes",
    );
    invalid(
        ops::fused_rope_qk_append(
            &dev,
            &qkv,
            ops::Rope {
                base: 0.0,
                ..rope(0)
            },
            0,
            ops::KvLayout::DenseSlab,
            &mut q,
            &mut k,
            &mut v,
        ),
        "base 0",
    );
}
