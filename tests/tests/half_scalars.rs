//! kiln's `half` feature (on for this crate): `half::f16` and `half::bf16` go into tensors and
//! come out of them directly, with the bits of kiln's own `F16` / `Bf16`.

use half::{bf16, f16};
use kiln::math::{Bf16, F16};
use kiln::{ops, DType, Device, Tensor};

/// Values across f16's range: rounding ties, subnormals, the largest finite, infinities, ±0.
fn values() -> Vec<f32> {
    let mut v: Vec<f32> = (0..300).map(|i| (i as f32 - 150.0) * 0.37).collect();
    v.extend([
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        6.1e-5,
        3.0e-7,
        65504.0,
        1.0009766,
        2049.0,
    ]);
    v
}

#[test]
fn half_slices_make_tensors_of_their_dtype_with_kilns_rounding() {
    let dev = Device::cpu();
    let xs = values();
    let n = xs.len();

    let h: Vec<f16> = xs.iter().map(|&v| f16::from_f32(v)).collect();
    let t = Tensor::from_slice(&dev, &[n], &h).unwrap();
    assert_eq!(t.dtype(), DType::F16);
    // half and kiln both round to nearest even: the tensor is the one kiln builds from f32.
    let k = Tensor::from_f32(&dev, DType::F16, &[n], &xs).unwrap();
    assert_eq!(t.to_bytes().unwrap(), k.to_bytes().unwrap());
    let back: Vec<f16> = k.to_vec().unwrap();
    assert!(back.iter().zip(&h).all(|(a, b)| a.to_bits() == b.to_bits()));

    let b: Vec<bf16> = xs.iter().map(|&v| bf16::from_f32(v)).collect();
    let t = Tensor::from_slice(&dev, &[n], &b).unwrap();
    assert_eq!(t.dtype(), DType::Bf16);
    let k = Tensor::from_f32(&dev, DType::Bf16, &[n], &xs).unwrap();
    assert_eq!(t.to_bytes().unwrap(), k.to_bytes().unwrap());
    let back: Vec<bf16> = k.to_vec().unwrap();
    assert!(back.iter().zip(&b).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn a_kernel_output_reads_back_as_half_types() {
    let dev = Device::cpu();
    let xs: Vec<f32> = (0..300).map(|i| i as f32 / 50.0 - 3.0).collect();
    let n = xs.len();
    let x: Vec<bf16> = xs.iter().map(|&v| bf16::from_f32(v)).collect();
    let x = Tensor::from_slice(&dev, &[n], &x).unwrap();
    let mut out = Tensor::zeros(&dev, DType::Bf16, &[n]).unwrap();
    ops::fused_xielu(&dev, &x, 0.8, 0.8, 0.5, -1e-6, &mut out).unwrap();

    let got: Vec<bf16> = out.to_vec().unwrap();
    let kiln_bits: Vec<Bf16> = out.to_vec().unwrap();
    assert!(got.iter().zip(&kiln_bits).all(|(a, b)| a.to_bits() == b.0));
    let widened: Vec<f32> = got.iter().map(|v| v.to_f32()).collect();
    assert_eq!(widened, out.to_f32_vec().unwrap());
    assert!(
        widened.iter().any(|&v| v != 0.0),
        "the kernel wrote nothing"
    );
}

#[test]
fn reading_a_tensor_as_the_other_half_type_is_refused() {
    let dev = Device::cpu();
    let t = Tensor::from_slice(&dev, &[2], &[f16::ONE, f16::NEG_ONE]).unwrap();
    assert!(t.to_vec::<bf16>().is_err());
    assert!(t.to_vec::<f32>().is_err());
    let mut b = Tensor::zeros(&dev, DType::Bf16, &[2]).unwrap();
    assert!(b.write(&[f16::ONE, f16::ONE]).is_err());
    b.write(&[bf16::ONE, bf16::NEG_ONE]).unwrap();
    assert_eq!(b.to_f32_vec().unwrap(), [1.0, -1.0]);
}

#[test]
fn conversions_to_kilns_types_keep_the_bits() {
    for bits in [0u16, 0x3c00, 0x7c00, 0x7e01, 0x8001, 0xfbff] {
        let h = f16::from_bits(bits);
        assert_eq!(F16::from(h).0, bits);
        assert_eq!(f16::from(F16(bits)).to_bits(), bits);
        let b = bf16::from_bits(bits);
        assert_eq!(Bf16::from(b).0, bits);
        assert_eq!(bf16::from(Bf16(bits)).to_bits(), bits);
    }
}
