//! `kiln bench --decode`: a model of a real shape with synthetic weights
//! ([`super::synthetic`]) or a GGUF file's own, a prompt run token by token, then a fixed number
//! of greedy decode steps, at batch 1 or for a batch of sequences in lockstep (each its own
//! random prompt and cache; a step decodes one token of every sequence), measured three ways:
//!
//! - **eager**: each step's launches issued from the host, the token read back after each
//!   (wall time per token);
//! - **graph** (where the device records: CUDA): the same steps replayed from recordings made
//!   before the timed loop. `fused_rope_qk_append` takes the position as a launch parameter
//!   and the K/V rows it writes are views at that position, so one recording cannot serve
//!   every token: there is one per position, recorded ahead; the token ids travel on the
//!   device (the sampler's output is the next step's embedding input) and the block table's
//!   length is written before each replay. The replayed tokens must equal the eager ones;
//! - **device time**: where the device records, a step replayed back to back between device
//!   events (the GPU's busy time per step, as the peers' graph replay measures it);
//!   elsewhere the profiled step's launches summed;
//! - **profiled**: one more step with every launch timed alone (device events on CUDA),
//!   aggregated by kernel and dtype: where the GPU time goes. Timing a launch alone adds its
//!   own cost to small kernels, so the profile's total exceeds the replayed step's time.
//!
//! A hybrid stack's Mamba2 states carry every earlier step (a KV row only its position), so
//! they are saved after the prompt and put back before each loop that repeats the steps.
//!
//! Host gap per step = wall per step − GPU time per step (a step is one token at batch 1).
//! Memory: every kiln allocation on
//! the device is metered (`Device::peak_bytes`); the peak must stay within the weights, the KV
//! pool, 5% of the two, and the workspace the model and sampler allocate when made
//! (activations, sampler rows, scratch), which is reported.

use super::synthetic::ModelShape;
use super::{ActDtype, BatchGreedy, Checkpoint, DecodeError, Model, Weights};
use kiln::rng::Rng;
use kiln::timing::{profile_launches, record, time_recorded, Issue, Recording};
use kiln::{Device, DeviceError, PortError};
use std::collections::BTreeMap;
use std::time::Instant;

/// What to run.
#[derive(Clone, Debug)]
pub struct DecodeBenchConfig {
    /// The model's shape.
    pub shape: ModelShape,
    /// Its weights from this GGUF file or MLX directory (whose config `shape` holds), not
    /// synthetic ones.
    pub gguf: Option<std::path::PathBuf>,
    /// Run only the first this many layers (`None`: all of them).
    pub layers: Option<usize>,
    /// Prompt tokens (prefill, one step per token, timed only as a whole).
    pub prompt_tokens: usize,
    /// Greedy decode steps timed (each a token of every sequence).
    pub decode_tokens: usize,
    /// Sequences decoded in lockstep (1 to `MAX_M`).
    pub batch: usize,
    /// Seed of the weights and the prompt.
    pub seed: u64,
    /// Also decode from per-position recordings where the device records.
    pub graphs: bool,
    /// The model's activations, residual and KV pools.
    pub act: ActDtype,
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
    /// Seconds of the whole loop (every step, every step's tokens read back).
    pub seconds: f64,
    /// The tokens it produced, step after step (a step's `batch` tokens together).
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
    /// Sequences per step.
    pub batch: usize,
    /// The dtype of the activations, residual and KV pools.
    pub act: ActDtype,
    /// Seconds from the first prompt token to the first token sampled.
    pub prefill_seconds: f64,
    pub eager: DecodeLoop,
    pub graph: Option<DecodeLoop>,
    /// Seconds to record the graph loop's steps (one recording per position), untimed.
    pub record_seconds: Option<f64>,
    /// Device seconds per step: a replayed step between device events where the device
    /// records, else the profiled step's launches summed.
    pub gpu_seconds_per_step: f64,
    /// How `gpu_seconds_per_step` was measured, in words.
    pub gpu_time_source: &'static str,
    /// The profiled step's launches, each timed alone, summed.
    pub profile_seconds_per_step: f64,
    /// Kernels by share of the profiled step, largest first.
    pub profile: Vec<KernelShare>,
    pub memory: DecodeMemory,
    /// kiln allocations during the timed loops (0: a warm step allocates nothing).
    pub steady_allocations: usize,
    /// Bytes a decode step must read at the loop's mean context: every weight once (the tied
    /// LM head reads the whole table; of the experts, the share the batch's tokens route to)
    /// and every sequence's K/V rows that attention reads.
    pub bytes_per_step: u64,
}

