//! Speculative-decoding acceptance (spec §6.6): which draft tokens a target model keeps, and
//! the token it emits after them, for three rules.
//!
//! - Stochastic (modified rejection sampling): accept draft `t` at position `j` iff
//!   `u · q_j(t) ≤ p_j(t)`; on the first rejection emit a token from the residual
//!   `normalize(max(p_j − q_j, 0))` (from `p_j` if that mass underflows to 0) and stop; when
//!   every draft is accepted emit a bonus token from `p_N`. The emitted tokens follow the
//!   target law `p` exactly, whatever `q` is, provided each draft was drawn from its `q`.
//! - SamplerMatch: draw `x ~ p_j`; emit `x`; continue iff `x` equals the draft.
//! - Greedy: `x = argmax p_j` (lowest index on ties); emit `x`; continue iff `x` equals the draft.
//!
//! Randomness: position `j` of row `r` takes its accept uniform from word 0 and its draw
//! uniform from word 1 of `philox((j, 0, r, 0), key)`. Draws are inverse CDFs in natural index
//! order (as in `rejection_sample`). A draft token outside the vocabulary is rejected.

use crate::random::{philox4x32_10_on, uniform_open};
use crate::sampling::{inverse_cdf, rows_and_vocab, thread_slice, MAX_VOCAB};
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// `tokens` entries after the emitted ones.
pub const NO_TOKEN: u32 = u32::MAX;

/// The `rule` param's stochastic rule: modified rejection sampling (`u · q_j(t) ≤ p_j(t)`).
pub const RULE_STOCHASTIC: u32 = 0;
/// The `rule` param's sampler-match rule: draw `x ~ p_j`, continue iff `x` is the draft.
pub const RULE_SAMPLER_MATCH: u32 = 1;
/// The `rule` param's greedy rule: `x = argmax p_j`, continue iff `x` is the draft.
pub const RULE_GREEDY: u32 = 2;

crate::params! {
    /// Params of `speculative_accept`.
    pub struct SpeculativeParams {
        /// Rows (B, the first axis of `draft_tokens`).
        pub batch: u32,
        /// Draft tokens per row (N).
        pub drafts: u32,
        /// Probabilities per position (V).
        pub vocab: u32,
        /// Philox key, low word (draw a fresh key per call).
        pub key0: u32 = 0,
        /// Philox key, high word.
        pub key1: u32 = 0,
        /// 0 stochastic (modified rejection), 1 sampler-match, 2 greedy.
        pub rule: u32 = 0,
    }
}

/// Descriptor of `speculative_accept`.
pub struct SpeculativeAccept;

impl KernelDef for SpeculativeAccept {
    type Params = SpeculativeParams;
    const NAME: &'static str = "speculative_accept";

    /// Buffers: `target_probs [B, N+1, V]` (p at each verify position), `draft_probs [B, N, V]`
    /// (the q each draft was drawn from; read by the stochastic rule only), `draft_tokens [B, N]`
    /// (u32), outputs `tokens [B, N+1]` (u32, emitted tokens then `NO_TOKEN`) and
    /// `emitted [B]` (u32, accepted drafts + 1).
    fn bind(p: &mut SpeculativeParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [target, draft, draft_tokens, tokens, emitted] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 5,
            });
        };
        let &[batch, positions, vocab] = *target else {
            return Err(ShapeError::Invalid(
                "target_probs must be [batch, drafts + 1, vocab]",
            ));
        };
        (p.batch, p.vocab) =
            rows_and_vocab("batch", batch, vocab, MAX_VOCAB, batch * positions * vocab)?;
        if positions < 2 {
            return Err(ShapeError::Invalid(
                "target_probs needs drafts + 1 >= 2 positions",
            ));
        }
        let drafts = positions - 1;
        if *draft != [batch, drafts, vocab] {
            return Err(ShapeError::Invalid(
                "draft_probs must be [batch, drafts, vocab]",
            ));
        }
        if *draft_tokens != [batch, drafts] {
            return Err(ShapeError::Invalid("draft_tokens must be [batch, drafts]"));
        }
        if *tokens != [batch, positions] {
            return Err(ShapeError::Invalid("tokens must be [batch, drafts + 1]"));
        }
        if *emitted != [batch] {
            return Err(ShapeError::Invalid("emitted must be [batch]"));
        }
        if p.rule > RULE_GREEDY {
            return Err(ShapeError::Range {
                what: "rule",
                got: p.rule as f64,
                lo: 0.0,
                hi: RULE_GREEDY as f64,
            });
        }
        // Fits: rows_and_vocab bounded batch · positions · vocab.
        p.drafts = drafts as u32;
        Ok(())
    }

    fn launch(p: &SpeculativeParams) -> Launch {
        Launch {
            grid: [p.batch, 1, 1],
            block: 256,
        }
    }
}

