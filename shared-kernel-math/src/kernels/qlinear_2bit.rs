//! `qlinear` at 2 bits per code: the body and every contract are in
//! [`qlinear`](super::qlinear).

use super::qlinear::{bind, launch, qlinear, QLinearParams, LAUNCH_BOUND};
use crate::{Block, Dst, Element, KernelDef, Launch, LaunchBound, ShapeError, Src};

/// Descriptor of `qlinear_2bit`.
pub struct QLinear2Bit;

impl KernelDef for QLinear2Bit {
    type Params = QLinearParams;
    const NAME: &'static str = "qlinear_2bit";
    const LAUNCH_BOUND: Option<LaunchBound> = Some(LAUNCH_BOUND);

    /// Buffers: `x [M, K]`, `w_q [N, K·2/32]`, `scales` and `biases` (packed words of
    /// `N·K/group_size` values), `bias [N]` (or anything of one element or more when
    /// `has_bias` is 0), `y [M, N]`.
    fn bind(p: &mut QLinearParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        bind(p, shapes, 2)
    }

    fn launch(p: &QLinearParams) -> Launch {
        launch(p)
    }
}

/// The body at 2 bits.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn qlinear_2bit<T: Element, B: Block>(
    b: &B,
    p: &QLinearParams,
    x: Src<T>,
    w_q: Src<u32>,
    scales: Src<u32>,
    biases: Src<u32>,
    bias: Src<T>,
    y: Dst<T>,
) {
    qlinear(b, p, x, w_q, scales, biases, bias, y, [0u32; 2]);
}
