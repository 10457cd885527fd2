//! One MoE layer for a batch of tokens (spec §7.8): the router, the routed experts with their
//! score-weighted K-sum, and the optional shared expert, in one call that picks the experts'
//! path by the batch and says which ran — the fused decode kernels (spec §7.3–7.6) for one
//! token, the `gather_qmm` chain (spec §13) otherwise, sorted by expert from 64 slots (the
//! prefill rule of §13). Both keep every value between the router and the output in f32 and
//! round `out` once.

use super::gather_qmm::{gather_qmm_indexed, gather_sort, scatter_unsort};
use super::moe::{moe_route, partial_din};
use super::{
    kernel, qlinear, GatherTiling, MoeActivation, MoeExperts, MoeRouter, QuantizedWeight,
    StackedExperts,
};
use crate::launch::Ran;
use crate::scratch::Scratch;
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::moe_act::MoeActParams;
use kiln_math::kernels::moe_combine::MoeCombineParams;
use kiln_math::kernels::moe_experts::{ACT_GEGLU, ACT_RELU2, ACT_SWIGLU};
use kiln_math::kernels::qlinear::MAX_M;
use kiln_math::DType;
use std::sync::Mutex;

/// The name refusals carry.
const OP: &str = "moe_block";

/// Slots (tokens × K) from which the gather path sorts them by expert first (spec §13: prefill
/// with `T·K ≥ 64`), so a block reads each weight word once per run of one expert.
pub const SORTED_MIN_SLOTS: usize = 64;

/// Rows per block of the fused expert kernels (never changes a bit; the seeds' default).
const FUSED_ROWS_PER_BLOCK: u32 = 8;

/// How the routed experts of a [`moe_block`] call ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MoeBlockPath {
    /// The fused decode kernels: gate/up (or fc1) into f32 activations, then down with the
    /// scores and the K-sum (`moe_down_sum`, or `moe_down` + `moe_combine`).
    Fused,
    /// `gather_qmm` per slot in slot order, `moe_act`, `gather_qmm` down in f32, `moe_combine`.
    Gather,
    /// The same with the slots sorted by expert (`gather_sort`) and put back
    /// (`scatter_unsort`) before the K-sum.
    GatherSorted,
}

impl MoeBlockPath {
    /// Its name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            MoeBlockPath::Fused => "fused",
            MoeBlockPath::Gather => "gather",
            MoeBlockPath::GatherSorted => "gather-sorted",
        }
    }

    /// The path [`moe_block`] takes for `tokens` tokens of `k` experts each: fused for one
    /// token (decode), gather below [`SORTED_MIN_SLOTS`] slots, sorted gather from there.
    pub fn for_batch(tokens: usize, k: usize) -> MoeBlockPath {
        if tokens == 1 {
            MoeBlockPath::Fused
        } else if tokens * k < SORTED_MIN_SLOTS {
            MoeBlockPath::Gather
        } else {
            MoeBlockPath::GatherSorted
        }
    }
}

/// What a [`moe_block`] call did.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeBlockRan {
    /// The routed experts' path.
    pub path: MoeBlockPath,
    /// Every launch, in order: router, routing, experts, shared expert, sums.
    pub launches: Vec<Ran>,
}

/// A dense MLP beside the routed experts, run for every token (spec §7.8 step 3: Nemotron-H's
/// `up → relu² → down`; the gated activations take a gate and an up projection). It runs as
/// a one-expert layer through the fused expert kernels, so its activations and output stay f32.
#[derive(Debug)]
pub struct SharedExpert {
    mlp: MoeExperts,
}

impl SharedExpert {
    /// `first` (gate, or up for relu²) and `up` `[Dsh, Din]`, `down` `[Din, Dsh]`: the checks
    /// and bit widths of [`MoeExperts::new`] for one expert (`up` exactly for the gated
    /// activations, gate/up at 4 or 8 bits, down at 4, 6 or 8).
    pub fn new(
        activation: MoeActivation,
        first: QuantizedWeight,
        up: Option<QuantizedWeight>,
        down: QuantizedWeight,
    ) -> Result<SharedExpert, PortError> {
        Ok(SharedExpert {
            mlp: MoeExperts::new(1, activation, first, up, down)?,
        })
    }

