//! Choosing the next token with kiln's samplers, over logits the LM head writes into the
//! sampler's own buffer:
//!
//! - temperature 0 (greedy): the argmax of the logits on the device, lowest index on ties —
//!   `ops::speculative_accept`'s greedy rule with one draft that is always rejected (an id
//!   past the vocabulary), so the emitted token is the target row's argmax. kiln has no
//!   standalone argmax op; this is its device argmax over a row.
//! - temperature > 0, no filter: `ops::gumbel_max_sample` (softmax-free, on the device).
//! - temperature > 0 with top-k / top-p / min-p: `ops::rejection_sample`, which reads the
//!   softmax of the untempered logits (the filters) and of the tempered ones (the draw). kiln
//!   has no softmax op, so the two rows are computed on the host from the logits read back and
//!   written into buffers made once.
//!
//! Each call draws a fresh Philox key from the seed and the call count, so a seed reproduces
//! a whole generation on every backend.

use super::DecodeError;
use kiln::ops::{self, AcceptRule, SamplingFilters};
use kiln::{DType, Device, Tensor};

/// How tokens are chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; 0 is greedy.
    pub temperature: f32,
    /// Keep the k most probable tokens (0 is off).
    pub top_k: u32,
    /// Keep the smallest prefix of mass `top_p` (1 is off).
    pub top_p: f32,
    /// Keep tokens with `p ≥ min_p · p_max` (0 is off).
    pub min_p: f32,
    /// Seed of the per-call keys.
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: 0,
        }
    }
}

/// Which kiln sampler a call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamplerKind {
    /// Device argmax.
    Greedy,
    /// Gumbel-max over the tempered logits.
    Gumbel,
    /// Filtered rejection sampling.
    Rejection,
}

impl SamplingParams {
    /// The filters as kiln's sampler reads them.
    pub fn filters(&self) -> SamplingFilters {
        SamplingFilters {
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
        }
    }

    /// Checks the settings for a `vocab`-token model and says which sampler they take.
    pub fn kind(&self, vocab: usize) -> Result<SamplerKind, DecodeError> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(DecodeError::Sampling(format!(
                "temperature is {}, must be finite and ≥ 0",
                self.temperature
            )));
        }
        self.filters().check(vocab).map_err(DecodeError::Sampling)?;
        let filtered = (self.top_k > 0 && (self.top_k as usize) < vocab)
            || self.top_p < 1.0
            || self.min_p > 0.0;
        Ok(if self.temperature == 0.0 {
            SamplerKind::Greedy
        } else if filtered {
            SamplerKind::Rejection
        } else {
            SamplerKind::Gumbel
        })
    }
}

/// splitmix64: one well-mixed 64-bit word per input (the key of call `n` under a seed).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Buffers of one sampler kind, made once.
enum Buffers {
    Greedy {
        draft_probs: Tensor,
        draft_tokens: Tensor,
        tokens: Tensor,
        emitted: Tensor,
    },
    Gumbel {
        ids: Tensor,
    },
    Rejection {
        probs: Tensor,
        probs_draw: Tensor,
        ids: Tensor,
        accepted: Tensor,
        rounds: Tensor,
        host: Vec<f32>,
    },
}

/// A sampler for batch 1 and the logits buffer it reads.
pub struct Sampler {
    params: SamplingParams,
    kind: SamplerKind,
    dev: Device,
    vocab: usize,
    /// `[1, 2, vocab]`: row 0 is the logits; row 1 is the greedy rule's bonus position,
    /// never reached (its draft is always rejected first).
    target: Tensor,
    logits: Tensor,
    buffers: Buffers,
    calls: u64,
}

