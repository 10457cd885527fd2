//! `kiln generate`: a GGUF model or an MLX model directory generating text on one backend,
//! streamed to stdout.

use kiln_benches::decode::{generate, ActDtype, ModelFile, Sampler, SamplingParams};
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    /// The model: a Llama-architecture GGUF file, or an MLX model directory (llama, qwen3,
    /// qwen3_moe).
    #[arg(long)]
    model: std::path::PathBuf,
    /// The prompt text.
    #[arg(long)]
    prompt: String,
    /// Most tokens to generate (a stop token ends earlier).
    #[arg(long, default_value_t = 64)]
    max_tokens: usize,
    /// Softmax temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Keep the smallest set of most probable tokens whose mass reaches P (1 is off).
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Keep the K most probable tokens (0 is off).
    #[arg(long, default_value_t = 0)]
    top_k: u32,
    /// Keep tokens at least M times as probable as the most probable one (0 is off).
    #[arg(long, default_value_t = 0.0)]
    min_p: f32,
    /// Seed of the sampler's keys.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// cpu, sim, cuda, rocm or wgpu.
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// Wrap the prompt in the model's chat template as a user turn.
    #[arg(long)]
    chat: bool,
    /// The dtype of the activations, residual stream and KV cache: f32 or bf16.
    #[arg(long, default_value = "f32")]
    act_dtype: ActDtype,
}

pub fn main(a: Args) -> anyhow::Result<()> {
    let backend = kiln::Backend::parse(&a.backend).ok_or_else(|| {
        anyhow::anyhow!(
            "unknown backend `{}` (cpu, sim, cuda, rocm, wgpu)",
            a.backend
        )
    })?;
    let act = a.act_dtype;
    let dev = kiln::Device::open(backend)?;
    let mut file = ModelFile::open(&a.model)?;
    let text = if a.chat {
        file.tokenizer.chat_prompt(&a.prompt)?
    } else {
        a.prompt.clone()
    };
    let prompt = file.tokenizer.encode(&text)?;
    let params = SamplingParams {
        temperature: a.temperature,
        top_k: a.top_k,
        top_p: a.top_p,
        min_p: a.min_p,
        seed: a.seed,
    };
    let mut sampler = Sampler::new(&dev, file.config.vocab, params)?;
    let t = std::time::Instant::now();
    let mut model = file.load_with(&dev, prompt.len() + a.max_tokens, act)?;
    let load_seconds = t.elapsed().as_secs_f64();
    let (weight_bytes, kv_bytes) = model.bytes();
    eprintln!(
        "# {} on {}: {} layers, {act} activations, loaded in {load_seconds:.1} s ({:.1} MB weights, {:.1} MB KV cache for {} tokens); {} prompt tokens; sampler {:?}",
        a.model.display(),
        dev.name(),
        file.config.layers,
        weight_bytes as f64 / 1e6,
        kv_bytes as f64 / 1e6,
        model.capacity(),
        prompt.len(),
        sampler.kind(),
    );
    let mut out = std::io::stdout().lock();
    if !a.chat {
        write!(out, "{}", a.prompt)?;
    }
    out.flush()?;
    let report = generate(
        &mut model,
        &file.tokenizer,
        &prompt,
        a.max_tokens,
        &mut sampler,
        |piece| {
            // A closed stdout (a pipe into head) is not an error of the generation.
            let _ = write!(out, "{piece}").and_then(|_| out.flush());
        },
    )?;
    writeln!(out)?;
    eprintln!(
        "# {} tokens ({:?}); prefill {} tokens in {:.2} s ({:.1} tok/s); decode {:.2} tok/s",
        report.generated.len(),
        report.stop,
        report.prompt_tokens,
        report.prefill_seconds,
        report.prefill_tokens_per_second(),
        report.decode_tokens_per_second()
    );
    Ok(())
}
