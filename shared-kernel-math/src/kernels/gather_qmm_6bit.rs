//! `gather_qmm` at 6 bits per code: the body and every contract are in
//! [`gather_qmm`](super::gather_qmm).

use super::gather_qmm::{bind, gather_qmm, launch, shared_bytes, GatherQmmParams};
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Descriptor of `gather_qmm_6bit`.
pub struct GatherQmm6Bit;

impl KernelDef for GatherQmm6Bit {
    type Params = GatherQmmParams;
    const NAME: &'static str = "gather_qmm_6bit";

    /// Buffers: `lhs [L, C]`, `lhs_idx [S]` and `rhs_idx [S]` u32, the stacked experts
    /// (`w_q [E, N, C·6/32]`, `scales`, `biases`: packed words of `E·N·C/group_size` values
    /// each), `out [S, N]`.
    fn bind(p: &mut GatherQmmParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        bind(p, shapes, 6)
    }

    fn launch(p: &GatherQmmParams) -> Launch {
        launch(p)
    }

    fn shared_bytes(p: &GatherQmmParams, block: u32, _wave: u32) -> usize {
        shared_bytes(p, block)
    }
}

/// The body at 6 bits.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn gather_qmm_6bit<T: Element, B: Block>(
    b: &B,
    p: &GatherQmmParams,
    lhs: Src<T>,
    lhs_idx: Src<u32>,
    rhs_idx: Src<u32>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    out: Dst<T>,
) {
    gather_qmm(
        b,
        p,
        lhs,
        lhs_idx,
        rhs_idx,
        w_q,
        scales,
        biases,
        out,
        [0u32; 6],
    );
}
