//! A toy one-layer decoder with random weights, laid out in the engine's arena, and its decode
//! step as kiln calls.

use crate::arena::ArenaView;
use kiln::math::kernels::fused_silu_mul::SiluMulParams;
use kiln::math::kernels::linear::LinearParams;
use kiln::ops;
use kiln::paged::{paged_attention_decode_resident, BlockTable, DeviceBlockTable};
use kiln::{DType, Device, PortError, Tensor};

/// The model's sizes.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    /// Requests decoded together.
    pub batch: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Query heads.
    pub heads_q: usize,
    /// KV heads.
    pub heads_kv: usize,
    /// Head dim.
    pub head_dim: usize,
    /// MLP width.
    pub ffn: usize,
    /// Vocabulary.
    pub vocab: usize,
    /// Pool rows (pages).
    pub pages: usize,
    /// Tokens per page.
    pub page_size: usize,
}

impl Dims {
    /// A small model that still exercises every op's block loops.
    pub const SMALL: Dims = Dims {
        batch: 2,
        hidden: 256,
        heads_q: 4,
        heads_kv: 2,
        head_dim: 64,
        ffn: 512,
        vocab: 2048,
        pages: 16,
        page_size: 16,
    };

    /// A smaller model for the SIMT emulator (one OS thread per lane).
    pub const TINY: Dims = Dims {
        batch: 2,
        hidden: 64,
        heads_q: 2,
        heads_kv: 1,
        head_dim: 32,
        ffn: 128,
        vocab: 256,
        pages: 4,
        page_size: 8,
    };

    /// The model size the example runs on `backend`.
    pub fn for_backend(backend: kiln::Backend) -> Dims {
        if backend == kiln::Backend::Sim {
            Dims::TINY
        } else {
            Dims::SMALL
        }
    }

    /// Arena bytes the model's weights and its activations take (with alignment slack): an
    /// engine keeps them in two allocations (on wgpu an input sharing a buffer with an output
    /// is copied before the dispatch).
    pub fn arena_bytes(&self) -> usize {
        let d = *self;
        let weights = d.hidden * 3
            + 2 * d.batch * d.hidden
            + d.hidden * d.heads_q * d.head_dim * 2
            + 3 * d.hidden * d.ffn
            + d.vocab * d.hidden;
        let pool = 2 * d.pages * d.page_size * d.heads_kv * d.head_dim;
        let acts = d.batch * (6 * d.hidden + 2 * d.heads_q * d.head_dim + 3 * d.ffn + d.vocab + 1);
        4 * (weights + pool + acts) + 64 * 256
    }
}

/// The engine's buffers, all views of its arena.
pub struct Model {
    /// Sizes.
    pub dims: Dims,
    norm: [Tensor; 3],
    wq: Tensor,
    wo: Tensor,
    w_gate: Tensor,
    w_up: Tensor,
    w_down: Tensor,
    lm_head: Tensor,
    no_bias: Tensor,
    k_pool: Tensor,
    v_pool: Tensor,
    /// The block table on the device, written by the engine before a step.
    pub table: DeviceBlockTable,
    /// The step's input hidden state `[B, D]`.
    pub x: Tensor,
    /// The residual stream at the start of a step (the engine copies it into `residual`).
    pub residual_init: Tensor,
    /// The residual stream, updated in place by the norms.
    pub residual: Tensor,
    h: Tensor,
    q: Tensor,
    attn: Tensor,
    o: Tensor,
    gate: Tensor,
    up: Tensor,
    act: Tensor,
    down: Tensor,
    /// Logits `[B, V]` of the step.
    pub logits: Tensor,
    /// The sampled tokens `[B]` of the step.
    pub tokens: Tensor,
}

