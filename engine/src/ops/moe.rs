//! Fused decode MoE experts (spec §7): [`MoeExperts`] holds one layer's stacked experts in
//! MLX's affine layout and [`moe_experts`] runs the routed tokens through them: the gate/up
//! pair (or fc1) with its activation into f32 `act_g`, then down with each slot's score
//! applied in f32 and the K-sum rounded to the activation dtype once — in one launch
//! (`moe_down_sum`) from 8 slots per token, else as `moe_down`'s f32 partials and
//! `moe_combine` (the same bits; the faster path per K as measured). Routing is the caller's:
//! each token brings its K expert ids and normalized scores.

use super::kernel;
use super::QuantizedWeight;
use crate::launch::{launch, Arg, Mode, Ran};
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::moe_combine::MoeCombineParams;
use kiln_math::kernels::moe_experts::{MoeParams, ACT_GEGLU, ACT_SWIGLU};
use kiln_math::kernels::moe_route::{MoeRouteParams, MODE_SIGMOID_BIAS, MODE_SOFTMAX};
use kiln_math::kernels::qlinear::scale_code;
use kiln_math::{DType, KernelId, Params};

/// The activation of a MoE layer's experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoeActivation {
    /// `silu(gate·x) ⊙ (up·x)` (Qwen3-MoE, Mixtral, DeepSeek).
    SwiGlu,
    /// `gelu_tanh(gate·x) ⊙ (up·x)` (Gemma 4).
    GeGlu,
    /// `max(fc1·x, 0)²`, one projection (Nemotron-H).
    Relu2,
}

/// One MoE layer's experts on a device: `first` (gate, or fc1 for [`MoeActivation::Relu2`])
/// and `up` as `[E·Dff, Din]` matrices (expert `e`'s rows at `e·Dff ..`), `down` as
/// `[E·Din, Dff]` — the row-major flattening of MLX's `[E, R, C]` stacked weights.
#[derive(Debug)]
pub struct MoeExperts {
    experts: usize,
    activation: MoeActivation,
    first: QuantizedWeight,
    up: Option<QuantizedWeight>,
    down: QuantizedWeight,
}

/// The kernel of each projection at its bit width.
fn first_kernel(activation: MoeActivation, bits: u32) -> Option<KernelId> {
    Some(match (activation, bits) {
        (MoeActivation::Relu2, 4) => KernelId::MoeFc1Relu24Bit,
        (MoeActivation::Relu2, 8) => KernelId::MoeFc1Relu28Bit,
        (_, 4) => KernelId::MoeGateup4Bit,
        (_, 8) => KernelId::MoeGateup8Bit,
        _ => return None,
    })
}

/// The down kernel at `bits`: with the K-sum (`moe_down_sum`) or into partials (`moe_down`).
fn down_kernel(bits: u32, summed: bool) -> Option<KernelId> {
    Some(match (bits, summed) {
        (4, true) => KernelId::MoeDownSum4Bit,
        (6, true) => KernelId::MoeDownSum6Bit,
        (8, true) => KernelId::MoeDownSum8Bit,
        (4, false) => KernelId::MoeDown4Bit,
        (6, false) => KernelId::MoeDown6Bit,
        (8, false) => KernelId::MoeDown8Bit,
        _ => return None,
    })
}

/// Columns of the partials a call over `k` slots per token keeps (none when down sums).
pub(super) fn partial_din(experts: &MoeExperts, k: usize) -> usize {
    if k >= DOWN_SUM_MIN_SLOTS {
        0
    } else {
        experts.din()
    }
}

/// Slots per token from which down runs with the K-sum in one launch (`moe_down_sum`, a wave
/// per output row over every slot) rather than as `moe_down`'s wave per slot and row plus
/// `moe_combine`: measured on the H200 (docs/results/moe-h200-2026-12-05.md, run B), the fused
/// sum won at Qwen3-30B-A3B's K 8 (23.9 µs against 23.6 + 3.4) and lost at Nemotron-3-Nano's
/// K 6 (62.6 against 42.6 + 3) and Mixtral's K 2 (153.6 against 146.9 + 1.2). Both give the
/// same bits.
const DOWN_SUM_MIN_SLOTS: usize = 8;

