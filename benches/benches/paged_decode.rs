//! Paged decode rows on the cpu backend: `cargo bench -p kiln-benches --bench paged_decode`
//! prints the host copy bandwidth, the v1/v2 crossover measurement and the CSV rows
//! (`-- --quick` runs a reduced grid).

use kiln::Device;
use kiln_benches::paged::{
    crossover, host_copy_bandwidth, run_paged_decode, PagedBenchConfig, PagedBenchRow,
};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let dev = Device::cpu();
    let copy = host_copy_bandwidth(512 << 20, 5);
    println!(
        "# cpu copy bandwidth: {:.2} GB/s (512 MiB memcpy, read + write bytes, best of 5)",
        copy / 1e9
    );
    println!(
        "# host threads (the cpu backend.s block workers): {}",
        rayon_workers()
    );

    let contexts: &[usize] = if quick {
        &[512, 4096]
    } else {
        &[256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
    };
    let (points, from) = crossover(&dev, contexts).expect("crossover");
    println!("# crossover (batch 1, Hq 8, Hkv 1, D 128, f16): context,v1_s,v2_s");
    for p in &points {
        println!("# {},{:.4e},{:.4e}", p.context, p.v1_seconds, p.v2_seconds);
    }
    println!("# v2 faster from context: {from:?}");

    let mut cfg = PagedBenchConfig::default();
    if quick {
        cfg.contexts = vec![1024];
        cfg.batches = vec![1];
    }
    println!("{}", PagedBenchRow::CSV_HEADER);
    run_paged_decode(&dev, &cfg, copy, |r| println!("{}", r.csv(&cfg))).expect("paged bench");
}

fn rayon_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
