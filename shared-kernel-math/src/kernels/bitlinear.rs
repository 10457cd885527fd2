//! BitNet b1.58's ternary linear layer (spec §2): `y[b, o] = rnd_T(acc[b, o]·s')` with
//! `acc[b, o] = Σ_c f32(x[b, c])·(code(o, c) − 1)` accumulated in f32, and `s' = s` or the f32
//! `1/s` of the stored scale (`invert_weight_scales`). Any batch: `x [.., in]` is read as
//! `[Btot, in]` and `y [.., out]` as `[Btot, out]`.
//!
//! Buffers: `x` and `y` in `T`; `packed_weights [out/4, in/4]` u32, the checkpoint's
//! `[out/4, in]` bytes read as little-endian words (columns `4w..4w + 4` of a packed row in its
//! word `w`), byte `P[r, c]` holding four 2-bit codes LSB first for the rows `r + j·out/4`,
//! `j = 0..4`; `weight_scale`, one element of `T`, read on the device (no host sync).
//!
//! Geometry: block `(r, t)` owns packed row `r` — output rows `r + j·out/4` — for the batch
//! tile `t` of up to [`MAX_M`] rows of `x`, so a launch reads each weight word once per tile and
//! every `x` element a thread loads serves four rows of `W`. All the block's threads stride
//! over the row in units of [`UNIT_WORDS`] words (16 bytes: 16 columns, 64 codes; for one or
//! two rows of `x` the next unit is loaded before the current one is reduced), fold their
//! `4·M` sums with `wave_sum`, and the waves' sums meet in shared memory, added in wave order
//! by the threads that write `y`. The whole block splits one row's reduction, so a layer with
//! few packed rows still fills a GPU.
//!
//! A code becomes its weight exactly, with no integer conversion: its two bits under the
//! exponent of 2^23 are the float `2^23 + code`, and subtracting `2^23 + 1` leaves `code − 1`.

use super::qlinear::{x_chunk, X_CHUNK};
use crate::kernel::shape;
use crate::{mul_add, Block, Dst, Element, KernelDef, Launch, LaunchBound, ShapeError, Src};

/// Most rows of `x` one block takes (four f32 accumulators per row live in registers).
pub const MAX_M: usize = 8;

/// Words per unit a thread loads at once: 16 bytes.
pub const UNIT_WORDS: usize = 4;

/// Columns of `x` per packed word (one byte each).
const WORD_COLUMNS: usize = 4;

/// Columns of `x` per unit.
const UNIT_COLUMNS: usize = UNIT_WORDS * WORD_COLUMNS;

/// Output rows per packed row: the four 2-bit codes of a byte.
const ROWS_PER_BYTE: usize = 4;

/// Partial sums one wave leaves in shared memory: four rows of `W` × `MAX_M` rows of `x`.
const WAVE_PARTIALS: usize = ROWS_PER_BYTE * MAX_M;

/// Most threads per block: four waves of a 32-wide GPU (fewer when a row has fewer units).
pub const BLOCK_THREADS: u32 = 128;

/// Most batch tiles (grid y, whose CUDA limit this is): a launch takes up to `65535·8` rows.
pub const MAX_TILES: usize = 65535;

/// The float whose mantissa's low bits receive a code: `2^23` (its bits, and it plus one).
const CODE_FLOAT_BITS: u32 = 0x4b00_0000;
const CODE_ONE: f32 = 8_388_609.0;

crate::params! {
    /// Params of `bitlinear`.
    pub struct BitLinearParams {
        /// 1: `y = acc·(1/s)` (mlx-lm's default); 0: `y = acc·s` (checkpoints whose
        /// `linear_class` is `autobitlinear`).
        pub invert_weight_scales: u32 = 1,
        /// Rows of `x` and `y` (`Btot`, every leading dim of `x` flattened), set by `bind`.
        pub rows: u32,
        /// Input features (`in`, a multiple of 4), set by `bind`.
        pub in_features: u32,
        /// Output features (`out`, a multiple of 4), set by `bind`.
        pub out_features: u32,
    }
}

/// Descriptor of `bitlinear`.
pub struct BitLinear;

impl KernelDef for BitLinear {
    type Params = BitLinearParams;
    const NAME: &'static str = "bitlinear";

    /// Four blocks per multiprocessor (16 warps on a 32-wide GPU) keep the row loads in
    /// flight; the 8-row instance's 32 accumulators and one half-unit of weights fit its budget.
    const LAUNCH_BOUND: Option<LaunchBound> = Some(LaunchBound {
        max_threads: BLOCK_THREADS,
        min_blocks: 4,
    });

