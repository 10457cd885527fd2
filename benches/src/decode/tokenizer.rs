//! The byte-level BPE tokenizer of a GGUF (`tokenizer.ggml.model = gpt2`), built with the
//! `tokenizers` crate from the file's own vocabulary, merges and token types, and its chat
//! template rendered with `minijinja`.
//!
//! The pre-tokenizer follows `tokenizer.ggml.pre`: `smollm` splits every digit apart before
//! GPT-2's byte-level split, `gpt2` is the byte-level split alone; other kinds are refused by
//! name rather than guessed. Control and user-defined tokens (`<|im_start|>`, …) are added as
//! special tokens, so a chat template's markers encode as one id each.

use super::DecodeError;
use kiln::quant::{GgufFile, MetaValue};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::AddedToken;

/// ggml's token types that are special (control and user-defined tokens).
const SPECIAL_TOKEN_TYPES: [i64; 2] = [3, 4];

/// A GGUF model's tokenizer and chat template.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    vocab: usize,
    bos: Option<u32>,
    add_bos: bool,
    stop: Vec<u32>,
    tokens: Vec<String>,
    chat_template: Option<String>,
}

fn strings<'a>(f: &'a GgufFile, key: &str) -> Result<Vec<&'a str>, DecodeError> {
    f.get(key)
        .ok_or_else(|| DecodeError::MissingMeta(key.to_string()))?
        .as_strings()
        .ok_or_else(|| DecodeError::BadMeta {
            key: key.to_string(),
            why: "expected an array of strings".into(),
        })
}

fn token_id(f: &GgufFile, key: &str, vocab: usize) -> Result<Option<u32>, DecodeError> {
    let Some(v) = f.get(key) else {
        return Ok(None);
    };
    match v.as_u64() {
        Some(id) if (id as usize) < vocab => Ok(Some(id as u32)),
        _ => Err(DecodeError::BadMeta {
            key: key.to_string(),
            why: format!("{v:?} is not a token id below {vocab}"),
        }),
    }
}

fn tok_err(e: impl std::fmt::Display) -> DecodeError {
    DecodeError::Tokenizer(e.to_string())
}

