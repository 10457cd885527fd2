//! Softmax-free categorical sampling: `argmax_i (logit_i / T + G_i)` (spec §5).
//!
//! `G_i` is Gumbel noise from word `i mod 4` of `philox((⌊i/4⌋, 0, row, 0), key)`, a pure
//! function of (key, row, i): the draw does not depend on the block size. Ties go to the lower
//! index; a row whose candidates are all −inf (or NaN) yields index 0.

use crate::kernel::shape;
use crate::random::{gumbel_noise, philox4x32_10};
use crate::{Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `gumbel_max_sample`.
    pub struct GumbelParams {
        pub rows: u32,
        pub vocab: u32,
        /// Philox key, low word (draw a fresh key per call).
        pub key0: u32 = 0,
        /// Philox key, high word.
        pub key1: u32 = 0,
        /// Softmax temperature, > 0 (greedy decoding never reaches this kernel).
        pub temperature: f32 = 1.0,
    }
}

/// Descriptor of `gumbel_max_sample`.
pub struct GumbelMaxSample;

impl KernelDef for GumbelMaxSample {
    type Params = GumbelParams;
    const NAME: &'static str = "gumbel_max_sample";

    /// Buffers: `logits [B, V]`, `index [B]` (u32).
    fn bind(p: &mut GumbelParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [logits, index] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 2,
            });
        };
        let &[rows, vocab] = *logits else {
            return Err(ShapeError::Invalid("logits must be [rows, vocab]"));
        };
        shape::nonzero("rows", rows)?;
        shape::nonzero("vocab", vocab)?;
        if *index != [rows] {
            return Err(ShapeError::Invalid("index must be [rows]"));
        }
        if !(p.temperature.is_finite() && p.temperature > 0.0) {
            return Err(ShapeError::Range {
                what: "temperature",
                got: p.temperature as f64,
                lo: f32::MIN_POSITIVE as f64,
                hi: f32::MAX as f64,
            });
        }
        p.rows = shape::to_u32("rows", rows)?;
        p.vocab = shape::to_u32("vocab", vocab)?;
        // Group counters and flat offsets stay in u32.
        shape::to_u32("logits elements", rows * vocab)?;
        Ok(())
    }

    fn launch(p: &GumbelParams) -> Launch {
        Launch {
            grid: [p.rows, 1, 1],
            block: 256,
        }
    }
}

/// The body: one block per row; each thread takes groups of four entries (one Philox call),
/// strided by the block size, then the block's argmax picks the lowest-index maximum.
pub fn gumbel_max_sample<T: Element, B: Block>(
    b: &B,
    p: &GumbelParams,
    logits: Src<T>,
    index: Dst<u32>,
) {
    let row = b.block_x();
    let vocab = p.vocab as usize;
    let base = row as usize * vocab;
    let groups = p.vocab.div_ceil(4);
    // Index 0 is the answer when nothing beats −inf, so it is every thread's starting point.
    let (mut best, mut best_i) = (f32::NEG_INFINITY, 0u32);
    let mut g = b.thread();
    while g < groups {
        let words = philox4x32_10([g, 0, row, 0], [p.key0, p.key1]);
        let mut j = 0;
        while j < 4 {
            let i = (4 * g + j) as usize;
            if i < vocab {
                let c =
                    logits.get(base + i).to_f32() / p.temperature + gumbel_noise(words[j as usize]);
                if c > best {
                    best = c;
                    best_i = i as u32;
                }
            }
            j += 1;
        }
        g += b.size();
    }
    let (_, winner) = b.argmax(best, best_i);
    if b.thread() == 0 {
        index.set(row as usize, winner);
    }
}
