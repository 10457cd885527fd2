//! A model on disk in either format the driver reads — a GGUF file, or an MLX (Hugging Face)
//! directory of `config.json`, `model*.safetensors` and `tokenizer.json` — opened for
//! generation: [`Checkpoint::open`] tells them apart (a directory is MLX), [`ModelFile`] holds its
//! config and tokenizer and loads the weights once the cache size is known.

use super::mlx_config::MlxConfig;
use super::safetensors_dir::SafetensorsDir;
use super::{ActDtype, DecodeError, LlamaConfig, Model, Tokenizer, Weights};
use kiln::quant::GgufFile;
use kiln::Device;
use std::path::{Path, PathBuf};

/// An MLX model directory: its config and its tensors' headers (no tensor data yet).
#[derive(Debug)]
pub struct MlxDir {
    /// The directory.
    pub path: PathBuf,
    /// `config.json` (and `generation_config.json`'s stop ids).
    pub config: MlxConfig,
    /// The safetensors files' tensors.
    pub tensors: SafetensorsDir,
}

impl MlxDir {
    /// Reads the config and the safetensors headers of `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<MlxDir, DecodeError> {
        let path = path.as_ref().to_path_buf();
        Ok(MlxDir {
            config: MlxConfig::read(&path)?,
            tensors: SafetensorsDir::open(&path)?,
            path,
        })
    }
}

/// A model's file or directory.
#[allow(clippy::large_enum_variant)] // one per model
pub enum Checkpoint {
    /// A GGUF file (Llama architecture).
    Gguf(GgufFile),
    /// An MLX directory (llama, qwen3, qwen3_moe).
    Mlx(MlxDir),
}

impl Checkpoint {
    /// Opens `path`: a directory as an MLX model, anything else as a GGUF file.
    pub fn open(path: impl AsRef<Path>) -> Result<Checkpoint, DecodeError> {
        let path = path.as_ref();
        Ok(if path.is_dir() {
            Checkpoint::Mlx(MlxDir::open(path)?)
        } else {
            Checkpoint::Gguf(GgufFile::open(path)?)
        })
    }

    /// The model's config.
    pub fn config(&self) -> Result<LlamaConfig, DecodeError> {
        match self {
            Checkpoint::Gguf(f) => LlamaConfig::from_gguf(f),
            Checkpoint::Mlx(d) => Ok(d.config.model.clone()),
        }
    }

    /// The model's tokenizer and chat template.
    pub fn tokenizer(&self) -> Result<Tokenizer, DecodeError> {
        match self {
            Checkpoint::Gguf(f) => Tokenizer::from_gguf(f),
            Checkpoint::Mlx(d) => Tokenizer::from_hf_dir(&d.path, &d.config),
        }
    }

    /// Reads and uploads the weights `cfg` needs (this model's config, or its first layers).
    pub fn load_weights(
        &mut self,
        cfg: &LlamaConfig,
        dev: &Device,
    ) -> Result<Weights, DecodeError> {
        match self {
            Checkpoint::Gguf(f) => Weights::load(f, cfg, dev),
            Checkpoint::Mlx(d) => Weights::load_mlx(&d.tensors, &d.config, cfg, dev),
        }
    }
}

/// A model opened for generation: its tokenizer, and the checkpoint to load weights from once
/// the cache size is known.
pub struct ModelFile {
    /// The file or directory.
    pub checkpoint: Checkpoint,
    /// Its config.
    pub config: LlamaConfig,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
}

impl ModelFile {
    /// Opens `path` (a GGUF file or an MLX directory) and reads its config and tokenizer.
    pub fn open(path: impl AsRef<Path>) -> Result<ModelFile, DecodeError> {
        ModelFile::new(Checkpoint::open(path)?)
    }

    /// Reads the config and tokenizer of a parsed GGUF file (one in memory, say).
    pub fn from_gguf(file: GgufFile) -> Result<ModelFile, DecodeError> {
        ModelFile::new(Checkpoint::Gguf(file))
    }

    /// Reads the config and tokenizer of `checkpoint`, checking that they agree on the
    /// vocabulary: a GGUF's token list is the embedding's rows; an MLX model's embedding may be
    /// padded past its tokenizer's ids, which must not be past it, nor the stop ids.
    pub fn new(checkpoint: Checkpoint) -> Result<ModelFile, DecodeError> {
        let config = checkpoint.config()?;
        let tokenizer = checkpoint.tokenizer()?;
        let (n, vocab) = (tokenizer.vocab(), config.vocab);
        let (key, fits) = match checkpoint {
            Checkpoint::Gguf(_) => ("tokenizer.ggml.tokens", n == vocab),
            Checkpoint::Mlx(_) => ("vocab_size", n <= vocab),
        };
        if !fits {
            return Err(DecodeError::BadMeta {
                key: key.into(),
                why: format!("{n} tokens for a vocabulary of {vocab}"),
            });
        }
        if let Some(&id) = tokenizer
            .stop_ids()
            .iter()
            .find(|&&id| id as usize >= vocab)
        {
            return Err(DecodeError::BadMeta {
                key: "eos_token_id".into(),
                why: format!("{id} is past the vocabulary of {vocab}"),
            });
        }
        Ok(ModelFile {
            checkpoint,
            config,
            tokenizer,
        })
    }

    /// Loads the weights onto `dev` with a KV cache of `capacity` tokens.
    pub fn load(&mut self, dev: &Device, capacity: usize) -> Result<Model, DecodeError> {
        self.load_with(dev, capacity, ActDtype::F32)
    }

    /// [`ModelFile::load`] with activations, residual and KV cache in `act`.
    pub fn load_with(
        &mut self,
        dev: &Device,
        capacity: usize,
        act: ActDtype,
    ) -> Result<Model, DecodeError> {
        let weights = self.checkpoint.load_weights(&self.config, dev)?;
        Model::with_act_dtype(self.config.clone(), weights, dev, capacity, 1, act)
    }
}
