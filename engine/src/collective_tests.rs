//! The block collectives added for the samplers, run lane by lane in the SIMT emulator at every
//! wave it emulates: `scan_sum` against an f64 prefix sum, its total identical on every thread.

use crate::host::{HostBuf, HostLaunch, ViewSource};
use crate::rng::Rng;
use crate::SimConfig;
use kiln_math::{shared_bytes_total, Block, Dst, Src};

/// `(exclusive prefix, total)` per thread of one block of `block` threads at wave `W`.
fn scan_on_sim<const W: u32>(values: &[f32]) -> Vec<(f32, f32)> {
    let block = values.len() as u32;
    let mut input = values.to_vec();
    let mut out = vec![0f32; 2 * values.len()];
    let bufs = [
        HostBuf {
            ptr: input.as_mut_ptr() as *mut u8,
            len: input.len(),
        },
        HostBuf {
            ptr: out.as_mut_ptr() as *mut u8,
            len: out.len(),
        },
    ];
    let cfg = SimConfig::new(W);
    let l = HostLaunch {
        kernel: "scan_sum",
        buffer_names: &["x", "out"],
        params: &[],
        bufs: &bufs,
        grid: [1, 1, 1],
        block,
        wave: W,
        shared: shared_bytes_total(block, W, 0),
        sim: Some(&cfg),
    };
    crate::sim::run::<W, _>(&l, |b, s| {
        let x: Src<f32> = s.view(0);
        let o: Dst<f32> = s.view(1);
        let t = b.thread() as usize;
        let (below, total) = b.scan_sum(x.get(t));
        o.set(2 * t, below);
        o.set(2 * t + 1, total);
    })
    .expect("scan on the sim");
    out.chunks(2).map(|c| (c[0], c[1])).collect()
}

fn check<const W: u32>(rng: &mut Rng) {
    for waves in [1usize, 3, 4] {
        let n = W as usize * waves;
        let values: Vec<f32> = (0..n).map(|_| rng.uniform() as f32).collect();
        let got = scan_on_sim::<W>(&values);
        let mut prefix = 0.0f64;
        for (t, &(below, total)) in got.iter().enumerate() {
            assert!(
                (below as f64 - prefix).abs() <= 1e-5 * (1.0 + prefix),
                "wave {W} block {n} thread {t}: prefix {below} vs {prefix}"
            );
            assert_eq!(
                total.to_bits(),
                got[0].1.to_bits(),
                "wave {W}: total bits differ"
            );
            prefix += values[t] as f64;
        }
        assert!(
            (got[0].1 as f64 - prefix).abs() <= 1e-5 * prefix,
            "wave {W}: total"
        );
    }
}

#[test]
fn scan_sum_is_a_prefix_sum_with_one_total_at_every_wave() {
    let mut rng = Rng::new(0x5ca9);
    check::<1>(&mut rng);
    check::<2>(&mut rng);
    check::<4>(&mut rng);
    check::<8>(&mut rng);
    check::<32>(&mut rng);
    check::<64>(&mut rng);
}