    /// Its width (Dsh).
    pub fn width(&self) -> usize {
        self.mlp.dff()
    }
}

/// The router of a [`MoeBlock`]: `weight [E, Din]` (the gate of spec §7.8 step 1), the rule,
/// and the correction bias `[E]` f32 of [`MoeRouter::SigmoidBias`].
#[derive(Debug)]
pub struct MoeGate {
    /// Logits `x · weightᵀ`, `[E, Din]`.
    pub weight: QuantizedWeight,
    /// How the logits become ids and scores.
    pub rule: MoeRouter,
    /// `[E]` f32, for [`MoeRouter::SigmoidBias`] only.
    pub correction_bias: Option<Tensor>,
}

/// One MoE layer on a device: its router, `k` experts per token, the routed experts (read by
/// the fused kernels and, through views of the same buffers, by `gather_qmm`) and an optional
/// shared expert.
#[derive(Debug)]
pub struct MoeBlock {
    gate: MoeGate,
    k: usize,
    experts: MoeExperts,
    /// Gate (or fc1), up and down as `gather_qmm` reads them.
    stacked_first: StackedExperts,
    stacked_up: Option<StackedExperts>,
    stacked_down: StackedExperts,
    shared: Option<SharedExpert>,
    /// The shared expert's routing, slot 0 with score 1 for every token, kept on the device
    /// (grown outside a recording): a call uploads nothing, so a CUDA graph of it replays
    /// without reading host memory the call has freed.
    shared_route: Mutex<Option<(Tensor, Tensor)>>,
}

/// The same weight over the same buffers (views: nothing is copied).
fn alias(w: &QuantizedWeight) -> Result<QuantizedWeight, PortError> {
    let (q, s, b) = w.buffers();
    QuantizedWeight::from_parts(
        w.format(),
        w.rows(),
        w.cols(),
        q.view(0, q.shape())?,
        s.view(0, s.shape())?,
        b.view(0, b.shape())?,
    )
}

fn invalid(msg: impl Into<String>) -> PortError {
    PortError::InvalidShape {
        kernel: OP,
        msg: msg.into(),
    }
}

impl MoeBlock {
    /// Checks the parts against each other: the router `[E, Din]` for the experts' E and Din,
    /// `1 ≤ k ≤ E`, the correction bias `[E]` f32 exactly with the sigmoid router, the shared
    /// expert's Din.
    pub fn new(
        gate: MoeGate,
        k: usize,
        experts: MoeExperts,
        shared: Option<SharedExpert>,
    ) -> Result<MoeBlock, PortError> {
        let (e, din) = (experts.experts(), experts.din());
        if gate.weight.rows() != e || gate.weight.cols() != din {
            return Err(invalid(format!(
                "the router must be [E, Din] = [{e}, {din}], got [{}, {}]",
                gate.weight.rows(),
                gate.weight.cols()
            )));
        }
        if k == 0 || k > e {
            return Err(invalid(format!("K = {k} experts per token, of {e}: 1..=E")));
        }
        match (gate.rule, &gate.correction_bias) {
            (MoeRouter::SigmoidBias { .. }, Some(b)) => {
                if b.dtype() != DType::F32 || b.shape() != [e] {
                    return Err(invalid(format!(
                        "the correction bias must be f32 [{e}], got {} {:?}",
                        b.dtype().name(),
                        b.shape()
                    )));
                }
            }
            (MoeRouter::Softmax { .. }, None) => {}
            _ => {
                return Err(invalid(
                    "a correction bias goes with the sigmoid router, and only with it",
                ))
            }
        }
        if let Some(s) = &shared {
            if s.mlp.din() != din {
                return Err(invalid(format!(
                    "the shared expert reads {} columns, the experts {din}",
                    s.mlp.din()
                )));
            }
        }
        let (first, up, down) = experts.weights();
        let stacked_first = StackedExperts::new(e, alias(first)?)?;
        let stacked_up = up.map(|u| StackedExperts::new(e, alias(u)?)).transpose()?;
        let stacked_down = StackedExperts::new(e, alias(down)?)?;
        Ok(MoeBlock {
            gate,
            k,
            experts,
            stacked_first,
            stacked_up,
            stacked_down,
            shared,
            shared_route: Mutex::new(None),
        })
    }

