//! Quantized linear layers over MLX's affine weights (spec §13): [`QuantizedWeight`] keeps a
//! weight's format with its buffers, so the kernel a call runs — one per bit width — and the
//! group size and scale dtype it reads are always the weight's own.

use crate::launch::{launch, Arg, Mode, Ran};
use crate::quant::{pack_le_words, AffineFormat, AffineTensor};
use crate::{Backend, Device, PortError, Tensor};
use kiln_math::kernels::qlinear::{scale_code, scale_words, QLinearParams, ACT_SILU_MUL};
use kiln_math::{DType, KernelId, Params};

/// Fewest weights (`N·K`) `qlinear_mma_4bit` is picked for at one row of `x` (groups of 64 or
/// more; see [`QuantizedWeight::kernel_on`]).
const MMA_MIN_WEIGHTS_ONE_ROW: usize = 4096 * 14336;

/// Fewest weights it is picked for at two or three rows of `x`.
const MMA_MIN_WEIGHTS_TWO_ROWS: usize = 4096 * 4096;

/// Fewest weights it is picked for at four rows of `x` or more.
const MMA_MIN_WEIGHTS_FOUR_ROWS: usize = 2048 * 2048;

/// An `[N, K]` matrix in MLX's affine layout on a device: `w_q [N, K·bits/32]` u32 words, and
/// `scales` / `biases`, `N·K/group_size` values of the format's scale dtype packed
/// little-endian into u32 words (16-bit values two per word, the last word zero-padded).
#[derive(Debug)]
pub struct QuantizedWeight {
    format: AffineFormat,
    rows: usize,
    cols: usize,
    w_q: Tensor,
    scales: Tensor,
    biases: Tensor,
}

/// The kernel of a bit width.
fn kernel_of(bits: u32) -> Option<KernelId> {
    Some(match bits {
        2 => KernelId::QLinear2Bit,
        3 => KernelId::QLinear3Bit,
        4 => KernelId::QLinear4Bit,
        5 => KernelId::QLinear5Bit,
        6 => KernelId::QLinear6Bit,
        8 => KernelId::QLinear8Bit,
        _ => return None,
    })
}

impl QuantizedWeight {
    /// Uploads a host matrix (from [`quantize`](crate::quant::quantize) or a GGUF
    /// [`repack`](crate::quant::repack)) to `dev`.
    pub fn upload(dev: &Device, w: &AffineTensor) -> Result<QuantizedWeight, PortError> {
        let (n, k) = (w.rows(), w.cols());
        let scales = pack_le_words(w.scales_bytes());
        let biases = pack_le_words(w.biases_bytes());
        QuantizedWeight::from_parts(
            w.format(),
            n,
            k,
            Tensor::from_slice(dev, &[n, w.w_q().len() / n.max(1)], w.w_q())?,
            Tensor::from_slice(dev, &[scales.len()], &scales)?,
            Tensor::from_slice(dev, &[biases.len()], &biases)?,
        )
    }

    /// Wraps buffers an engine already holds (e.g. views over its own weight arena): `w_q`
    /// u32 `[N, K·bits/32]`, `scales` and `biases` u32 holding the packed values (any shape of
    /// exactly that many words). Every length is checked against the format and shape.
    pub fn from_parts(
        format: AffineFormat,
        rows: usize,
        cols: usize,
        w_q: Tensor,
        scales: Tensor,
        biases: Tensor,
    ) -> Result<QuantizedWeight, PortError> {
        let kernel = kernel_of(format.bits()).ok_or_else(|| {
            PortError::invalid(
                KernelId::QLinear4Bit,
                format!("no qlinear kernel at {} bits", format.bits()),
            )
        })?;
        let bad = |msg: String| PortError::invalid(kernel, msg);
        let words = format.packed_words(cols).map_err(|e| bad(e.to_string()))?;
        let groups = rows
            .checked_mul(format.groups(cols).map_err(|e| bad(e.to_string()))?)
            .ok_or_else(|| bad(format!("{rows}x{cols} overflows")))?;
        let want = scale_words(scale_code(format.scale_dtype()), groups);
        if w_q.dtype() != DType::U32 || w_q.shape() != [rows, words] {
            return Err(bad(format!(
                "w_q must be u32 [{rows}, {words}], got {} {:?}",
                w_q.dtype().name(),
                w_q.shape()
            )));
        }
        for (what, t) in [("scales", &scales), ("biases", &biases)] {
            if t.dtype() != DType::U32 || t.numel() != want {
                return Err(bad(format!(
                    "{what} must be {want} u32 words ({groups} {} values packed), got {} {:?}",
                    format.scale_dtype().name(),
                    t.dtype().name(),
                    t.shape()
                )));
            }
        }
        Ok(QuantizedWeight {
            format,
            rows,
            cols,
            w_q,
            scales: scales.reshape(&[want])?,
            biases: biases.reshape(&[want])?,
        })
    }

    /// The format.
    pub fn format(&self) -> AffineFormat {
        self.format
    }

    /// Rows (N, output features).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns (K, input features).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The kernel of this weight's bit width (`qlinear_<b>bit`).
    pub fn kernel(&self) -> KernelId {
        kernel_of(self.format.bits()).expect("checked at construction")
    }

