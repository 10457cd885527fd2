//! f16/bf16 conversions are round-to-nearest-even and bit-exact: checked against the `half`
//! crate (an independent implementation) on every f16 pattern and on edge and random f32 values.

use kiln::math::{Bf16, Element, F16};

#[test]
fn every_f16_widens_exactly() {
    for bits in 0..=u16::MAX {
        let want = half::f16::from_bits(bits).to_f32();
        let got = F16(bits).to_f32();
        assert!(
            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
            "f16 {bits:#06x}: {got} vs {want}"
        );
    }
}

fn narrowing_cases(seed: u64) -> Vec<f32> {
    let mut v: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        65504.0,
        65519.99,
        65520.0,
        1e9,
        -1e9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
        5.96e-8,
        2.98e-8,
        2.9802322e-8,
        2.9802326e-8,
        1e-45,
        6.1e-5,
        3.4e38,
        f32::MAX,
    ];
    // Every f16/bf16 midpoint (ties) and its neighbours.
    for bits in (0..=u16::MAX).step_by(7) {
        let a = half::f16::from_bits(bits).to_f32();
        let b = half::f16::from_bits(bits.wrapping_add(1)).to_f32();
        if a.is_finite() && b.is_finite() {
            let mid = (a as f64 + b as f64) / 2.0;
            v.extend([
                mid as f32,
                f32::from_bits((mid as f32).to_bits() + 1),
                f32::from_bits((mid as f32).to_bits().wrapping_sub(1)),
            ]);
        }
        let c = f32::from_bits((bits as u32) << 16 | 0x8000);
        v.extend([
            c,
            f32::from_bits(c.to_bits() + 1),
            f32::from_bits(c.to_bits() - 1),
        ]);
    }
    let mut rng = kiln::rng::Rng::new(seed);
    v.extend((0..200_000).map(|_| f32::from_bits(rng.next_u64() as u32)));
    v
}

#[test]
fn narrowing_rounds_to_nearest_even() {
    for x in narrowing_cases(kiln_tests::seed("narrowing")) {
        let (h, b) = (half::f16::from_f32(x), half::bf16::from_f32(x));
        if x.is_nan() {
            assert!(
                F16::from_f32(x).to_f32().is_nan() && Bf16::from_f32(x).to_f32().is_nan(),
                "{x}"
            );
            continue;
        }
        assert_eq!(
            F16::from_f32(x).0,
            h.to_bits(),
            "f16 of {x:e} ({:#010x})",
            x.to_bits()
        );
        assert_eq!(
            Bf16::from_f32(x).0,
            b.to_bits(),
            "bf16 of {x:e} ({:#010x})",
            x.to_bits()
        );
    }
}