    /// The shared expert's ids (zeros, u32) and scores (ones, f32), `[tokens, 1]` views of
    /// device tensors made, or grown, on the first call of that many tokens.
    fn shared_route(&self, dev: &Device, tokens: usize) -> Result<(Tensor, Tensor), PortError> {
        let mut route = self.shared_route.lock().unwrap_or_else(|p| p.into_inner());
        let fits = matches!(&*route, Some((ids, _)) if ids.numel() >= tokens);
        if !fits {
            if dev.is_capturing() {
                return Err(invalid(format!(
                    "the shared expert's routing for {tokens} tokens is not on the device: run \
                     the block once at this many tokens before recording it"
                )));
            }
            let n = tokens.next_power_of_two();
            *route = Some((
                Tensor::from_slice(dev, &[n], &vec![0u32; n])?,
                Tensor::from_slice(dev, &[n], &vec![1f32; n])?,
            ));
        }
        match &*route {
            Some((ids, scores)) => Ok((ids.view(0, &[tokens, 1])?, scores.view(0, &[tokens, 1])?)),
            None => Err(invalid("the shared expert's routing is missing")),
        }
    }

    /// Experts per token (K).
    pub fn k(&self) -> usize {
        self.k
    }

    /// The routed experts.
    pub fn experts(&self) -> &MoeExperts {
        &self.experts
    }

    fn act_code(activation: MoeActivation) -> u32 {
        match activation {
            MoeActivation::SwiGlu => ACT_SWIGLU,
            MoeActivation::GeGlu => ACT_GEGLU,
            MoeActivation::Relu2 => ACT_RELU2,
        }
    }

    /// The scratch pieces of a call over `tokens` tokens on `path`, in the order they are carved.
    fn pieces(&self, tokens: usize, dtype: DType, path: MoeBlockPath) -> Vec<(DType, usize)> {
        let (e, k, din, dff) = (
            self.experts.experts(),
            self.k,
            self.experts.din(),
            self.experts.dff(),
        );
        let slots = tokens * k;
        let mut v = vec![
            (dtype, tokens * e),
            (DType::U32, slots),
            (DType::F32, slots),
        ];
        v.push((DType::F32, 1));
        if let Some(s) = &self.shared {
            let w = s.width();
            // The two f32 sums, then the shared expert's activations.
            v.extend([(DType::F32, 2 * tokens * din), (DType::F32, tokens * w)]);
        }
        match path {
            MoeBlockPath::Fused => v.extend([
                (DType::F32, slots * dff),
                (DType::F32, slots * partial_din(&self.experts, k)),
            ]),
            MoeBlockPath::Gather | MoeBlockPath::GatherSorted => {
                // lhs rows, down's rows, sorted experts and scores; gate, up, act, partials.
                v.extend([(DType::U32, slots), (DType::U32, slots)]);
                v.extend([(DType::U32, slots), (DType::F32, slots)]);
                v.extend([(dtype, slots * dff), (dtype, slots * dff)]);
                v.extend([(DType::F32, slots * dff), (DType::F32, slots * din)]);
                v.push((DType::F32, slots * din));
            }
        }
        v
    }
}

/// Scratch bytes a [`moe_block`] call over `tokens` tokens of `dtype` takes on whichever path
/// it picks, for [`Device::reserve_scratch`].
pub fn moe_block_scratch_bytes(block: &MoeBlock, tokens: usize, dtype: DType) -> usize {
    let path = MoeBlockPath::for_batch(tokens, block.k);
    crate::scratch_bytes(&block.pieces(tokens, dtype, path))
}

