//! Mamba's single-token causal depthwise conv1d step (spec §8 step 3), out of place: per batch
//! row `b` and channel `c`, over the window `u = concat(state_in[b, :, c], x[b, c])` of the
//! kernel width `k`,
//! `out[b, c] = act(bias[c] + Σ_j weight[c, j] · u[j])` with `act` SiLU (or none), in f32 from
//! the `T` inputs and rounded to `T` once, and `state_out[b, j, c] = u[j + 1]` (the last `k − 1`
//! inputs, bits unchanged). MLX's layouts: the state is channels-last `[B, k − 1, C]` and the
//! weight `[C, k]` (MLX's depthwise `[C, k, 1]`), tap `j` multiplying the `j`-th oldest input.

use crate::kernel::shape;
use crate::kernels::fused_silu_mul::silu;
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// The narrowest and widest kernel widths (Mamba's `d_conv` is 4; 2 and 3 are accepted).
pub const WIDTHS: (usize, usize) = (2, 4);

crate::params! {
    /// Params of `causal_conv1d_update`.
    pub struct ConvUpdateParams {
        /// 1: add `bias [C]`; 0: no bias (the bias buffer, one element or more, is ignored).
        pub has_bias: u32 = 1,
        /// 1: SiLU after the bias (Mamba); 0: none.
        pub silu: u32 = 1,
        /// Batch rows (`B`), set by `bind`.
        pub batch: u32,
        /// Channels (`C`), set by `bind`.
        pub channels: u32,
        /// Kernel width (`k`, 2 to 4), set by `bind`.
        pub width: u32,
    }
}

/// Channels per block; a GPU block gives each thread one, the serial cpu block strides.
const TILE: u32 = 256;

/// Descriptor of `causal_conv1d_update`.
pub struct CausalConv1dUpdate;

impl KernelDef for CausalConv1dUpdate {
    type Params = ConvUpdateParams;
    const NAME: &'static str = "causal_conv1d_update";

    /// Buffers: `x [B, C]` (or `[B, 1, C]`), `weight [C, k]` (or `[C, k, 1]`), `bias [C]`,
    /// `state_in [B, k − 1, C]`, `out` (the shape of `x`), `state_out` (that of `state_in`).
    fn bind(p: &mut ConvUpdateParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [x, weight, bias, state_in, out, state_out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 6,
            });
        };
        let (batch, channels) = match **x {
            [b, c] | [b, 1, c] => (b, c),
            _ => {
                return Err(ShapeError::Invalid(
                    "x must be [B, C] or [B, 1, C] (a single token)",
                ))
            }
        };
        shape::nonzero("B (the batch of x)", batch)?;
        shape::nonzero("C (the channels of x)", channels)?;
        let width = match **weight {
            [c, k] | [c, k, 1] => {
                shape::eq("channels of weight against C", c, channels)?;
                k
            }
            _ => return Err(ShapeError::Invalid("weight must be [C, k] or [C, k, 1]")),
        };
        if !(WIDTHS.0..=WIDTHS.1).contains(&width) {
            return Err(ShapeError::Range {
                what: "kernel width k (the last axis of weight)",
                got: width as f64,
                lo: WIDTHS.0 as f64,
                hi: WIDTHS.1 as f64,
            });
        }
        let &[sb, taps, sc] = *state_in else {
            return Err(ShapeError::Invalid("state_in must be [B, k - 1, C]"));
        };
        shape::eq("batch of state_in against B", sb, batch)?;
        shape::eq("rows of state_in against k - 1", taps, width - 1)?;
        shape::eq("channels of state_in against C", sc, channels)?;
        if out != x {
            return Err(ShapeError::Invalid("out must have the shape of x"));
        }
        if state_out != state_in {
            return Err(ShapeError::Invalid("state_out must have the shape of state_in"));
        }
        match p.has_bias {
            0 => shape::nonzero("elements of bias (unused without has_bias)", shape::numel(bias))?,
            1 => {
                let &[bc] = *bias else {
                    return Err(ShapeError::Invalid("bias must be [C] when has_bias is 1"));
                };
                shape::eq("bias length against C", bc, channels)?;
            }
            v => {
                return Err(ShapeError::Range {
                    what: "has_bias",
                    got: v as f64,
                    lo: 0.0,
                    hi: 1.0,
                })
            }
        }
        if p.silu > 1 {
            return Err(ShapeError::Range {
                what: "silu",
                got: p.silu as f64,
                lo: 0.0,
                hi: 1.0,
            });
        }
        // The state's elements are indexed as one u32 in the body.
        shape::to_u32("elements of state_in", shape::numel(state_in))?;
        p.batch = shape::to_u32("B", batch)?;
        p.channels = shape::to_u32("C", channels)?;
        p.width = width as u32;
        Ok(())
    }

    fn launch(p: &ConvUpdateParams) -> Launch {
        Launch {
            grid: [p.channels.div_ceil(TILE), p.batch, 1],
            block: TILE,
        }
    }
}

/// The body: block `(t, b)` takes channels `[t·TILE, (t+1)·TILE)` of batch row `b`; thread `i`
/// takes channels `i, i + size, …` of the tile. Neighbouring threads read neighbouring channels
/// of each state row, so every load and store of the state is one contiguous run per wave.
#[allow(clippy::too_many_arguments)]
pub fn causal_conv1d_update<T: Element, B: Block>(
    b: &B,
    p: &ConvUpdateParams,
    x: Src<T>,
    weight: Src<T>,
    bias: Src<T>,
    state_in: Src<T>,
    out: Dst<T>,
    state_out: Dst<T>,
) {
    let (channels, width) = (p.channels as usize, p.width as usize);
    let row = b.block_y() as usize;
    let start = b.block_x() as usize * TILE as usize;
    let end = (start + TILE as usize).min(channels);
    // State row j of batch row `row` starts at `state_base + j·C`.
    let state_base = row * (width - 1) * channels;
    let mut c = start + b.thread() as usize;
    while c < end {
        let mut acc = if p.has_bias == 1 {
            bias.get(c).widen()
        } else {
            0.0
        };
        let mut j = 0;
        while j + 1 < width {
            let u = state_in.get(state_base + j * channels + c);
            acc += weight.get(c * width + j).widen() * u.widen();
            if j > 0 {
                state_out.set(state_base + (j - 1) * channels + c, u);
            }
            j += 1;
        }
        let u = x.get(row * channels + c);
        acc += weight.get(c * width + width - 1).widen() * u.widen();
        state_out.set(state_base + (width - 2) * channels + c, u);
        out.set(
            row * channels + c,
            T::from_f32(if p.silu == 1 { silu(acc) } else { acc }),
        );
        c += b.size() as usize;
    }
}
