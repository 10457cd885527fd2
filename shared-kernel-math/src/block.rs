//! `Block`: the only door a kernel has to the hardware.
//!
//! A vendor implements the primitives (ids, sizes, `barrier`, `shuffle_xor`, shared memory); the
//! collectives (`wave_sum`, `sum`, `argmax`, …) are written here once on top of them, so every
//! port runs the same reduction code and the SIMT emulator exercises it exactly.
//!
//! Rules for kernel bodies: call collectives and `barrier` in uniform control flow (every thread
//! of the block reaches the same call); never write 32 or 64 — fold from `B::WAVE / 2`, stride
//! by `b.size()`. Block sizes are multiples of `WAVE`.

use crate::element::Scalar;
use crate::view::Rw;

/// Number of u32 scratch words the collectives need for a block of `block` threads at `wave`.
pub const fn scratch_words(block: u32, wave: u32) -> u32 {
    2 * block.div_ceil(wave)
}

/// Bytes of launch-sized shared memory a launch needs: collective scratch, then the kernel's own.
pub const fn shared_bytes_total(block: u32, wave: u32, kernel_bytes: usize) -> usize {
    scratch_words(block, wave) as usize * 4 + kernel_bytes
}

/// The block of threads a kernel body runs in: thread and block ids, the barrier, wave shuffles
/// and shared memory (implemented per backend), and the collectives written once on top of them.
pub trait Block: Sized {
    /// Lanes per wave (CUDA warp, AMD wavefront, WGSL subgroup; 1 on the serial CPU block).
    const WAVE: u32;

    /// Thread index within the block, `0..size()`.
    fn thread(&self) -> u32;
    /// Threads in the block (a multiple of `WAVE`).
    fn size(&self) -> u32;
    /// This block's index along x, `0..grid_x()`.
    fn block_x(&self) -> u32;
    /// This block's index along y, `0..grid_y()`.
    fn block_y(&self) -> u32;
    /// This block's index along z, `0..grid_z()`.
    fn block_z(&self) -> u32;
    /// Blocks in the grid along x.
    fn grid_x(&self) -> u32;
    /// Blocks in the grid along y.
    fn grid_y(&self) -> u32;
    /// Blocks in the grid along z.
    fn grid_z(&self) -> u32;

    /// Block-wide barrier: all threads arrive; memory written before it is visible after it.
    #[track_caller]
    fn barrier(&self);

    /// The 32-bit value that lane `lane() ^ mask` of this wave passed (`mask < WAVE`).
    #[track_caller]
    fn shuffle_xor(&self, v: u32, mask: u32) -> u32;

    /// The collectives' scratch: `scratch_words(size(), WAVE)` words at the start of shared memory.
    fn scratch(&self) -> Rw<u32>;

    /// Kernel shared memory: `len` values of `T` at `offset` bytes after the scratch.
    /// `offset` is a multiple of `align_of::<T>()`; out-of-range requests trap.
    fn shared<T: Scalar>(&self, offset: usize, len: usize) -> Rw<T>;

    /// This thread's lane in its wave, `0..WAVE`.
    #[inline(always)]
    fn lane(&self) -> u32 {
        self.thread() % Self::WAVE
    }
    /// This thread's wave in the block, `0..waves()`.
    #[inline(always)]
    fn wave_id(&self) -> u32 {
        self.thread() / Self::WAVE
    }
    /// Waves in the block.
    #[inline(always)]
    fn waves(&self) -> u32 {
        self.size().div_ceil(Self::WAVE)
    }

    /// Sum over the wave; every lane gets the same bits.
    #[track_caller]
    #[inline(always)]
    fn wave_sum(&self, v: f32) -> f32 {
        let mut v = v;
        let mut m = Self::WAVE / 2;
        while m > 0 {
            v += f32::from_bits(self.shuffle_xor(v.to_bits(), m));
            m /= 2;
        }
        v
    }

    /// Max over the wave (NaN loses to any number); every lane gets the same bits.
    #[track_caller]
    #[inline(always)]
    fn wave_max(&self, v: f32) -> f32 {
        let mut v = v;
        let mut m = Self::WAVE / 2;
        while m > 0 {
            v = max_total(v, f32::from_bits(self.shuffle_xor(v.to_bits(), m)));
            m /= 2;
        }
        v
    }

