//! MoE routing: each token's top-k experts and their scores from its router logits, on the
//! device so a decode step needs no round trip to the host.
//!
//! * `mode` 0, softmax (Qwen3-MoE, Mixtral, DeepSeek-V2): `p = softmax(logits)` in f32; the k
//!   largest `p` are picked; `score = p·scaling_factor`, or with `renormalize` 1 the picked
//!   `p` divided by their sum (Qwen3's `norm_topk_prob`; Mixtral's softmax over its top-k
//!   logits is the same numbers).
//! * `mode` 1, sigmoid with a correction bias (spec §7.8, Nemotron-H, DeepSeek-V3):
//!   `orig = sigmoid(logit)` in f32, the k largest `orig + correction_bias[e]` are picked, the
//!   scores are their `orig`; with `renormalize` 1 and k > 1 `score = orig/(Σ orig + 1e-20)·
//!   scaling_factor`, else `orig·scaling_factor`.
//!
//! Ties go to the lower expert index and the picks are written best first, so the answer is
//! one function of the logits on every port. Softmax picks by its numerators `e^(l − max)`,
//! which order the experts as `p` does and do not depend on the order of the sum. A NaN key
//! ranks below every number (a token always gets k distinct experts; its scores are then NaN).
//!
//! Geometry: one block per token. Each pick is a block argmax over the experts after the last
//! pick in (key descending, index ascending) order, so nothing is stored between picks; the
//! picks are made twice, once for the sum the scores are divided by and once to write them.

use crate::kernel::shape;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// `mode`: softmax, top-k of the probabilities.
pub const MODE_SOFTMAX: u32 = 0;
/// `mode`: sigmoid, top-k of the sigmoid plus the correction bias.
pub const MODE_SIGMOID_BIAS: u32 = 1;

/// Threads per block.
const BLOCK_THREADS: u32 = 256;

crate::params! {
    /// Params of `moe_route`.
    pub struct MoeRouteParams {
        /// Tokens: rows of `logits`.
        pub tokens: u32,
        /// Experts: columns of `logits`.
        pub experts: u32,
        /// Experts picked per token: columns of `ids` and `scores`.
        pub k: u32,
        /// 0 softmax, 1 sigmoid with the correction bias.
        pub mode: u32 = 0,
        /// 1: the picked scores divided by their sum (see the module docs).
        pub renormalize: u32 = 0,
        /// Multiplies every score (DeepSeek-V3 / Nemotron-H's `routed_scaling_factor`).
        pub scaling_factor: f32 = 1.0,
    }
}

/// Descriptor of `moe_route`.
pub struct MoeRoute;

impl KernelDef for MoeRoute {
    type Params = MoeRouteParams;
    const NAME: &'static str = "moe_route";

    /// Buffers: `logits [T, E]` in `T`, `correction_bias [E]` f32 (mode 1; any one element or
    /// more in mode 0, unread), `ids [T, K]` u32, `scores [T, K]` f32.
    fn bind(p: &mut MoeRouteParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [logits, bias, ids, scores] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 4,
            });
        };
        let &[t, e] = *logits else {
            return Err(ShapeError::Invalid("logits must be two-dimensional: [T, E]"));
        };
        let &[it, k] = *ids else {
            return Err(ShapeError::Invalid("ids must be two-dimensional: [T, K]"));
        };
        shape::nonzero("T (the tokens: rows of logits)", t)?;
        shape::nonzero("E (the experts: columns of logits)", e)?;
        shape::nonzero("K (the experts picked: columns of ids)", k)?;
        shape::eq("rows of ids against T", it, t)?;
        if k > e {
            return Err(ShapeError::Invalid(
                "K (the experts picked per token) must not exceed E (the experts)",
            ));
        }
        if *scores != [t, k] {
            return Err(ShapeError::Invalid("scores must be [T, K], like ids"));
        }
        match p.mode {
            MODE_SOFTMAX => shape::nonzero(
                "elements of correction_bias (unread in mode 0)",
                shape::numel(bias),
            )?,
            MODE_SIGMOID_BIAS => {
                if *bias != [e] {
                    return Err(ShapeError::Invalid(
                        "correction_bias must be [E] in mode 1 (sigmoid + bias)",
                    ));
                }
            }
            m => {
                return Err(ShapeError::Range {
                    what: "mode (0 softmax, 1 sigmoid with correction bias)",
                    got: m as f64,
                    lo: 0.0,
                    hi: 1.0,
                })
            }
        }
        if p.renormalize > 1 {
            return Err(ShapeError::Range {
                what: "renormalize",
                got: p.renormalize as f64,
                lo: 0.0,
                hi: 1.0,
            });
        }
        if !p.scaling_factor.is_finite() {
            return Err(ShapeError::Invalid("scaling_factor must be finite"));
        }
        shape::to_u32("elements of logits", t.saturating_mul(e))?;
        p.tokens = t as u32;
        p.experts = e as u32;
        p.k = k as u32;
        Ok(())
    }

    fn launch(p: &MoeRouteParams) -> Launch {
        Launch {
            grid: [p.tokens, 1, 1],
            block: BLOCK_THREADS,
        }
    }
}

