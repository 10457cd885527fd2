//! Token embeddings: rows of a table gathered for a batch of token ids, in the activation
//! dtype. The quantized form reads a [`QuantizedWeight`], so one upload of a tied model's
//! table serves both the embedding and the LM head (`ops::qlinear` over the same weight).
//!
//! The ids come from the host and are checked against the vocabulary before anything is
//! uploaded or launched; they travel in the device's scratch region
//! ([`embedding_scratch_bytes`]). Ids already on the device (a sampled token) go straight to
//! the launchers `ops::kernel::embedding` / `embedding_affine`, where an id ≥ V gives a row of
//! zeros instead.

use super::kernel;
use super::QuantizedWeight;
use crate::launch::Ran;
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::embedding::EmbeddingParams;
use kiln_math::kernels::embedding_affine::EmbeddingAffineParams;
use kiln_math::kernels::qlinear::scale_code;
use kiln_math::{DType, KernelId};

/// Scratch bytes an embedding of `ids` token ids takes (the uploaded ids), for
/// [`Device::reserve_scratch`].
pub fn embedding_scratch_bytes(ids: usize) -> usize {
    crate::scratch_bytes(&[(DType::U32, ids)])
}

/// The first id at or past `vocab`, as the typed refusal.
fn check_ids(kernel: KernelId, ids: &[u32], vocab: usize) -> Result<(), PortError> {
    match ids.iter().position(|&id| id as usize >= vocab) {
        Some(position) => Err(PortError::IdOutOfRange {
            kernel: kernel.name(),
            position,
            id: ids[position],
            vocab,
        }),
        None => Ok(()),
    }
}

/// `out[b, :] = table[ids[b], :]`: `table [V, D]` and `out [B, D]` in one dtype (f32, f16 or
/// bf16), `B = ids.len()`; an id ≥ V is refused ([`PortError::IdOutOfRange`]).
pub fn embedding(
    dev: &Device,
    table: &Tensor,
    ids: &[u32],
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = KernelId::Embedding;
    let &[vocab, _] = table.shape() else {
        return Err(PortError::invalid(
            kernel,
            "table must be two-dimensional: [V, D]",
        ));
    };
    check_ids(kernel, ids, vocab)?;
    let mut scratch = dev.scratch(embedding_scratch_bytes(ids.len()))?;
    let ids = scratch.upload(ids)?;
    kernel::embedding(dev, &EmbeddingParams::default(), &ids, table, out)
}

/// `out[b, d] = rnd(scale·q + bias)` of row `ids[b]` of `table`, the `[V, D]` matrix in MLX's
/// affine layout that `ops::qlinear` reads as a `[N, K]` weight (any of its bit widths, group
/// sizes and scale dtypes; `D` a multiple of 32); `out [B, D]` in the activation dtype (f32,
/// f16 or bf16), `B = ids.len()`; an id ≥ V is refused ([`PortError::IdOutOfRange`]).
pub fn embedding_affine(
    dev: &Device,
    table: &QuantizedWeight,
    ids: &[u32],
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    check_ids(KernelId::EmbeddingAffine, ids, table.rows())?;
    let format = table.format();
    let p = EmbeddingAffineParams {
        bits: format.bits(),
        group_size: format.group_size(),
        scale_dtype: scale_code(format.scale_dtype()),
        ..Default::default()
    };
    let (w_q, scales, biases) = table.buffers();
    let mut scratch = dev.scratch(embedding_scratch_bytes(ids.len()))?;
    let ids = scratch.upload(ids)?;
    kernel::embedding_affine(dev, &p, &ids, w_q, scales, biases, out)
}
