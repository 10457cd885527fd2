//! A Llama model's shape from its GGUF metadata (`llama.*` keys), checked before any tensor is
//! read: a file of another architecture, or with a key missing or out of range, is refused
//! with the key named.

use super::DecodeError;
use kiln::ops::MoeActivation;
use kiln::quant::{GgufFile, MetaValue};

/// The sizes and constants of a Llama-architecture model.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Transformer blocks.
    pub layers: usize,
    /// Hidden size (the residual stream's width).
    pub hidden: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Width of the SwiGLU MLP.
    pub ffn: usize,
    /// Tokens in the vocabulary (rows of the embedding table).
    pub vocab: usize,
    /// RoPE frequency base.
    pub rope_base: f32,
    /// Leading dims of each head that RoPE rotates.
    pub rope_dims: usize,
    /// RoPE rotates adjacent pairs `(2i, 2i+1)` of each head (ggml's order, which GGUF's llama
    /// q/k rows are permuted for, and the loaders' default); otherwise half-split pairs
    /// `(i, i + dims/2)`, Hugging Face's `rotate_half` on the rows as HF and MLX store them.
    pub rope_traditional: bool,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// The context length the model was trained for.
    pub context: usize,
    /// Each query and key head RMS-normalised (its own gain) before RoPE (Qwen3).
    pub qk_norm: bool,
    /// A mixture-of-experts MLP in every layer instead of the dense one (Qwen3-MoE), or in
    /// the layers a hybrid stack says.
    pub moe: Option<MoeConfig>,
    /// A hybrid stack of Mamba2 mixers, attention and MoE (granite-4.0-h, Nemotron-H);
    /// `None`: every layer is attention then the MLP.
    pub hybrid: Option<HybridConfig>,
}

/// What a layer of a hybrid stack runs, each part after its own RMSNorm and added to the
/// residual stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerKind {
    /// The sequence mixer, if any.
    pub mixer: Option<MixerKind>,
    /// A MoE block after the mixer (or alone).
    pub moe: bool,
}

/// A hybrid layer's sequence mixer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MixerKind {
    /// Grouped-query attention over the paged cache, without positional encoding.
    Attention,
    /// Mamba2's selective state space, one token at a time.
    Mamba2,
}

/// A Mamba2 mixer's sizes (HF's `mamba_*` / `ssm_*` keys).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mamba2Config {
    /// SSM heads (H).
    pub heads: usize,
    /// Channels per head (Dh); the inner width is `H·Dh`.
    pub head_dim: usize,
    /// Groups sharing B and C (G); also the gated norm's groups.
    pub groups: usize,
    /// State size per channel (Ds).
    pub state: usize,
    /// Conv window (k).
    pub conv: usize,
    /// The clip of `softplus(dt + dt_bias)`.
    pub dt_min: f32,
    /// The clip's upper bound.
    pub dt_max: f32,
}

impl Mamba2Config {
    /// The inner width `H·Dh`.
    pub fn inner(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Channels of the conv: x, then B and C (`I + 2·G·Ds`).
    pub fn conv_channels(&self) -> usize {
        self.inner() + 2 * self.groups * self.state
    }

    /// Rows of the input projection: z, the conv's channels, dt.
    pub fn in_proj_rows(&self) -> usize {
        self.inner() + self.conv_channels() + self.heads
    }
}

/// A hybrid stack: each layer's kind, its Mamba2 mixers' sizes, whether the LM head is the
/// embedding.
#[derive(Clone, Debug, PartialEq)]
pub struct HybridConfig {
    /// One per layer.
    pub layers: Vec<LayerKind>,
    /// The Mamba2 mixers' sizes.
    pub mamba: Mamba2Config,
    /// The LM head reads the embedding table.
    pub tied_embeddings: bool,
}

impl HybridConfig {
    /// Layer kinds from Nemotron-H's `hybrid_override_pattern`: `M` a Mamba2 mixer, `E` a MoE
    /// block, `*` attention, one character per layer.
    pub fn nemotron_pattern(pattern: &str) -> Result<Vec<LayerKind>, DecodeError> {
        pattern
            .chars()
            .map(|c| match c {
                'M' => Ok(LayerKind {
                    mixer: Some(MixerKind::Mamba2),
                    moe: false,
                }),
                'E' => Ok(LayerKind {
                    mixer: None,
                    moe: true,
                }),
                '*' => Ok(LayerKind {
                    mixer: Some(MixerKind::Attention),
                    moe: false,
                }),
                other => Err(bad(
                    "hybrid_override_pattern",
                    format!("`{other}` is not a layer kind (M, E or *)"),
                )),
            })
            .collect()
    }
}

/// A mixture-of-experts MLP: a router over the experts, the top `k` of its softmax per token,
/// each a SwiGLU MLP of width `expert_ffn`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoeConfig {
    /// Experts per layer.
    pub experts: usize,
    /// Experts each token runs.
    pub k: usize,
    /// Width of one expert's MLP.
    pub expert_ffn: usize,
    /// Divide the top-k probabilities by their sum (`norm_topk_prob`).
    pub renormalize: bool,
    /// The experts' activation (SwiGLU; Nemotron-H's relu²).
    pub activation: MoeActivation,
    /// `Some(routed_scaling_factor)`: the sigmoid router with a correction bias (Nemotron-H);
    /// `None`: softmax.
    pub sigmoid_scale: Option<f32>,
    /// Width of a shared expert every token runs beside the routed ones, if any.
    pub shared_ffn: Option<usize>,
}

