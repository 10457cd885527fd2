//! The wave multiply at every wave the SIMT emulator runs: the emulator's own (the definition,
//! all lanes' fragments at once) and the `shuffle_xor` version the other ports run, both
//! against an integer matrix product of the fragments laid out as `kiln_math::wave_mma` states.
//! Small integer values keep every sum exact, so the checks are bitwise.

use crate::host::{HostBuf, HostLaunch, ViewSource};
use crate::rng::Rng;
use crate::SimConfig;
use kiln_math::wave_mma::{mma_classes, mma_groups};
use kiln_math::{shared_bytes_total, wave_mma_shuffled, Bf16, Block, Dst, Element, Src, F16};

/// Words of one lane's input: `a[0]`, `a[1]`, `b` (pairs), then `c` (four f32 bits).
const IN_WORDS: usize = 10;

/// Each lane's `[emulator's, shuffled]` results, four floats each, for `inputs` at wave `W`.
fn run_on_sim<const W: u32, T: Element>(inputs: &mut [u32]) -> Vec<f32> {
    let block = (inputs.len() / IN_WORDS) as u32;
    let mut out = vec![f32::NAN; 8 * block as usize];
    let bufs = [
        HostBuf {
            ptr: inputs.as_mut_ptr() as *mut u8,
            len: inputs.len(),
        },
        HostBuf {
            ptr: out.as_mut_ptr() as *mut u8,
            len: out.len(),
        },
    ];
    let cfg = SimConfig::new(W);
    let l = HostLaunch {
        kernel: "wave_mma",
        buffer_names: &["inputs", "out"],
        params: &[],
        bufs: &bufs,
        grid: [1, 1, 1],
        block,
        wave: W,
        shared: shared_bytes_total(block, W, 0),
        sim: Some(&cfg),
    };
    crate::sim::run::<W, _>(&l, |b, s| {
        let x: Src<u32> = s.view(0);
        let o: Dst<f32> = s.view(1);
        let t = b.thread() as usize;
        let w = |i: usize| x.get(t * IN_WORDS + i);
        let a = [[w(0), w(1)], [w(2), w(3)]];
        let bw = [w(4), w(5)];
        let c = [
            [f32::from_bits(w(6)), f32::from_bits(w(7))],
            [f32::from_bits(w(8)), f32::from_bits(w(9))],
        ];
        let native = b.wave_mma::<T>(a, bw, c);
        let shuffled = wave_mma_shuffled(b, a, bw, c, T::from_bits32(0));
        for (k, v) in native.iter().chain(shuffled.iter()).flatten().enumerate() {
            o.set(8 * t + k, *v);
        }
    })
    .expect("the wave multiply on the sim");
    out
}

/// The 16-bit bits of the small integer `v` in `T`.
fn bits<T: Element>(v: i32) -> u32 {
    T::from_f32(v as f32).to_bits32()
}

// The checks index other lanes' values by lane arithmetic, not by the loop's own element.
#[allow(clippy::needless_range_loop)]
fn check<const W: u32, T: Element>(rng: &mut Rng, waves: usize) {
    let lanes = W as usize * waves;
    let int = |rng: &mut Rng, lo: i32, hi: i32| lo + (rng.uniform() * (hi - lo + 1) as f64) as i32;
    // Per lane: A values [row r][slot 0..4], B values [slot], C values [r][t].
    let mut av = vec![[[0i32; 4]; 2]; lanes];
    let mut bv = vec![[0i32; 4]; lanes];
    let mut cv = vec![[[0i32; 2]; 2]; lanes];
    let mut inputs = vec![0u32; lanes * IN_WORDS];
    for l in 0..lanes {
        for v in av[l].iter_mut().flatten() {
            *v = int(rng, -8, 8);
        }
        for v in bv[l].iter_mut() {
            *v = int(rng, -16, 16);
        }
        for v in cv[l].iter_mut().flatten() {
            *v = int(rng, -100, 100);
        }
        let pair = |v: &[i32; 4], w: usize| bits::<T>(v[2 * w]) | bits::<T>(v[2 * w + 1]) << 16;
        let i = &mut inputs[l * IN_WORDS..][..IN_WORDS];
        i[0] = pair(&av[l][0], 0);
        i[1] = pair(&av[l][0], 1);
        i[2] = pair(&av[l][1], 0);
        i[3] = pair(&av[l][1], 1);
        i[4] = pair(&bv[l], 0);
        i[5] = pair(&bv[l], 1);
        for (k, c) in cv[l].iter().flatten().enumerate() {
            i[6 + k] = (*c as f32).to_bits();
        }
    }
    let out = run_on_sim::<W, T>(&mut inputs);
    let (q_n, g_n) = (mma_classes(W) as usize, mma_groups(W) as usize);
    for l in 0..lanes {
        let lane = l % W as usize;
        let base = l - lane + lane / (q_n * g_n) * q_n * g_n;
        let (g, q) = ((lane / q_n) % g_n, lane % q_n);
        for r in 0..2 {
            for t in 0..2 {
                let col = q + q_n * t;
                if col >= g_n {
                    continue;
                }
                // C[g + G·r][col] = c + Σ over the classes and slots of A row · B column.
                let mut want = cv[l][r][t] as i64;
                for class in 0..q_n {
                    let (la, lb) = (base + g * q_n + class, base + col * q_n + class);
                    for s in 0..4 {
                        want += av[la][r][s] as i64 * bv[lb][s] as i64;
                    }
                }
                for (which, at) in [
                    ("emulator's", 8 * l + 2 * r + t),
                    ("shuffled", 8 * l + 4 + 2 * r + t),
                ] {
                    assert_eq!(
                        out[at],
                        want as f32,
                        "wave {W}, {} lanes, lane {l}: {which} C[{}][{col}]",
                        lanes,
                        g + g_n * r
                    );
                }
            }
        }
    }
}

#[test]
fn wave_mma_is_the_product_of_the_fragments_at_every_wave() {
    let mut rng = Rng::new(0x3a3a);
    for waves in [1, 2] {
        check::<1, F16>(&mut rng, waves);
        check::<2, F16>(&mut rng, waves);
        check::<4, F16>(&mut rng, waves);
        check::<8, Bf16>(&mut rng, waves);
        check::<16, F16>(&mut rng, waves);
        check::<32, F16>(&mut rng, waves);
        check::<32, Bf16>(&mut rng, waves);
        check::<64, F16>(&mut rng, waves);
    }
}