impl MoeExperts {
    /// Checks the projections against each other: `up` present exactly for the gated
    /// activations with `first`'s format and shape; gate/up (fc1) at 4 or 8 bits, down at 4, 6
    /// or 8; `first` `[E·Dff, Din]` and `down` `[E·Din, Dff]` for the given `experts`.
    pub fn new(
        experts: usize,
        activation: MoeActivation,
        first: QuantizedWeight,
        up: Option<QuantizedWeight>,
        down: QuantizedWeight,
    ) -> Result<MoeExperts, PortError> {
        let Some(kernel) = first_kernel(activation, first.format().bits()) else {
            return Err(PortError::invalid(
                KernelId::MoeGateup4Bit,
                format!(
                    "gate/up/fc1 at {} bits: the fused experts read 4 or 8",
                    first.format().bits()
                ),
            ));
        };
        let bad = |msg: String| PortError::invalid(kernel, msg);
        if down_kernel(down.format().bits(), true).is_none() {
            return Err(bad(format!(
                "down at {} bits: the fused experts read 4, 6 or 8",
                down.format().bits()
            )));
        }
        if experts == 0 {
            return Err(bad("a MoE layer needs one expert or more".into()));
        }
        let gated = activation != MoeActivation::Relu2;
        match (&up, gated) {
            (Some(u), true) => {
                if u.format() != first.format()
                    || u.rows() != first.rows()
                    || u.cols() != first.cols()
                {
                    return Err(bad("gate and up must share the format and the shape".into()));
                }
            }
            (None, false) => {}
            (Some(_), false) => return Err(bad("relu² experts have no up projection".into())),
            (None, true) => return Err(bad("gated experts need an up projection".into())),
        }
        let (din, dff) = (first.cols(), first.rows() / experts);
        if first.rows() != experts * dff || dff == 0 {
            return Err(bad(format!(
                "gate/fc1 has {} rows: not {experts} experts of equal height",
                first.rows()
            )));
        }
        if down.rows() != experts * din || down.cols() != dff {
            return Err(bad(format!(
                "down must be [E·Din, Dff] = [{}, {dff}], got [{}, {}]",
                experts * din,
                down.rows(),
                down.cols()
            )));
        }
        Ok(MoeExperts {
            experts,
            activation,
            first,
            up,
            down,
        })
    }

    /// Experts in the layer.
    pub fn experts(&self) -> usize {
        self.experts
    }

    /// Model width (Din).
    pub fn din(&self) -> usize {
        self.first.cols()
    }

    /// Expert FFN width (Dff).
    pub fn dff(&self) -> usize {
        self.down.cols()
    }

    /// The activation.
    pub fn activation(&self) -> MoeActivation {
        self.activation
    }

    /// Gate (or fc1), up and down, for `moe_block`'s `gather_qmm` views of the same buffers.
    pub(super) fn weights(&self) -> (&QuantizedWeight, Option<&QuantizedWeight>, &QuantizedWeight) {
        (&self.first, self.up.as_ref(), &self.down)
    }

    /// [`moe_experts_routed`] over temporaries the caller carved (`act_g [T, K, Dff]` and
    /// `partial [T, K, partial_din]` f32), for `moe_block`, which holds the scratch region.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_routed(
        &self,
        dev: &Device,
        x: &Tensor,
        ids: &Tensor,
        scores: &Tensor,
        rows_per_block: u32,
        act_g: &mut Tensor,
        partial: &mut Tensor,
        out: &mut Tensor,
    ) -> Result<MoeRan, PortError> {
        self.check(x, ids.shape().get(1).copied().unwrap_or(0))?;
        self.launch_all(dev, x, ids, scores, rows_per_block, act_g, partial, out)
    }
}

/// The launches one [`moe_experts`] call made.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeRan {
    /// The gate/up pair or fc1.
    pub up: Ran,
    /// Down: with the K-sum (`moe_down_sum`), or into f32 partials.
    pub down: Ran,
    /// The K-sum of the partials (`moe_combine`), when down did not sum.
    pub combine: Option<Ran>,
}

