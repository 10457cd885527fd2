//! BitNet b1.58's ternary linear layer over a checkpoint's packed weights (spec §2): the op
//! takes the bytes as stored (u8 `[out/4, in]`) or the same bytes as u32 words, and hands the
//! kernel words, so no port reads bytes one at a time.

use crate::launch::Ran;
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::bitlinear::BitLinearParams;
use kiln_math::{DType, KernelId};

/// `packed_weights` as the u32 words `[out/4, in/4]` the kernel reads: a u8 `[out/4, in]`
/// tensor (`in` a multiple of 4, starting on a word) is viewed in place, a u32 one passes.
fn packed_words(packed_weights: &Tensor) -> Result<Tensor, PortError> {
    let kernel = KernelId::BitLinear;
    match (packed_weights.dtype(), packed_weights.shape()) {
        (DType::U32, shape @ [_, _]) => packed_weights.reshape(shape),
        (DType::U8, &[rows, cols]) => {
            if !cols.is_multiple_of(4) {
                return Err(PortError::invalid(
                    kernel,
                    format!("packed_weights: in is {cols}, must be a multiple of 4"),
                ));
            }
            if !packed_weights.byte_offset().is_multiple_of(4) {
                return Err(PortError::invalid(
                    kernel,
                    format!(
                        "packed_weights: a u8 view at byte {} does not start on a u32 word",
                        packed_weights.byte_offset()
                    ),
                ));
            }
            packed_weights.view_bytes(0, DType::U32, &[rows, cols / 4])
        }
        (dtype, shape) => Err(PortError::invalid(
            kernel,
            format!(
                "packed_weights must be u8 [out/4, in] or u32 [out/4, in/4], got {} {shape:?}",
                dtype.name()
            ),
        )),
    }
}

/// `y = (x · Wᵀ)·s`, or `(x · Wᵀ)·(1/s)` when `invert_weight_scales` (mlx-lm's default, off
/// for `autobitlinear` checkpoints), for BitNet b1.58's ternary `W [out, in]` (spec §2), in one
/// launch for any batch; f32 accumulation, one rounding to the activation dtype.
///
/// Shapes: `x [.., in]` and `y [.., out]` (the same leading dims, any number, flattened to
/// `Btot` rows) in one activation dtype (f32, f16 or bf16); `packed_weights` the checkpoint's
/// bytes, u8 `[out/4, in]` (byte `P[r, c]` holds the 2-bit codes of rows `r + j·out/4`,
/// `j = 0..4`, LSB first, weight `code − 1`), or those bytes as little-endian u32 words
/// `[out/4, in/4]`; `in` and `out` multiples of 4. `weight_scale` is one element in the
/// activation dtype on the device (an engine casts the checkpoint's scale once at load): the
/// kernel reads it there, so a call never waits on the device.
pub fn bitlinear(
    dev: &Device,
    x: &Tensor,
    packed_weights: &Tensor,
    weight_scale: &Tensor,
    invert_weight_scales: bool,
    y: &mut Tensor,
) -> Result<Ran, PortError> {
    let words = packed_words(packed_weights)?;
    let p = BitLinearParams {
        invert_weight_scales: invert_weight_scales as u32,
        ..Default::default()
    };
    super::kernel::bitlinear(dev, &p, x, &words, weight_scale, y)
}