/// `out[t, :] = rnd(Σ_k s[t, k] · expert_{e[t, k]}(x[t]) + shared(x[t]))` for `x` and `out`
/// `[T, Din]` of one activation dtype (f32, f16 or bf16): the router's logits `x · Wgᵀ`
/// (rounded to the activation dtype, as the gate's matmul stores them), its ids and scores
/// (spec §7.8 step 1, [`moe_route`](super::moe_route)), the routed experts on the path
/// [`MoeBlockPath::for_batch`] picks, and the shared expert. The routed sum and the shared
/// expert are added in f32 before the one rounding, the all-f32 chain of spec §7.9 (§7.8's
/// graph rounds the routed sum first; a second rounding alone is above the fused bound).
/// Shapes and dtypes that disagree are refused before any launch.
pub fn moe_block(
    dev: &Device,
    x: &Tensor,
    block: &MoeBlock,
    out: &mut Tensor,
) -> Result<MoeBlockRan, PortError> {
    run_block(dev, x, block, None, None, out)
}

/// [`moe_block`] on a given path (`None`: the batch's), for A/B runs and tests: every path
/// computes the same function for any batch.
pub fn moe_block_on(
    dev: &Device,
    x: &Tensor,
    block: &MoeBlock,
    path: Option<MoeBlockPath>,
    out: &mut Tensor,
) -> Result<MoeBlockRan, PortError> {
    run_block(dev, x, block, None, path, out)
}

/// [`moe_block_on`] with the routing the caller made instead of the block's router: `ids`
/// and `scores` `T·K` values token by token. Ids not K per token, scores of another length
/// or an id ≥ E are refused before any launch.
pub fn moe_block_routed(
    dev: &Device,
    x: &Tensor,
    block: &MoeBlock,
    ids: &[u32],
    scores: &[f32],
    path: Option<MoeBlockPath>,
    out: &mut Tensor,
) -> Result<MoeBlockRan, PortError> {
    let slots = x.shape().first().copied().unwrap_or(0) * block.k;
    if ids.len() != slots || scores.len() != slots {
        return Err(invalid(format!(
            "{} ids and {} scores for {slots} slots (T·K)",
            ids.len(),
            scores.len()
        )));
    }
    let experts = block.experts.experts();
    if let Some(position) = ids.iter().position(|&e| e as usize >= experts) {
        return Err(PortError::ExpertOutOfRange {
            kernel: OP,
            position,
            id: ids[position],
            experts,
        });
    }
    run_block(dev, x, block, Some((ids, scores)), path, out)
}

/// The call: checks, then routing (the router's, or the host's uploaded), experts, sums.
fn run_block(
    dev: &Device,
    x: &Tensor,
    block: &MoeBlock,
    routing: Option<(&[u32], &[f32])>,
    path: Option<MoeBlockPath>,
    out: &mut Tensor,
) -> Result<MoeBlockRan, PortError> {
    let din = block.experts.din();
    let &[tokens, cols] = x.shape() else {
        return Err(invalid(format!("x must be [T, Din], got {:?}", x.shape())));
    };
    if tokens == 0 || cols != din {
        return Err(invalid(format!(
            "x is [{tokens}, {cols}]: one token or more of the experts' {din} columns"
        )));
    }
    let dtype = x.dtype();
    if !matches!(dtype, DType::F32 | DType::F16 | DType::Bf16) {
        return Err(invalid(format!("x is {}: f32, f16 or bf16", dtype.name())));
    }
    if out.dtype() != dtype || out.shape() != x.shape() {
        return Err(invalid(format!(
            "out is {} {:?}, must be {} {:?} like x",
            out.dtype().name(),
            out.shape(),
            dtype.name(),
            x.shape()
        )));
    }
    let path = path.unwrap_or(MoeBlockPath::for_batch(tokens, block.k));
    let pieces = block.pieces(tokens, dtype, path);
    let mut scratch = dev.scratch(crate::scratch_bytes(&pieces))?;
    let mut run = BlockRun {
        dev,
        block,
        x,
        tokens,
        launches: Vec::new(),
    };
    let (ids, scores) = match routing {
        None => run.route(&mut scratch)?,
        Some((ids, scores)) => {
            let k = [tokens, block.k];
            (
                scratch.upload(ids)?.reshape(&k)?,
                scratch.upload(scores)?.reshape(&k)?,
            )
        }
    };
    match &block.shared {
        None => run.experts(&mut scratch, path, &ids, &scores, out)?,
        Some(shared) => {
            // Routed and shared sums side by side in f32: `[1, 2, T·Din]` for moe_combine.
            let sums = scratch.tensor(DType::F32, &[2 * tokens * din])?;
            let mut routed = sums.view(0, &[tokens, din])?;
            let mut own = sums.view(tokens * din, &[tokens, din])?;
            run.shared(&mut scratch, shared, &mut own)?;
            run.experts(&mut scratch, path, &ids, &scores, &mut routed)?;
            let pair = sums.reshape(&[1, 2, tokens * din])?;
            let mut flat = out.reshape(&[1, tokens * din])?;
            run.combine(&pair, &mut flat)?;
        }
    }
    Ok(MoeBlockRan {
        path,
        launches: run.launches,
    })
}

