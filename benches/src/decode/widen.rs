//! The dtype changes a bf16 step needs where an op reads or writes f32, made with kiln's public
//! ops (kiln has no cast op):
//!
//! - **bf16 → f32, exactly** ([`Bf16Widen`]): paged decode attention reads an f32 query (its
//!   contract for pools of any dtype), and the greedy draw (`speculative_accept`) and the
//!   filtered sampler read f32 logits, which the LM head writes from an f32 input (the final
//!   normed row, widened). A bf16 value is the upper 16 bits of the f32 of the same value, so
//!   the f32 output read as bf16 pairs is `[0, v₀, 0, v₁, …]` (little-endian: low half first):
//!   the dense `embedding` kernel, a bit copy, gathers each half from a staging row
//!   `[v₀, …, vₙ₋₁, 0]` with one id per half (`n`, the zero, then `i`). Every bit is kept, NaN
//!   and −0 included. One element per block is slow for long rows (on the cpu at
//!   Llama-3.1-8B's shapes, widening the vocabulary's logits took ~36 ms a step, a 4096-wide
//!   query or hidden row ~1 ms), so only query and hidden rows are widened. f16 has no such
//!   widening, which is why the driver runs no f16 activations.
//! - **f32 → bf16, rounded once** ([`round_f32`]): attention's f32 output into the output
//!   projection's bf16 input, through `moe_combine` over one slot (`rnd(0 + x)`: −0 becomes +0).

use super::DecodeError;
use kiln::math::kernels::embedding::EmbeddingParams;
use kiln::math::kernels::moe_combine::MoeCombineParams;
use kiln::ops;
use kiln::{DType, Device, PortError, Ran, Tensor};

/// A staging row that a bf16 producer writes and the exact widening of it into an f32 tensor.
pub(super) struct Bf16Widen {
    /// bf16 `[len + 1]`: the values, then a zero that is never written.
    staging: Tensor,
    /// u32 `[2·len]`: per f32 of the output, the ids of its low half (`len`: the zero) and its
    /// high half (`i`).
    halves: Tensor,
    len: usize,
}

impl Bf16Widen {
    /// Staging for `len` values on `dev` and the ids of their widening.
    pub(super) fn new(dev: &Device, len: usize) -> Result<Bf16Widen, PortError> {
        let zero = len as u32;
        let halves: Vec<u32> = (0..len as u32).flat_map(|i| [zero, i]).collect();
        Ok(Bf16Widen {
            staging: Tensor::zeros(dev, DType::Bf16, &[len + 1])?,
            halves: Tensor::from_slice(dev, &[2 * len], &halves)?,
            len,
        })
    }

    /// The staged values from `first`, under `shape` (a view for the producer to write): never
    /// past the values, so the zero the low halves read stays zero.
    pub(super) fn staged(&self, first: usize, shape: &[usize]) -> Result<Tensor, DecodeError> {
        let count: usize = shape.iter().product();
        if first + count > self.len {
            return Err(DecodeError::Bench(format!(
                "{count} staged values from {first} of {}",
                self.len
            )));
        }
        Ok(self.staging.view(first, shape)?)
    }

    /// Enqueues `out` (f32, any shape of all the staged values) = the staged values, widened.
    pub(super) fn widen_into(&self, dev: &Device, out: &mut Tensor) -> Result<Ran, DecodeError> {
        if out.dtype() != DType::F32 || out.numel() != self.len {
            return Err(DecodeError::Bench(format!(
                "widening {} bf16 values into {} {:?}",
                self.len,
                out.dtype().name(),
                out.shape()
            )));
        }
        // Rows of one element: each output half is its own row of the table.
        let table = self.staging.reshape(&[self.len + 1, 1])?;
        let mut halves_out = out.view_bytes(0, DType::Bf16, &[2 * self.len, 1])?;
        let p = EmbeddingParams::default();
        Ok(ops::kernel::embedding(
            dev,
            &p,
            &self.halves,
            &table,
            &mut halves_out,
        )?)
    }
}

/// Enqueues `out [R, C]` (bf16 or f16) = f32 `x` (`R·C` values) rounded once.
pub(super) fn round_f32(dev: &Device, x: &Tensor, out: &mut Tensor) -> Result<Ran, DecodeError> {
    let &[rows, cols] = out.shape() else {
        return Err(DecodeError::Bench(format!(
            "rounding into {:?}: [rows, cols] expected",
            out.shape()
        )));
    };
    // One slot per row: the K-sum is the value itself.
    let partial = x.reshape(&[rows, 1, cols])?;
    Ok(ops::kernel::moe_combine(
        dev,
        &MoeCombineParams::default(),
        &partial,
        out,
    )?)
}