    /// Buffers: `x [.., in]`, `packed_weights [out/4, in/4]` u32, `weight_scale` (one element),
    /// `y [.., out]` with the leading dims of `x`.
    fn bind(p: &mut BitLinearParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [x, w, scale, y] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 4,
            });
        };
        let Some((&k, lead)) = x.split_last() else {
            return Err(ShapeError::Invalid("x must have a last dim: [.., in]"));
        };
        let rows = shape::numel(lead);
        shape::nonzero("Btot (the rows of x, its leading dims)", rows)?;
        shape::nonzero("in (the last dim of x)", k)?;
        if !k.is_multiple_of(WORD_COLUMNS) {
            return Err(ShapeError::Invalid(
                "in (the last dim of x) must be a multiple of 4: a packed word holds 4 columns",
            ));
        }
        let Some((&n, y_lead)) = y.split_last() else {
            return Err(ShapeError::Invalid("y must have a last dim: [.., out]"));
        };
        if y_lead != lead {
            return Err(ShapeError::Invalid(
                "y must have the leading dims of x: [.., out]",
            ));
        }
        shape::nonzero("out (the last dim of y)", n)?;
        if !n.is_multiple_of(ROWS_PER_BYTE) {
            return Err(ShapeError::Invalid(
                "out (the last dim of y) must be a multiple of 4: a packed byte holds 4 rows",
            ));
        }
        let &[packed_rows, words] = *w else {
            return Err(ShapeError::Invalid(
                "packed_weights must be two-dimensional: [out/4, in/4] u32 words",
            ));
        };
        shape::eq("rows of packed_weights against out/4", packed_rows, n / 4)?;
        shape::eq("words per row of packed_weights against in/4", words, k / 4)?;
        shape::eq("elements of weight_scale", shape::numel(scale), 1)?;
        if p.invert_weight_scales > 1 {
            return Err(ShapeError::Range {
                what: "invert_weight_scales",
                got: p.invert_weight_scales as f64,
                lo: 0.0,
                hi: 1.0,
            });
        }
        if rows.div_ceil(MAX_M) > MAX_TILES {
            return Err(ShapeError::Range {
                what: "Btot (the rows of x; one launch takes at most 65535·8)",
                got: rows as f64,
                lo: 1.0,
                hi: (MAX_TILES * MAX_M) as f64,
            });
        }
        // Every element index must fit the u32 a WGSL index holds.
        shape::to_u32("elements of x", rows.saturating_mul(k))?;
        shape::to_u32("elements of y", rows.saturating_mul(n))?;
        shape::to_u32("words of packed_weights", packed_rows.saturating_mul(words))?;
        p.rows = rows as u32;
        p.in_features = k as u32;
        p.out_features = n as u32;
        Ok(())
    }

    fn launch(p: &BitLinearParams) -> Launch {
        // Threads that have a unit (or, for rows that take no units, a word) to read.
        let words = p.in_features / WORD_COLUMNS as u32;
        let loads = if words.is_multiple_of(UNIT_WORDS as u32) {
            words / UNIT_WORDS as u32
        } else {
            words
        };
        Launch {
            grid: [
                p.out_features / ROWS_PER_BYTE as u32,
                p.rows.div_ceil(MAX_M as u32),
                1,
            ],
            block: loads.next_multiple_of(32).clamp(32, BLOCK_THREADS),
        }
    }

    /// Each wave's `4·MAX_M` partial sums.
    fn shared_bytes(_p: &BitLinearParams, block: u32, wave: u32) -> usize {
        block.div_ceil(wave) as usize * WAVE_PARTIALS * 4
    }
}

/// The body: dispatches on the rows of the block's tile to an instance whose accumulators are
/// fixed-size arrays (1, 2, 4 or 8 rows; the rows past the tile of a padded instance re-read
/// its last row and are not written).
#[inline(always)]
pub fn bitlinear<T: Element, B: Block>(
    b: &B,
    p: &BitLinearParams,
    x: Src<T>,
    packed_weights: Src<u32>,
    weight_scale: Src<T>,
    y: Dst<T>,
) {
    let here = (p.rows as usize - b.block_y() as usize * MAX_M).min(MAX_M);
    if here == 1 {
        packed_row(b, p, x, packed_weights, weight_scale, y, [[0.0f32; ROWS_PER_BYTE]; 1]);
    } else if here == 2 {
        packed_row(b, p, x, packed_weights, weight_scale, y, [[0.0f32; ROWS_PER_BYTE]; 2]);
    } else if here <= 4 {
        packed_row(b, p, x, packed_weights, weight_scale, y, [[0.0f32; ROWS_PER_BYTE]; 4]);
    } else {
        packed_row(b, p, x, packed_weights, weight_scale, y, [[0.0f32; ROWS_PER_BYTE]; 8]);
    }
}

