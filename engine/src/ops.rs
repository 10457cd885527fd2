//! The op API: one typed function per kernel, documenting its shapes. Every op validates its
//! inputs before any launch, takes the fallback when the device has no port, and says which
//! path ran.

use crate::launch::{launch, Arg, Mode, Ran};
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::fused_add_rms_norm::AddRmsNormParams;
use kiln_math::{KernelId, Params};

/// Residual add + RMSNorm (spec §3), in place on the residual stream.
///
/// Shapes: `x` and `residual` `[.., D]` (same shape), `weight` `[D]`, `out` `[.., D]`; all one
/// dtype (f32, f16 or bf16). Afterwards `residual = rnd(x + residual)` and
/// `out = rnd(weight · rnd(residual / sqrt(mean(residual²) + eps)))` per row.
pub fn fused_add_rms_norm(
    dev: &Device,
    x: &Tensor,
    residual: &mut Tensor,
    weight: &Tensor,
    eps: f32,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = AddRmsNormParams {
        eps,
        weight_bias: 0.0,
        ..Default::default()
    };
    launch_add_rms_norm(dev, &p, x, residual, weight, out)
}

/// [`fused_add_rms_norm`] with Gemma's gain `(1 + weight)`, the `+1` folded in the weight's dtype.
pub fn fused_add_rms_norm_gemma(
    dev: &Device,
    x: &Tensor,
    residual: &mut Tensor,
    weight: &Tensor,
    eps: f32,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = AddRmsNormParams {
        eps,
        weight_bias: 1.0,
        ..Default::default()
    };
    launch_add_rms_norm(dev, &p, x, residual, weight, out)
}

fn launch_add_rms_norm(
    dev: &Device,
    p: &AddRmsNormParams,
    x: &Tensor,
    residual: &mut Tensor,
    weight: &Tensor,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let mut args = [
        Arg::In(x),
        Arg::Out(residual),
        Arg::In(weight),
        Arg::Out(out),
    ];
    launch(
        dev,
        KernelId::FusedAddRmsNorm,
        p.words(),
        &mut args,
        Mode::Auto,
    )
}