    /// (max, index of the max) over the wave, ties to the lowest index, NaN loses.
    #[track_caller]
    #[inline(always)]
    fn wave_argmax(&self, v: f32, i: u32) -> (f32, u32) {
        let (mut v, mut i) = (v, i);
        let mut m = Self::WAVE / 2;
        while m > 0 {
            let ov = f32::from_bits(self.shuffle_xor(v.to_bits(), m));
            let oi = self.shuffle_xor(i, m);
            if argmax_beats(ov, oi, v, i) {
                v = ov;
                i = oi;
            }
            m /= 2;
        }
        (v, i)
    }

    /// Sum over the block; every thread gets the same bits. Waves are folded in index order.
    #[track_caller]
    fn sum(&self, v: f32) -> f32 {
        let w = self.wave_sum(v);
        let n = self.waves();
        if n <= 1 {
            return w;
        }
        let s = publish(self, [w.to_bits()]);
        let mut t = f32::from_bits(s.get(0));
        let mut k = 1;
        while k < n as usize {
            t += f32::from_bits(s.get(k));
            k += 1;
        }
        t
    }

    /// Max over the block (NaN loses to any number).
    #[track_caller]
    fn max(&self, v: f32) -> f32 {
        let w = self.wave_max(v);
        let n = self.waves();
        if n <= 1 {
            return w;
        }
        let s = publish(self, [w.to_bits()]);
        let mut t = f32::from_bits(s.get(0));
        let mut k = 1;
        while k < n as usize {
            t = max_total(t, f32::from_bits(s.get(k)));
            k += 1;
        }
        t
    }

    /// (max, index) over the block, ties to the lowest index, NaN loses.
    #[track_caller]
    fn argmax(&self, v: f32, i: u32) -> (f32, u32) {
        let (wv, wi) = self.wave_argmax(v, i);
        let n = self.waves();
        if n <= 1 {
            return (wv, wi);
        }
        let s = publish(self, [wv.to_bits(), wi]);
        let (mut tv, mut ti) = (f32::from_bits(s.get(0)), s.get(1));
        let mut k = 1;
        while k < n as usize {
            let (kv, ki) = (f32::from_bits(s.get(2 * k)), s.get(2 * k + 1));
            if argmax_beats(kv, ki, tv, ti) {
                tv = kv;
                ti = ki;
            }
            k += 1;
        }
        (tv, ti)
    }

    /// Prefix sum over the block in thread order: thread `t` gets `(Σ_{s<t} v_s, Σ_s v_s)`.
    /// Lanes combine by xor butterfly (each level adds the sibling group's sum; `a + b` and
    /// `b + a` are the same bits, so both halves agree), waves in index order; every thread
    /// gets the same total bits.
    #[track_caller]
    fn scan_sum(&self, v: f32) -> (f32, f32) {
        let lane = self.lane();
        let (mut below, mut group) = (0.0f32, v);
        let mut m = 1;
        while m < Self::WAVE {
            let sibling = f32::from_bits(self.shuffle_xor(group.to_bits(), m));
            if lane & m != 0 {
                below += sibling;
            }
            group += sibling;
            m *= 2;
        }
        let n = self.waves();
        if n <= 1 {
            return (below, group);
        }
        let s = publish(self, [group.to_bits()]);
        let w = self.wave_id() as usize;
        let (mut before, mut total) = (0.0f32, 0.0f32);
        let mut k = 0;
        while k < n as usize {
            let t = f32::from_bits(s.get(k));
            if k < w {
                before += t;
            }
            total += t;
            k += 1;
        }
        (before + below, total)
    }
}

/// Lane 0 of each wave publishes `words` into its slot of the scratch (`N` words per wave);
/// returns the scratch after a barrier. The leading barrier keeps a previous collective's
/// readers ahead of these writes.
#[track_caller]
#[inline(always)]
fn publish<B: Block, const N: usize>(b: &B, words: [u32; N]) -> Rw<u32> {
    let s = b.scratch();
    b.barrier();
    if b.lane() == 0 {
        let w = b.wave_id() as usize;
        let mut k = 0;
        while k < N {
            s.set(N * w + k, words[k]);
            k += 1;
        }
    }
    b.barrier();
    s
}

/// `max` that every lane computes identically: NaN loses, +0 beats -0.
#[inline(always)]
pub fn max_total(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if b > a || (b == a && b.is_sign_positive()) {
        b
    } else {
        a
    }
}

/// Whether (av, ai) strictly beats (bv, bi) for argmax: larger value, then lower index; NaN loses.
#[inline(always)]
pub fn argmax_beats(av: f32, ai: u32, bv: f32, bi: u32) -> bool {
    match (av.is_nan(), bv.is_nan()) {
        (false, true) => true,
        (true, false) => false,
        (true, true) => ai < bi,
        (false, false) => av > bv || (av == bv && ai < bi),
    }
}