/// Where the block's tile of `x` sits.
#[derive(Clone, Copy)]
struct Tile {
    /// `in`: elements per row of `x`.
    k: usize,
    /// The tile's first row of `x`.
    first: usize,
    /// Its last row, relative to `first` (the padded rows of an instance re-read it).
    last: usize,
}

/// The first element of the tile's row `m` (or of its last row, for a padded `m`).
#[inline(always)]
fn row_start(tile: Tile, m: usize) -> usize {
    let row = if m < tile.last { m } else { tile.last };
    (tile.first + row) * tile.k
}

/// Packed row `block_x` for the tile `block_y` of `M` rows of `x` (`zero` is `M` zero
/// accumulators of four rows of `W`: it fixes `M`).
///
/// Uniform control flow around `wave_sum` and `barrier`: the unit and word loops (whose trip
/// counts differ between threads) hold no collective, and every thread leaves them and reaches
/// each `wave_sum` (their loop bounds are constants) and the barrier.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn packed_row<T: Element, B: Block, const M: usize>(
    b: &B,
    p: &BitLinearParams,
    x: Src<T>,
    packed_weights: Src<u32>,
    weight_scale: Src<T>,
    y: Dst<T>,
    zero: [[f32; ROWS_PER_BYTE]; M],
) {
    let k = p.in_features as usize;
    let words = k / WORD_COLUMNS;
    let r = b.block_x() as usize;
    let first = b.block_y() as usize * MAX_M;
    let tile = Tile {
        k,
        first,
        last: (p.rows as usize - first).min(MAX_M) - 1,
    };
    let row_words = r * words;
    // Units when every unit of W and every chunk of x starts on 16 bytes (uniform over the
    // launch): the words of a row a multiple of a unit, both views aligned.
    let wide = words.is_multiple_of(UNIT_WORDS)
        && packed_weights.chunk_aligned::<UNIT_WORDS>(0)
        && x.chunk_aligned::<X_CHUNK>(0);
    let units = if wide { words / UNIT_WORDS } else { 0 };
    let step = b.size() as usize;
    let mut acc = zero;

    // For one or two rows of `x` the next unit is loaded before the current one is reduced;
    // more rows give each load enough work to hide it, and the registers go to them.
    let unit_at = |u: usize| row_words + u * UNIT_WORDS;
    let mut u = b.thread() as usize;
    if M <= 2 {
        let mut current = [0u32; UNIT_WORDS];
        if u < units {
            current = packed_weights.get_chunk::<UNIT_WORDS>(unit_at(u));
        }
        while u < units {
            let next = u + step;
            let mut ahead = current;
            if next < units {
                ahead = packed_weights.get_chunk::<UNIT_WORDS>(unit_at(next));
            }
            acc = unit(x, tile, u * UNIT_COLUMNS, current, acc);
            current = ahead;
            u = next;
        }
    } else {
        while u < units {
            let loaded = packed_weights.get_chunk::<UNIT_WORDS>(unit_at(u));
            acc = unit(x, tile, u * UNIT_COLUMNS, loaded, acc);
            u += step;
        }
    }
    // Word by word: the whole row when it cannot be read in units.
    let mut t = units * UNIT_WORDS + b.thread() as usize;
    while t < words {
        acc = word(x, tile, t * WORD_COLUMNS, packed_weights.get(row_words + t), acc);
        t += step;
    }

    // Each wave's sums to shared memory (`[wave][m][j]`), then the tile's outputs summed over
    // the waves in order: every port and block size adds the same partials the same way.
    let partials = b.shared::<f32>(0, b.waves() as usize * WAVE_PARTIALS);
    let mine = b.wave_id() as usize * WAVE_PARTIALS;
    let lane0 = b.lane() == 0;
    let mut m = 0;
    while m < M {
        let mut j = 0;
        while j < ROWS_PER_BYTE {
            let total = b.wave_sum(acc[m][j]);
            if lane0 {
                partials.set(mine + m * ROWS_PER_BYTE + j, total);
            }
            j += 1;
        }
        m += 1;
    }
    b.barrier();
    let s = weight_scale.get(0).widen();
    let scale = if p.invert_weight_scales != 0 {
        1.0 / s
    } else {
        s
    };
    let n = p.out_features as usize;
    let quarter = n / ROWS_PER_BYTE;
    let outputs = (tile.last + 1) * ROWS_PER_BYTE;
    let waves = b.waves() as usize;
    let mut i = b.thread() as usize;
    while i < outputs {
        let mut total = 0.0f32;
        let mut w = 0;
        while w < waves {
            total += partials.get(w * WAVE_PARTIALS + i);
            w += 1;
        }
        let (m, j) = (i / ROWS_PER_BYTE, i % ROWS_PER_BYTE);
        y.set((first + m) * n + j * quarter + r, T::from_f32(total * scale));
        i += step;
    }
}