/// The architectures the driver runs.
const SUPPORTED: &[&str] = &["llama"];

fn meta<'a>(f: &'a GgufFile, key: &str) -> Result<&'a MetaValue, DecodeError> {
    f.get(key)
        .ok_or_else(|| DecodeError::MissingMeta(key.to_string()))
}

fn bad(key: &str, why: impl Into<String>) -> DecodeError {
    DecodeError::BadMeta {
        key: key.to_string(),
        why: why.into(),
    }
}

/// A positive integer that fits the driver's sizes (below 2^31, so every product of two
/// stays well inside usize and kiln's u32 launch fields).
fn size(f: &GgufFile, key: &str) -> Result<usize, DecodeError> {
    let v = meta(f, key)?;
    match v.as_u64() {
        Some(n) if n > 0 && n < (1 << 31) => Ok(n as usize),
        Some(n) => Err(bad(key, format!("{n} is out of range"))),
        None => Err(bad(key, format!("expected an integer, got {v:?}"))),
    }
}

fn size_or(f: &GgufFile, key: &str, default: usize) -> Result<usize, DecodeError> {
    match f.get(key) {
        None => Ok(default),
        Some(_) => size(f, key),
    }
}

/// A finite positive float, or `default` when the key is absent.
fn positive_or(f: &GgufFile, key: &str, default: f32) -> Result<f32, DecodeError> {
    let Some(v) = f.get(key) else {
        return Ok(default);
    };
    match v.as_f64() {
        Some(x) if x.is_finite() && x > 0.0 => Ok(x as f32),
        _ => Err(bad(key, format!("expected a positive float, got {v:?}"))),
    }
}

impl LlamaConfig {
    /// Reads and checks the config of `f`.
    pub fn from_gguf(f: &GgufFile) -> Result<LlamaConfig, DecodeError> {
        let arch_key = "general.architecture";
        let arch = meta(f, arch_key)?
            .as_str()
            .ok_or_else(|| bad(arch_key, "expected a string"))?;
        if !SUPPORTED.contains(&arch) {
            return Err(DecodeError::UnsupportedArch(arch.to_string()));
        }
        let key = |k: &str| format!("{arch}.{k}");
        let hidden = size(f, &key("embedding_length"))?;
        let heads = size(f, &key("attention.head_count"))?;
        let kv_heads = size_or(f, &key("attention.head_count_kv"), heads)?;
        if !heads.is_multiple_of(kv_heads) {
            return Err(bad(
                &key("attention.head_count_kv"),
                format!("{kv_heads} KV heads do not divide {heads} query heads"),
            ));
        }
        if !hidden.is_multiple_of(heads) {
            return Err(bad(
                &key("attention.head_count"),
                format!("{heads} heads do not divide the hidden size {hidden}"),
            ));
        }
        let head_dim = size_or(f, &key("attention.key_length"), hidden / heads)?;
        if size_or(f, &key("attention.value_length"), head_dim)? != head_dim {
            return Err(bad(
                &key("attention.value_length"),
                "value heads wider or narrower than key heads are not supported",
            ));
        }
        let rope_dims = size_or(f, &key("rope.dimension_count"), head_dim)?;
        if rope_dims > head_dim || !rope_dims.is_multiple_of(2) {
            return Err(bad(
                &key("rope.dimension_count"),
                format!("{rope_dims} must be even and at most the head dim {head_dim}"),
            ));
        }
        if let Some(kind) = f.get(&key("rope.scaling.type")) {
            if kind.as_str() != Some("none") {
                return Err(bad(
                    &key("rope.scaling.type"),
                    format!("RoPE scaling {kind:?} is not supported"),
                ));
            }
        }
        // The vocabulary size may be absent; the tokenizer's token list then says it.
        let vocab = match f.get(&key("vocab_size")) {
            Some(_) => size(f, &key("vocab_size"))?,
            None => meta(f, "tokenizer.ggml.tokens")?
                .as_array()
                .map(<[_]>::len)
                .filter(|&n| n > 0)
                .ok_or_else(|| bad("tokenizer.ggml.tokens", "expected a non-empty array"))?,
        };
        Ok(LlamaConfig {
            layers: size(f, &key("block_count"))?,
            hidden,
            heads,
            kv_heads,
            head_dim,
            ffn: size(f, &key("feed_forward_length"))?,
            vocab,
            rope_base: positive_or(f, &key("rope.freq_base"), 10_000.0)?,
            rope_dims,
            rope_traditional: true,
            rms_eps: positive_or(f, &key("attention.layer_norm_rms_epsilon"), 1e-5)?,
            context: size_or(f, &key("context_length"), 2048)?,
            qk_norm: false,
            moe: None,
            hybrid: None,
        })
    }