/// Scratch bytes a [`moe_experts`] call over `tokens × k` slots takes (ids, scores, `act_g`
/// and, below 8 slots per token, the partials), for [`Device::reserve_scratch`].
pub fn moe_scratch_bytes(experts: &MoeExperts, tokens: usize, k: usize) -> usize {
    let slots = tokens * k;
    let partials = if k >= DOWN_SUM_MIN_SLOTS {
        0
    } else {
        slots * experts.din()
    };
    crate::scratch_bytes(&[
        (DType::U32, slots),
        (DType::F32, slots),
        (DType::F32, slots * experts.dff()),
        (DType::F32, partials),
    ])
}

/// `out[t, :] = rnd(Σ_k scores[t, k] · down_e(act(gate_e·x[t]) ⊙ up_e·x[t]))` with
/// `e = ids[t, k]` (or relu² of fc1 without up): `x` and `out` `[T, Din]` in one activation
/// dtype (f32, f16 or bf16), `ids` and `scores` `T·K` values row by row (token-major). Every
/// dot product and the weighted sum in f32; only `out` is rounded. `rows_per_block` (1..=32,
/// the seeds' `sgy`; 8 is a good default) never changes a bit of the answer. K above E, an id
/// ≥ E, or ids and scores of other lengths are refused before any launch.
pub fn moe_experts(
    dev: &Device,
    x: &Tensor,
    experts: &MoeExperts,
    ids: &[u32],
    scores: &[f32],
    rows_per_block: u32,
    out: &mut Tensor,
) -> Result<MoeRan, PortError> {
    let kernel = experts.first_kernel();
    let (tokens, k) = ids_per_token(kernel, x, ids)?;
    if scores.len() != ids.len() {
        return Err(PortError::invalid(
            kernel,
            format!("{} scores for {} expert ids", scores.len(), ids.len()),
        ));
    }
    experts.check(x, k)?;
    check_expert_ids(kernel, ids, experts.experts)?;
    let mut scratch = dev.scratch(moe_scratch_bytes(experts, tokens, k))?;
    let ids = scratch.upload(ids)?.reshape(&[tokens, k])?;
    let scores = scratch.upload(scores)?.reshape(&[tokens, k])?;
    let mut act_g = scratch.tensor(DType::F32, &[tokens, k, experts.dff()])?;
    let mut partial = scratch.tensor(DType::F32, &[tokens, k, partial_din(experts, k)])?;
    experts.launch_all(
        dev,
        x,
        &ids,
        &scores,
        rows_per_block,
        &mut act_g,
        &mut partial,
        out,
    )
}

/// `(T, K)` of host routing: `T` the rows of `x`, `K` the ids per token (refused unless `ids`
/// holds a whole number of them, one or more). Shared with `gather_qmm_topk`.
pub(super) fn ids_per_token(
    kernel: KernelId,
    x: &Tensor,
    ids: &[u32],
) -> Result<(usize, usize), PortError> {
    let tokens = x.shape().first().copied().unwrap_or(0);
    if tokens == 0 || ids.is_empty() || !ids.len().is_multiple_of(tokens) {
        return Err(PortError::invalid(
            kernel,
            format!(
                "{} expert ids for {tokens} tokens: K ids per token expected",
                ids.len()
            ),
        ));
    }
    Ok((tokens, ids.len() / tokens))
}

/// Refuses the first host expert id ≥ `experts` (its slot named). Shared with `gather_qmm`.
pub(super) fn check_expert_ids(
    kernel: KernelId,
    ids: &[u32],
    experts: usize,
) -> Result<(), PortError> {
    match ids.iter().position(|&e| e as usize >= experts) {
        Some(position) => Err(PortError::ExpertOutOfRange {
            kernel: kernel.name(),
            position,
            id: ids[position],
            experts,
        }),
        None => Ok(()),
    }
}

