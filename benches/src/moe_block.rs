//! `kiln bench --moe`: the one-token MoE experts block (gate/up or fc1 → down → K-sum, the
//! launches `ops::moe_experts_routed` makes) at real model shapes, timed as one unit. Only
//! the K routed experts are stacked, so the bytes are the selected experts' weights, scales
//! and biases (+ `x` and `out`), read from DRAM: the pass rotates over enough copies of the
//! layer to exceed the last-level cache.

use kiln::ops::{
    moe_experts_routed, moe_scratch_bytes, MoeActivation, MoeExperts, QuantizedWeight,
};
use kiln::quant::AffineFormat;
use kiln::rng::Rng;
use kiln::timing::{time_recorded, Issue};
use kiln::{DType, Device, KernelId, PortError, Tensor};

/// One model's MoE layer at decode.
#[derive(Clone, Copy, Debug)]
pub struct MoeBlockShape {
    pub model: &'static str,
    /// Experts in the model's layer (for the label; only `k` are stacked).
    pub experts: usize,
    pub k: usize,
    pub din: usize,
    pub dff: usize,
    pub activation: MoeActivation,
    pub first_bits: u32,
    pub down_bits: u32,
    pub group_size: u32,
}

/// Qwen3-30B-A3B (the issue's target shape), Mixtral-8x7B and Nemotron-3-Nano-30B-A3B's relu²
/// experts, 4-bit g64 with bf16 scales.
pub const MOE_BLOCKS: [MoeBlockShape; 3] = [
    MoeBlockShape {
        model: "qwen3-30b-a3b",
        experts: 128,
        k: 8,
        din: 2048,
        dff: 768,
        activation: MoeActivation::SwiGlu,
        first_bits: 4,
        down_bits: 4,
        group_size: 64,
    },
    MoeBlockShape {
        model: "mixtral-8x7b",
        experts: 8,
        k: 2,
        din: 4096,
        dff: 14336,
        activation: MoeActivation::SwiGlu,
        first_bits: 4,
        down_bits: 4,
        group_size: 64,
    },
    MoeBlockShape {
        model: "nemotron-3-nano",
        experts: 128,
        k: 6,
        din: 2688,
        dff: 1856,
        activation: MoeActivation::Relu2,
        first_bits: 4,
        down_bits: 4,
        group_size: 64,
    },
];

/// One measured block.
#[derive(Clone, Debug)]
pub struct MoeBlockRow {
    pub model: &'static str,
    pub dtype: &'static str,
    pub rows_per_block: u32,
    /// Bytes one block moves: the K experts' codes, scales and biases, `x` and `out`.
    pub bytes: u64,
    pub copies: usize,
    pub median_us: f64,
    pub pct_of_copy: f64,
    pub issue: &'static str,
}

impl MoeBlockRow {
    pub const CSV_HEADER: &'static str =
        "model,dtype,rows_per_block,bytes,copies,median_us,gbps,pct_of_copy,issue";

    pub fn csv(&self) -> String {
        format!(
            "{},{},{},{},{},{:.3},{:.1},{:.2},{}",
            self.model,
            self.dtype,
            self.rows_per_block,
            self.bytes,
            self.copies,
            self.median_us,
            self.bytes as f64 / self.median_us / 1e3,
            self.pct_of_copy,
            self.issue
        )
    }
}

/// A stacked projection of `rows × cols` with random codes and small scales and biases.
fn random_weight(
    dev: &Device,
    format: AffineFormat,
    rows: usize,
    cols: usize,
    rng: &mut Rng,
) -> Result<(QuantizedWeight, u64), PortError> {
    let words = rows * cols * format.bits() as usize / 32;
    let codes: Vec<u32> = (0..words).map(|_| rng.next_u64() as u32).collect();
    let groups = rows * cols / format.group_size() as usize;
    // Two bf16 values per word: scale 2^-7, bias −2^-4 (finite outputs at any code).
    let scale_words = vec![0x3c00_3c00u32; groups.div_ceil(2)];
    let bias_words = vec![0xbd80_bd80u32; groups.div_ceil(2)];
    let bytes = 4 * (codes.len() + 2 * scale_words.len()) as u64;
    let w = QuantizedWeight::from_parts(
        format,
        rows,
        cols,
        Tensor::from_slice(dev, &[rows, words / rows], &codes)?,
        Tensor::from_slice(dev, &[scale_words.len()], &scale_words)?,
        Tensor::from_slice(dev, &[bias_words.len()], &bias_words)?,
    )?;
    Ok((w, bytes))
}