    /// The kernel a call on `dev` with activations `x` runs: `qlinear_mma_4bit` at 4 bits, group
    /// sizes 32–128, with f16/bf16 activations on a device whose wave multiply is hardware
    /// (CUDA's `mma.sync`) where it measured faster than `qlinear_4bit` on the H100
    /// (docs/results/qlinear-mma-h100-2026-12-06-s28.md): from four rows of `x` at 2048×2048
    /// weights and more, two or three rows from 4096×4096, one row at groups of 64 or more from
    /// 4096×14336 (its time hardly grows with the rows of `x`; the FMA kernel's grows with
    /// each); elsewhere the bit width's FMA kernel (on other devices the multiply is the
    /// shuffle version: correct, slower).
    pub fn kernel_on(&self, dev: &Device, x: &Tensor) -> KernelId {
        let sixteen_bit = matches!(x.dtype(), DType::F16 | DType::Bf16);
        let rows_of_x = x.shape().first().copied().unwrap_or(0);
        let weights = self.rows * self.cols;
        let group = self.format.group_size();
        let large_enough = match rows_of_x {
            0 | 1 => group >= 64 && weights >= MMA_MIN_WEIGHTS_ONE_ROW,
            2 | 3 => weights >= MMA_MIN_WEIGHTS_TWO_ROWS,
            _ => weights >= MMA_MIN_WEIGHTS_FOUR_ROWS,
        };
        if self.format.bits() == 4
            && group >= 32
            && sixteen_bit
            && dev.backend() == Backend::Cuda
            && large_enough
        {
            KernelId::QLinearMma4Bit
        } else {
            self.kernel()
        }
    }

    /// The packed codes, scales and biases.
    pub fn buffers(&self) -> (&Tensor, &Tensor, &Tensor) {
        (&self.w_q, &self.scales, &self.biases)
    }

    /// The codes of `experts` stacked experts of equal height as `[E, N/E, K·bits/32]` (MLX's
    /// stacked layout, what the expert kernels bind); scales and biases are read flat.
    pub(crate) fn stacked_codes(&self, experts: usize) -> Result<Tensor, PortError> {
        let words = self.w_q.shape()[1];
        self.w_q
            .reshape(&[experts, self.rows / experts.max(1), words])
    }

    fn params(&self, has_bias: bool, act: u32) -> QLinearParams {
        QLinearParams {
            has_bias: has_bias as u32,
            group_size: self.format.group_size(),
            scale_dtype: scale_code(self.format.scale_dtype()),
            act,
            ..QLinearParams::default()
        }
    }

    fn run(
        &self,
        dev: &Device,
        x: &Tensor,
        bias: Option<&Tensor>,
        y: &mut Tensor,
        act: u32,
    ) -> Result<Ran, PortError> {
        let p = self.params(bias.is_some(), act);
        // Without a bias any buffer of one element or more stands in, unread: x is one.
        let mut args = [
            Arg::In(x),
            Arg::In(&self.w_q),
            Arg::In(&self.scales),
            Arg::In(&self.biases),
            Arg::In(bias.unwrap_or(x)),
            Arg::Out(y),
        ];
        launch(
            dev,
            self.kernel_on(dev, x),
            p.words(),
            &mut args,
            Mode::Auto,
        )
    }
}

/// `y[M, N] = x[M, K] · Ŵ[N, K]^T (+ bias[N])` for 1..=8 rows of `x` in one launch that
/// streams `w` once; `x`, `bias` and `y` in one activation dtype (f32, f16 or bf16).
pub fn qlinear(
    dev: &Device,
    x: &Tensor,
    w: &QuantizedWeight,
    bias: Option<&Tensor>,
    y: &mut Tensor,
) -> Result<Ran, PortError> {
    w.run(dev, x, bias, y, 0)
}

/// A gate+up pair with SwiGLU in one pass: `w`'s rows are gate and up rows interleaved (gate
/// `j` at row `2j`, up `j` at `2j + 1`; [`interleave_rows`] builds it) and
/// `y[m, j] = silu(gate)·up` of the two projections rounded to the activation dtype,
/// `y [M, N/2]` — the activated product written directly, without the two `[M, N/2]` round trips.
pub fn qlinear_silu_mul(
    dev: &Device,
    x: &Tensor,
    w: &QuantizedWeight,
    bias: Option<&Tensor>,
    y: &mut Tensor,
) -> Result<Ran, PortError> {
    w.run(dev, x, bias, y, ACT_SILU_MUL)
}

/// The host matrix whose rows alternate `gate`'s and `up`'s (same format and shape), as
/// [`qlinear_silu_mul`] reads them.
pub fn interleave_rows(gate: &AffineTensor, up: &AffineTensor) -> Result<AffineTensor, PortError> {
    // Errors name the kernel of gate's width (any listed one when the width has none).
    let kernel = kernel_of(gate.format().bits()).unwrap_or(KernelId::QLinear4Bit);
    let bad = |msg: &str| PortError::invalid(kernel, msg.to_string());
    if gate.format() != up.format() || gate.rows() != up.rows() || gate.cols() != up.cols() {
        return Err(bad("gate and up must share the format and the shape"));
    }
    let (n, k) = (gate.rows(), gate.cols());
    let words = gate.w_q().len() / n.max(1);
    let groups = gate.groups_per_row();
    let size = gate.format().scale_dtype().size();
    let mut w_q = Vec::with_capacity(2 * gate.w_q().len());
    let mut scales = Vec::with_capacity(2 * gate.scales_bytes().len());
    let mut biases = Vec::with_capacity(2 * gate.biases_bytes().len());
    for r in 0..n {
        for t in [gate, up] {
            w_q.extend_from_slice(&t.w_q()[r * words..(r + 1) * words]);
            let span = r * groups * size..(r + 1) * groups * size;
            scales.extend_from_slice(&t.scales_bytes()[span.clone()]);
            biases.extend_from_slice(&t.biases_bytes()[span]);
        }
    }
    AffineTensor::from_parts(gate.format(), 2 * n, k, w_q, scales, biases)
        .map_err(|e| bad(&e.to_string()))
}
