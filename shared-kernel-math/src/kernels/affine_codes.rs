//! Per-element decoding of MLX's affine layout (spec §13), for kernels that read single
//! weights rather than stream whole units as `qlinear` does: a code of an LSB-first bit stream
//! at any width, and a value of the packed scale and bias words (which `qlinear` reads too).

use crate::{Bf16, Element, Src, F16};

/// Dtype code of packed f32 values (qlinear's `scale_dtype`, ssm_update's input dtypes).
pub const SCALE_F32: u32 = 0;
/// Dtype code of packed 16-bit IEEE values.
pub const SCALE_F16: u32 = 1;
/// Dtype code of packed bfloat16 values.
pub const SCALE_BF16: u32 = 2;

/// Code `index` of the LSB-first bit stream of `bits`-bit codes (1..=8) that starts at word
/// `first` of `words`: element `j` at bits `j·bits ..`, a code that crosses a word boundary
/// taking its high bits from the next word.
#[inline(always)]
pub fn stream_code(words: Src<u32>, first: usize, bits: u32, index: usize) -> u32 {
    let bit = index * bits as usize;
    let word = first + bit / 32;
    let shift = (bit % 32) as u32;
    let mut v = words.get(word) >> shift;
    if shift + bits > 32 {
        // shift > 24 here, so the left shift is below 32.
        v |= words.get(word + 1) << (32 - shift);
    }
    v & ((1u32 << bits) - 1)
}

/// The word of packed words of dtype `code` that holds value `e`, loaded without a bounds
/// check on GPUs and not yet decoded: a kernel that issues all its loads before it waits on
/// one ([`packed_scale`] is the checked load and decode).
///
/// # Safety
/// Value `e` of dtype `code` lies inside `words`.
#[inline(always)]
pub unsafe fn packed_word_unchecked(words: Src<u32>, code: u32, e: usize) -> u32 {
    // SAFETY: the caller's precondition.
    unsafe { words.get_unchecked(if code == SCALE_F32 { e } else { e / 2 }) }
}

/// The 16-bit half of `word` that holds value `e` (the lower half for even `e`).
#[inline(always)]
fn half_of(word: u32, e: usize) -> u16 {
    ((word >> ((e % 2) as u32 * 16)) & 0xffff) as u16
}

/// A 16-bit value of dtype `code` (f16, else bf16) widened exactly.
#[inline(always)]
pub fn widen_half(half: u16, code: u32) -> f32 {
    if code == SCALE_F16 {
        F16(half).widen()
    } else {
        Bf16(half).widen()
    }
}

/// Value `e` of dtype `code` from the word that holds it, widened exactly; the 16-bit decode
/// and the f32 one are both computed and one is selected, so the decode has no branch to split
/// a kernel's loads around.
#[inline(always)]
pub fn unpack_scale(word: u32, code: u32, e: usize) -> f32 {
    let narrow = widen_half(half_of(word, e), code);
    if code == SCALE_F32 {
        f32::from_bits(word)
    } else {
        narrow
    }
}

/// Value `e` of packed scale or bias words of the `scale_dtype` code `code` (f32 one per word;
/// f16 or bf16 two per word, the lower half first), widened exactly to f32.
#[inline(always)]
pub fn packed_scale(words: Src<u32>, code: u32, e: usize) -> f32 {
    if code == SCALE_F32 {
        return f32::from_bits(words.get(e));
    }
    widen_half(half_of(words.get(e / 2), e), code)
}
