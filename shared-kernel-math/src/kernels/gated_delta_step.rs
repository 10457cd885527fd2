//! Qwen3-Next's Gated DeltaNet recurrence (mlx-lm's `gated_delta_kernel`, spec §14) over `T`
//! steps of one launch.
//!
//! Buffers, all in the activation dtype `T` but `mask`: `q, k [B, T, Hk, Dk]`,
//! `v [B, T, Hv, Dv]`, the gate `g [B, T, Hv]` (one decay per head) or `[B, T, Hv, Dk]` (one
//! per key column), `beta [B, T, Hv]`, `mask` (u32 words, read only when `mask_kind` says one
//! is present), `state_in [B, Hv, Dv, Dk]`, outputs `y [B, T, Hv, Dv]` and `state_out` (the
//! shape of `state_in`). Value head `hv` reads key head `hk = hv / (Hv / Hk)`.
//!
//! Per row `(b, hv, dv)` with state `s[0..Dk]` (f32, from `state_in`), for `t = 0..T`, where
//! `q, k, g` are step `t`'s vectors of the row's heads:
//! - a step whose mask is 0 leaves `s` unchanged and writes `y[b, t, hv, dv] = 0`;
//! - otherwise `s ← s·g` (the scalar or per column), `kv = Σ_c s[c]·k[c]`,
//!   `δ = (v[b, t, hv, dv] − kv)·beta[b, t, hv]`, `s ← s + k·δ`, and
//!   `y[b, t, hv, dv] = rnd_T(Σ_c s[c]·q[c])`;
//!
//! then `state_out = rnd_T(s)`. Arithmetic is f32 and the state stays f32 across the steps.
//! With `chain_parity` the state is rounded to `T` at the end of every step (`y` still from the
//! unrounded state), so a `T`-step launch equals `T` one-step launches bit for bit on a port;
//! for f32 both variants coincide.
//!
//! Geometry: block `(i, b·Hv + hv)` owns rows `dv = i·BLOCK_ROWS + r`, `r < BLOCK_ROWS`; its
//! waves take them in turn, each lane the columns `c ≡ lane (mod WAVE)`, folded with
//! `wave_sum`. A row's f32 state lives in shared memory for the whole launch (any `Dk` up to
//! [`MAX_KEY_DIM`], one compiled body): each lane only touches its own columns, so no barrier.

