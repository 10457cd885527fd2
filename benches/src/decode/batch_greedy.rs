//! Greedy next tokens for a batch of sequences, on the device: each row's argmax (lowest index
//! on ties) by `ops::speculative_accept`'s greedy rule with one draft that is always rejected,
//! the tokens written where the next step's embedding reads them (u32 `[B]`).
//!
//! The rule reads `target [1, 2, V]` per row: the row's logits, then a bonus position that a
//! rejected draft never reaches. The logits buffer is `[B + 1, V]`, so row `b`'s target is rows
//! `b` and `b + 1` of it (the extra row only ever stands in as the last sequence's bonus). Its
//! emitted pair `[id, NO_TOKEN]` lands at `tokens[b..b + 2]`; the launches run in order, so
//! row `b + 1`'s id overwrites row `b`'s filler and `tokens[..B]` ends as the batch's ids.
//! One launch per row: kiln has no batched argmax op yet.

use super::DecodeError;
use kiln::ops::{self, AcceptRule};
use kiln::{DType, Device, Tensor};

/// The device argmax of `B` logits rows into `B` device token ids.
pub struct BatchGreedy {
    dev: Device,
    batch: usize,
    vocab: usize,
    /// `[B + 1, V]` f32.
    rows: Tensor,
    draft_probs: Tensor,
    draft_tokens: Tensor,
    /// u32 `[B + 1]`.
    tokens: Tensor,
    /// u32 `[B]`.
    emitted: Tensor,
}

impl BatchGreedy {
    /// Buffers for `batch` rows of `vocab` logits on `dev`.
    pub fn new(dev: &Device, vocab: usize, batch: usize) -> Result<BatchGreedy, DecodeError> {
        if batch == 0 || vocab == 0 {
            return Err(DecodeError::Sampling(format!(
                "a greedy batch needs rows and a vocabulary, got {batch} × {vocab}"
            )));
        }
        Ok(BatchGreedy {
            dev: dev.clone(),
            batch,
            vocab,
            rows: Tensor::zeros(dev, DType::F32, &[batch + 1, vocab])?,
            draft_probs: Tensor::zeros(dev, DType::F32, &[1, 1, vocab])?,
            draft_tokens: Tensor::from_slice(dev, &[1, 1], &[u32::MAX])?,
            tokens: Tensor::zeros(dev, DType::U32, &[batch + 1])?,
            emitted: Tensor::zeros(dev, DType::U32, &[batch])?,
        })
    }

    /// The logits `[B, V]` the LM head writes (a view: no allocation).
    pub fn logits(&self) -> Result<Tensor, DecodeError> {
        Ok(self.rows.view(0, &[self.batch, self.vocab])?)
    }

    /// The u32 `[B]` the draw writes and the next step reads (a view).
    pub fn device_tokens(&self) -> Result<Tensor, DecodeError> {
        Ok(self.tokens.view(0, &[self.batch])?)
    }

    /// Enqueues the draw of every row (no wait, no host data: recordable with the step).
    pub fn enqueue(&mut self) -> Result<(), DecodeError> {
        let v = self.vocab;
        for b in 0..self.batch {
            ops::speculative_accept(
                &self.dev,
                &self.rows.view(b * v, &[1, 2, v])?,
                &self.draft_probs,
                &self.draft_tokens,
                AcceptRule::Greedy,
                // The greedy rule draws nothing.
                [0, 0],
                &mut self.tokens.view(b, &[1, 2])?,
                &mut self.emitted.view(b, &[1])?,
            )?;
        }
        Ok(())
    }

    /// The ids the last draw wrote (waits for the device); an id past the vocabulary (from
    /// non-finite logits) is an error.
    pub fn read(&self) -> Result<Vec<u32>, DecodeError> {
        let ids = self.device_tokens()?.to_vec::<u32>()?;
        match ids.iter().find(|&&id| id as usize >= self.vocab) {
            Some(&id) => Err(DecodeError::TokenOutOfVocab {
                id,
                vocab: self.vocab,
            }),
            None => Ok(ids),
        }
    }

    /// Writes `ids` as the device tokens (to restart a loop from the same first tokens).
    pub fn set(&mut self, ids: &[u32]) -> Result<(), DecodeError> {
        if ids.len() != self.batch {
            return Err(DecodeError::Sampling(format!(
                "{} ids for a batch of {}",
                ids.len(),
                self.batch
            )));
        }
        self.device_tokens()?.write(ids)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_takes_its_own_first_argmax() {
        let dev = Device::cpu();
        let (batch, vocab) = (5, 700);
        let mut want = Vec::new();
        let mut logits = Vec::new();
        for b in 0..batch {
            let mut row: Vec<f32> = (0..vocab).map(|i| ((i * 31 + b * 7) % 97) as f32).collect();
            let top = (b * 131 + 17) % vocab;
            row[top] = 500.0;
            // A tie later in the row: the lower index wins.
            row[vocab - 1 - b] = 500.0;
            want.push(top.min(vocab - 1 - b) as u32);
            logits.extend(row);
        }
        let mut g = BatchGreedy::new(&dev, vocab, batch).unwrap();
        g.logits().unwrap().write(&logits).unwrap();
        g.enqueue().unwrap();
        assert_eq!(g.read().unwrap(), want);
        g.set(&[1, 2, 3, 4, 5]).unwrap();
        assert_eq!(g.read().unwrap(), vec![1, 2, 3, 4, 5]);
        assert!(g.set(&[1]).is_err());
    }
}