/// The body: block `t` routes token `t`.
pub fn moe_route<T: Element, B: Block>(
    b: &B,
    p: &MoeRouteParams,
    logits: Src<T>,
    correction_bias: Src<f32>,
    ids: Dst<u32>,
    scores: Dst<f32>,
) {
    let t = b.block_x() as usize;
    let experts = p.experts as usize;
    let row = t * experts;
    let softmax = p.mode == MODE_SOFTMAX;
    // Softmax's max and sum of numerators (unused by the sigmoid).
    let mut top = f32::NEG_INFINITY;
    let mut total = 0.0f32;
    if softmax {
        let mut i = b.thread() as usize;
        let mut m = f32::NEG_INFINITY;
        while i < experts {
            let l = logits.get(row + i).widen();
            m = if l > m { l } else { m };
            i += b.size() as usize;
        }
        top = b.max(m);
        let mut i = b.thread() as usize;
        let mut s = 0.0f32;
        while i < experts {
            s += libm::expf(logits.get(row + i).widen() - top);
            i += b.size() as usize;
        }
        total = b.sum(s);
    }
    // Pass one: the picks' sum.
    let mut picked_sum = 0.0f32;
    let mut last = (f32::INFINITY, 0u32);
    let mut r = 0;
    while r < p.k as usize {
        last = pick(b, p, logits, correction_bias, row, top, r == 0, last);
        picked_sum += value(p, logits, row, top, last.1 as usize);
        r += 1;
    }
    let denominator = if softmax {
        if p.renormalize == 1 {
            picked_sum
        } else {
            total
        }
    } else if p.renormalize == 1 && p.k > 1 {
        picked_sum + 1e-20
    } else {
        1.0
    };
    // Pass two: the same picks, written best first.
    let mut last = (f32::INFINITY, 0u32);
    let mut r = 0;
    while r < p.k as usize {
        last = pick(b, p, logits, correction_bias, row, top, r == 0, last);
        if b.thread() == 0 {
            let at = t * p.k as usize + r;
            ids.set(at, last.1);
            let v = value(p, logits, row, top, last.1 as usize);
            scores.set(at, v / denominator * p.scaling_factor);
        }
        r += 1;
    }
}

/// Expert `i`'s score before normalization: its softmax numerator `e^(l − top)`, or its
/// sigmoid.
#[inline(always)]
fn value<T: Element>(p: &MoeRouteParams, logits: Src<T>, row: usize, top: f32, i: usize) -> f32 {
    let l = logits.get(row + i).widen();
    if p.mode == MODE_SOFTMAX {
        libm::expf(l - top)
    } else {
        1.0 / (1.0 + libm::expf(-l))
    }
}

/// Expert `i`'s rank key: its value, plus the correction bias in mode 1; NaN ranks as −∞ (the
/// test is on the bits, which no compiler folds away).
#[inline(always)]
fn key<T: Element>(
    p: &MoeRouteParams,
    logits: Src<T>,
    correction_bias: Src<f32>,
    row: usize,
    top: f32,
    i: usize,
) -> f32 {
    let mut k = value(p, logits, row, top, i);
    if p.mode == MODE_SIGMOID_BIAS {
        k += correction_bias.get(i);
    }
    if (k.to_bits() & 0x7fff_ffff) > 0x7f80_0000 {
        f32::NEG_INFINITY
    } else {
        k
    }
}

/// The next pick after `last` (the best, when `first`) in (key descending, index ascending)
/// order: each thread offers its best expert after `last`, and the block's argmax (ties to the
/// lower index) takes one. K ≤ E leaves an expert to pick, which beats the offer of a thread
/// with none (−∞ at index `u32::MAX`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pick<T: Element, B: Block>(
    b: &B,
    p: &MoeRouteParams,
    logits: Src<T>,
    correction_bias: Src<f32>,
    row: usize,
    top: f32,
    first: bool,
    last: (f32, u32),
) -> (f32, u32) {
    let mut best = (f32::NEG_INFINITY, u32::MAX);
    let mut i = b.thread() as usize;
    while i < p.experts as usize {
        let k = key(p, logits, correction_bias, row, top, i);
        let after = first || k < last.0 || (k == last.0 && i as u32 > last.1);
        // Within a thread the indices rise, so a strictly larger key is the better one.
        if after && (k > best.0 || best.1 == u32::MAX) {
            best = (k, i as u32);
        }
        i += b.size() as usize;
    }
    b.argmax(best.0, best.1)
}
