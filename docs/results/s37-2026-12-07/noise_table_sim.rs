//! Session 37's host check of the Gumbel noise-bound table (not part of kiln): how tight a
//! table indexed by a word's leading ones and the next 4 bits is against session 36's two-level
//! table, and how many exact candidates the kernel's decisions (seed, wave threshold, v4's
//! per-position branches against v5's per-lane count) take with each, for normal(0, sigma)
//! logits at T 0.8 over 2000 waves of 32 lanes × 8 entries per turn.
//!
//! rustc -O -o /tmp/noise_table_sim docs/results/s37-2026-12-07/noise_table_sim.rs
//! /tmp/noise_table_sim 10 3.0   # turns per wave, logit sigma
fn uniform_open(word: u32) -> f32 {
    ((word >> 9) as f32 + 0.5) * (1.0 / 8_388_608.0)
}
fn noise(w: u32) -> f32 {
    -(-uniform_open(w).ln()).ln()
}
fn margin(g: f32) -> f32 {
    g + (g.abs() + 1.0) / 65536.0
}
fn new_index(w: u32, sub: u32) -> u32 {
    let read = w & !(u32::MAX >> 23);
    let ones = (!read).leading_zeros();
    (ones << sub) | ((read << (ones + 1)) >> (32 - sub))
}
fn new_bound(j: u32, sub: u32) -> f32 {
    let (ones, m) = (j >> sub, j & ((1 << sub) - 1));
    let below = 31 - sub - ones;
    let largest = (!(u32::MAX >> ones) | (m << below) | ((1 << below) - 1)) & !(u32::MAX >> 23);
    margin(noise(largest))
}
fn old_index(w: u32) -> u32 {
    let top = w >> 24;
    if top == 255 { 256 + ((w >> 16) & 255) } else { top }
}
fn old_bound(j: u32) -> f32 {
    let largest = if j < 256 {
        (j << 24) | (u32::MAX >> 8)
    } else {
        (255 << 24) | ((j - 256) << 16) | (u32::MAX >> 16)
    };
    margin(noise(largest))
}
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let (a, b) = (self.uniform().max(1e-300), self.uniform());
        (-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()
    }
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let turns: usize = args.get(1).map_or(10, |s| s.parse().unwrap());
    let sigma: f64 = args.get(2).map_or(3.0, |s| s.parse().unwrap());
    // Slack of each table over every value of the 23 bits the noise reads.
    let (mut new_sum, mut old_sum, mut new_hi, mut old_hi, mut n, mut n_hi) = (0.0, 0.0, 0.0, 0.0, 0, 0);
    for v in 0..1u32 << 23 {
        let w = v << 9;
        let g = noise(w);
        let (nb, ob) = (new_bound(new_index(w, 4), 4), old_bound(old_index(w)));
        assert!(g <= nb && g <= ob, "{w:#x}");
        new_sum += (nb - g) as f64;
        old_sum += (ob - g) as f64;
        n += 1;
        if g > 4.0 {
            new_hi += (nb - g) as f64;
            old_hi += (ob - g) as f64;
            n_hi += 1;
        }
    }
    println!(
        "mean slack: leading-ones table {:.4}, two-level {:.4}; where the noise > 4: {:.4}, {:.4}",
        new_sum / n as f64, old_sum / n as f64, new_hi / n_hi as f64, old_hi / n_hi as f64
    );
    for (name, table) in [("two-level", 0), ("leading-ones", 1)] {
        let bounds: Vec<f32> = if table == 0 {
            (0..512).map(old_bound).collect()
        } else {
            (0..24 << 4).map(|j| new_bound(j, 4)).collect()
        };
        let index = |w: u32| if table == 0 { old_index(w) } else { new_index(w, 4) } as usize;
        let mut rng = Rng(0x1234567);
        let waves = 2000;
        let (mut v5_serial, mut v4_positions) = (0usize, 0usize);
        for _ in 0..waves {
            let (mut best, mut wave_best) = ([f32::NEG_INFINITY; 32], f32::NEG_INFINITY);
            for t in 0..turns {
                let mut x = [[0f32; 8]; 32];
                let mut w = [[0u32; 8]; 32];
                for l in 0..32 {
                    for k in 0..8 {
                        x[l][k] = (rng.normal() * sigma) as f32 / 0.8;
                        w[l][k] = rng.next() as u32;
                    }
                }
                let mut skip = [8usize; 32];
                if t == 0 {
                    // Each lane's seed: the exact candidate of its highest bound.
                    for l in 0..32 {
                        let top = (0..8)
                            .max_by(|&a, &b| {
                                (x[l][a] + bounds[index(w[l][a])]).total_cmp(&(x[l][b] + bounds[index(w[l][b])]))
                            })
                            .unwrap();
                        best[l] = x[l][top] + noise(w[l][top]);
                        skip[l] = top;
                    }
                    wave_best = best.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                }
                let (mut most, mut positions) = (0, [false; 8]);
                for l in 0..32 {
                    let mut taken = 0;
                    for k in (0..8).filter(|&k| k != skip[l]) {
                        if x[l][k] + bounds[index(w[l][k])] >= best[l].max(wave_best) {
                            taken += 1;
                            positions[k] = true;
                            best[l] = best[l].max(x[l][k] + noise(w[l][k]));
                        }
                    }
                    most = most.max(taken);
                }
                v5_serial += most;
                v4_positions += positions.iter().filter(|&&p| p).count();
                wave_best = best.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            }
        }
        let per = (waves * turns) as f64;
        println!(
            "{name} table, {turns} turns, sigma {sigma}: exact candidates per wave-turn after the seed: v5 (most per lane) {:.3}, v4 (positions any lane takes) {:.3}",
            v5_serial as f64 / per,
            v4_positions as f64 / per
        );
    }
}
