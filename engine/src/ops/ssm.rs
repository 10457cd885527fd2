//! The state-space ops over typed tensors: the Mamba2 mixer's conv step, state update and gated
//! norm, and Mamba1's selective scan. The state update's inputs keep the dtypes they are stored in, and the op names each
//! dtype to the kernel, which reads the tensor's bytes as packed words.

use crate::launch::{launch, Arg, Mode, Ran};
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::causal_conv1d_update::ConvUpdateParams;
use kiln_math::kernels::gated_rms_norm::GatedRmsNormParams;
use kiln_math::kernels::mamba1_selective_scan::Mamba1ScanParams;
use kiln_math::kernels::qlinear::scale_code;
use kiln_math::kernels::ssm_update::SsmUpdateParams;
use kiln_math::{DType, KernelId, Params};

/// `t` as the u32 words the kernel reads, and its dtype's code; `t` must be f32, f16 or bf16,
/// start on a word and fill whole words.
fn packed_words(kernel: KernelId, name: &str, t: &Tensor) -> Result<(Tensor, u32), PortError> {
    let bad = |why: String| PortError::invalid(kernel, format!("{name}: {why}"));
    if !matches!(t.dtype(), DType::F32 | DType::F16 | DType::Bf16) {
        return Err(bad(format!(
            "must be f32, f16 or bf16, got {}",
            t.dtype().name()
        )));
    }
    if !t.byte_offset().is_multiple_of(4) || !t.byte_len().is_multiple_of(4) {
        return Err(bad(format!(
            "a {}-byte {} tensor at byte {} is not whole u32 words (a 16-bit vector of odd \
             length, or one starting mid-word); store it as f32",
            t.byte_len(),
            t.dtype().name(),
            t.byte_offset()
        )));
    }
    Ok((
        t.view_bytes(0, DType::U32, &[t.byte_len() / 4])?,
        scale_code(t.dtype()),
    ))
}

/// The dt clip bounds of an [`ssm_update`]: `dt' = clip(softplus(dt + dt_bias), min, max)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeStepLimits {
    /// Lower bound (finite; 0 for none).
    pub min: f32,
    /// Upper bound (`f32::INFINITY` for none).
    pub max: f32,
}

/// Mamba2's single-token state update (spec §8), out of place.
///
/// Shapes: `x [B, 1, H, Dh]` and `d [H]` in the activation dtype `T` (f32, f16 or bf16),
/// `b` and `c` `[B, 1, G, Ds]` with `H % G == 0` and `Ds` a multiple of 32, `dt [B, 1, H]`
/// (any shape of `B·H` elements), `a_log` and `dt_bias` `[H]`, each of these five in its own
/// dtype (f32, f16 or bf16); the f32 state `state_in [B, H, Dh, Ds]`; outputs `out` (the shape
/// and dtype of `x`) and `state_out` (that of `state_in`, not overlapping it).
#[allow(clippy::too_many_arguments)]
pub fn ssm_update(
    dev: &Device,
    limits: TimeStepLimits,
    x: &Tensor,
    a_log: &Tensor,
    b: &Tensor,
    c: &Tensor,
    d: &Tensor,
    dt: &Tensor,
    dt_bias: &Tensor,
    state_in: &Tensor,
    out: &mut Tensor,
    state_out: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = KernelId::SsmUpdate;
    let &[_, tokens, groups, _] = b.shape() else {
        return Err(PortError::invalid(
            kernel,
            format!("b must be [B, 1, G, Ds], got {:?}", b.shape()),
        ));
    };
    if tokens != 1 || c.shape() != b.shape() {
        return Err(PortError::invalid(
            kernel,
            format!(
                "b must be [B, 1, G, Ds] and c its shape, got {:?} and {:?}",
                b.shape(),
                c.shape()
            ),
        ));
    }
    let (a_log_w, a_log_dtype) = packed_words(kernel, "a_log", a_log)?;
    let (b_w, b_dtype) = packed_words(kernel, "b", b)?;
    let (c_w, c_dtype) = packed_words(kernel, "c", c)?;
    let (dt_w, dt_dtype) = packed_words(kernel, "dt", dt)?;
    let (dt_bias_w, dt_bias_dtype) = packed_words(kernel, "dt_bias", dt_bias)?;
    let p = SsmUpdateParams {
        groups: u32::try_from(groups)
            .map_err(|_| PortError::invalid(kernel, format!("{groups} groups")))?,
        time_step_min: limits.min,
        time_step_max: limits.max,
        a_log_dtype,
        b_dtype,
        c_dtype,
        dt_dtype,
        dt_bias_dtype,
        ..Default::default()
    };
    let mut args = [
        Arg::In(x),
        Arg::In(&a_log_w),
        Arg::In(&b_w),
        Arg::In(&c_w),
        Arg::In(d),
        Arg::In(&dt_w),
        Arg::In(&dt_bias_w),
        Arg::In(state_in),
        Arg::Out(out),
        Arg::Out(state_out),
    ];
    launch(dev, kernel, p.words(), &mut args, Mode::Auto)
}