impl Sampler {
    /// A sampler for `vocab`-token logits on `dev`.
    pub fn new(dev: &Device, vocab: usize, params: SamplingParams) -> Result<Sampler, DecodeError> {
        let kind = params.kind(vocab)?;
        let target = Tensor::zeros(dev, DType::F32, &[1, 2, vocab])?;
        let logits = target.view(0, &[1, vocab])?;
        let u32s = |n: usize| Tensor::zeros(dev, DType::U32, &[n]);
        let buffers = match kind {
            SamplerKind::Greedy => Buffers::Greedy {
                draft_probs: Tensor::zeros(dev, DType::F32, &[1, 1, vocab])?,
                draft_tokens: Tensor::from_slice(dev, &[1, 1], &[u32::MAX])?,
                tokens: Tensor::zeros(dev, DType::U32, &[1, 2])?,
                emitted: u32s(1)?,
            },
            SamplerKind::Gumbel => Buffers::Gumbel { ids: u32s(1)? },
            SamplerKind::Rejection => Buffers::Rejection {
                probs: Tensor::zeros(dev, DType::F32, &[1, vocab])?,
                probs_draw: Tensor::zeros(dev, DType::F32, &[1, vocab])?,
                ids: u32s(1)?,
                accepted: u32s(1)?,
                rounds: u32s(1)?,
                host: Vec::with_capacity(vocab),
            },
        };
        Ok(Sampler {
            params,
            kind,
            dev: dev.clone(),
            vocab,
            target,
            logits,
            buffers,
            calls: 0,
        })
    }

    /// The sampler kiln runs for these settings.
    pub fn kind(&self) -> SamplerKind {
        self.kind
    }

    /// The logits buffer `[1, vocab]` f32 the model writes and [`Sampler::sample`] reads.
    pub fn logits_mut(&mut self) -> &mut Tensor {
        &mut self.logits
    }

    /// The logits buffer.
    pub fn logits(&self) -> &Tensor {
        &self.logits
    }

    /// The next Philox key.
    fn key(&mut self) -> [u32; 2] {
        let w = mix(self.params.seed ^ mix(self.calls));
        self.calls += 1;
        [w as u32, (w >> 32) as u32]
    }

    /// The u32 `[1]` on the device that the greedy draw writes its token into, for a step
    /// that reads its token there ([`super::Model::enqueue_step`]); `None` for other kinds.
    pub fn device_token(&self) -> Option<Tensor> {
        match &self.buffers {
            Buffers::Greedy { tokens, .. } => tokens.view(0, &[1]).ok(),
            _ => None,
        }
    }

    /// Enqueues the greedy draw alone (no wait, no host data: recordable with the step);
    /// [`Sampler::read_token`] reads what it wrote. Refused for the other kinds.
    pub fn enqueue_greedy(&mut self) -> Result<(), DecodeError> {
        let key = self.key();
        let Buffers::Greedy {
            draft_probs,
            draft_tokens,
            tokens,
            emitted,
        } = &mut self.buffers
        else {
            return Err(DecodeError::Sampling(
                "only the greedy draw runs on the device alone".into(),
            ));
        };
        ops::speculative_accept(
            &self.dev,
            &self.target,
            draft_probs,
            draft_tokens,
            AcceptRule::Greedy,
            key,
            tokens,
            emitted,
        )?;
        Ok(())
    }

    /// The token the last greedy draw wrote (waits for the device).
    pub fn read_token(&self) -> Result<u32, DecodeError> {
        let id = match &self.buffers {
            Buffers::Greedy { tokens, .. } => tokens.to_vec::<u32>()?[0],
            _ => {
                return Err(DecodeError::Sampling(
                    "only the greedy draw runs on the device alone".into(),
                ))
            }
        };
        if id as usize >= self.vocab {
            return Err(DecodeError::TokenOutOfVocab {
                id,
                vocab: self.vocab,
            });
        }
        Ok(id)
    }

    /// Draws the next token from the logits buffer (waits for the device).
    pub fn sample(&mut self) -> Result<u32, DecodeError> {
        let key = self.key();
        let (dev, p) = (&self.dev, self.params);
        let id = match &mut self.buffers {
            Buffers::Greedy {
                draft_probs,
                draft_tokens,
                tokens,
                emitted,
            } => {
                ops::speculative_accept(
                    dev,
                    &self.target,
                    draft_probs,
                    draft_tokens,
                    AcceptRule::Greedy,
                    key,
                    tokens,
                    emitted,
                )?;
                tokens.to_vec::<u32>()?[0]
            }
            Buffers::Gumbel { ids } => {
                ops::gumbel_max_sample(dev, &self.logits, key, p.temperature, ids)?;
                ids.to_vec::<u32>()?[0]
            }
            Buffers::Rejection {
                probs,
                probs_draw,
                ids,
                accepted,
                rounds,
                host,
            } => {
                let logits = self.logits.to_vec::<f32>()?;
                softmax_into(&logits, 1.0, host);
                probs.write(host)?;
                softmax_into(&logits, p.temperature, host);
                probs_draw.write(host)?;
                let filters = [p.filters()];
                ops::rejection_sample(
                    dev, probs, probs_draw, &filters, key, ids, accepted, rounds,
                )?;
                ids.to_vec::<u32>()?[0]
            }
        };
        if id as usize >= self.vocab {
            return Err(DecodeError::TokenOutOfVocab {
                id,
                vocab: self.vocab,
            });
        }
        Ok(id)
    }
}

