//! Speculative-decoding acceptance (spec §6.6), sequentially per row, with the kernel's Philox
//! counters and natural-order f32 inverse CDFs (so a serial block's bits match it exactly).

use super::sampling::{inverse_cdf, open_uniform, philox};
use kiln_math::kernels::speculative_accept::{
    SpeculativeParams, NO_TOKEN, RULE_GREEDY, RULE_SAMPLER_MATCH,
};
use kiln_math::Element;

/// A draw from `weights` at `u`: index 0 when rounding leaves the goal unreached (the kernel's
/// unclaimed draw), with the mass.
fn draw(weights: &[f32], u: f32) -> (u32, f32) {
    let (i, mass) = inverse_cdf(weights, u);
    (i.unwrap_or(0), mass)
}

fn argmax(v: &[f32]) -> u32 {
    let (mut best, mut arg) = (f32::NEG_INFINITY, 0u32);
    for (i, &x) in v.iter().enumerate() {
        if x > best {
            (best, arg) = (x, i as u32);
        }
    }
    arg
}

/// The emitted tokens of one row.
pub fn accept_row(
    p: &SpeculativeParams,
    row: u32,
    target: &[Vec<f32>],
    draft: &[Vec<f32>],
    drafts: &[u32],
) -> Vec<u32> {
    let mut out = Vec::new();
    for (j, pj) in target.iter().enumerate() {
        let w = philox([j as u32, 0, row, 0], [p.key0, p.key1]);
        let (u_accept, u_draw) = (open_uniform(w[0]), open_uniform(w[1]));
        let proposal = drafts.get(j).copied();
        let token = if p.rule == RULE_GREEDY {
            argmax(pj)
        } else if p.rule == RULE_SAMPLER_MATCH || proposal.is_none() {
            draw(pj, u_draw).0
        } else {
            let t = proposal.unwrap();
            let qj = &draft[j];
            let ok = (t as usize) < pj.len() && u_accept * qj[t as usize] <= pj[t as usize];
            if ok {
                out.push(t);
                continue;
            }
            let residual: Vec<f32> = pj.iter().zip(qj).map(|(a, b)| (a - b).max(0.0)).collect();
            let (r, mass) = draw(&residual, u_draw);
            let token = if mass > 0.0 { r } else { draw(pj, u_draw).0 };
            out.push(token);
            return out;
        };
        out.push(token);
        if proposal != Some(token) {
            return out;
        }
    }
    out
}

/// The unfused chain of [`speculative_accept`](kiln_math::kernels::speculative_accept::speculative_accept): its params and
/// buffers, in list order, as host slices.
pub fn speculative_accept<T: Element>(
    p: &SpeculativeParams,
    target_probs: &[T],
    draft_probs: &[T],
    draft_tokens: &[u32],
    tokens: &mut [u32],
    emitted: &mut [u32],
) {
    let (n, v) = (p.drafts as usize, p.vocab as usize);
    let rows = |data: &[T], count: usize, r: usize| -> Vec<Vec<f32>> {
        (0..count)
            .map(|j| {
                data[(r * count + j) * v..][..v]
                    .iter()
                    .map(|x| x.to_f32())
                    .collect()
            })
            .collect()
    };
    for r in 0..p.batch as usize {
        let target = rows(target_probs, n + 1, r);
        let draft = rows(draft_probs, n, r);
        let out = accept_row(p, r as u32, &target, &draft, &draft_tokens[r * n..][..n]);
        emitted[r] = out.len() as u32;
        for j in 0..=n {
            tokens[r * (n + 1) + j] = out.get(j).copied().unwrap_or(NO_TOKEN);
        }
    }
}
