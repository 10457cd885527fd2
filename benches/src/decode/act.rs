//! The activation dtype a [`super::Model`] runs in: its activations, its residual stream and its
//! KV pools, chosen when the model is built. f32 is the default (and what the logit traces
//! against transformers check); bf16 runs a 4-bit model's decode the way MLX and production
//! engines run a bf16 checkpoint's, and `qlinear` is faster with 16-bit `x`.
//!
//! Every op of the step takes one activation dtype for its tensors, so the dense tensors an op
//! reads beside the activations (norm gains, dense matrices, Mamba2's conv taps, `D` and gated
//! norm gain) are rounded once into it when the model is built
//! ([`Weights::convert_dense`]). What stays f32 is what the ops require or accept in f32: the
//! Mamba2 SSM state (`ssm_update` keeps its state in f32), `A_log` and `dt_bias` (read in
//! their stored dtype), a MoE router's scores and correction bias, attention's query and output
//! (`paged_decode_planned` reads and writes f32 whatever the pools' dtype), and the logits the
//! samplers read (see [`super::widen`]).

use super::hybrid::Mixer;
use super::weights::{GateUp, Mlp, QkvProjection};
use super::{DecodeError, Matrix, Weights};
use kiln::{DType, PortError, Tensor};

/// The dtype of a model's activations, residual stream and KV pools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ActDtype {
    /// f32 throughout.
    #[default]
    F32,
    /// bf16: activations, residual and KV pools; f32 where an op requires it.
    Bf16,
}

impl ActDtype {
    /// Every activation dtype the driver runs.
    pub const ALL: [ActDtype; 2] = [ActDtype::F32, ActDtype::Bf16];

    /// kiln's dtype of the activation tensors.
    pub fn dtype(self) -> DType {
        match self {
            ActDtype::F32 => DType::F32,
            ActDtype::Bf16 => DType::Bf16,
        }
    }

    /// `f32` or `bf16`, as `--act-dtype` takes it.
    pub fn name(self) -> &'static str {
        self.dtype().name()
    }

    /// Parses `f32` or `bf16`; anything else is a typed refusal naming the accepted values.
    pub fn parse(s: &str) -> Result<ActDtype, DecodeError> {
        let refuse = |why: &str| DecodeError::ActDtype {
            got: s.to_string(),
            why: why.to_string(),
        };
        match s.trim() {
            "f32" => Ok(ActDtype::F32),
            "bf16" => Ok(ActDtype::Bf16),
            // Attention's query and the LM head's input (for the samplers' f32 logits) are f32;
            // kiln has no cast op, and a bf16 value widens exactly by a gather of 16-bit halves,
            // an f16 one does not.
            "f16" => Err(refuse(
                "expected f32 or bf16 (f16 is not built: the step widens its attention query and \
                 LM head input to f32 by a gather of bf16 halves, which f16 values have no \
                 equivalent of)",
            )),
            _ => Err(refuse("expected f32 or bf16")),
        }
    }
}

impl std::fmt::Display for ActDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ActDtype {
    type Err = DecodeError;

    fn from_str(s: &str) -> Result<ActDtype, DecodeError> {
        ActDtype::parse(s)
    }
}

/// A dense matrix's values (a quantized one keeps its own scale dtype).
fn dense(m: &mut Matrix) -> Option<&mut Tensor> {
    match m {
        Matrix::Dense(t) => Some(t),
        Matrix::Quantized(_) => None,
    }
}

/// The dense matrices of a q/k/v projection.
fn dense_qkv(p: &mut QkvProjection) -> Vec<&mut Tensor> {
    match p {
        QkvProjection::Fused(m) => dense(m).into_iter().collect(),
        QkvProjection::Split(ms) => ms.iter_mut().filter_map(dense).collect(),
    }
}

/// `t` rounded to nearest even into `dtype` (through f32, which holds every f32, f16 and bf16
/// value exactly: one rounding); unchanged when it already is `dtype`.
fn round_into(t: &mut Tensor, dtype: DType) -> Result<(), PortError> {
    if t.dtype() == dtype {
        return Ok(());
    }
    let values = t.to_f32_vec()?;
    let dev = t.device().clone();
    *t = Tensor::from_f32(&dev, dtype, t.shape(), &values)?;
    Ok(())
}