/// Mamba's single-token conv step, out of place: `out[b, c] = silu(bias[c] + Σ_j weight[c, j] ·
/// u[j])` over the window `u = concat(state_in[b, :, c], x[b, c])` (f32 accumulation, one
/// rounding), and `state_out` = the window's last `k − 1` inputs.
///
/// Shapes, all one dtype (f32, f16 or bf16): `x [B, C]` (or `[B, 1, C]`), `weight [C, k]` (or
/// MLX's `[C, k, 1]`) with `k` 2 to 4, `bias [C]`, `state_in [B, k − 1, C]` (channels last, the
/// oldest input first), `out` the shape of `x`, `state_out` that of `state_in` (not overlapping
/// it).
pub fn causal_conv1d_update(
    dev: &Device,
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    state_in: &Tensor,
    out: &mut Tensor,
    state_out: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = ConvUpdateParams {
        has_bias: bias.is_some() as u32,
        silu: 1,
        ..Default::default()
    };
    // Without a bias any buffer of one element or more stands in, unread: x is one.
    super::kernel::causal_conv1d_update(
        dev,
        &p,
        x,
        weight,
        bias.unwrap_or(x),
        state_in,
        out,
        state_out,
    )
}

/// Mamba2's gated RMSNorm (MambaRMSNormGated, gate before the norm):
/// `out = weight · h / sqrt(mean_group(h²) + eps)` with `h = y · silu(gate)` (or `h = y` without
/// a gate), over `groups` contiguous groups of each row, in f32 and rounded once.
///
/// Shapes, all one dtype (f32, f16 or bf16): `y [.., I]` with `I % groups == 0`, `gate` the
/// shape of `y`, `weight [I]`, `out` the shape of `y`.
pub fn gated_rms_norm(
    dev: &Device,
    y: &Tensor,
    gate: Option<&Tensor>,
    weight: &Tensor,
    groups: usize,
    eps: f32,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = KernelId::GatedRmsNorm;
    let p = GatedRmsNormParams {
        groups: u32::try_from(groups)
            .map_err(|_| PortError::invalid(kernel, format!("{groups} groups")))?,
        eps,
        has_gate: gate.is_some() as u32,
        ..Default::default()
    };
    // Without a gate y stands in, unread.
    super::kernel::gated_rms_norm(dev, &p, y, gate.unwrap_or(y), weight, out)
}

/// Mamba1's selective scan over whole sequences (spec §12), float state: per batch row and
/// channel `d`, `s[n] = exp(dt_t·a[d, n])·s[n] + dt_t·x_t·b_t[n]` and
/// `y_t = Σ_n s[n]·c_t[n] + d[d]·x_t` for `t = 0..L`, the state and the arithmetic in f32 across
/// the sequence, `y` rounded to `T` once per element; no z-gate (multiply by `silu(z)` after).
///
/// Shapes: `x`, `dt` (already softplus'd) and `y` `[Bt, L, Dm]`, `b` and `c` `[Bt, L, N]` with
/// `1 ≤ N ≤ 32`, `d [Dm]`, all in the activation dtype `T` (f32, f16 or bf16); `a [Dm, N]`
/// (already `−exp(A_log)`) and the states `[Bt, Dm, N]` in f32. `state_in` `None` starts every
/// row from zeros (a fresh sequence); `state_out` must not overlap `state_in`.
#[allow(clippy::too_many_arguments)]
pub fn mamba1_selective_scan(
    dev: &Device,
    x: &Tensor,
    dt: &Tensor,
    b: &Tensor,
    c: &Tensor,
    a: &Tensor,
    d: &Tensor,
    state_in: Option<&Tensor>,
    y: &mut Tensor,
    state_out: &mut Tensor,
) -> Result<Ran, PortError> {
    let p = Mamba1ScanParams {
        fresh: state_in.is_none() as u32,
        ..Default::default()
    };
    // A fresh scan reads no state: `a` (f32, never empty) stands in, unread.
    super::kernel::mamba1_selective_scan(
        dev,
        &p,
        x,
        dt,
        b,
        c,
        a,
        d,
        state_in.unwrap_or(a),
        y,
        state_out,
    )
}