/// The K experts of `s` with random weights, and their bytes.
fn random_experts(
    dev: &Device,
    s: &MoeBlockShape,
    rng: &mut Rng,
) -> Result<(MoeExperts, u64), PortError> {
    let format = |bits| {
        AffineFormat::new(bits, s.group_size, DType::Bf16).map_err(|e| PortError::InvalidShape {
            kernel: KernelId::MoeGateup4Bit.name(),
            msg: e.to_string(),
        })
    };
    let (first, a) = random_weight(dev, format(s.first_bits)?, s.k * s.dff, s.din, rng)?;
    let (up, b) = if s.activation == MoeActivation::Relu2 {
        (None, 0)
    } else {
        let (u, b) = random_weight(dev, format(s.first_bits)?, s.k * s.dff, s.din, rng)?;
        (Some(u), b)
    };
    let (down, c) = random_weight(dev, format(s.down_bits)?, s.k * s.din, s.dff, rng)?;
    Ok((
        MoeExperts::new(s.k, s.activation, first, up, down)?,
        a + b + c,
    ))
}

/// Times the block of every shape in `shapes` at one token, activations `dtype`, rotating
/// over copies of the layer that span `rotate_bytes`; rows go to `on_row` as measured.
#[allow(clippy::too_many_arguments)]
pub fn run_moe_blocks(
    dev: &Device,
    shapes: &[MoeBlockShape],
    dtype: DType,
    rows_per_block: u32,
    runs: usize,
    issue: Issue,
    copy_gbps: f64,
    rotate_bytes: usize,
    mut on_row: impl FnMut(&MoeBlockRow),
) -> Result<Vec<MoeBlockRow>, PortError> {
    let mut rows = Vec::new();
    for s in shapes {
        let mut rng = Rng::new(0x6d6f_6521 ^ s.din as u64);
        let (first, layer_bytes) = random_experts(dev, s, &mut rng)?;
        let copies = rotate_bytes.div_ceil(layer_bytes as usize).clamp(1, 64);
        let mut layers = vec![first];
        for _ in 1..copies {
            layers.push(random_experts(dev, s, &mut rng)?.0);
        }
        let x_values: Vec<f32> = (0..s.din).map(|_| rng.normal() as f32).collect();
        let x = Tensor::from_f32(dev, dtype, &[1, s.din], &x_values)?;
        let ids: Vec<u32> = (0..s.k as u32).collect();
        let ids = Tensor::from_slice(dev, &[1, s.k], &ids)?;
        let scores = Tensor::from_slice(dev, &[1, s.k], &vec![1.0 / s.k as f32; s.k])?;
        let mut out = Tensor::zeros(dev, dtype, &[1, s.din])?;
        dev.reserve_scratch(moe_scratch_bytes(&layers[0], 1, s.k))?;
        let t = time_recorded(dev, runs, copies, issue, || {
            for layer in &layers {
                moe_experts_routed(dev, &x, layer, &ids, &scores, rows_per_block, &mut out)?;
            }
            Ok(())
        })?;
        let median_s = crate::median(t);
        let bytes = layer_bytes + 2 * (s.din * dtype.size()) as u64;
        let row = MoeBlockRow {
            model: s.model,
            dtype: dtype.name(),
            rows_per_block,
            bytes,
            copies,
            median_us: median_s * 1e6,
            pct_of_copy: 100.0 * bytes as f64 / median_s / 1e9 / copy_gbps,
            issue: issue.on(dev).name(),
        };
        on_row(&row);
        rows.push(row);
    }
    Ok(rows)
}
