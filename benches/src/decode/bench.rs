//! `kiln bench --decode`: a model of a real shape with synthetic weights
//! ([`super::synthetic`]) or a GGUF file's own, a prompt run token by token, then a fixed number of greedy decode
//! steps at batch 1, measured three ways:
//!
//! - **eager**: each step's launches issued from the host, the token read back after each
//!   (wall time per token);
//! - **graph** (where the device records: CUDA): the same steps replayed from recordings made
//!   before the timed loop. `fused_rope_qk_append` takes the position as a launch parameter
//!   and the K/V rows it writes are views at that position, so one recording cannot serve
//!   every token: there is one per position, recorded ahead; the token id travels on the
//!   device (the sampler's output is the next step's embedding input) and the block table's
//!   length is written before each replay. The replayed tokens must equal the eager ones;
//! - **profiled**: one more step with every launch timed alone (device events on CUDA),
//!   aggregated by kernel and dtype: the GPU time per token and where it goes.
//!
//! Host gap per token = wall per token − GPU time per token. Memory: every kiln allocation on
//! the device is metered (`Device::peak_bytes`); the peak must stay within the weights, the KV
//! pool, 5% of the two, and the workspace the model and sampler allocate when made
//! (activations, sampler rows, scratch), which is reported.

use super::synthetic::ModelShape;
use super::{DecodeError, Model, Sampler, SamplingParams, Weights};
use kiln::quant::GgufFile;
use kiln::rng::Rng;
use kiln::timing::{profile_launches, record, Recording};
use kiln::{Device, DeviceError, PortError};
use std::collections::BTreeMap;
use std::time::Instant;

/// What to run.
#[derive(Clone, Debug)]
pub struct DecodeBenchConfig {
    /// The model's shape.
    pub shape: ModelShape,
    /// Its weights from this GGUF file (whose config `shape` holds), not synthetic ones.
    pub gguf: Option<std::path::PathBuf>,
    /// Run only the first this many layers (`None`: all of them).
    pub layers: Option<usize>,
    /// Prompt tokens (prefill, one step per token, timed only as a whole).
    pub prompt_tokens: usize,
    /// Greedy decode steps timed.
    pub decode_tokens: usize,
    /// Seed of the weights and the prompt.
    pub seed: u64,
    /// Also decode from per-position recordings where the device records.
    pub graphs: bool,
}

/// One kernel × dtype's part of a decode step's device time.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelShare {
    pub kernel: &'static str,
    pub dtype: &'static str,
    /// Launches of it in one step.
    pub launches: usize,
    /// Its seconds in one step.
    pub seconds: f64,
    /// Its share of the step's device time, 0..=1.
    pub share: f64,
}

/// Device bytes of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeMemory {
    /// The weights.
    pub weights: usize,
    /// The KV pools.
    pub kv: usize,
    /// What the model and sampler allocate beside them when made (activations, sampler rows,
    /// block table, the reserved scratch): fixed for a model and context.
    pub workspace: usize,
    /// The most bytes of kiln's allocations live at once during the run.
    pub peak: usize,
}

impl DecodeMemory {
    /// The bound the peak must stay within: weights + KV + 5% of the two + the workspace.
    pub fn bound(&self) -> usize {
        let core = self.weights + self.kv;
        core + core / 20 + self.workspace
    }

    /// Whether the peak is within [`DecodeMemory::bound`].
    pub fn within_bound(&self) -> bool {
        self.peak <= self.bound()
    }
}

/// One timed decode loop.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeLoop {
    /// `eager` or `graph`.
    pub path: &'static str,
    /// Seconds of the whole loop (every step, every token read back).
    pub seconds: f64,
    /// The tokens it produced.
    pub tokens: Vec<u32>,
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct DecodeBenchReport {
    pub model: String,
    /// Where the weights came from: `synthetic:seed=<seed>` or the GGUF file's path.
    pub source: String,
    pub layers: usize,
    pub backend: String,
    pub device: String,
    pub prompt_tokens: usize,
    /// Seconds from the first prompt token to the first token sampled.
    pub prefill_seconds: f64,
    pub eager: DecodeLoop,
    pub graph: Option<DecodeLoop>,
    /// Seconds to record the graph loop's steps (one recording per position), untimed.
    pub record_seconds: Option<f64>,
    /// Device seconds of one profiled step (the sum of its launches).
    pub gpu_seconds_per_token: f64,
    /// Kernels by share of the profiled step, largest first.
    pub profile: Vec<KernelShare>,
    pub memory: DecodeMemory,
    /// kiln allocations during the timed loops (0: a warm step allocates nothing).
    pub steady_allocations: usize,
    /// Bytes a decode step must read at the loop's mean context: every weight (the tied LM
    /// head reads the whole table; of the experts, the routed share) and the K/V rows
    /// attention reads.
    pub bytes_per_token: u64,
}

