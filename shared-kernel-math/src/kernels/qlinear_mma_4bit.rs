//! `qlinear` at 4 bits on the wave multiply, for 16-bit activations: the body and its geometry
//! are in [`qlinear_mma`](super::qlinear_mma), the contract is `qlinear_4bit`'s
//! ([`qlinear`](super::qlinear)).

use super::qlinear::{bind, QLinearParams};
use super::qlinear_mma::{check_group, launch, qlinear_mma, shared_bytes, MMA_LAUNCH_BOUND};
use crate::{Block, Dst, Element, KernelDef, Launch, LaunchBound, ShapeError, Src};

/// Descriptor of `qlinear_mma_4bit`.
pub struct QLinearMma4Bit;

impl KernelDef for QLinearMma4Bit {
    type Params = QLinearParams;
    const NAME: &'static str = "qlinear_mma_4bit";
    const LAUNCH_BOUND: Option<LaunchBound> = Some(MMA_LAUNCH_BOUND);

    /// Buffers as `qlinear_4bit`'s: `x [M, K]`, `w_q [N, K·4/32]`, `scales` and `biases`
    /// (packed words of `N·K/group_size` values), `bias [N]` (or anything of one element or
    /// more when `has_bias` is 0), `y [M, N]`; group sizes 32, 64 and 128.
    fn bind(p: &mut QLinearParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        bind(p, shapes, 4)?;
        check_group(p)
    }

    fn launch(p: &QLinearParams) -> Launch {
        launch(p)
    }

    fn shared_bytes(p: &QLinearParams, block: u32, wave: u32) -> usize {
        shared_bytes(p, block, wave)
    }
}

/// The body at 4 bits.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn qlinear_mma_4bit<T: Element, B: Block>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    bias: Src<T>,
    y: Dst<T>,
) {
    qlinear_mma(b, p, x, w_q, scales, biases, bias, y);
}