/// A deterministic fill in [-scale, scale) (an LCG: the example needs no RNG crate).
fn fill(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn weight(a: &mut ArenaView, seed: u64, shape: &[usize], scale: f32) -> Result<Tensor, PortError> {
    let mut t = a.take(DType::F32, shape)?;
    t.write_f32(&fill(seed, t.numel(), scale))?;
    Ok(t)
}

impl Model {
    /// Lays the model out in `a` and fills it; allocates only the device block table.
    pub fn new(
        dev: &Device,
        a: &mut ArenaView,
        acts: &mut ArenaView,
        dims: Dims,
    ) -> Result<Model, PortError> {
        let d = dims;
        let qd = d.heads_q * d.head_dim;
        let pool = [d.pages, d.page_size, d.heads_kv, d.head_dim];
        let ones = |a: &mut ArenaView| -> Result<Tensor, PortError> {
            let mut t = a.take(DType::F32, &[d.hidden])?;
            t.write_f32(&vec![1.0; d.hidden])?;
            Ok(t)
        };
        let scale = |k: usize| 1.0 / (k as f32).sqrt();
        let mut m = Model {
            dims,
            norm: [ones(a)?, ones(a)?, ones(a)?],
            wq: weight(a, 1, &[qd, d.hidden], scale(d.hidden))?,
            wo: weight(a, 2, &[d.hidden, qd], scale(qd))?,
            w_gate: weight(a, 3, &[d.ffn, d.hidden], scale(d.hidden))?,
            w_up: weight(a, 4, &[d.ffn, d.hidden], scale(d.hidden))?,
            w_down: weight(a, 5, &[d.hidden, d.ffn], scale(d.ffn))?,
            lm_head: weight(a, 6, &[d.vocab, d.hidden], 4.0 * scale(d.hidden))?,
            no_bias: a.take(DType::F32, &[1])?,
            k_pool: weight(a, 7, &pool, 1.0)?,
            v_pool: weight(a, 8, &pool, 1.0)?,
            table: DeviceBlockTable::new(dev, d.batch, d.pages)?,
            x: weight(a, 9, &[d.batch, d.hidden], 1.0)?,
            residual_init: weight(a, 10, &[d.batch, d.hidden], 1.0)?,
            residual: acts.take(DType::F32, &[d.batch, d.hidden])?,
            h: acts.take(DType::F32, &[d.batch, d.hidden])?,
            q: acts.take(DType::F32, &[d.batch, d.heads_q, d.head_dim])?,
            attn: acts.take(DType::F32, &[d.batch, d.heads_q, d.head_dim])?,
            o: acts.take(DType::F32, &[d.batch, d.hidden])?,
            gate: acts.take(DType::F32, &[d.batch, d.ffn])?,
            up: acts.take(DType::F32, &[d.batch, d.ffn])?,
            act: acts.take(DType::F32, &[d.batch, d.ffn])?,
            down: acts.take(DType::F32, &[d.batch, d.hidden])?,
            logits: acts.take(DType::F32, &[d.batch, d.vocab])?,
            tokens: acts.take(DType::U32, &[d.batch])?,
        };
        // Request r owns pages r, r + B, r + 2B, … and sees a different context length each.
        let mut table = BlockTable::default();
        table.row_offsets.push(0);
        let per = d.pages / d.batch;
        for r in 0..d.batch {
            table
                .rows
                .extend((0..per).map(|p| (r + p * d.batch) as i32));
            table.row_offsets.push(table.rows.len() as i32);
            table.logical_starts.push(0);
            table
                .visible_lens
                .push((per * d.page_size - 5 * r - 3) as i32);
        }
        m.table.write(&table, &m.k_pool)?;
        Ok(m)
    }

    /// One decode step over the residual the engine has reset: norm → q projection → paged
    /// attention → o projection → norm → SwiGLU MLP → norm → LM head → Gumbel sampling.
    /// Everything is enqueued; nothing is allocated once the device's scratch is warm.
    pub fn step(&mut self, dev: &Device, key: [u32; 2]) -> Result<(), PortError> {
        let m = self;
        let lin = LinearParams::default();
        let [n0, n1, n2] = &m.norm;
        ops::fused_add_rms_norm(dev, &m.x, &mut m.residual, n0, 1e-5, &mut m.h)?;
        ops::kernel::linear(
            dev,
            &lin,
            &m.h,
            &m.wq,
            &m.no_bias,
            &mut m
                .q
                .reshape(&[m.dims.batch, m.dims.heads_q * m.dims.head_dim])?,
        )?;
        paged_attention_decode_resident(
            dev,
            &m.q,
            &m.k_pool,
            &m.v_pool,
            &m.table,
            0.0,
            &mut m.attn,
        )?;
        let attn = m
            .attn
            .reshape(&[m.dims.batch, m.dims.heads_q * m.dims.head_dim])?;
        ops::kernel::linear(dev, &lin, &attn, &m.wo, &m.no_bias, &mut m.o)?;
        ops::fused_add_rms_norm(dev, &m.o, &mut m.residual, n1, 1e-5, &mut m.h)?;
        ops::kernel::linear(dev, &lin, &m.h, &m.w_gate, &m.no_bias, &mut m.gate)?;
        ops::kernel::linear(dev, &lin, &m.h, &m.w_up, &m.no_bias, &mut m.up)?;
        ops::kernel::fused_silu_mul(dev, &SiluMulParams::default(), &m.gate, &m.up, &mut m.act)?;
        ops::kernel::linear(dev, &lin, &m.act, &m.w_down, &m.no_bias, &mut m.down)?;
        ops::fused_add_rms_norm(dev, &m.down, &mut m.residual, n2, 1e-5, &mut m.h)?;
        ops::kernel::linear(dev, &lin, &m.h, &m.lm_head, &m.no_bias, &mut m.logits)?;
        let splits = ops::gumbel_splits(m.dims.batch, m.dims.vocab);
        ops::gumbel_max_sample_split(dev, &m.logits, key, 1.0, splits, &mut m.tokens)?;
        Ok(())
    }

    /// Scratch the step's ops take (the sampler's partials), to reserve before a capture.
    pub fn scratch_bytes(&self) -> usize {
        let splits = ops::gumbel_splits(self.dims.batch, self.dims.vocab);
        ops::gumbel_scratch_bytes(self.dims.batch, splits)
    }

    /// The step's outputs as bytes: logits then tokens (a read waits for the device).
    pub fn outputs(&self) -> Result<Vec<u8>, PortError> {
        let mut out = self.logits.to_bytes()?;
        out.extend(self.tokens.to_bytes()?);
        Ok(out)
    }
}