impl Tokenizer {
    /// Builds the tokenizer from `f`'s `tokenizer.*` metadata.
    pub fn from_gguf(f: &GgufFile) -> Result<Tokenizer, DecodeError> {
        let model_key = "tokenizer.ggml.model";
        let model = f
            .get(model_key)
            .and_then(MetaValue::as_str)
            .ok_or_else(|| DecodeError::MissingMeta(model_key.into()))?;
        if model != "gpt2" {
            return Err(DecodeError::Tokenizer(format!(
                "tokenizer model `{model}` is not supported (byte-level BPE, `gpt2`, is)"
            )));
        }
        let pre = f
            .get("tokenizer.ggml.pre")
            .and_then(MetaValue::as_str)
            .unwrap_or("gpt2");
        let byte_level = ByteLevel::new(false, true, true);
        let pre_tokenizer: PreTokenizerWrapper = match pre {
            "smollm" => Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into(),
            "gpt2" | "default" => byte_level.into(),
            other => {
                return Err(DecodeError::Tokenizer(format!(
                    "pre-tokenizer `{other}` is not supported (smollm, gpt2 are)"
                )))
            }
        };
        let tokens = strings(f, "tokenizer.ggml.tokens")?;
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), i as u32))
            .collect();
        if vocab.len() != tokens.len() {
            return Err(DecodeError::BadMeta {
                key: "tokenizer.ggml.tokens".into(),
                why: "a token appears twice".into(),
            });
        }
        let merges = strings(f, "tokenizer.ggml.merges")?
            .into_iter()
            .enumerate()
            .map(|(i, m)| match m.split_once(' ') {
                Some((a, b)) => Ok((a.to_string(), b.to_string())),
                None => Err(DecodeError::BadMeta {
                    key: "tokenizer.ggml.merges".into(),
                    why: format!("merge {i} `{m}` is not two tokens"),
                }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(tok_err)?;
        let mut inner = tokenizers::Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(pre_tokenizer));
        inner.with_decoder(Some(ByteLevelDecoder::default()));
        let types = f
            .get("tokenizer.ggml.token_type")
            .and_then(MetaValue::as_array)
            .unwrap_or(&[]);
        let special: Vec<AddedToken> = types
            .iter()
            .zip(&tokens)
            .filter(|(t, _)| t.as_i64().is_some_and(|t| SPECIAL_TOKEN_TYPES.contains(&t)))
            .map(|(_, s)| AddedToken::from(s.to_string(), true))
            .collect();
        inner.add_special_tokens(&special);
        let n = tokens.len();
        let eos = token_id(f, "tokenizer.ggml.eos_token_id", n)?;
        let eot = token_id(f, "tokenizer.ggml.eot_token_id", n)?;
        Ok(Tokenizer {
            inner,
            vocab: n,
            bos: token_id(f, "tokenizer.ggml.bos_token_id", n)?,
            add_bos: f
                .get("tokenizer.ggml.add_bos_token")
                .and_then(MetaValue::as_bool)
                .unwrap_or(false),
            stop: eos.into_iter().chain(eot).collect(),
            tokens: tokens.iter().map(|s| s.to_string()).collect(),
            chat_template: f
                .get("tokenizer.chat_template")
                .and_then(MetaValue::as_str)
                .map(str::to_string),
        })
    }

    /// A tokenizer over a built `tokenizers` one (read from a `tokenizer.json`, say) whose
    /// vocabulary is every id it knows, added tokens included.
    pub(super) fn from_parts(
        inner: tokenizers::Tokenizer,
        bos: Option<u32>,
        add_bos: bool,
        stop: Vec<u32>,
        chat_template: Option<String>,
    ) -> Tokenizer {
        let ids = inner.get_vocab(true);
        let vocab = ids.values().max().map_or(0, |&id| id as usize + 1);
        let mut tokens = vec![String::new(); vocab];
        for (token, id) in ids {
            tokens[id as usize] = token;
        }
        Tokenizer {
            inner,
            vocab,
            bos,
            add_bos,
            stop,
            tokens,
            chat_template,
        }
    }

    /// The `tokenizers` tokenizer inside (what a `tokenizer.json` holds).
    pub(super) fn hf(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }

    /// The beginning-of-sequence id, and whether [`Tokenizer::encode`] puts it first.
    pub(super) fn bos(&self) -> (Option<u32>, bool) {
        (self.bos, self.add_bos)
    }

    /// The chat template, where the model has one.
    pub(super) fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// Tokens in the vocabulary.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// The ids that end a generation (end of sequence, end of turn).
    pub fn stop_ids(&self) -> &[u32] {
        &self.stop
    }

    /// `text` as token ids, with BOS first when the model asks for it. Special tokens written
    /// in the text (`<|im_start|>`) encode as their single ids.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, DecodeError> {
        let enc = self.inner.encode(text, false).map_err(tok_err)?;
        let bos = self.bos.filter(|_| self.add_bos);
        Ok(bos
            .into_iter()
            .chain(enc.get_ids().iter().copied())
            .collect())
    }

    /// The text of `ids`, special tokens left out; an id past the vocabulary is refused.
    pub fn decode(&self, ids: &[u32]) -> Result<String, DecodeError> {
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= self.vocab) {
            return Err(DecodeError::TokenOutOfVocab {
                id,
                vocab: self.vocab,
            });
        }
        self.inner.decode(ids, true).map_err(tok_err)
    }

    /// The vocabulary entry of `id` as stored (byte-level symbols), for diagnostics.
    pub fn token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// The prompt of a one-turn chat: `user` as the user's message, rendered with the model's
    /// `tokenizer.chat_template` with the assistant's turn opened.
    pub fn chat_prompt(&self, user: &str) -> Result<String, DecodeError> {
        let template = self.chat_template.as_deref().ok_or_else(|| {
            DecodeError::Template("the model has no tokenizer.chat_template".into())
        })?;
        let tpl_err = |e: minijinja::Error| DecodeError::Template(e.to_string());
        let mut env = minijinja::Environment::new();
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<String, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_template("chat", template).map_err(tpl_err)?;
        let message = minijinja::context! { role => "user", content => user };
        let name = |id: Option<u32>| id.and_then(|i| self.token(i)).unwrap_or("").to_string();
        let ctx = minijinja::context! {
            messages => vec![message],
            add_generation_prompt => true,
            bos_token => name(self.bos),
            eos_token => name(self.stop.first().copied()),
        };
        env.get_template("chat")
            .and_then(|t| t.render(ctx))
            .map_err(tpl_err)
    }
}
