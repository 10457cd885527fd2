//! The wave matrix multiply behind [`Block::wave_mma`](crate::Block::wave_mma): its lane
//! geometry and its definition over every lane's fragments (the version on `shuffle_xor` that
//! ports without a native one run is the trait's provided method).
//!
//! A wave is split into sets of `mma_classes(WAVE) × mma_groups(WAVE)` lanes; lane `l` of a set
//! has class `q = l % Q` and group `g = l / Q`. One call multiplies per set
//! `C[2G × G] += A[2G × 4Q] · B[4Q × G]` (16-bit inputs, f32 sums) with every operand lane-local
//! in `k`: lane `(g, q)` holds rows `g` and `g + G` of `A` and column `g` of `B` at the same four
//! `k` slots of class `q` (two 16-bit pairs per row, low half first), so a kernel may put any
//! data of its own at a slot as long as `A` and `B` agree on it. The lane gets back
//! `C[g + G·r][mma_col(t)]` for `r, t < 2`, where `mma_col(t) < G`; a column past `G` is none.
//! At a wave of 32 this is one `mma.m16n8k16` per warp, in exactly NVIDIA's fragment layout.

use crate::Element;

/// Most groups (columns of `B`) of a set at any wave.
pub const MMA_MAX_GROUPS: usize = 8;

/// Lanes of a set that hold different `k` slots (its classes): 4, fewer on narrower waves.
#[inline(always)]
pub const fn mma_classes(wave: u32) -> u32 {
    if wave < 4 {
        wave
    } else {
        4
    }
}

/// Groups of a set: columns of `B` and `C`, half the rows of `A` and `C`.
#[inline(always)]
pub const fn mma_groups(wave: u32) -> u32 {
    let g = wave / mma_classes(wave);
    if g < MMA_MAX_GROUPS as u32 {
        g
    } else {
        MMA_MAX_GROUPS as u32
    }
}

/// Independent sets per wave (2 on a 64-wide wave).
#[inline(always)]
pub const fn mma_sets(wave: u32) -> u32 {
    wave / (mma_classes(wave) * mma_groups(wave))
}

/// `lo·lo' + hi·hi'` of two pairs of 16-bit `T` values: each product is exact in f32.
#[inline(always)]
pub fn pair_dot<T: Element>(a: u32, b: u32) -> f32 {
    let lo = T::from_bits32(a & 0xffff).widen() * T::from_bits32(b & 0xffff).widen();
    crate::mul_add(
        T::from_bits32(a >> 16).widen(),
        T::from_bits32(b >> 16).widen(),
        lo,
    )
}

/// Words of one lane's fragments at a meeting of every lane ([`mma_from_fragments`]).
pub const MMA_FRAGMENT_WORDS: usize = 6;

/// One lane's fragments as [`mma_from_fragments`] reads them: `a[0]`, `a[1]`, then `b`.
#[inline(always)]
pub fn mma_fragment_words(a: [[u32; 2]; 2], b: [u32; 2]) -> [u32; MMA_FRAGMENT_WORDS] {
    [a[0][0], a[0][1], a[1][0], a[1][1], b[0], b[1]]
}

/// The wave multiply by its definition, for lane `lane` of a `wave`-wide wave, from every
/// lane's [`mma_fragment_words`] (lane-major) and this lane's `c`: what a host emulator that
/// sees all lanes at once returns, and what the shuffle version is tested against. Column `t`
/// is the one [`Block::mma_col`](crate::Block::mma_col) names by default (`q + Q·t`).
pub fn mma_from_fragments<T: Element>(
    wave: u32,
    lane: u32,
    all: &[u32],
    c: [[f32; 2]; 2],
) -> [[f32; 2]; 2] {
    let classes = mma_classes(wave);
    let groups = mma_groups(wave);
    let set_base = lane / (classes * groups) * classes * groups;
    let g = (lane / classes) % groups;
    let q = lane % classes;
    let words = |l: u32| &all[l as usize * MMA_FRAGMENT_WORDS..][..MMA_FRAGMENT_WORDS];
    let mut out = c;
    for (t, col) in [q, q + classes].into_iter().enumerate() {
        if col >= groups {
            continue;
        }
        for (r, row) in out.iter_mut().enumerate() {
            for class in 0..classes {
                let a = words(set_base + g * classes + class);
                let b = words(set_base + col * classes + class);
                row[t] += pair_dot::<T>(a[2 * r], b[4]) + pair_dot::<T>(a[2 * r + 1], b[5]);
            }
        }
    }
    out
}