    /// Width of the fused q/k/v projection's output: query heads, then key, then value heads.
    pub fn qkv_width(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln::quant::GgufWriter;

    fn file(edit: impl FnOnce(&mut Vec<(&'static str, MetaValue)>)) -> GgufFile {
        let mut kv = vec![
            ("general.architecture", MetaValue::String("llama".into())),
            ("llama.block_count", MetaValue::U32(2)),
            ("llama.embedding_length", MetaValue::U32(64)),
            ("llama.feed_forward_length", MetaValue::U32(128)),
            ("llama.attention.head_count", MetaValue::U32(4)),
            ("llama.attention.head_count_kv", MetaValue::U32(2)),
            ("llama.vocab_size", MetaValue::U32(100)),
            ("llama.rope.freq_base", MetaValue::F32(100_000.0)),
        ];
        edit(&mut kv);
        let mut w = GgufWriter::new();
        for (k, v) in kv {
            w.add_metadata(k, v);
        }
        GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap()
    }

    #[test]
    fn reads_the_llama_keys_with_defaults() {
        let c = LlamaConfig::from_gguf(&file(|_| {})).unwrap();
        assert_eq!(
            (c.layers, c.hidden, c.heads, c.kv_heads, c.head_dim, c.ffn),
            (2, 64, 4, 2, 16, 128)
        );
        assert_eq!((c.vocab, c.rope_dims, c.context), (100, 16, 2048));
        assert_eq!((c.rope_base, c.rms_eps), (100_000.0, 1e-5));
        assert_eq!(c.qkv_width(), 8 * 16);
    }

    #[test]
    fn refusals_name_the_key() {
        let arch = file(|kv| kv[0].1 = MetaValue::String("mamba".into()));
        assert!(matches!(
            LlamaConfig::from_gguf(&arch),
            Err(DecodeError::UnsupportedArch(a)) if a == "mamba"
        ));
        let missing = file(|kv| {
            kv.remove(1);
        });
        assert!(matches!(
            LlamaConfig::from_gguf(&missing),
            Err(DecodeError::MissingMeta(k)) if k == "llama.block_count"
        ));
        let heads = file(|kv| kv[5].1 = MetaValue::U32(3));
        assert!(matches!(
            LlamaConfig::from_gguf(&heads),
            Err(DecodeError::BadMeta { key, .. }) if key == "llama.attention.head_count_kv"
        ));
        let zero = file(|kv| kv[2].1 = MetaValue::U32(0));
        assert!(matches!(
            LlamaConfig::from_gguf(&zero),
            Err(DecodeError::BadMeta { key, .. }) if key == "llama.embedding_length"
        ));
        let base = file(|kv| kv[7].1 = MetaValue::F32(f32::NAN));
        assert!(matches!(
            LlamaConfig::from_gguf(&base),
            Err(DecodeError::BadMeta { key, .. }) if key == "llama.rope.freq_base"
        ));
    }
}