impl DecodeBenchReport {
    /// Tokens the decode loops produce (of every sequence).
    pub fn generated_tokens(&self) -> usize {
        self.eager.tokens.len()
    }

    /// Decode steps a loop runs.
    pub fn steps(&self) -> usize {
        self.eager.tokens.len() / self.batch.max(1)
    }

    /// The fastest loop measured (graph where recorded).
    pub fn best(&self) -> &DecodeLoop {
        self.graph.as_ref().unwrap_or(&self.eager)
    }

    /// Wall seconds per step of `l`.
    pub fn seconds_per_step(&self, l: &DecodeLoop) -> f64 {
        l.seconds * self.batch.max(1) as f64 / l.tokens.len().max(1) as f64
    }

    /// Host gap per step of `l`: wall per step − device time per step.
    pub fn host_gap(&self, l: &DecodeLoop) -> f64 {
        self.seconds_per_step(l) - self.gpu_seconds_per_step
    }
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
    let (prompt, steps, batch) = (cfg.prompt_tokens, cfg.decode_tokens, cfg.batch);
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
        Some(path) => Checkpoint::open(path)?.load_weights(&mcfg, dev)?,
        None => Weights::synthetic(&mcfg, dev, cfg.seed)?,
    };
    let mut model = Model::with_act_dtype(mcfg.clone(), weights, dev, capacity, batch, cfg.act)?;
    let mut sampler = BatchGreedy::new(dev, mcfg.vocab, batch)?;
    let (weight_bytes, kv_bytes) = model.bytes();
    let weight_read = model.weight_bytes_read_per_step();
    let workspace =
        (dev.live_bytes().saturating_sub(live0)).saturating_sub(weight_bytes + kv_bytes);
    let mut logits = sampler.logits()?;
    let tokens_on_device = sampler.device_tokens()?;

    // Position-major: the batch's prompt tokens at position p are ids[p·B..(p + 1)·B].
    let mut rng = Rng::new(cfg.seed ^ 0x7072_6f6d_7074);
    let ids: Vec<u32> = (0..prompt * batch)
        .map(|_| (rng.next_u64() % mcfg.vocab as u64) as u32)
        .collect();
    let t0 = Instant::now();
    for (position, at) in ids.chunks(batch).take(prompt - 1).enumerate() {
        model.prefill_batch(at, position)?;
    }
    model.step_batch(&ids[(prompt - 1) * batch..], prompt - 1, &mut logits)?;
    sampler.enqueue()?;
    let first = sampler.read()?;
    let prefill_seconds = t0.elapsed().as_secs_f64();
    // Later loops re-run the same decode steps: the Mamba2 states go back to this point.
    let saved = model.save_states()?;

    // One step: the model reads the sampler's last tokens on the device and the sampler
    // writes the next ones there.
    let mut enqueue = |model: &mut Model, sampler: &mut BatchGreedy, position: usize| {
        model.enqueue_step(&tokens_on_device, position, &mut logits)?;
        sampler.enqueue()
    };
    let allocations0 = dev.allocations();
    let t = Instant::now();
    let mut tokens = Vec::with_capacity(steps * batch);
    for i in 0..steps {
        model.set_position(prompt + i)?;
        enqueue(&mut model, &mut sampler, prompt + i)?;
        tokens.extend(sampler.read()?);
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
            // A recording keeps the launch geometry of the plan written when it was made (v2's
            // chunks, pages per chunk): record each position over its own plan, the plan its
            // replay will find.
            model.set_position(prompt + i)?;
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
            sampler.set(&first)?;
            model.restore_states(&saved)?;
            let t = Instant::now();
            let mut tokens = Vec::with_capacity(steps * batch);
            for (i, r) in recordings.iter().enumerate() {
                model.set_position(prompt + i)?;
                r.replay()?;
                tokens.extend(sampler.read()?);
            }
            let replayed = DecodeLoop {
                path: "graph",
                seconds: t.elapsed().as_secs_f64(),
                tokens,
            };
            if let Some(i) = (0..steps * batch).find(|&i| replayed.tokens[i] != eager.tokens[i]) {
                return Err(DecodeError::Bench(format!(
                    "graph replay gave token {} at decode step {} of sequence {}, the eager step {}",
                    replayed.tokens[i],
                    i / batch,
                    i % batch,
                    eager.tokens[i]
                )));
            }
            graph = Some(replayed);
        }
    }
    let steady_allocations = dev.allocations() - allocations0;

    // The profiled step re-runs the first decode position.
    sampler.set(&first)?;
    model.restore_states(&saved)?;
    model.set_position(prompt)?;
    let launches = profile_launches(dev, || {
        enqueue(&mut model, &mut sampler, prompt).map_err(kiln_error)
    })?;
    let (profile_seconds_per_step, profile) = shares(&launches);
    // The GPU's busy time per step: the first decode step replayed back to back (its token
    // input changes between replays; its launches and bytes do not).
    let (gpu_seconds_per_step, gpu_time_source) = if graph.is_some() {
        sampler.set(&first)?;
        model.set_position(prompt)?;
        let mut times = time_recorded(dev, 9, 1, Issue::Replayed, || {
            enqueue(&mut model, &mut sampler, prompt).map_err(kiln_error)
        })?;
        model.restore_states(&saved)?;
        times.sort_by(f64::total_cmp);
        (
            times[times.len() / 2],
            "a step replayed back to back between device events (median of 9)",
        )
    } else {
        (
            profile_seconds_per_step,
            "the profiled step's launches, each timed alone, summed",
        )
    };
    let memory = DecodeMemory {
        weights: weight_bytes,
        kv: kv_bytes,
        workspace,
        peak: dev.peak_bytes().saturating_sub(live0),
    };
    let mean_context = prompt + steps / 2;
    let kv_read = batch
        * 2
        * model.attention_layers()
        * mean_context
        * mcfg.kv_heads
        * mcfg.head_dim
        * cfg.act.dtype().size();
    // Each Mamba2 state is read from one copy and written whole into the other.
    let states = model.state_bytes();
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
        batch,
        act: cfg.act,
        prefill_seconds,
        eager,
        graph,
        record_seconds,
        gpu_seconds_per_step,
        gpu_time_source,
        profile_seconds_per_step,
        profile,
        memory,
        steady_allocations,
        bytes_per_step: (weight_read + kv_read + states) as u64,
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
    use super::super::synthetic::{tiny_hybrid, tiny_llama, tiny_moe};
    use super::*;
    use kiln::math::kernels::qlinear::MAX_M;
    use kiln::DType;

    /// Launches of kernel `k` in one step of the report's profile.
    fn launches(r: &DecodeBenchReport, k: &str) -> usize {
        r.profile
            .iter()
            .filter(|s| s.kernel == k)
            .map(|s| s.launches)
            .sum()
    }

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
            batch: 1,
            seed: 3,
            graphs,
            act: ActDtype::F32,
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
        let count = |k: &str| launches(&r, k);
        // Per layer: the router and the route, the experts' two launches (K 2 < 8: down into
        // partials, then the K-sum); the q and k head norms beside the two layer norms.
        assert_eq!(count("moe_route"), 2);
        assert_eq!(count("moe_gateup_4bit"), 2);
        assert_eq!(count("fused_add_rms_norm"), 2 * 4 + 1);
        // The routed share of the experts: K/E of their bytes, so fewer than all weights.
        assert!(r.bytes_per_step < (r.memory.weights + r.memory.kv) as u64);
    }

    #[test]
    fn a_batch_decodes_every_sequence_within_its_bound() {
        let dev = Device::cpu();
        let mut cfg = DecodeBenchConfig {
            shape: tiny_moe(),
            gguf: None,
            layers: None,
            prompt_tokens: 8,
            decode_tokens: 4,
            batch: 3,
            seed: 3,
            graphs: false,
            act: ActDtype::F32,
        };
        let r = run_decode_bench(&dev, &cfg).unwrap();
        assert_eq!((r.batch, r.steps(), r.generated_tokens()), (3, 4, 12));
        assert_eq!(r.steady_allocations, 0);
        assert!(r.memory.within_bound(), "{:?}", r.memory);
        let count = |k: &str| launches(&r, k);
        // Projections and routes once per layer for the batch; RoPE+append, the q/k head norms
        // and the greedy draw once per sequence.
        assert_eq!(count("moe_route"), 2);
        assert_eq!(count("fused_rope_qk_append"), 2 * 3);
        assert_eq!(count("fused_add_rms_norm"), 2 * (2 + 2 * 3) + 1);
        assert_eq!(count("speculative_accept"), 3);
        // Three times the KV rows of batch 1, the weights read once.
        cfg.batch = 1;
        let one = run_decode_bench(&dev, &cfg).unwrap();
        assert!(r.bytes_per_step > one.bytes_per_step);
        assert!(r.memory.kv == 3 * one.memory.kv);
        assert!(r.model_label(2).ends_with("-b3") && one.model_label(2) == one.model);
        cfg.batch = MAX_M + 1;
        assert!(matches!(
            run_decode_bench(&dev, &cfg),
            Err(DecodeError::Bench(_))
        ));
    }

    #[test]
    fn the_tiny_hybrid_runs_mamba_attention_and_moe_layers_within_its_bound() {
        let dev = Device::cpu();
        for batch in [1, 2] {
            let cfg = DecodeBenchConfig {
                shape: tiny_hybrid(),
                gguf: None,
                layers: None,
                prompt_tokens: 8,
                decode_tokens: 4,
                batch,
                seed: 3,
                graphs: false,
                act: ActDtype::F32,
            };
            let r = run_decode_bench(&dev, &cfg).unwrap();
            assert_eq!(r.generated_tokens(), 4 * batch);
            assert_eq!(r.steady_allocations, 0);
            assert!(r.memory.within_bound(), "{:?}", r.memory);
            let count = |k: &str| launches(&r, k);
            // Two Mamba2 layers (conv, SSM and gated norm per sequence), one attention layer
            // (RoPE+append per sequence), three MoE blocks (one route each); a norm before each
            // of the six sublayers and the head.
            assert_eq!(count("causal_conv1d_update"), 2 * batch);
            assert_eq!(count("ssm_update"), 2 * batch);
            assert_eq!(count("gated_rms_norm"), 2 * batch);
            assert_eq!(count("fused_rope_qk_append"), batch);
            assert_eq!(count("paged_attention_decode"), 1);
            assert_eq!(count("moe_route"), 3);
            assert_eq!(count("fused_add_rms_norm"), 7);
            // The same run repeats its tokens: the states were put back.
            assert_eq!(
                run_decode_bench(&dev, &cfg).unwrap().eager.tokens,
                r.eager.tokens
            );
        }
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
            batch: 1,
            seed: 3,
            graphs: false,
            act: ActDtype::F32,
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

    /// A bf16 model really runs in bf16: its KV pools take half the f32 model's bytes, every
    /// launch of its decode step is a bf16 one but those that are f32 by design (kernels with no
    /// bf16 form: the greedy draw's `speculative_accept`, MoE down into f32 partials; the LM
    /// head writing f32 logits; a MoE block's f32 sums), a warm step allocates nothing, the
    /// peak stays within its bound, and its CSV row's model says bf16 (an f32 row's keeps the
    /// label it always had).
    #[test]
    fn a_bf16_model_runs_its_step_in_bf16() {
        let dev = Device::cpu();
        for shape in [tiny_llama(), tiny_moe(), tiny_hybrid()] {
            let layers = shape.config.layers;
            let run = |act| {
                let cfg = DecodeBenchConfig {
                    shape: shape.clone(),
                    gguf: None,
                    layers: None,
                    prompt_tokens: 8,
                    decode_tokens: 4,
                    batch: 2,
                    seed: 3,
                    graphs: false,
                    act,
                };
                run_decode_bench(&dev, &cfg).unwrap()
            };
            let (full, half) = (run(ActDtype::F32), run(ActDtype::Bf16));
            let name = &shape.name;
            if shape.config.hybrid.is_none() {
                assert_eq!(2 * half.memory.kv, full.memory.kv, "{name}");
            } else {
                // The Mamba2 SSM states stay f32 beside the halved KV pools and conv states.
                assert!(half.memory.kv < full.memory.kv, "{name}");
            }
            assert_eq!(half.steady_allocations, 0, "{name}");
            assert!(half.memory.within_bound(), "{name}: {:?}", half.memory);
            // f32 by design: kernels without a bf16 form, the LM head (one `qlinear` writing
            // the greedy draw's f32 logits), and `moe_block`'s routed K-sum, kept in f32 beside
            // a shared expert's sum (the block's output is then rounded once).
            let shared_expert = shape.config.moe.is_some_and(|m| m.shared_ffn.is_some());
            for k in &half.profile {
                let id = kiln::KernelId::from_name(k.kernel).expect("a listed kernel");
                let f32_by_design = !id.dtypes().contains(&DType::Bf16)
                    || (k.kernel == "qlinear_4bit" && k.launches == 1)
                    || (shared_expert && k.kernel == "moe_combine");
                let ok = k.dtype == "bf16" || (k.dtype == "f32" && f32_by_design);
                assert!(ok, "{name}: {} at {}", k.kernel, k.dtype);
            }
            let at_bf16 = |kernel: &str| {
                half.profile
                    .iter()
                    .any(|k| k.kernel == kernel && k.dtype == "bf16")
            };
            for kernel in [
                "qlinear_4bit",
                "fused_add_rms_norm",
                "paged_attention_decode",
            ] {
                assert!(at_bf16(kernel), "{name}: no bf16 {kernel}");
            }
            assert!(full.profile.iter().all(|k| k.dtype == "f32"), "{name}");
            assert_eq!(half.model_label(layers), format!("{name}-b2-bf16"));
            assert_eq!(full.model_label(layers), format!("{name}-b2"));
        }
    }
}
