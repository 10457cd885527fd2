//! `Block`: the only door a kernel has to the hardware.
//!
//! A vendor implements the primitives (ids, sizes, `barrier`, `shuffle_xor`, shared memory); the
//! collectives (`wave_sum`, `sum`, `argmax`, …) are written here once on top of them, so every
//! port runs the same reduction code and the SIMT emulator exercises it exactly.
//!
//! Rules for kernel bodies: call collectives and `barrier` in uniform control flow (every thread
//! of the block reaches the same call); never write 32 or 64 — fold from `B::WAVE / 2`, stride
//! by `b.size()`. Block sizes are multiples of `WAVE`.

use crate::element::{Element, Scalar};
use crate::view::Rw;
use crate::wave_mma::{mma_classes, mma_groups, pair_dot, MMA_MAX_GROUPS};

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

    /// Whether [`wave_mma`](Block::wave_mma) is the hardware's (a kernel may then prefer it to
    /// FMA loops; elsewhere it is the shuffle version: correct, slower). The SIMT emulator says
    /// yes, so the kernels' multiply paths run under it.
    const MMA_NATIVE: bool = false;

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

    /// `a / b` correctly rounded (Rust's `/`) on every port. Plain `/` is that on the host,
    /// CUDA and AMD ports, but a Vulkan device's `/` may be 2.5 ulp off, so WGSL divides in
    /// integers (exact, and several times slower than the device's `/` in a bandwidth kernel):
    /// for divisions whose rounding a kernel amplifies, like RoPE's `p / (R/2)` scaled by the
    /// position.
    #[inline(always)]
    fn div_exact(&self, a: f32, b: f32) -> f32 {
        a / b
    }

    /// `v` as rounded, never fused with what consumes it (Rust's semantics: every `*` and `+`
    /// rounds). The host, CUDA and AMD ports never contract, so it is `v`; a Vulkan driver may
    /// fuse a product into the add after it (NVIDIA's does), so WGSL passes it through an exact
    /// integer copy the driver cannot see through. For kernels held to a per-op chain bit for
    /// bit (xIELU, spec §10), where one fused rounding is tens of ulps after a cancellation.
    #[inline(always)]
    fn unfused(&self, v: f32) -> f32 {
        v
    }

    /// `(hi, lo)`: the high and low words of the 64-bit product `a · b`. One wide multiply on
    /// the host, CUDA and AMD ports; WGSL has no 64-bit integers, so the provided version
    /// multiplies 16-bit limbs (Philox's rounds are most of a sampler's arithmetic).
    #[inline(always)]
    fn mul_wide(&self, a: u32, b: u32) -> (u32, u32) {
        crate::wide_mul::mulhilo32(a, b)
    }

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

    /// This lane's class in the wave multiply ([`wave_mma`](Block::wave_mma)): the `k` slots
    /// it holds.
    #[inline(always)]
    fn mma_class(&self) -> u32 {
        self.lane() % mma_classes(Self::WAVE)
    }
    /// This lane's group in the wave multiply: its column of `B` and its rows `g`, `g + G` of
    /// `A` and `C`.
    #[inline(always)]
    fn mma_group(&self) -> u32 {
        (self.lane() / mma_classes(Self::WAVE)) % mma_groups(Self::WAVE)
    }
    /// This lane's set in the wave multiply (sets multiply independently).
    #[inline(always)]
    fn mma_set(&self) -> u32 {
        self.lane() / (mma_classes(Self::WAVE) * mma_groups(Self::WAVE))
    }
    /// The column of `C[.][t]` this lane gets back from [`wave_mma`](Block::wave_mma), `t < 2`;
    /// `mma_groups(WAVE)` or more: none.
    #[inline(always)]
    fn mma_col(&self, t: u32) -> u32 {
        self.mma_class() + mma_classes(Self::WAVE) * t
    }
    /// One wave multiply `C += A·B` of 16-bit `T` values (f16 or bf16) with f32 sums, lane-local
    /// in `k` (the geometry is in `wave_mma.rs`): `a[r]` is row `g + G·r` of this lane's slots,
    /// `b` its column's, two pairs each (low half first); the result is this lane's `C[r][t]`
    /// at column `mma_col(t)`. Called in uniform control flow.
    ///
    /// Provided on `shuffle_xor` ([`wave_mma_shuffled`]); CUDA has `mma.sync`, the SIMT emulator
    /// the definition.
    #[track_caller]
    #[inline(always)]
    fn wave_mma<T: Element>(
        &self,
        a: [[u32; 2]; 2],
        b: [u32; 2],
        c: [[f32; 2]; 2],
    ) -> [[f32; 2]; 2] {
        wave_mma_shuffled(self, a, b, c, T::from_bits32(0))
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

    /// Two sums over the block at the cost of one (`sum` of each, the same bits).
    #[track_caller]
    fn sum_pair(&self, a: f32, c: f32) -> (f32, f32) {
        let (wa, wc) = (self.wave_sum(a), self.wave_sum(c));
        let n = self.waves();
        if n <= 1 {
            return (wa, wc);
        }
        let s = publish(self, [wa.to_bits(), wc.to_bits()]);
        let (mut ta, mut tc) = (f32::from_bits(s.get(0)), f32::from_bits(s.get(1)));
        let mut k = 1;
        while k < n as usize {
            ta += f32::from_bits(s.get(2 * k));
            tc += f32::from_bits(s.get(2 * k + 1));
            k += 1;
        }
        (ta, tc)
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

/// [`Block::wave_mma`] written on `shuffle_xor` alone (`_like` names `T`): each lane meets its
/// own slots with the `B` of every group of its class, the classes' sums are folded by a
/// butterfly, and each lane keeps the columns it owns. Every lane shuffles the same masks.
#[track_caller]
#[inline(always)]
pub fn wave_mma_shuffled<T: Element, B: Block>(
    bl: &B,
    a: [[u32; 2]; 2],
    bw: [u32; 2],
    c: [[f32; 2]; 2],
    _like: T,
) -> [[f32; 2]; 2] {
    let classes = mma_classes(B::WAVE);
    let groups = mma_groups(B::WAVE);
    let g = bl.mma_group();
    // part[r][d]: row r of this lane against the column of group g ^ d.
    let mut part = [[0.0f32; MMA_MAX_GROUPS]; 2];
    let mut d = 0usize;
    while d < MMA_MAX_GROUPS {
        if (d as u32) < groups {
            let b0 = bl.shuffle_xor(bw[0], d as u32 * classes);
            let b1 = bl.shuffle_xor(bw[1], d as u32 * classes);
            let mut r = 0usize;
            while r < 2 {
                part[r][d] = pair_dot::<T>(a[r][0], b0) + pair_dot::<T>(a[r][1], b1);
                r += 1;
            }
        }
        d += 1;
    }
    let mut r = 0usize;
    while r < 2 {
        let mut d = 0usize;
        while d < MMA_MAX_GROUPS {
            if (d as u32) < groups {
                let mut v = part[r][d];
                let mut m = classes / 2;
                while m > 0 {
                    v += f32::from_bits(bl.shuffle_xor(v.to_bits(), m));
                    m /= 2;
                }
                part[r][d] = v;
            }
            d += 1;
        }
        r += 1;
    }
    let mut out = c;
    let mut t = 0usize;
    while t < 2 {
        let col = bl.mma_col(t as u32);
        if col < groups {
            let want = (g ^ col) as usize;
            let mut r = 0usize;
            while r < 2 {
                // A select per group, not an index: the partials stay in registers.
                let mut v = 0.0f32;
                let mut d = 0usize;
                while d < MMA_MAX_GROUPS {
                    if d == want {
                        v = part[r][d];
                    }
                    d += 1;
                }
                out[r][t] += v;
                r += 1;
            }
        }
        t += 1;
    }
    out
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
