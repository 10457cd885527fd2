//! Generation: the prompt run through the decode step token by token (prefill need not be
//! fast), then one sampled token per step until a stop token or the limit, with the text
//! streamed as it becomes whole UTF-8.

use super::{DecodeError, Model, Sampler, Tokenizer};
use std::time::Instant;

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-sequence or end-of-turn token.
    StopToken,
    /// `max_tokens` were generated.
    MaxTokens,
    /// The KV cache is full.
    Context,
}

/// What a generation produced and how long it took.
#[derive(Clone, Debug)]
pub struct GenerateReport {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// The generated ids (a stop token included).
    pub generated: Vec<u32>,
    /// The generated text (special tokens left out).
    pub text: String,
    /// Seconds from the first prompt token to the first generated token.
    pub prefill_seconds: f64,
    /// Seconds of the steps after the first generated token.
    pub decode_seconds: f64,
    /// Why it stopped.
    pub stop: StopReason,
}

impl GenerateReport {
    /// Decode steps per second (each generated token after the first is one step).
    pub fn decode_tokens_per_second(&self) -> f64 {
        let steps = self.generated.len().saturating_sub(1);
        if self.decode_seconds > 0.0 {
            steps as f64 / self.decode_seconds
        } else {
            0.0
        }
    }

    /// Prompt tokens per second through the (token-by-token) prefill.
    pub fn prefill_tokens_per_second(&self) -> f64 {
        if self.prefill_seconds > 0.0 {
            self.prompt_tokens as f64 / self.prefill_seconds
        } else {
            0.0
        }
    }
}

/// Turns ids into text as it becomes whole: a multi-byte character split over tokens is held
/// back until its last byte arrives.
pub struct TextStream<'t> {
    tokenizer: &'t Tokenizer,
    ids: Vec<u32>,
    emitted: usize,
}

impl<'t> TextStream<'t> {
    /// An empty stream.
    pub fn new(tokenizer: &'t Tokenizer) -> TextStream<'t> {
        TextStream {
            tokenizer,
            ids: Vec::new(),
            emitted: 0,
        }
    }

    /// Adds `id`; returns the text that became whole.
    pub fn push(&mut self, id: u32) -> Result<String, DecodeError> {
        self.ids.push(id);
        let text = self.tokenizer.decode(&self.ids)?;
        // An incomplete UTF-8 sequence decodes as U+FFFD at the end: wait for more bytes.
        if text.ends_with('\u{FFFD}') || text.len() < self.emitted {
            return Ok(String::new());
        }
        let new = text[self.emitted..].to_string();
        self.emitted = text.len();
        Ok(new)
    }

    /// The whole text, and what was still held back.
    pub fn finish(self) -> Result<(String, String), DecodeError> {
        let text = self.tokenizer.decode(&self.ids)?;
        let rest = text.get(self.emitted..).unwrap_or("").to_string();
        Ok((text, rest))
    }
}

/// Generates up to `max_tokens` after `prompt` (ids, at least one), calling `on_text` with
/// each piece of text as it becomes whole. The sequence starts at position 0 of `model`'s cache.
pub fn generate(
    model: &mut Model,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    max_tokens: usize,
    sampler: &mut Sampler,
    mut on_text: impl FnMut(&str),
) -> Result<GenerateReport, DecodeError> {
    if prompt.is_empty() {
        return Err(DecodeError::Tokenizer("the prompt has no tokens".into()));
    }
    let t0 = Instant::now();
    // Only the last prompt token's logits are read.
    let (&last, head) = prompt.split_last().expect("checked non-empty");
    for (position, &id) in head.iter().enumerate() {
        model.prefill_step(id, position)?;
    }
    model.step(last, head.len(), sampler.logits_mut())?;
    let mut report = GenerateReport {
        prompt_tokens: prompt.len(),
        generated: Vec::new(),
        text: String::new(),
        prefill_seconds: 0.0,
        decode_seconds: 0.0,
        stop: StopReason::MaxTokens,
    };
    let mut stream = TextStream::new(tokenizer);
    let mut t1 = Instant::now();
    let mut position = prompt.len();
    while report.generated.len() < max_tokens {
        if !report.generated.is_empty() {
            if position >= model.capacity() {
                report.stop = StopReason::Context;
                break;
            }
            let last = *report.generated.last().expect("not empty");
            model.step(last, position, sampler.logits_mut())?;
            position += 1;
        }
        let id = sampler.sample()?;
        if report.generated.is_empty() {
            report.prefill_seconds = t0.elapsed().as_secs_f64();
            t1 = Instant::now();
        }
        report.generated.push(id);
        if tokenizer.stop_ids().contains(&id) {
            report.stop = StopReason::StopToken;
            break;
        }
        let piece = stream.push(id)?;
        if !piece.is_empty() {
            on_text(&piece);
        }
    }
    report.decode_seconds = if report.generated.len() > 1 {
        t1.elapsed().as_secs_f64()
    } else {
        0.0
    };
    let (text, rest) = stream.finish()?;
    if !rest.is_empty() {
        on_text(&rest);
    }
    report.text = text;
    Ok(report)
}

/// Teacher forcing: runs `ids` through `model` from position 0 and returns the next-token
/// logits after each of them (`ids.len()` rows of the vocabulary), `logits` being the
/// `[1, vocab]` buffer the LM head writes.
pub fn trace_logits(
    model: &mut Model,
    ids: &[u32],
    logits: &mut kiln::Tensor,
) -> Result<Vec<Vec<f32>>, DecodeError> {
    let mut rows = Vec::with_capacity(ids.len());
    for (position, &id) in ids.iter().enumerate() {
        model.step(id, position, logits)?;
        rows.push(logits.to_vec::<f32>()?);
    }
    Ok(rows)
}
