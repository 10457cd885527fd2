//! The decode driver's projections: a matrix on the host between a checkpoint's repack and the
//! upload, and on the device (quantized, run by `ops::qlinear`, or dense f32, by `linear`),
//! and the attention's q/k/v input projection. Below the weights of every model kind (dense,
//! MoE, hybrid), which all hold them.

use kiln::math::kernels::linear::LinearParams;
use kiln::ops::{self, QuantizedWeight};
use kiln::quant::AffineTensor;
use kiln::{Device, PortError, Ran, Tensor};

/// A matrix on the host between the repack and the upload.
#[derive(Debug)]
pub enum HostMatrix {
    /// MLX affine codes, scales and biases (from a quantized GGUF type).
    Affine(AffineTensor),
    /// Dense values `[rows, cols]` widened to f32 (from an F32, F16 or BF16 tensor).
    Dense {
        /// Rows (output features).
        rows: usize,
        /// Columns (input features).
        cols: usize,
        /// The values, row-major.
        values: Vec<f32>,
    },
}

impl HostMatrix {
    /// Rows (output features).
    pub fn rows(&self) -> usize {
        match self {
            HostMatrix::Affine(t) => t.rows(),
            HostMatrix::Dense { rows, .. } => *rows,
        }
    }

    /// Rows of `parts` stacked into one matrix, when they share a layout (same affine format,
    /// or all dense); `None` when they do not.
    pub fn stack(parts: &[&HostMatrix]) -> Option<HostMatrix> {
        let first = parts.first()?;
        match first {
            HostMatrix::Affine(t0) => {
                let (format, cols) = (t0.format(), t0.cols());
                let (mut w_q, mut scales, mut biases, mut rows) = (vec![], vec![], vec![], 0);
                for p in parts {
                    let HostMatrix::Affine(t) = p else {
                        return None;
                    };
                    if t.format() != format || t.cols() != cols {
                        return None;
                    }
                    w_q.extend_from_slice(t.w_q());
                    scales.extend_from_slice(t.scales_bytes());
                    biases.extend_from_slice(t.biases_bytes());
                    rows += t.rows();
                }
                AffineTensor::from_parts(format, rows, cols, w_q, scales, biases)
                    .ok()
                    .map(HostMatrix::Affine)
            }
            HostMatrix::Dense { cols, .. } => {
                let (mut values, mut rows) = (vec![], 0);
                for p in parts {
                    match p {
                        HostMatrix::Dense {
                            rows: r,
                            cols: c,
                            values: v,
                        } if c == cols => {
                            values.extend_from_slice(v);
                            rows += r;
                        }
                        _ => return None,
                    }
                }
                Some(HostMatrix::Dense {
                    rows,
                    cols: *cols,
                    values,
                })
            }
        }
    }

    /// The matrix on `dev`.
    pub fn upload(&self, dev: &Device) -> Result<Matrix, PortError> {
        Ok(match self {
            HostMatrix::Affine(t) => Matrix::Quantized(QuantizedWeight::upload(dev, t)?),
            HostMatrix::Dense { rows, cols, values } => {
                Matrix::Dense(Tensor::from_slice(dev, &[*rows, *cols], values)?)
            }
        })
    }
}

/// A projection on the device: `y[M, N] = x[M, K] · Wᵀ`.
#[derive(Debug)]
pub enum Matrix {
    /// Run by `ops::qlinear` in the weight's own format.
    Quantized(QuantizedWeight),
    /// `[N, K]` (f32 as uploaded, or the activation dtype a model rounded it into), run by
    /// the dense `linear` kernel.
    Dense(Tensor),
}

impl Matrix {
    /// Rows (N, output features).
    pub fn rows(&self) -> usize {
        match self {
            Matrix::Quantized(w) => w.rows(),
            Matrix::Dense(w) => w.shape()[0],
        }
    }

    /// Device bytes the matrix holds.
    pub fn bytes(&self) -> usize {
        match self {
            Matrix::Quantized(w) => quantized_bytes(w),
            Matrix::Dense(w) => w.byte_len(),
        }
    }

    /// `y = x · Wᵀ` (no bias).
    pub fn apply(&self, dev: &Device, x: &Tensor, y: &mut Tensor) -> Result<Ran, PortError> {
        match self {
            Matrix::Quantized(w) => ops::qlinear(dev, x, w, None, y),
            // Without a bias the kernel ignores its bias buffer: x stands in.
            Matrix::Dense(w) => ops::kernel::linear(dev, &LinearParams::default(), x, w, x, y),
        }
    }
}

/// The attention's input projection.
#[derive(Debug)]
pub enum QkvProjection {
    /// q, k and v rows stacked: one launch writes `[M, (Hq + 2·Hkv)·D]`.
    Fused(Matrix),
    /// Three matrices of different layouts, each writing its columns of the qkv row.
    Split(Box<[Matrix; 3]>),
}

impl QkvProjection {
    /// Device bytes of its matrices.
    pub fn bytes(&self) -> usize {
        match self {
            QkvProjection::Fused(m) => m.bytes(),
            QkvProjection::Split(ms) => ms.iter().map(Matrix::bytes).sum(),
        }
    }
}

/// Device bytes of a quantized weight's codes, scales and biases.
pub(crate) fn quantized_bytes(w: &QuantizedWeight) -> usize {
    let (q, s, b) = w.buffers();
    q.byte_len() + s.byte_len() + b.byte_len()
}