impl DecodeBenchReport {
    /// Tokens the decode loops produce.
    pub fn generated_tokens(&self) -> usize {
        self.eager.tokens.len()
    }

    /// The fastest loop measured (graph where recorded).
    pub fn best(&self) -> &DecodeLoop {
        self.graph.as_ref().unwrap_or(&self.eager)
    }

    /// Wall seconds per token of `l`.
    pub fn seconds_per_token(&self, l: &DecodeLoop) -> f64 {
        l.seconds / l.tokens.len().max(1) as f64
    }

    /// Host gap per token of `l`: wall per token − device time per token.
    pub fn host_gap(&self, l: &DecodeLoop) -> f64 {
        self.seconds_per_token(l) - self.gpu_seconds_per_token
    }
}

/// Puts `first` back as the sampler's device token, so a loop re-runs the same steps.
fn restart(sampler: &Sampler, first: u32) -> Result<(), DecodeError> {
    let mut t = sampler.device_token().ok_or_else(|| {
        DecodeError::Bench("the greedy sampler keeps its token on the device".into())
    })?;
    t.write(&[first])?;
    Ok(())
}

fn kiln_error(e: DecodeError) -> PortError {
    match e {
        DecodeError::Kiln(e) => e,
        other => PortError::Device(DeviceError::Other(other.to_string())),
    }
}