use crate::kernel::shape;
use crate::{mul_add, Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

/// Rows `(b, hv, dv)` one block owns (mlx-lm's threadgroup holds four rows).
pub const BLOCK_ROWS: u32 = 4;

/// Threads per block: one wave per row on a 32-wide GPU.
pub const BLOCK_THREADS: u32 = 128;

/// The widest key head: the block's `BLOCK_ROWS · Dk` f32 state words must fit shared memory
/// beside the collectives' scratch within WebGPU's 16 KiB guaranteed minimum.
pub const MAX_KEY_DIM: usize = 512;

/// `mask_kind`: no mask, every step runs.
pub const MASK_NONE: u32 = 0;
/// `mask_kind`: one u32 word per `(b, t)`, nonzero runs the step.
pub const MASK_WORDS: u32 = 1;
/// `mask_kind`: one byte per `(b, t)` (bool or u8), four per little-endian word.
pub const MASK_BYTES: u32 = 2;

crate::params! {
    /// Params of `gated_delta_step`.
    pub struct GatedDeltaParams {
        /// 1: round the state to `T` after every step (the chain-parity variant); 0: keep it
        /// f32 across the launch's steps.
        pub chain_parity: u32 = 0,
        /// How `mask` is read: [`MASK_NONE`], [`MASK_WORDS`] or [`MASK_BYTES`].
        pub mask_kind: u32 = 0,
        /// Batch (`B`), set by `bind`.
        pub batch: u32,
        /// Steps (`T`), set by `bind`.
        pub steps: u32,
        /// Key heads (`Hk`), set by `bind`.
        pub key_heads: u32,
        /// Value heads (`Hv`, a multiple of `Hk`), set by `bind`.
        pub value_heads: u32,
        /// Key columns (`Dk`), set by `bind`.
        pub key_dim: u32,
        /// Value rows per head (`Dv`), set by `bind`.
        pub value_dim: u32,
        /// 1 when `g` holds one decay per key column, 0 one per head; set by `bind`.
        pub gate_per_key: u32,
    }
}

/// Descriptor of `gated_delta_step`.
pub struct GatedDeltaStep;

/// `shape` as four dims, or the error naming `what` (its expected layout).
fn dims4(shape: &[usize], what: &'static str) -> Result<[usize; 4], ShapeError> {
    match *shape {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(ShapeError::Invalid(what)),
    }
}

impl KernelDef for GatedDeltaStep {
    type Params = GatedDeltaParams;
    const NAME: &'static str = "gated_delta_step";

    /// Buffers: `q`, `k`, `v`, `g`, `beta`, `mask`, `state_in`, `y`, `state_out` (module docs);
    /// `mask` holds `B·T` words or `⌈B·T/4⌉` byte words, or any nonempty buffer without a mask.
    fn bind(p: &mut GatedDeltaParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [q, k, v, g, beta, mask, state_in, y, state_out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 9,
            });
        };
        let [batch, steps, key_heads, key_dim] =
            dims4(q, "q must be four-dimensional: [B, T, Hk, Dk]")?;
        shape::nonzero("B (the batch of q)", batch)?;
        shape::nonzero("T (the steps of q)", steps)?;
        shape::nonzero("Hk (the key heads of q)", key_heads)?;
        shape::nonzero("Dk (the key columns of q)", key_dim)?;
        if key_dim > MAX_KEY_DIM {
            return Err(ShapeError::Range {
                what: "Dk (the key columns: a block's state rows live in shared memory)",
                got: key_dim as f64,
                lo: 1.0,
                hi: MAX_KEY_DIM as f64,
            });
        }
        if k != q {
            return Err(ShapeError::Invalid("k must have the shape of q"));
        }
        let [vb, vt, value_heads, value_dim] =
            dims4(v, "v must be four-dimensional: [B, T, Hv, Dv]")?;
        shape::eq("batch of v against B", vb, batch)?;
        shape::eq("steps of v against T", vt, steps)?;
        shape::nonzero("Hv (the value heads of v)", value_heads)?;
        shape::nonzero("Dv (the value rows of v)", value_dim)?;
        if !value_heads.is_multiple_of(key_heads) {
            return Err(ShapeError::Invalid("Hv must be a multiple of Hk"));
        }
        let heads = [batch, steps, value_heads];
        p.gate_per_key = match **g {
            [a, b, c] if [a, b, c] == heads => 0,
            [a, b, c, d] if [a, b, c] == heads && d == key_dim => 1,
            _ => {
                return Err(ShapeError::Invalid(
                    "g must be [B, T, Hv] or [B, T, Hv, Dk]",
                ))
            }
        };
        if *beta != heads {
            return Err(ShapeError::Invalid("beta must be [B, T, Hv]"));
        }
        let words = match p.mask_kind {
            MASK_NONE => 0,
            MASK_WORDS => batch * steps,
            MASK_BYTES => (batch * steps).div_ceil(4),
            other => {
                return Err(ShapeError::Range {
                    what: "mask_kind",
                    got: other as f64,
                    lo: 0.0,
                    hi: MASK_BYTES as f64,
                })
            }
        };
        if p.mask_kind == MASK_NONE {
            shape::nonzero("elements of mask (unread without one)", shape::numel(mask))?;
        } else {
            shape::eq(
                "words of mask against its B·T steps",
                shape::numel(mask),
                words,
            )?;
        }
        if *state_in != [batch, value_heads, value_dim, key_dim] {
            return Err(ShapeError::Invalid("state_in must be [B, Hv, Dv, Dk]"));
        }
        if y != v {
            return Err(ShapeError::Invalid("y must have the shape of v"));
        }
        if state_out != state_in {
            return Err(ShapeError::Invalid(
                "state_out must have the shape of state_in",
            ));
        }
        if p.chain_parity > 1 {
            return Err(ShapeError::Range {
                what: "chain_parity",
                got: p.chain_parity as f64,
                lo: 0.0,
                hi: 1.0,
            });
        }
        // Every element index must fit the u32 a WGSL index holds.
        let biggest = [
            shape::numel(q),
            shape::numel(v),
            shape::numel(g),
            shape::numel(state_in),
        ];
        for n in biggest {
            shape::to_u32("elements of a buffer", n)?;
        }
        shape::to_u32("blocks along y (B·Hv)", batch * value_heads)?;
        p.batch = batch as u32;
        p.steps = steps as u32;
        p.key_heads = key_heads as u32;
        p.value_heads = value_heads as u32;
        p.key_dim = key_dim as u32;
        p.value_dim = value_dim as u32;
        Ok(())
    }

    fn launch(p: &GatedDeltaParams) -> Launch {
        Launch {
            grid: [p.value_dim.div_ceil(BLOCK_ROWS), p.batch * p.value_heads, 1],
            block: BLOCK_THREADS,
        }
    }

    fn shared_bytes(p: &GatedDeltaParams, _block: u32, _wave: u32) -> usize {
        BLOCK_ROWS as usize * p.key_dim as usize * 4
    }
}