/// `softmax(logits / temperature)` into `out` (f64 sums: the filters compare masses).
fn softmax_into(logits: &[f32], temperature: f32, out: &mut Vec<f32>) {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    out.clear();
    if !max.is_finite() {
        // No finite logit: zero mass everywhere, which the sampler answers with its argmax.
        out.resize(logits.len(), 0.0);
        return;
    }
    let t = temperature as f64;
    let mut sum = 0.0f64;
    out.extend(logits.iter().map(|&l| {
        let e = ((l as f64 - max as f64) / t).exp();
        sum += e;
        e as f32
    }));
    let inv = 1.0 / sum;
    out.iter_mut().for_each(|v| *v = (*v as f64 * inv) as f32);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_pick_the_sampler_and_bad_ones_are_refused() {
        let p = SamplingParams::default();
        assert_eq!(p.kind(100).unwrap(), SamplerKind::Greedy);
        let t = SamplingParams {
            temperature: 0.7,
            ..p
        };
        assert_eq!(t.kind(100).unwrap(), SamplerKind::Gumbel);
        // top_k equal to the vocabulary keeps everything: no filter.
        assert_eq!(
            SamplingParams { top_k: 100, ..t }.kind(100).unwrap(),
            SamplerKind::Gumbel
        );
        for f in [
            SamplingParams { top_k: 5, ..t },
            SamplingParams { top_p: 0.9, ..t },
            SamplingParams { min_p: 0.05, ..t },
        ] {
            assert_eq!(f.kind(100).unwrap(), SamplerKind::Rejection);
        }
        for bad in [
            SamplingParams {
                temperature: -1.0,
                ..p
            },
            SamplingParams {
                temperature: f32::NAN,
                ..p
            },
            SamplingParams { top_p: 0.0, ..t },
            SamplingParams { min_p: 1.0, ..t },
            SamplingParams { top_k: 101, ..t },
        ] {
            assert!(
                matches!(bad.kind(100), Err(DecodeError::Sampling(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn greedy_is_the_first_argmax_and_seeds_reproduce() {
        let dev = Device::cpu();
        let vocab = 3000;
        let mut logits: Vec<f32> = (0..vocab).map(|i| ((i * 37) % 101) as f32 * 0.01).collect();
        logits[1234] = 5.0;
        logits[2345] = 5.0;
        let mut s = Sampler::new(&dev, vocab, SamplingParams::default()).unwrap();
        s.logits_mut().write(&logits).unwrap();
        assert_eq!(s.sample().unwrap(), 1234);
        // A peaked row: every sampler lands on the peak; a seed repeats its draws.
        logits[2345] = 40.0;
        let draws_from = |logits: &[f32], params: SamplingParams| -> Vec<u32> {
            let mut s = Sampler::new(&dev, vocab, params).unwrap();
            (0..4)
                .map(|_| {
                    s.logits_mut().write(logits).unwrap();
                    s.sample().unwrap()
                })
                .collect()
        };
        let hot = SamplingParams {
            temperature: 1.0,
            seed: 9,
            ..Default::default()
        };
        let draws = |params| draws_from(&logits, params);
        assert_eq!(draws(hot), vec![2345; 4]);
        let filtered = SamplingParams {
            top_k: 3,
            top_p: 0.9,
            ..hot
        };
        assert_eq!(draws(filtered), vec![2345; 4]);
        // A flat row: the draws depend on the seed alone.
        let flat_row = vec![0.0f32; vocab];
        let draws = |params| draws_from(&flat_row, params);
        let flat = SamplingParams {
            temperature: 1.0,
            seed: 5,
            ..Default::default()
        };
        assert_eq!(draws(flat), draws(flat));
        assert_ne!(draws(flat), draws(SamplingParams { seed: 6, ..flat }));
        let flat_k = SamplingParams { top_k: 50, ..flat };
        let picks = draws(flat_k);
        assert_eq!(picks, draws(flat_k));
        assert!(picks.iter().all(|&i| (i as usize) < vocab));
    }
}
