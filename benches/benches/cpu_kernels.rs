//! Criterion benches of the kernels on the cpu backend, reported as bytes/s.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kiln::{ops, DType, Device, Tensor};

fn fused_add_rms_norm(c: &mut Criterion) {
    let dev = Device::cpu();
    let mut g = c.benchmark_group("fused_add_rms_norm/cpu");
    for dtype in [DType::F32, DType::Bf16] {
        for (rows, dim) in [(1usize, 4096usize), (32, 4096), (512, 8192)] {
            let n = rows * dim;
            let x = Tensor::from_f32(&dev, dtype, &[rows, dim], &vec![0.5; n]).unwrap();
            let mut residual = Tensor::from_f32(&dev, dtype, &[rows, dim], &vec![0.25; n]).unwrap();
            let w = Tensor::from_f32(&dev, dtype, &[dim], &vec![1.0; dim]).unwrap();
            let mut out = Tensor::zeros(&dev, dtype, &[rows, dim]).unwrap();
            // Bytes the kernel must move: x, residual and weight read; residual and out written.
            let bytes = (4 * n + dim) * dtype.size();
            g.throughput(Throughput::Bytes(bytes as u64));
            g.bench_function(format!("{}/{rows}x{dim}", dtype.name()), |b| {
                b.iter(|| {
                    ops::fused_add_rms_norm(&dev, &x, &mut residual, &w, 1e-6, &mut out).unwrap()
                })
            });
        }
    }
    g.finish();
}

fn fused_xielu(c: &mut Criterion) {
    let dev = Device::cpu();
    let mut g = c.benchmark_group("fused_xielu/cpu");
    for dtype in [DType::F32, DType::Bf16] {
        // A decode row and a prefill chunk of Apertus-8B's MLP width.
        for n in [21504usize, 64 * 21504] {
            let data: Vec<f32> = (0..n).map(|i| (i % 97) as f32 / 24.0 - 2.0).collect();
            let x = Tensor::from_f32(&dev, dtype, &[n], &data).unwrap();
            let mut out = Tensor::zeros(&dev, dtype, &[n]).unwrap();
            // Bytes the kernel must move: x read, out written.
            g.throughput(Throughput::Bytes((2 * n * dtype.size()) as u64));
            g.bench_function(format!("{}/{n}", dtype.name()), |b| {
                b.iter(|| ops::fused_xielu(&dev, &x, 0.79, 1.29, 0.5, -1e-6, &mut out).unwrap())
            });
        }
    }
    g.finish();
}

fn fused_add3_layer_norm(c: &mut Criterion) {
    let dev = Device::cpu();
    let mut g = c.benchmark_group("fused_add3_layer_norm/cpu");
    for dtype in [DType::F32, DType::Bf16] {
        // Cohere2's hidden width (4096) and the kernel's limit, decode and a prefill chunk.
        for (rows, dim) in [(1usize, 4096usize), (64, 4096), (8, 6656)] {
            let n = rows * dim;
            let fill = |v: f32| Tensor::from_f32(&dev, dtype, &[rows, dim], &vec![v; n]).unwrap();
            let (attn, mlp, residual) = (fill(0.5), fill(-0.25), fill(1.0));
            let w = Tensor::from_f32(&dev, dtype, &[dim], &vec![1.0; dim]).unwrap();
            let bias = Tensor::from_f32(&dev, dtype, &[dim], &vec![0.1; dim]).unwrap();
            let mut x_out = Tensor::zeros(&dev, dtype, &[rows, dim]).unwrap();
            let mut h_out = Tensor::zeros(&dev, dtype, &[rows, dim]).unwrap();
            // Bytes the kernel must move: three rows, weight and bias read; two rows written.
            let bytes = (5 * n + 2 * dim) * dtype.size();
            g.throughput(Throughput::Bytes(bytes as u64));
            g.bench_function(format!("{}/{rows}x{dim}", dtype.name()), |b| {
                b.iter(|| {
                    ops::fused_add3_layer_norm(
                        &dev, &attn, &mlp, &residual, &w, &bias, 1e-5, &mut x_out, &mut h_out,
                    )
                    .unwrap()
                })
            });
        }
    }
    g.finish();
}

fn fused_rope_qk_append(c: &mut Criterion) {
    let dev = Device::cpu();
    let mut g = c.benchmark_group("fused_rope_qk_append/cpu");
    let rope = ops::Rope {
        dims: 0,
        base: 500000.0,
        scale: 1.0,
        traditional: false,
    };
    for dtype in [DType::F32, DType::Bf16] {
        // Llama-3-8B heads (32 Q, 8 KV, D 128): one decode token, a 128-token prefill window.
        for (batch, seq) in [(1usize, 1usize), (1, 128)] {
            let (hq, hkv, d) = (32usize, 8usize, 128usize);
            let width = (hq + 2 * hkv) * d;
            let n = batch * seq * width;
            let data: Vec<f32> = (0..n).map(|i| (i % 13) as f32 / 6.0 - 1.0).collect();
            let qkv = Tensor::from_f32(&dev, dtype, &[batch, seq, width], &data).unwrap();
            let mut q = Tensor::zeros(&dev, dtype, &[batch, hq, seq, d]).unwrap();
            let mut k = Tensor::zeros(&dev, dtype, &[batch, hkv, seq, d]).unwrap();
            let mut v = Tensor::zeros(&dev, dtype, &[batch, hkv, seq, d]).unwrap();
            // Bytes the kernel must move: the projection read once, Q, K and V written once.
            g.throughput(Throughput::Bytes((2 * n * dtype.size()) as u64));
            g.bench_function(format!("{}/b{batch}xl{seq}", dtype.name()), |b| {
                b.iter(|| {
                    ops::fused_rope_qk_append(
                        &dev,
                        &qkv,
                        rope,
                        4096,
                        ops::KvLayout::DenseSlab,
                        &mut q,
                        &mut k,
                        &mut v,
                    )
                    .unwrap()
                })
            });
        }
    }
    g.finish();
}