/// Whether step `i = b·T + t` runs: always without a mask, else its word or byte is nonzero.
#[inline(always)]
fn step_runs(p: &GatedDeltaParams, mask: Src<u32>, i: usize) -> bool {
    if p.mask_kind == MASK_WORDS {
        return mask.get(i) != 0;
    }
    if p.mask_kind == MASK_BYTES {
        return (mask.get(i / 4) >> (8 * (i % 4) as u32)) & 0xff != 0;
    }
    true
}

/// The body: block `(i, n = b·Hv + hv)`; its wave `w` takes rows `r = w, w + waves, …` of the
/// block's [`BLOCK_ROWS`], every lane of a wave the same rows and steps, so each `wave_sum` is
/// reached by the whole wave.
#[allow(clippy::too_many_arguments)] // one view per buffer of the list entry
pub fn gated_delta_step<T: Element, B: Block>(
    b: &B,
    p: &GatedDeltaParams,
    q: Src<T>,
    k: Src<T>,
    v: Src<T>,
    g: Src<T>,
    beta: Src<T>,
    mask: Src<u32>,
    state_in: Src<T>,
    y: Dst<T>,
    state_out: Dst<T>,
) {
    let dk = p.key_dim as usize;
    let dv = p.value_dim as usize;
    let steps = p.steps as usize;
    let value_heads = p.value_heads as usize;
    let key_heads = p.key_heads as usize;
    let n = b.block_y() as usize;
    let (batch, hv) = (n / value_heads, n % value_heads);
    let hk = hv / (value_heads / key_heads);
    let first = b.block_x() as usize * BLOCK_ROWS as usize;
    let here = (BLOCK_ROWS as usize).min(dv - first);
    let lane = b.lane() as usize;
    let wave = B::WAVE as usize;
    let state = b.shared::<f32>(0, BLOCK_ROWS as usize * dk);
    let mut r = b.wave_id() as usize;
    while r < here {
        let row = n * dv + first + r;
        let own = r * dk;
        let mut c_load = lane;
        while c_load < dk {
            state.set(own + c_load, state_in.get(row * dk + c_load).widen());
            c_load += wave;
        }
        let mut t = 0;
        while t < steps {
            let bt = batch * steps + t;
            // Step t's head row of v, beta and y, and its key row of q and k.
            let head = bt * value_heads + hv;
            let out_at = head * dv + first + r;
            if step_runs(p, mask, bt) {
                let keys = (bt * key_heads + hk) * dk;
                let scalar_gate = g.get(if p.gate_per_key == 1 { 0 } else { head }).widen();
                let mut kv_part = 0.0f32;
                let mut c_decay = lane;
                while c_decay < dk {
                    let gate = if p.gate_per_key == 1 {
                        g.get(head * dk + c_decay).widen()
                    } else {
                        scalar_gate
                    };
                    let decayed = state.get(own + c_decay) * gate;
                    state.set(own + c_decay, decayed);
                    kv_part = mul_add(decayed, k.get(keys + c_decay).widen(), kv_part);
                    c_decay += wave;
                }
                let kv = b.wave_sum(kv_part);
                let delta = (v.get(out_at).widen() - kv) * beta.get(head).widen();
                let mut out_part = 0.0f32;
                let mut c_update = lane;
                while c_update < dk {
                    let at = own + c_update;
                    let new = mul_add(k.get(keys + c_update).widen(), delta, state.get(at));
                    out_part = mul_add(new, q.get(keys + c_update).widen(), out_part);
                    // The chain-parity variant keeps only what a one-step launch would store.
                    let kept = if p.chain_parity == 1 {
                        T::from_f32(new).to_f32()
                    } else {
                        new
                    };
                    state.set(at, kept);
                    c_update += wave;
                }
                let out = b.wave_sum(out_part);
                if lane == 0 {
                    y.set(out_at, T::from_f32(out));
                }
            } else if lane == 0 {
                y.set(out_at, T::from_f32(0.0));
            }
            t += 1;
        }
        let mut c_store = lane;
        while c_store < dk {
            state_out.set(row * dk + c_store, T::from_f32(state.get(own + c_store)));
            c_store += wave;
        }
        r += b.waves() as usize;
    }
}