/// One call's state: what it reads and the launches so far.
struct BlockRun<'a> {
    dev: &'a Device,
    block: &'a MoeBlock,
    x: &'a Tensor,
    tokens: usize,
    launches: Vec<Ran>,
}

impl BlockRun<'_> {
    /// `y = x · Ŵᵀ` over rows of `x` in `qlinear`'s chunks.
    fn linear(&mut self, w: &QuantizedWeight, y: &mut Tensor) -> Result<(), PortError> {
        let (x, cols, n) = (self.x, self.x.shape()[1], y.shape()[1]);
        for first in (0..self.tokens).step_by(MAX_M) {
            let rows = MAX_M.min(self.tokens - first);
            let xs = x.view(first * cols, &[rows, cols])?;
            let mut ys = y.view(first * n, &[rows, n])?;
            self.launches
                .push(qlinear(self.dev, &xs, w, None, &mut ys)?);
        }
        Ok(())
    }

    /// The router's logits, ids and scores `[T, K]`.
    fn route(&mut self, scratch: &mut Scratch) -> Result<(Tensor, Tensor), PortError> {
        let b = self.block;
        let (e, k) = (b.experts.experts(), b.k);
        let mut logits = scratch.tensor(self.x.dtype(), &[self.tokens, e])?;
        let mut ids = scratch.tensor(DType::U32, &[self.tokens, k])?;
        let mut scores = scratch.tensor(DType::F32, &[self.tokens, k])?;
        self.linear(&b.gate.weight, &mut logits)?;
        let bias = b.gate.correction_bias.as_ref();
        let ran = moe_route(self.dev, &logits, b.gate.rule, bias, &mut ids, &mut scores)?;
        self.launches.push(ran);
        Ok((ids, scores))
    }

    /// The shared expert into `own [T, Din]` f32: slot 0 of every token, score 1, down's f32
    /// partials written straight there.
    fn shared(
        &mut self,
        scratch: &mut Scratch,
        s: &SharedExpert,
        own: &mut Tensor,
    ) -> Result<(), PortError> {
        let t = self.tokens;
        let (ids, scores) = self.block.shared_route(self.dev, t)?;
        let mut act_g = scratch.tensor(DType::F32, &[t, 1, s.width()])?;
        let mut partial = own.reshape(&[t, 1, s.mlp.din()])?;
        s.mlp.check(self.x, 1)?;
        let (up, down) = s.mlp.launch_up_down(
            self.dev,
            self.x,
            &ids,
            &scores,
            FUSED_ROWS_PER_BLOCK,
            &mut act_g,
            &mut partial,
            false,
        )?;
        self.launches.extend([up, down]);
        Ok(())
    }

    /// `out = rnd(Σ_k partial[t, k, :])`.
    fn combine(&mut self, partial: &Tensor, out: &mut Tensor) -> Result<(), PortError> {
        let ran = kernel::moe_combine(self.dev, &MoeCombineParams::default(), partial, out)?;
        self.launches.push(ran);
        Ok(())
    }

    /// The routed experts' K-sum into `out [T, Din]` (the activation dtype, or f32 beside a
    /// shared expert).
    fn experts(
        &mut self,
        scratch: &mut Scratch,
        path: MoeBlockPath,
        ids: &Tensor,
        scores: &Tensor,
        out: &mut Tensor,
    ) -> Result<(), PortError> {
        let b = self.block;
        let (k, din, dff) = (b.k, b.experts.din(), b.experts.dff());
        let slots = self.tokens * k;
        if path == MoeBlockPath::Fused {
            let mut act_g = scratch.tensor(DType::F32, &[self.tokens, k, dff])?;
            let pd = partial_din(&b.experts, k);
            let mut partial = scratch.tensor(DType::F32, &[self.tokens, k, pd])?;
            let ran = b.experts.launch_routed(
                self.dev,
                self.x,
                ids,
                scores,
                FUSED_ROWS_PER_BLOCK,
                &mut act_g,
                &mut partial,
                out,
            )?;
            self.launches.extend([ran.up, ran.down]);
            self.launches.extend(ran.combine);
            return Ok(());
        }
        let sorted = path == MoeBlockPath::GatherSorted;
        // Slot `s` is token `s / K` against expert `ids[s]`; sorted, slot `i` is slot
        // `order[i]`, and the scores follow it.
        let (order, lhs_rows, experts, slot_scores) = if sorted {
            let host_ids = ids.to_vec::<u32>()?;
            let host_scores = scores.to_vec::<f32>()?;
            let (order, sorted_ids) = gather_sort(&host_ids);
            let rows: Vec<u32> = order.iter().map(|&s| s / k as u32).collect();
            let sc: Vec<f32> = order.iter().map(|&s| host_scores[s as usize]).collect();
            let rows = scratch.upload(&rows)?;
            let down_rows = scratch.upload(&(0..slots as u32).collect::<Vec<_>>())?;
            let experts = scratch.upload(&sorted_ids)?;
            let sc = scratch.upload(&sc)?;
            (Some(order), (rows, down_rows), experts, sc)
        } else {
            let rows: Vec<u32> = (0..slots).map(|s| (s / k) as u32).collect();
            let rows = scratch.upload(&rows)?;
            let down_rows = scratch.upload(&(0..slots as u32).collect::<Vec<_>>())?;
            // Unused pieces keep the carving order of `pieces`.
            scratch.tensor(DType::U32, &[slots])?;
            scratch.tensor(DType::F32, &[slots])?;
            (
                None,
                (rows, down_rows),
                ids.reshape(&[slots])?,
                scores.reshape(&[slots])?,
            )
        };
        let tiling = if sorted {
            GatherTiling::SORTED
        } else {
            GatherTiling::UNSORTED
        };
        let dtype = self.x.dtype();
        let mut gate = scratch.tensor(dtype, &[slots, dff])?;
        let mut up = scratch.tensor(dtype, &[slots, dff])?;
        let mut act = scratch.tensor(DType::F32, &[slots, dff])?;
        let mut partial = scratch.tensor(DType::F32, &[slots, din])?;
        let mut unsorted = scratch.tensor(DType::F32, &[slots, din])?;
        let (rows, down_rows) = &lhs_rows;
        let first = &b.stacked_first;
        let ran = gather_qmm_indexed(self.dev, self.x, rows, &experts, first, tiling, &mut gate)?;
        self.launches.push(ran);
        let up = match &b.stacked_up {
            Some(u) => {
                let ran = gather_qmm_indexed(self.dev, self.x, rows, &experts, u, tiling, &mut up)?;
                self.launches.push(ran);
                &up
            }
            None => &gate,
        };
        let p = MoeActParams {
            act: MoeBlock::act_code(b.experts.activation()),
            ..MoeActParams::default()
        };
        let ran = kernel::moe_act(self.dev, &p, &gate, up, &slot_scores, &mut act)?;
        self.launches.push(ran);
        // Down in f32 over score-weighted rows: each slot's partial, as moe_down writes it.
        let down = &b.stacked_down;
        let ran = gather_qmm_indexed(
            self.dev,
            &act,
            down_rows,
            &experts,
            down,
            tiling,
            &mut partial,
        )?;
        self.launches.push(ran);
        let partial = match order {
            Some(order) => {
                scatter_unsort(&partial, &order, &mut unsorted)?;
                unsorted
            }
            None => partial,
        };
        self.combine(&partial.reshape(&[self.tokens, k, din])?, out)
    }
}