/// Runs the benchmark on `dev`.
pub fn run_decode_bench(
    dev: &Device,
    cfg: &DecodeBenchConfig,
) -> Result<DecodeBenchReport, DecodeError> {
    let mut mcfg = cfg.shape.config.clone();
    if let Some(n) = cfg.layers {
        if n == 0 || n > mcfg.layers {
            return Err(DecodeError::Bench(format!(
                "--layers {n}: {} has 1 to {} layers",
                cfg.shape.name, mcfg.layers
            )));
        }
        mcfg.layers = n;
    }
    let (prompt, steps) = (cfg.prompt_tokens, cfg.decode_tokens);
    if prompt == 0 || steps == 0 {
        return Err(DecodeError::Bench(
            "the prompt and the decode need one token or more".into(),
        ));
    }
    let capacity = prompt + steps;
    if capacity > mcfg.context {
        return Err(DecodeError::Bench(format!(
            "{capacity} tokens exceed {}'s context of {}",
            cfg.shape.name, mcfg.context
        )));
    }
    dev.sync()?;
    dev.reset_peak_bytes();
    let live0 = dev.live_bytes();
    let weights = match &cfg.gguf {
        Some(path) => Weights::load(&mut GgufFile::open(path)?, &mcfg, dev)?,
        None => Weights::synthetic(&mcfg, dev, cfg.seed)?,
    };
    let mut model = Model::new(mcfg.clone(), weights, dev, capacity)?;
    let mut sampler = Sampler::new(dev, mcfg.vocab, SamplingParams::default())?;
    let (weight_bytes, kv_bytes) = model.bytes();
    let weight_read = model.weight_bytes_read_per_token();
    let workspace =
        (dev.live_bytes().saturating_sub(live0)).saturating_sub(weight_bytes + kv_bytes);
    let mut logits = sampler.logits().view(0, &[1, mcfg.vocab])?;
    let token = sampler.device_token().ok_or_else(|| {
        DecodeError::Bench("the greedy sampler keeps its token on the device".into())
    })?;

    let mut rng = Rng::new(cfg.seed ^ 0x7072_6f6d_7074);
    let ids: Vec<u32> = (0..prompt)
        .map(|_| (rng.next_u64() % mcfg.vocab as u64) as u32)
        .collect();
    let t0 = Instant::now();
    for (position, &id) in ids[..prompt - 1].iter().enumerate() {
        model.prefill_step(id, position)?;
    }
    model.step(ids[prompt - 1], prompt - 1, &mut logits)?;
    sampler.enqueue_greedy()?;
    let first = sampler.read_token()?;
    let prefill_seconds = t0.elapsed().as_secs_f64();

    // One step: the model reads the sampler's last token on the device and the sampler
    // writes the next one there.
    let mut enqueue = |model: &mut Model, sampler: &mut Sampler, position: usize| {
        model.enqueue_step(&token, position, &mut logits)?;
        sampler.enqueue_greedy()
    };
    let allocations0 = dev.allocations();
    let t = Instant::now();
    let mut tokens = Vec::with_capacity(steps);
    for i in 0..steps {
        model.set_position(prompt + i)?;
        enqueue(&mut model, &mut sampler, prompt + i)?;
        tokens.push(sampler.read_token()?);
    }
    let eager = DecodeLoop {
        path: "eager",
        seconds: t.elapsed().as_secs_f64(),
        tokens,
    };

    let (mut graph, mut record_seconds) = (None, None);
    if cfg.graphs {
        let t = Instant::now();
        let mut recordings: Vec<Recording> = Vec::with_capacity(steps);
        for i in 0..steps {
            let rec = record(dev, || {
                enqueue(&mut model, &mut sampler, prompt + i).map_err(kiln_error)
            })?;
            match rec {
                Some(r) => recordings.push(r),
                None => break,
            }
        }
        if recordings.len() == steps {
            record_seconds = Some(t.elapsed().as_secs_f64());
            restart(&sampler, first)?;
            let t = Instant::now();
            let mut tokens = Vec::with_capacity(steps);
            for (i, r) in recordings.iter().enumerate() {
                model.set_position(prompt + i)?;
                r.replay()?;
                tokens.push(sampler.read_token()?);
            }
            let replayed = DecodeLoop {
                path: "graph",
                seconds: t.elapsed().as_secs_f64(),
                tokens,
            };
            if let Some(i) = (0..steps).find(|&i| replayed.tokens[i] != eager.tokens[i]) {
                return Err(DecodeError::Bench(format!(
                    "graph replay gave token {} at decode step {i}, the eager step {}",
                    replayed.tokens[i], eager.tokens[i]
                )));
            }
            graph = Some(replayed);
        }
    }
    let steady_allocations = dev.allocations() - allocations0;

    // The profiled step re-runs the first decode position.
    restart(&sampler, first)?;
    model.set_position(prompt)?;
    let launches = profile_launches(dev, || {
        enqueue(&mut model, &mut sampler, prompt).map_err(kiln_error)
    })?;
    let (gpu_seconds_per_token, profile) = shares(&launches);
    let memory = DecodeMemory {
        weights: weight_bytes,
        kv: kv_bytes,
        workspace,
        peak: dev.peak_bytes().saturating_sub(live0),
    };
    let mean_context = prompt + steps / 2;
    let kv_read = 2 * mcfg.layers * mean_context * mcfg.kv_heads * mcfg.head_dim * 4;
    Ok(DecodeBenchReport {
        model: cfg.shape.name.clone(),
        source: match &cfg.gguf {
            Some(path) => path.display().to_string(),
            None => format!("synthetic:seed={}", cfg.seed),
        },
        layers: mcfg.layers,
        backend: dev.backend().to_string(),
        device: dev.name().to_string(),
        prompt_tokens: prompt,
        prefill_seconds,
        eager,
        graph,
        record_seconds,
        gpu_seconds_per_token,
        profile,
        memory,
        steady_allocations,
        bytes_per_token: (weight_read + kv_read) as u64,
    })
}

/// The launches of one step summed, and grouped by kernel × dtype, largest first.
pub fn shares(launches: &[kiln::LaunchTime]) -> (f64, Vec<KernelShare>) {
    let total: f64 = launches.iter().map(|l| l.seconds).sum();
    let mut by: BTreeMap<(&'static str, &'static str), (usize, f64)> = BTreeMap::new();
    for l in launches {
        let e = by.entry((l.kernel.name(), l.dtype.name())).or_default();
        e.0 += 1;
        e.1 += l.seconds;
    }
    let mut rows: Vec<KernelShare> = by
        .into_iter()
        .map(|((kernel, dtype), (launches, seconds))| KernelShare {
            kernel,
            dtype,
            launches,
            seconds,
            share: if total > 0.0 { seconds / total } else { 0.0 },
        })
        .collect();
    rows.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    (total, rows)
}

/// A device token tensor for tests of the step alone.
#[cfg(test)]
fn token_tensor(dev: &Device, id: u32) -> Result<kiln::Tensor, PortError> {
    kiln::Tensor::from_slice(dev, &[1], &[id])
}

#[cfg(test)]
mod tests {
    use super::super::synthetic::{tiny_llama, tiny_moe};
    use super::*;

    fn tiny(dev: &Device, graphs: bool) -> DecodeBenchReport {
        run(dev, tiny_llama(), graphs)
    }