fn gumbel_max_sample(c: &mut Criterion) {
    let dev = Device::cpu();
    let mut g = c.benchmark_group("gumbel_max_sample/cpu");
    for dtype in [DType::F32, DType::Bf16] {
        // Qwen2's 152064-token vocabulary, one decode row and a batch of 8.
        for rows in [1usize, 8] {
            let vocab = 152_064usize;
            let data: Vec<f32> = (0..rows * vocab).map(|i| (i % 251) as f32 / 25.0).collect();
            let logits = Tensor::from_f32(&dev, dtype, &[rows, vocab], &data).unwrap();
            let mut index = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
            // Bytes the kernel must move: the logits read once. One block per row against
            // spec §5's split count (64 and 8 here).
            g.throughput(Throughput::Bytes((rows * vocab * dtype.size()) as u64));
            for splits in [1, ops::gumbel_splits(rows, vocab)] {
                g.bench_function(format!("{}/{rows}x{vocab}/S{splits}", dtype.name()), |b| {
                    b.iter(|| {
                        ops::gumbel_max_sample_split(&dev, &logits, [1, 2], 0.8, splits, &mut index)
                            .unwrap()
                    })
                });
            }
        }
    }
    g.finish();
}

fn rejection_sample(c: &mut Criterion) {
    let dev = Device::cpu();
    let mut g = c.benchmark_group("rejection_sample/cpu");
    // Llama 3's 128256-token vocabulary; a softmax-shaped row (geometric decay, shuffled).
    let vocab = 128_256usize;
    for rows in [1usize, 8] {
        let row: Vec<f32> = (0..vocab)
            .map(|i| 0.999f32.powi(((i * 7919) % vocab) as i32))
            .collect();
        let sum: f32 = row.iter().sum();
        let data: Vec<f32> = (0..rows)
            .flat_map(|_| row.iter().map(|v| v / sum))
            .collect();
        let probs = Tensor::from_f32(&dev, DType::F32, &[rows, vocab], &data).unwrap();
        let mut ids = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
        let mut accepted = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
        let mut rounds = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
        let top_p = ops::SamplingFilters {
            top_p: 0.9,
            ..Default::default()
        };
        let top_k_p = ops::SamplingFilters {
            top_k: 40,
            top_p: 0.95,
            ..Default::default()
        };
        for (name, filters) in [
            ("top-p 0.9", vec![top_p; rows]),
            ("top-k 40 + top-p 0.95", vec![top_k_p; rows]),
            // Rows alternate between the two.
            (
                "mixed rows",
                (0..rows).map(|r| [top_p, top_k_p][r % 2]).collect(),
            ),
        ] {
            // Bytes the kernel must read at least once: probs and probs_draw.
            g.throughput(Throughput::Bytes((2 * rows * vocab * 4) as u64));
            g.bench_function(format!("f32/{rows}x{vocab}/{name}"), |b| {
                b.iter(|| {
                    ops::rejection_sample(
                        &dev,
                        &probs,
                        &probs,
                        &filters,
                        [1, 2],
                        &mut ids,
                        &mut accepted,
                        &mut rounds,
                    )
                    .unwrap()
                })
            });
        }
    }
    g.finish();
}

fn speculative_accept(c: &mut Criterion) {
    let dev = Device::cpu();
    let mut g = c.benchmark_group("speculative_accept/cpu");
    // Four drafts over a 128256-token vocabulary; q = p, so every draft is accepted and the
    // bonus token is drawn (the longest walk).
    let (n, vocab) = (4usize, 128_256usize);
    for rows in [1usize, 8] {
        let row: Vec<f32> = (0..vocab)
            .map(|i| 0.999f32.powi(((i * 7919) % vocab) as i32))
            .collect();
        let sum: f32 = row.iter().sum();
        let law: Vec<f32> = row.iter().map(|v| v / sum).collect();
        let target: Vec<f32> = (0..rows * (n + 1))
            .flat_map(|_| law.iter().copied())
            .collect();
        let draft: Vec<f32> = (0..rows * n).flat_map(|_| law.iter().copied()).collect();
        let target = Tensor::from_f32(&dev, DType::F32, &[rows, n + 1, vocab], &target).unwrap();
        let draft = Tensor::from_f32(&dev, DType::F32, &[rows, n, vocab], &draft).unwrap();
        let drafts = Tensor::from_slice(&dev, &[rows, n], &vec![0u32; rows * n]).unwrap();
        let mut tokens = Tensor::zeros(&dev, DType::U32, &[rows, n + 1]).unwrap();
        let mut emitted = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
        // Bytes the bonus draw must read at least: one target row per batch row.
        g.throughput(Throughput::Bytes((rows * vocab * 4) as u64));
        g.bench_function(format!("f32/{rows}x{n}x{vocab}"), |b| {
            b.iter(|| {
                ops::speculative_accept(
                    &dev,
                    &target,
                    &draft,
                    &drafts,
                    ops::AcceptRule::Stochastic,
                    [1, 2],
                    &mut tokens,
                    &mut emitted,
                )
                .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    fused_add_rms_norm,
    fused_xielu,
    fused_add3_layer_norm,
    fused_rope_qk_append,
    gumbel_max_sample,
    rejection_sample,
    speculative_accept
);
criterion_main!(benches);
