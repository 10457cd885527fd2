//! A model directory's tokenizer: `tokenizer.json` as the `tokenizers` crate reads it (any model
//! and pre-tokenizer it knows, added tokens with their special flags), the chat template of
//! `tokenizer_config.json` (or `chat_template.jinja`), and the ids that end a generation
//! (`eos_token_id` of the configs, else `tokenizer_config.json`'s `eos_token`).
//!
//! Whether BOS goes first follows `tokenizer_config.json`'s `add_bos_token` where it is set,
//! else the post-processor: transformers' `encode` prepends what the post-processor adds.

use super::mlx_config::{read_json, MlxConfig};
use super::{DecodeError, Tokenizer};
use serde_json::{Map, Value};
use std::path::Path;

/// A special token of `tokenizer_config.json`: a string, or an object with its `content`.
fn token_text<'a>(tc: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    match tc.get(key)? {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("content")?.as_str(),
        _ => None,
    }
}

/// The chat template: `tokenizer_config.json`'s `chat_template` (a string, or a list of named
/// templates of which `default` is taken), else the file `chat_template.jinja`.
fn chat_template(dir: &Path, tc: &Map<String, Value>) -> Result<Option<String>, DecodeError> {
    match tc.get("chat_template") {
        Some(Value::String(t)) => return Ok(Some(t.clone())),
        Some(Value::Array(named)) => {
            let default = named.iter().find(|t| t["name"] == "default");
            let template = default.and_then(|t| t["template"].as_str());
            return Ok(template.map(str::to_string));
        }
        _ => {}
    }
    let file = dir.join("chat_template.jinja");
    if !file.is_file() {
        return Ok(None);
    }
    std::fs::read_to_string(&file)
        .map(Some)
        .map_err(|e| DecodeError::File {
            path: file.display().to_string(),
            why: e.to_string(),
        })
}

/// Refuses a `tokenizer.json` whose added tokens the `tokenizers` crate numbers otherwise than
/// the file: it numbers added tokens missing from the model's vocabulary in sequence after it,
/// so a gap in the file's ids would shift every later one silently.
fn check_added_ids(path: &Path, inner: &tokenizers::Tokenizer) -> Result<(), DecodeError> {
    let json = read_json(path)?;
    let added = json.get("added_tokens").and_then(Value::as_array);
    for token in added.into_iter().flatten() {
        let content = token.get("content").and_then(Value::as_str);
        let id = token.get("id").and_then(Value::as_u64);
        let (Some(content), Some(id)) = (content, id) else {
            return Err(DecodeError::File {
                path: path.display().to_string(),
                why: format!("an added token without a content and an id: {token}"),
            });
        };
        let given = inner.token_to_id(content);
        if given.map(u64::from) != Some(id) {
            return Err(DecodeError::File {
                path: path.display().to_string(),
                why: format!(
                    "added token {content:?} has id {id} in the file but {given:?} when read \
                     (added ids must follow the vocabulary without gaps)"
                ),
            });
        }
    }
    Ok(())
}

impl Tokenizer {
    /// The tokenizer of the model directory `dir`, whose config `cfg` names the BOS and EOS ids.
    pub fn from_hf_dir(dir: &Path, cfg: &MlxConfig) -> Result<Tokenizer, DecodeError> {
        let path = dir.join("tokenizer.json");
        let inner = tokenizers::Tokenizer::from_file(&path).map_err(|e| DecodeError::File {
            path: path.display().to_string(),
            why: e.to_string(),
        })?;
        check_added_ids(&path, &inner)?;
        let config_path = dir.join("tokenizer_config.json");
        let tc = if config_path.is_file() {
            match read_json(&config_path)? {
                Value::Object(o) => o,
                _ => {
                    return Err(DecodeError::File {
                        path: config_path.display().to_string(),
                        why: "expected a JSON object".into(),
                    })
                }
            }
        } else {
            Map::new()
        };
        let id_of = |key: &str| token_text(&tc, key).and_then(|t| inner.token_to_id(t));
        let mut bos = id_of("bos_token").or(cfg.bos_token_id);
        let add_bos = match tc.get("add_bos_token").and_then(Value::as_bool) {
            Some(add) => add,
            None => {
                // What the post-processor puts before a text's own ids.
                let tok_err = |e| DecodeError::Tokenizer(format!("{e}"));
                let plain = inner.encode("a", false).map_err(tok_err)?;
                let processed = inner.encode("a", true).map_err(tok_err)?;
                let (plain, processed) = (plain.get_ids(), processed.get_ids());
                let prepends = processed.len() > plain.len() && processed.first() != plain.first();
                if prepends {
                    bos = bos.or(processed.first().copied());
                }
                prepends
            }
        };
        let mut stop = cfg.eos_token_ids.clone();
        if stop.is_empty() {
            stop.extend(id_of("eos_token"));
        }
        let template = chat_template(dir, &tc)?;
        Ok(Tokenizer::from_parts(inner, bos, add_bos, stop, template))
    }
}