/// Argmax of `target[t_base..][..vocab]`, lowest index on ties.
#[inline(always)]
fn argmax_index<T: Element, B: Block>(
    b: &B,
    target: Src<T>,
    t_base: usize,
    first: usize,
    end: usize,
) -> u32 {
    let (mut best, mut best_i) = (f32::NEG_INFINITY, 0u32);
    let mut i = first;
    while i < end {
        let v = target.get(t_base + i).to_f32();
        if v > best {
            best = v;
            best_i = i as u32;
        }
        i += 1;
    }
    b.argmax(best, best_i).1
}

/// The body: one block per row; positions are walked in order, every decision is uniform
/// across the block.
pub fn speculative_accept<T: Element, B: Block>(
    b: &B,
    p: &SpeculativeParams,
    target_probs: Src<T>,
    draft_probs: Src<T>,
    draft_tokens: Src<u32>,
    tokens: Dst<u32>,
    emitted: Dst<u32>,
) {
    let row = b.block_x() as usize;
    let (drafts, vocab) = (p.drafts as usize, p.vocab as usize);
    let (first, end) = thread_slice(b, vocab);
    let key = [p.key0, p.key1];
    let lead = b.thread() == 0;

    let mut j = 0usize;
    let mut done = false;
    while !done {
        let t_base = (row * (drafts + 1) + j) * vocab;
        let words = philox4x32_10_on(b, [j as u32, 0, row as u32, 0], key);
        let (u_accept, u_draw) = (uniform_open(words[0]), uniform_open(words[1]));
        let bonus = j == drafts;
        // The bonus position has no draft row; any in-bounds base serves (it is never read).
        let (draft, d_base) = if bonus {
            (NO_TOKEN, 0)
        } else {
            (
                draft_tokens.get(row * drafts + j),
                (row * drafts + j) * vocab,
            )
        };
        let target = |i: usize| target_probs.get(t_base + i).to_f32();
        // The residual max(p − q, 0) of a rejected draft.
        let residual = |i: usize| {
            let r = target(i) - draft_probs.get(d_base + i).to_f32();
            if r > 0.0 {
                r
            } else {
                0.0
            }
        };
        let valid = (draft as usize) < vocab;
        let out;
        if p.rule == RULE_GREEDY {
            out = argmax_index(b, target_probs, t_base, first, end);
            done = bonus || out != draft;
        } else if p.rule == RULE_SAMPLER_MATCH || bonus {
            out = inverse_cdf(b, first, end, u_draw, target).1;
            done = bonus || out != draft;
        } else {
            let accept = valid
                && u_accept * draft_probs.get(d_base + draft as usize).to_f32()
                    <= target(draft as usize);
            if accept {
                out = draft;
            } else {
                let (_, from_residual, mass) = inverse_cdf(b, first, end, u_draw, residual);
                out = if mass > 0.0 {
                    from_residual
                } else {
                    inverse_cdf(b, first, end, u_draw, target).1
                };
            }
            done = !accept;
        }
        if lead {
            tokens.set(row * (drafts + 1) + j, out);
        }
        j += 1;
    }
    if lead {
        emitted.set(row, j as u32);
        while j <= drafts {
            tokens.set(row * (drafts + 1) + j, NO_TOKEN);
            j += 1;
        }
    }
}
