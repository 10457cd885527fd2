//! Sixteen threads using an op for the first time at once (port tables and every other
//! once-per-process state are initialised under contention). The only test in its binary.

use kiln::{ops, DType, Device, Path, Tensor};

#[test]
fn sixteen_threads_first_use_at_once() {
    let barrier = std::sync::Barrier::new(16);
    std::thread::scope(|s| {
        for i in 0..16 {
            let barrier = &barrier;
            s.spawn(move || {
                let dev = if i % 2 == 0 {
                    Device::cpu()
                } else {
                    Device::sim(8).unwrap()
                };
                let dim = 64;
                let x = Tensor::from_f32(&dev, DType::F32, &[2, dim], &vec![i as f32; 2 * dim])
                    .unwrap();
                let mut r =
                    Tensor::from_f32(&dev, DType::F32, &[2, dim], &vec![1.0; 2 * dim]).unwrap();
                let w = Tensor::from_f32(&dev, DType::F32, &[dim], &vec![2.0; dim]).unwrap();
                let mut o = Tensor::zeros(&dev, DType::F32, &[2, dim]).unwrap();
                barrier.wait();
                let ran = ops::fused_add_rms_norm(&dev, &x, &mut r, &w, 0.0, &mut o).unwrap();
                assert!(matches!(ran.path, Path::Port { .. }));
                // Every row is constant (i + 1): normalised it is 1, times the weight 2.
                assert_eq!(r.to_vec::<f32>().unwrap(), vec![i as f32 + 1.0; 2 * dim]);
                assert_eq!(o.to_vec::<f32>().unwrap(), vec![2.0; 2 * dim]);
            });
        }
    });
}