    fn run(dev: &Device, shape: ModelShape, graphs: bool) -> DecodeBenchReport {
        let cfg = DecodeBenchConfig {
            shape,
            gguf: None,
            layers: None,
            prompt_tokens: 8,
            decode_tokens: 4,
            seed: 3,
            graphs,
        };
        run_decode_bench(dev, &cfg).unwrap()
    }

    #[test]
    fn the_tiny_model_decodes_within_its_memory_bound_without_allocating() {
        let dev = Device::cpu();
        let r = tiny(&dev, true);
        assert_eq!(r.generated_tokens(), 4);
        // The cpu records nothing: the graph loop is not run.
        assert!(r.graph.is_none());
        assert_eq!(r.steady_allocations, 0);
        assert!(r.memory.weights > 0 && r.memory.kv > 0 && r.memory.workspace > 0);
        assert!(r.memory.peak >= r.memory.weights + r.memory.kv);
        assert!(
            r.memory.within_bound(),
            "{:?} over {}",
            r.memory,
            r.memory.bound()
        );
        // Per layer: 2 norms, qkv, rope, attention, wo, gate/up, down; then the embedding,
        // the final norm, the LM head and the greedy draw.
        let launches: usize = r.profile.iter().map(|k| k.launches).sum();
        assert_eq!(launches, 8 * 2 + 4);
        let share: f64 = r.profile.iter().map(|k| k.share).sum();
        assert!((share - 1.0).abs() < 1e-9);
        assert!(r.profile.windows(2).all(|w| w[0].seconds >= w[1].seconds));
        // The same seed decodes the same tokens.
        assert_eq!(tiny(&dev, false).eager.tokens, r.eager.tokens);
    }

    #[test]
    fn the_tiny_moe_model_routes_and_stays_within_its_bound() {
        let dev = Device::cpu();
        let r = run(&dev, tiny_moe(), false);
        assert_eq!(r.steady_allocations, 0);
        assert!(
            r.memory.within_bound(),
            "{:?} over {}",
            r.memory,
            r.memory.bound()
        );
        let count = |k: &str| {
            r.profile
                .iter()
                .filter(|s| s.kernel == k)
                .map(|s| s.launches)
                .sum::<usize>()
        };
        // Per layer: the router and the route, the experts' two launches (K 2 < 8: down into
        // partials, then the K-sum); the q and k head norms beside the two layer norms.
        assert_eq!(count("moe_route"), 2);
        assert_eq!(count("moe_gateup_4bit"), 2);
        assert_eq!(count("fused_add_rms_norm"), 2 * 4 + 1);
        // The routed share of the experts: K/E of their bytes, so fewer than all weights.
        assert!(r.bytes_per_token < (r.memory.weights + r.memory.kv) as u64);
    }

    #[test]
    fn the_device_token_step_matches_the_host_token_step() {
        let dev = Device::cpu();
        let cfg = tiny_llama().config;
        let vocab = cfg.vocab;
        let model = |dev: &Device| {
            let w = Weights::synthetic(&cfg, dev, 5).unwrap();
            Model::new(cfg.clone(), w, dev, 16).unwrap()
        };
        let (mut a, mut b) = (model(&dev), model(&dev));
        let mut la = kiln::Tensor::zeros(&dev, kiln::DType::F32, &[1, vocab]).unwrap();
        let mut lb = kiln::Tensor::zeros(&dev, kiln::DType::F32, &[1, vocab]).unwrap();
        for (p, id) in [17u32, 200, 3].into_iter().enumerate() {
            a.step(id, p, &mut la).unwrap();
            b.set_position(p).unwrap();
            b.enqueue_step(&token_tensor(&dev, id).unwrap(), p, &mut lb)
                .unwrap();
            assert_eq!(la.to_vec::<f32>().unwrap(), lb.to_vec::<f32>().unwrap());
        }
    }

    #[test]
    fn bad_settings_are_refused() {
        let dev = Device::cpu();
        let mut cfg = DecodeBenchConfig {
            shape: tiny_llama(),
            gguf: None,
            layers: Some(3),
            prompt_tokens: 8,
            decode_tokens: 4,
            seed: 3,
            graphs: false,
        };
        assert!(matches!(
            run_decode_bench(&dev, &cfg),
            Err(DecodeError::Bench(_))
        ));
        cfg.layers = None;
        cfg.decode_tokens = 0;
        assert!(matches!(
            run_decode_bench(&dev, &cfg),
            Err(DecodeError::Bench(_))
        ));
    }
}