impl Weights {
    /// Rounds every dense tensor that an op reads in the activations' dtype into `dtype`, once:
    /// RMSNorm gains (the layers', q/k heads', final), dense matrices (run by `linear`, or
    /// gathered by `embedding`), Mamba2's conv taps and bias, `D` and gated-norm gain. Left as
    /// stored: quantized weights, Mamba2's `A_log` and `dt_bias` (`ssm_update` reads each in its
    /// own dtype) and a MoE router's correction bias (f32 by `MoeBlock`'s contract). Loaders
    /// upload dense values as f32, so at f32 this changes nothing.
    pub fn convert_dense(&mut self, dtype: DType) -> Result<(), PortError> {
        for t in self.dense_tensors() {
            round_into(t, dtype)?;
        }
        Ok(())
    }

    /// The tensors [`Weights::convert_dense`] rounds.
    fn dense_tensors(&mut self) -> Vec<&mut Tensor> {
        let mut v: Vec<&mut Tensor> = Vec::new();
        v.extend(dense(&mut self.embed));
        v.extend(self.lm_head.as_mut().and_then(dense));
        v.push(&mut self.output_norm);
        for l in &mut self.layers {
            v.push(&mut l.attn_norm);
            v.push(&mut l.ffn_norm);
            v.extend(dense_qkv(&mut l.qkv));
            if let Some(n) = &mut l.qk_norm {
                v.extend([&mut n.q, &mut n.k]);
            }
            v.extend(dense(&mut l.wo));
            match &mut l.mlp {
                Mlp::Dense { gate_up, down } => {
                    if let GateUp::Split { gate, up } = gate_up {
                        v.extend(dense(gate));
                        v.extend(dense(up));
                    }
                    v.extend(dense(down));
                }
                Mlp::Moe { router, .. } => v.extend(dense(router)),
            }
        }
        for l in &mut self.hybrid {
            if let Some((norm, mixer)) = &mut l.mixer {
                v.push(norm);
                match mixer {
                    Mixer::Attention { qkv, wo } => {
                        v.extend(dense_qkv(qkv));
                        v.extend(dense(wo));
                    }
                    Mixer::Mamba2(m) => {
                        v.extend(dense(&mut m.in_proj));
                        v.extend(dense(&mut m.out_proj));
                        v.extend([&mut m.conv_weight, &mut m.conv_bias, &mut m.d, &mut m.norm]);
                    }
                }
            }
            if let Some(moe) = &mut l.moe {
                v.push(&mut moe.norm);
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::super::synthetic::{tiny_hybrid, tiny_llama, tiny_moe};
    use super::super::{
        run_decode_bench, trace_logits, DecodeBenchConfig, LlamaConfig, MixerKind, Model,
    };
    use super::*;
    use kiln::rng::Rng;
    use kiln::Device;

    /// Teacher-forced logits (f32 rows) of `ids` through `cfg`'s synthetic model in `act`.
    fn logits(cfg: &LlamaConfig, act: ActDtype, ids: &[u32]) -> Vec<Vec<f32>> {
        let dev = Device::cpu();
        let w = Weights::synthetic(cfg, &dev, 11).unwrap();
        let mut model = Model::with_act_dtype(cfg.clone(), w, &dev, ids.len(), 1, act).unwrap();
        assert_eq!(model.act_dtype(), act);
        let mut out = Tensor::zeros(&dev, DType::F32, &[1, cfg.vocab]).unwrap();
        trace_logits(&mut model, ids, &mut out).unwrap()
    }

    /// nrms of `got` against `want` (spec §0.2), in f64.
    fn nrms(got: &[f32], want: &[f32]) -> f64 {
        let d: f64 = got
            .iter()
            .zip(want)
            .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
            .sum();
        let w: f64 = want.iter().map(|b| (*b as f64).powi(2)).sum();
        (d / w.max(1e-40)).sqrt()
    }

    /// The index of the largest value and its lead over the second.
    fn top2(row: &[f32]) -> (usize, f32) {
        let mut idx: Vec<usize> = (0..row.len()).collect();
        idx.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
        (idx[0], row[idx[0]] - row[idx[1]])
    }

    #[test]
    fn names_parse_and_others_are_typed_refusals() {
        for a in ActDtype::ALL {
            assert_eq!(ActDtype::parse(a.name()).unwrap(), a);
            assert_eq!(a.to_string().parse::<ActDtype>().unwrap(), a);
        }
        assert_eq!(ActDtype::default(), ActDtype::F32);
        for bad in ["f16", "fp32", "", "u32"] {
            assert!(matches!(
                ActDtype::parse(bad),
                Err(DecodeError::ActDtype { got, .. }) if got == bad
            ));
        }
    }

    /// [`tiny_hybrid`]'s mixers without its MoE blocks (its MoE-only layer becomes Mamba2):
    /// attention and Mamba2 with no routing decision.
    fn tiny_hybrid_mixers() -> (String, LlamaConfig) {
        let mut cfg = tiny_hybrid().config;
        for kind in &mut cfg.hybrid.as_mut().expect("a hybrid stack").layers {
            kind.moe = false;
            kind.mixer.get_or_insert(MixerKind::Mamba2);
        }
        ("tiny-hybrid-mixers".into(), cfg)
    }

    /// bf16 activations follow the f32 run (which the logit traces check against
    /// transformers): per position the logits' nrms stays within the model's bound, and where
    /// the f32 logits' top-2 gap is decided the bf16 top-1 is the f32 one.
    ///
    /// The bounds: bf16 keeps 8 significant bits, so each rounding is off by at most
    /// u = 2^-9 ≈ 2e-3 relative; a layer rounds its residual, normed input, q/k/v, K/V, query,
    /// attention output, MLP activations and outputs (the logits are f32, from the final normed
    /// row in bf16). Measured over 2000 seeds × 12 positions: the tiny Llama's worst
    /// per-position nrms 8.8e-3 (≈ 4.5u; median of the runs' worst 5.7e-3), attention + Mamba2
    /// (its conv state in bf16 too) 2.2e-2. The bounds are ~2.5× those: 2.5e-2 and 5e-2. A MoE router's top-k is a
    /// discrete choice: where two experts nearly tie, bf16 can pick the other and move that
    /// position's logits (worst 0.34 for tiny-moe, 0.30 for tiny-hybrid, whose Mamba2 states
    /// carry it on); those models are held to 0.75 only, which unrelated logits (nrms ≈ 1.4) or
    /// a misread dtype exceed, and their top-1 is not compared.
    #[test]
    fn bf16_logits_follow_the_f32_ones() {
        let seed = kiln::parity::base_seed();
        eprintln!("seed {seed} (replay with KILN_SEED={seed})");
        let named = |s: super::super::ModelShape| (s.name, s.config);
        let models = [
            (named(tiny_llama()), 2.5e-2, true),
            (tiny_hybrid_mixers(), 5e-2, true),
            (named(tiny_moe()), 0.75, false),
            (named(tiny_hybrid()), 0.75, false),
        ];
        let mut decided = 0;
        for ((name, cfg), bound, compare_top1) in models {
            let mut rng = Rng::new(seed);
            let ids: Vec<u32> = (0..12)
                .map(|_| (rng.next_u64() % cfg.vocab as u64) as u32)
                .collect();
            let want = logits(&cfg, ActDtype::F32, &ids);
            let got = logits(&cfg, ActDtype::Bf16, &ids);
            let mut worst = 0.0f64;
            for (p, (g, w)) in got.iter().zip(&want).enumerate() {
                let e = nrms(g, w);
                worst = worst.max(e);
                assert!(e < bound, "{name} position {p}: nrms {e:.3e} ≥ {bound:e}");
                // Decided: a gap no two logits' errors within the bound can close (a logit's
                // error stays within ~4σ, σ = bound × the row's rms).
                let rms = (w.iter().map(|v| v * v).sum::<f32>() / w.len() as f32).sqrt();
                let ((top_w, gap), (top_g, _)) = (top2(w), top2(g));
                if compare_top1 && gap > 8.0 * bound as f32 * rms {
                    decided += 1;
                    assert_eq!(top_g, top_w, "{name} position {p}: f32 gap {gap:.3e}");
                }
            }
            eprintln!("{name}: worst nrms {worst:.3e}, {decided} decided positions so far");
        }
        // The tiny Llama alone decides most of its positions (in each of 2000 seeds, some).
        assert!(decided > 0, "no decided position to compare");
    }

    /// A bf16 model really runs in bf16: its KV pools take half the f32 model's bytes, every
    /// launch of its decode step is a bf16 one but those that are f32 by design (kernels with no
    /// bf16 form: the greedy draw's `speculative_accept`, MoE down into f32 partials; the LM
    /// head writing f32 logits; a MoE block's f32 sums), a warm step allocates nothing, the peak stays within its bound, and its CSV
    /// row's model says bf16 (an f32 row's keeps the label it always had).
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