/// [`moe_experts`] with the routing already on the device (from [`moe_route`]): `ids [T, K]`
/// u32 and `scores [T, K]` f32. The ids cannot be checked before the launch; a slot whose id
/// is ≥ E contributes nothing (the kernels read no weights for it).
pub fn moe_experts_routed(
    dev: &Device,
    x: &Tensor,
    experts: &MoeExperts,
    ids: &Tensor,
    scores: &Tensor,
    rows_per_block: u32,
    out: &mut Tensor,
) -> Result<MoeRan, PortError> {
    let kernel = experts.first_kernel();
    let &[tokens, k] = ids.shape() else {
        return Err(PortError::invalid(kernel, "ids must be [T, K]"));
    };
    if ids.dtype() != DType::U32 || scores.dtype() != DType::F32 || scores.shape() != ids.shape() {
        return Err(PortError::invalid(
            kernel,
            "ids must be u32 [T, K] and scores f32 of the same shape",
        ));
    }
    experts.check(x, k)?;
    let mut scratch = dev.scratch(moe_scratch_bytes(experts, tokens, k))?;
    let mut act_g = scratch.tensor(DType::F32, &[tokens, k, experts.dff()])?;
    let mut partial = scratch.tensor(DType::F32, &[tokens, k, partial_din(experts, k)])?;
    experts.launch_all(
        dev,
        x,
        ids,
        scores,
        rows_per_block,
        &mut act_g,
        &mut partial,
        out,
    )
}

/// A router's rule (see `kiln_math::kernels::moe_route`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MoeRouter {
    /// Softmax over the experts, the top k of the probabilities; `renormalize` divides the
    /// picked ones by their sum (Qwen3's `norm_topk_prob`, Mixtral).
    Softmax {
        /// Divide the picked probabilities by their sum.
        renormalize: bool,
    },
    /// Sigmoid, the top k of sigmoid + correction bias, scores from the sigmoid (Nemotron-H,
    /// DeepSeek-V3): divided by their sum (+1e-20) when `renormalize` and k > 1, then scaled.
    SigmoidBias {
        /// Divide the picked scores by their sum.
        renormalize: bool,
        /// `routed_scaling_factor`.
        scaling_factor: f32,
    },
}

/// Each token's top-k experts: `logits [T, E]` (the router's output, any activation dtype)
/// into `ids [T, K]` u32 (best first, ties to the lower index) and `scores [T, K]` f32;
/// `correction_bias [E]` f32 for [`MoeRouter::SigmoidBias`] (refused otherwise).
pub fn moe_route(
    dev: &Device,
    logits: &Tensor,
    router: MoeRouter,
    correction_bias: Option<&Tensor>,
    ids: &mut Tensor,
    scores: &mut Tensor,
) -> Result<Ran, PortError> {
    let unread;
    let bias = match (router, correction_bias) {
        (MoeRouter::SigmoidBias { .. }, Some(b)) => b,
        (MoeRouter::Softmax { .. }, None) => {
            // The softmax router reads no bias, but its slot is f32: the logits' first word
            // (no allocation) unless they are too short or start mid-word.
            unread = if logits.byte_len() >= 4 && logits.byte_offset().is_multiple_of(4) {
                logits.view_bytes(0, DType::F32, &[1])?
            } else {
                Tensor::zeros(dev, DType::F32, &[1])?
            };
            &unread
        }
        _ => {
            return Err(PortError::invalid(
                KernelId::MoeRoute,
                "a correction bias goes with the sigmoid router, and only with it",
            ))
        }
    };
    let (mode, renormalize, scaling_factor) = match router {
        MoeRouter::Softmax { renormalize } => (MODE_SOFTMAX, renormalize, 1.0),
        MoeRouter::SigmoidBias {
            renormalize,
            scaling_factor,
        } => (MODE_SIGMOID_BIAS, renormalize, scaling_factor),
    };
    let p = MoeRouteParams {
        mode,
        renormalize: renormalize as u32,
        scaling_factor,
        ..MoeRouteParams::default()
    };
    kernel::moe_route(dev, &p, logits, bias, ids, scores)
}

impl MoeExperts {
    fn first_kernel(&self) -> KernelId {
        first_kernel(self.activation, self.first.format().bits()).expect("checked at construction")
    }