/// The weights `code − 1` of column `c` (byte `c`) of a packed word, one per row `j` of the
/// byte, each exact (see the module docs).
#[inline(always)]
fn column_weights(word: u32, c: usize) -> [f32; ROWS_PER_BYTE] {
    let mut w = [0.0f32; ROWS_PER_BYTE];
    let mut j = 0;
    while j < ROWS_PER_BYTE {
        let code = (word >> (8 * c + 2 * j) as u32) & 3;
        w[j] = f32::from_bits(code | CODE_FLOAT_BITS) - CODE_ONE;
        j += 1;
    }
    w
}

/// `acc[j] += Σ_c w[c][j]·x[c]` over `C` columns of one row of `x` (each widened once).
#[inline(always)]
fn accumulate<T: Element, const C: usize>(
    w: [[f32; ROWS_PER_BYTE]; C],
    xs: [T; C],
    acc: [f32; ROWS_PER_BYTE],
) -> [f32; ROWS_PER_BYTE] {
    let mut acc = acc;
    let mut c = 0;
    while c < C {
        let xv = xs[c].widen();
        let mut j = 0;
        while j < ROWS_PER_BYTE {
            acc[j] = mul_add(w[c][j], xv, acc[j]);
            j += 1;
        }
        c += 1;
    }
    acc
}

/// The weights of `C` consecutive columns of `words` (four a word) from column `first`; the
/// length of `zero` fixes `C`.
#[inline(always)]
fn decode<const N: usize, const C: usize>(
    words: [u32; N],
    first: usize,
    zero: [[f32; ROWS_PER_BYTE]; C],
) -> [[f32; ROWS_PER_BYTE]; C] {
    let mut w = zero;
    let mut c = 0;
    while c < C {
        let at = first + c;
        w[c] = column_weights(words[at / WORD_COLUMNS], at % WORD_COLUMNS);
        c += 1;
    }
    w
}

/// Decoded columns against every row of the tile: `xs(e)` loads a row's `C` elements of `x`
/// given the row's first element `e`.
#[inline(always)]
fn tile_rows<T: Element, const C: usize, const M: usize>(
    tile: Tile,
    w: [[f32; ROWS_PER_BYTE]; C],
    xs: impl Fn(usize) -> [T; C],
    acc: [[f32; ROWS_PER_BYTE]; M],
) -> [[f32; ROWS_PER_BYTE]; M] {
    let mut acc = acc;
    let mut m = 0;
    while m < M {
        acc[m] = accumulate(w, xs(row_start(tile, m)), acc[m]);
        m += 1;
    }
    acc
}

/// One unit (four words, 16 columns from `col`) against every row of the tile: per half, the
/// eight columns' weights decoded once, then one chunk of `x` per row.
#[inline(always)]
fn unit<T: Element, const M: usize>(
    x: Src<T>,
    tile: Tile,
    col: usize,
    words: [u32; UNIT_WORDS],
    acc: [[f32; ROWS_PER_BYTE]; M],
) -> [[f32; ROWS_PER_BYTE]; M] {
    let mut acc = acc;
    let mut h = 0;
    while h < UNIT_COLUMNS / X_CHUNK {
        let first = h * X_CHUNK;
        let w = decode(words, first, [[0.0f32; ROWS_PER_BYTE]; X_CHUNK]);
        acc = tile_rows(tile, w, |row| x_chunk(x, row + col + first, true), acc);
        h += 1;
    }
    acc
}

/// One word (four columns from `col`) against every row of the tile, `x` element by element.
#[inline(always)]
fn word<T: Element, const M: usize>(
    x: Src<T>,
    tile: Tile,
    col: usize,
    packed: u32,
    acc: [[f32; ROWS_PER_BYTE]; M],
) -> [[f32; ROWS_PER_BYTE]; M] {
    let w = decode([packed], 0, [[0.0f32; ROWS_PER_BYTE]; WORD_COLUMNS]);
    let xs = |row: usize| {
        let at = row + col;
        [x.get(at), x.get(at + 1), x.get(at + 2), x.get(at + 3)]
    };
    tile_rows(tile, w, xs, acc)
}
