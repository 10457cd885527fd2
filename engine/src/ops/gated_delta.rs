//! Qwen3-Next's Gated DeltaNet recurrence over a block of steps (spec §14): the op checks the
//! optional mask's dtype and hands the kernel u32 words (a u8/bool mask viewed in place), and a
//! stand-in buffer when there is none.

use crate::launch::Ran;
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::gated_delta_step::{GatedDeltaParams, MASK_BYTES, MASK_NONE, MASK_WORDS};
use kiln_math::{DType, KernelId};

/// The mask as the words the kernel reads and its `mask_kind`: u32 `[B, T]` (nonzero runs a
/// step) as it is, u8 `[B, T]` (bool bytes) viewed as words in place when it starts on a word
/// and `B·T` is a multiple of 4.
fn mask_words(q: &Tensor, mask: &Tensor) -> Result<(Tensor, u32), PortError> {
    let kernel = KernelId::GatedDeltaStep;
    let steps = match *q.shape() {
        [b, t, _, _] => [b, t],
        _ => {
            return Err(PortError::invalid(
                kernel,
                format!("q must be [B, T, Hk, Dk], got {:?}", q.shape()),
            ))
        }
    };
    if mask.shape() != steps {
        return Err(PortError::invalid(
            kernel,
            format!("mask must be [B, T] = {steps:?}, got {:?}", mask.shape()),
        ));
    }
    let n = steps[0] * steps[1];
    match mask.dtype() {
        DType::U32 => Ok((mask.reshape(&[n])?, MASK_WORDS)),
        DType::U8 if n.is_multiple_of(4) && mask.byte_offset().is_multiple_of(4) => {
            Ok((mask.view_bytes(0, DType::U32, &[n / 4])?, MASK_BYTES))
        }
        DType::U8 => Err(PortError::invalid(
            kernel,
            format!(
                "a u8 mask is read as u32 words: {n} bytes at byte {} are not whole words; \
                 pass it as u32",
                mask.byte_offset()
            ),
        )),
        other => Err(PortError::invalid(
            kernel,
            format!("mask must be u8 (bool) or u32, got {}", other.name()),
        )),
    }
}

/// One word of an input the kernel never reads, standing in for an absent mask (no allocation
/// unless every input is shorter than a word).
fn unread_word(dev: &Device, inputs: [&Tensor; 4]) -> Result<Tensor, PortError> {
    for t in inputs {
        if t.byte_len() >= 4 && t.byte_offset().is_multiple_of(4) {
            return t.view_bytes(0, DType::U32, &[1]);
        }
    }
    Tensor::zeros(dev, DType::U32, &[1])
}

/// Gated DeltaNet over `T` steps (mlx-lm's `gated_delta_kernel`), out of place. Per row
/// `(b, hv, dv)` with the f32 state `s = state_in[b, hv, dv, :]` and, at step `t`, the key
/// head `hk = hv / (Hv/Hk)`'s `q, k`: `s ← s·g` (the head's scalar or one per key column),
/// `kv = Σ s·k`, `δ = (v − kv)·β`, `s ← s + k·δ`, `y = rnd_T(Σ s·q)`; a step whose mask is 0
/// (false) leaves `s` unchanged and writes `y = 0`. `state_out = rnd_T(s)` after the last step.
/// Arithmetic is f32; the state stays f32 across the steps, or with `chain_parity` is rounded
/// to `T` after every step (`y` from the unrounded state), so a `T`-step call equals `T`
/// one-step calls bit for bit (for f32 the two coincide).
///
/// Shapes, all in one activation dtype `T` (f32, f16 or bf16): `q, k [B, T, Hk, Dk]` with
/// `Dk ≤ 512` (the block's state rows live in shared memory), `v [B, T, Hv, Dv]` with
/// `Hv % Hk == 0`, `g [B, T, Hv]` or `[B, T, Hv, Dk]`, `beta [B, T, Hv]`,
/// `state_in [B, Hv, Dv, Dk]`; outputs `y` (the shape of `v`) and `state_out` (that of
/// `state_in`, not overlapping it). `mask`: `[B, T]`, u32 (nonzero runs the step) or u8/bool
/// (`B·T` a multiple of 4 and starting on a word, else pass it as u32).
#[allow(clippy::too_many_arguments)]
pub fn gated_delta_step(
    dev: &Device,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    g: &Tensor,
    beta: &Tensor,
    mask: Option<&Tensor>,
    state_in: &Tensor,
    chain_parity: bool,
    y: &mut Tensor,
    state_out: &mut Tensor,
) -> Result<Ran, PortError> {
    let (words, mask_kind) = match mask {
        Some(m) => mask_words(q, m)?,
        None => (unread_word(dev, [q, k, v, state_in])?, MASK_NONE),
    };
    let p = GatedDeltaParams {
        chain_parity: chain_parity as u32,
        mask_kind,
        ..Default::default()
    };
    super::kernel::gated_delta_step(dev, &p, q, k, v, g, beta, &words, state_in, y, state_out)
}