    /// `x [T, Din]` and K against the layer.
    pub(super) fn check(&self, x: &Tensor, k: usize) -> Result<(), PortError> {
        let bad = |msg: String| PortError::invalid(self.first_kernel(), msg);
        let &[_, din] = x.shape() else {
            return Err(bad("x must be two-dimensional: [T, Din]".into()));
        };
        if din != self.din() {
            return Err(bad(format!(
                "x has {din} columns, the experts read {}",
                self.din()
            )));
        }
        if k > self.experts {
            return Err(bad(format!(
                "K = {k} experts per token, more than the layer's {}",
                self.experts
            )));
        }
        Ok(())
    }

    /// The launches over device ids and scores and the `act_g` temporary: down with the K-sum
    /// from [`DOWN_SUM_MIN_SLOTS`] slots per token, else into `partial` and `moe_combine`.
    #[allow(clippy::too_many_arguments)]
    fn launch_all(
        &self,
        dev: &Device,
        x: &Tensor,
        ids: &Tensor,
        scores: &Tensor,
        rows_per_block: u32,
        act_g: &mut Tensor,
        partial: &mut Tensor,
        out: &mut Tensor,
    ) -> Result<MoeRan, PortError> {
        let summed = ids.shape()[1] >= DOWN_SUM_MIN_SLOTS;
        let down_out = if summed { &mut *out } else { &mut *partial };
        let (up, down) =
            self.launch_up_down(dev, x, ids, scores, rows_per_block, act_g, down_out, summed)?;
        let combine = if summed {
            None
        } else {
            Some(kernel::moe_combine(
                dev,
                &MoeCombineParams::default(),
                partial,
                out,
            )?)
        };
        Ok(MoeRan { up, down, combine })
    }

    /// Gate/up (or fc1) into `act_g`, then down: with the K-sum into `down_out [T, Din]` when
    /// `summed`, else into its f32 partials `down_out [T, K, Din]` (`moe_block`'s shared
    /// expert writes them beside the routed sum).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn launch_up_down(
        &self,
        dev: &Device,
        x: &Tensor,
        ids: &Tensor,
        scores: &Tensor,
        rows_per_block: u32,
        act_g: &mut Tensor,
        down_out: &mut Tensor,
        summed: bool,
    ) -> Result<(Ran, Ran), PortError> {
        let params = |w: &QuantizedWeight, act: u32| MoeParams {
            group_size: w.format().group_size(),
            scale_dtype: scale_code(w.format().scale_dtype()),
            act,
            rows_per_block,
            ..MoeParams::default()
        };
        // The codes as `[E, R, C·bits/32]`; scales and biases are read flat.
        let fq = self.first.stacked_codes(self.experts)?;
        let (_, fs, fb) = self.first.buffers();
        let up = match &self.up {
            Some(u) => {
                let uq = u.stacked_codes(self.experts)?;
                let (_, us, ub) = u.buffers();
                let code = if self.activation == MoeActivation::GeGlu {
                    ACT_GEGLU
                } else {
                    ACT_SWIGLU
                };
                let mut args = [
                    Arg::In(x),
                    Arg::In(ids),
                    Arg::In(&fq),
                    Arg::In(fs),
                    Arg::In(fb),
                    Arg::In(&uq),
                    Arg::In(us),
                    Arg::In(ub),
                    Arg::Out(act_g),
                ];
                let p = params(&self.first, code);
                launch(dev, self.first_kernel(), p.words(), &mut args, Mode::Auto)?
            }
            None => {
                let mut args = [
                    Arg::In(x),
                    Arg::In(ids),
                    Arg::In(&fq),
                    Arg::In(fs),
                    Arg::In(fb),
                    Arg::Out(act_g),
                ];
                let p = params(&self.first, 0);
                launch(dev, self.first_kernel(), p.words(), &mut args, Mode::Auto)?
            }
        };
        let dq = self.down.stacked_codes(self.experts)?;
        let (_, ds, db) = self.down.buffers();
        let p = params(&self.down, 0);
        let down_kernel =
            down_kernel(self.down.format().bits(), summed).expect("checked at construction");
        let mut args = [
            Arg::In(ids),
            Arg::In(&dq),
            Arg::In(ds),
            Arg::In(db),
            Arg::In(act_g),
            Arg::In(scores),
            Arg::Out(down_out),
        ];
        let down = launch(dev, down_kernel, p.words(), &mut args, Mode::Auto)?;
        Ok((up, down))
    }
}
