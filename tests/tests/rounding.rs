//! The 16-bit rounding inside a kernel is round-to-nearest-even on every device, bit for bit:
//! the residual that `fused_add_rms_norm` writes back is `rnd_T(x + r)`, checked against the
//! `half` crate (an independent implementation) on ties, overflow, subnormals, signed zeros,
//! NaN and random values. GPU ports convert pairs with one packed instruction and single
//! values with another, so the rows are long enough for the chunked path and odd for the
//! element-wise one.

use kiln::math::{Bf16, F16};
use kiln::{ops, DType, Device, Tensor};

/// A deterministic stream (SplitMix64) for the random part of the inputs.
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The dtype's bits ↔ f32, and its round-to-nearest-even, from the `half` crate.
struct Format {
    dtype: DType,
    widen: fn(u16) -> f32,
    round: fn(f32) -> u16,
    /// Half an ulp of 1.0 and the largest finite value.
    half_ulp_of_one: f32,
    max: f32,
}

const FORMATS: [Format; 2] = [
    Format {
        dtype: DType::F16,
        widen: |b| half::f16::from_bits(b).to_f32(),
        round: |v| half::f16::from_f32(v).to_bits(),
        half_ulp_of_one: 1.0 / 2048.0,
        max: 65504.0,
    },
    Format {
        dtype: DType::Bf16,
        widen: |b| half::bf16::from_bits(b).to_f32(),
        round: |v| half::bf16::from_f32(v).to_bits(),
        half_ulp_of_one: 1.0 / 256.0,
        max: 3.389_531_4e38,
    },
];

/// `(x, r)` pairs: exact ties both ways, overflow, subnormal sums, signed zeros, infinities,
/// NaN, then random finite values of nearby magnitude (so most sums round).
fn pairs(f: &Format, n: usize, s: &mut Stream) -> Vec<(f32, f32)> {
    let h = f.half_ulp_of_one;
    let tiny = (f.widen)(1); // the smallest subnormal
    let mut v = vec![
        (1.0, h),                           // tie, rounds down to even 1.0
        (1.0 + 2.0 * h, h),                 // tie, rounds up to even
        (-1.0, -h),                         // negative tie
        (1.0, h * 1.5),                     // above the tie
        (f.max, f.max),                     // overflow to inf
        (f.max, -f.max),                    // exact zero
        (tiny, tiny),                       // subnormal sum
        (tiny * 3.0, -tiny),                // subnormal difference
        (-0.0, -0.0),                       // -0
        (0.0, -0.0),                        // +0
        (f32::INFINITY, 1.0),               // inf
        (f32::INFINITY, f32::NEG_INFINITY), // NaN
        (f32::NAN, 1.0),                    // NaN in
    ];
    while v.len() < n {
        let exp = (s.next() % 40) as i32 - 20;
        let mut pick = || {
            let m = 1.0 + (s.next() % 4096) as f32 / 4096.0;
            let sign = if s.next() & 1 == 0 { 1.0 } else { -1.0 };
            sign * m * 2f32.powi(exp + (s.next() % 9) as i32 - 4)
        };
        // Inputs are values of the dtype, as a real residual stream holds.
        let (a, b) = (pick(), pick());
        v.push(((f.widen)((f.round)(a)), (f.widen)((f.round)(b))));
    }
    v.truncate(n);
    v
}

fn residual_bits(dev: &Device, f: &Format, rows: usize, dim: usize, xr: &[(f32, f32)]) -> Vec<u16> {
    let shape = [rows, dim];
    let x: Vec<f32> = xr.iter().map(|p| p.0).collect();
    let r: Vec<f32> = xr.iter().map(|p| p.1).collect();
    let x = Tensor::from_f32(dev, f.dtype, &shape, &x).unwrap();
    let mut r = Tensor::from_f32(dev, f.dtype, &shape, &r).unwrap();
    let w = Tensor::from_f32(dev, f.dtype, &[dim], &vec![1.0; dim]).unwrap();
    let mut out = Tensor::zeros(dev, f.dtype, &shape).unwrap();
    ops::fused_add_rms_norm(dev, &x, &mut r, &w, 1e-6, &mut out).unwrap();
    match f.dtype {
        DType::F16 => r.to_vec::<F16>().unwrap().iter().map(|v| v.0).collect(),
        _ => r.to_vec::<Bf16>().unwrap().iter().map(|v| v.0).collect(),
    }
}

#[test]
fn residual_rounding_is_round_to_nearest_even_on_every_device() {
    let seed = kiln_tests::seed("residual_rounding");
    for dev in kiln_tests::test_devices() {
        for f in &FORMATS {
            // 64: the chunked path (pairs); 13: the element-wise path.
            for (rows, dim) in [(16, 64), (8, 13)] {
                let mut s = Stream(seed ^ dim as u64);
                let xr = pairs(f, rows * dim, &mut s);
                let got = residual_bits(&dev, f, rows, dim, &xr);
                for (i, (&(x, r), &g)) in xr.iter().zip(&got).enumerate() {
                    let want = (f.round)(x + r);
                    let ok = if (f.widen)(want).is_nan() {
                        (f.widen)(g).is_nan()
                    } else {
                        g == want
                    };
                    assert!(
                        ok,
                        "{} {} {rows}x{dim} element {i}: {x:e} + {r:e} gave {g:#06x}, want {want:#06x}",
                        dev.name(),
                        f.dtype.name()
                    );
                }
            }
        }
    }
}
