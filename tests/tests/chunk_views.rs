//! Chunked view access (`get_chunk`/`set_chunk`), which the GPU ports turn into 16-byte loads
//! and stores: same elements as one-by-one access, bounds checked like every view access.

use kiln_math::{Bf16, Dst, Rw, Src, View};

#[test]
fn a_chunk_holds_the_elements_it_starts_at() {
    let seed = kiln_tests::seed("chunk_views");
    let data: Vec<u32> = (0..64u64)
        .map(|i| (i.wrapping_mul(seed | 1) >> 7) as u32)
        .collect();
    // SAFETY: the view covers `data`, which outlives it.
    let src = unsafe { Src::<u32>::from_raw_parts(data.as_ptr() as *mut u8, data.len()) };
    for i in [0, 8, 13, 56] {
        let chunk = src.get_chunk::<8>(i);
        assert_eq!(&chunk[..], &data[i..i + 8], "chunk at {i}");
    }
    let mut out = vec![0u32; 64];
    // SAFETY: as above.
    let dst = unsafe { Dst::<u32>::from_raw_parts(out.as_mut_ptr() as *mut u8, out.len()) };
    dst.set_chunk(24, src.get_chunk::<8>(0));
    assert_eq!(&out[24..32], &data[0..8]);
    assert!(out[..24].iter().chain(&out[32..]).all(|&v| v == 0));
}

#[test]
fn a_chunk_must_be_a_multiple_of_16_bytes() {
    let mut data = [Bf16(0); 32];
    // SAFETY: the view covers `data`, which outlives it.
    let rw = unsafe { Rw::<Bf16>::from_raw_parts(data.as_mut_ptr() as *mut u8, data.len()) };
    assert!(rw.chunk_aligned::<8>(0), "8 bf16 = 16 bytes");
    assert!(!rw.chunk_aligned::<4>(0), "4 bf16 = 8 bytes");
}

#[test]
fn a_chunk_past_the_end_panics() {
    let data = [1.0f32; 20];
    // SAFETY: the view covers `data`, which outlives it.
    let src = unsafe { Src::<f32>::from_raw_parts(data.as_ptr() as *mut u8, data.len()) };
    assert_eq!(src.get_chunk::<8>(12), [1.0; 8]);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| src.get_chunk::<8>(13)));
    assert!(r.is_err(), "elements 13..21 of 20 must be refused");
}
