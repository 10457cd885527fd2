//! `kiln bench`.

use crate::decode_bench::{CompareArgs, DecodeSettings};
use kiln_benches::decode::ActDtype;

#[derive(clap::Subcommand)]
pub enum BenchCmd {
    /// Pairs two `--decode` CSV files by model: median decode ratio (after/before), quartiles,
    /// range and the rows that moved more than the threshold (spec §16.2).
    Compare(CompareArgs),
}

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Option<BenchCmd>,
    /// cpu, sim, cuda, rocm or wgpu.
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the rows as CSV to this file.
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
    /// Timed passes per shape (default: 50 on a GPU, 5 on the host).
    #[arg(long)]
    runs: Option<usize>,
    /// Paged decode instead: the v1/v2 crossover and the rows of contexts 1K–32K × batch
    /// 1, 4, 8 (D 128, Hq 32, Hkv 8, page 32, f16 pool; --gqa, --head-dims, --page-sizes and
    /// --dtype (the pool's) run other shapes) for v1, v2 and the fallback, as CSV.
    #[arg(long)]
    paged: bool,
    /// The one-token MoE experts block instead (gate/up → down → K-sum at Qwen3-30B-A3B,
    /// Mixtral-8x7B and Nemotron-3-Nano shapes, 4-bit g64), timed as one unit, as CSV.
    #[arg(long)]
    moe: bool,
    /// The sampling ops instead (the filtered sampler on both paths, Gumbel-max; every launch
    /// of a call timed as one unit) at vocabularies 128256 and 152064, batch 1, 8, 64, as CSV.
    #[arg(long)]
    samplers: bool,
    /// The device's streaming rates instead: its buffer copy, and plain read, write and copy
    /// kernels (not kiln's; wgpu only; write and copy also in 4-byte accesses) over 128 MiB with
    /// and without the backend's runtime checks, at workgroup counts from 64 up to one 16-byte
    /// access per thread, as CSV.
    #[arg(long)]
    stream: bool,
    /// With --moe: rows per block of the expert kernels (comma-separated; default 8).
    #[arg(long, value_delimiter = ',')]
    rows_per_block: Vec<u32>,
    /// Only these kernels (comma-separated names).
    #[arg(long)]
    kernel: Option<String>,
    /// Only these dtypes (comma-separated: f32, f16, bf16); with --paged, the pools' (default f16).
    #[arg(long, value_delimiter = ',')]
    dtype: Vec<String>,
    /// Only shapes whose label contains one of these texts (comma-separated, e.g. `B1 `).
    #[arg(long, value_delimiter = ',')]
    shape: Vec<String>,
    /// With --paged: contexts to run (comma-separated; default 1024,4096,16384,32768).
    #[arg(long, value_delimiter = ',')]
    contexts: Vec<usize>,
    /// With --paged: batch sizes to run (comma-separated; default 1,4,8). With --decode:
    /// sequences decoded in lockstep, one row per batch size (default 1).
    #[arg(long, value_delimiter = ',')]
    batches: Vec<usize>,
    /// With --paged: arms to run (comma-separated v1, v2, fallback; default all three).
    #[arg(long, value_delimiter = ',')]
    arms: Vec<String>,
    /// With --paged: query/KV head counts to run, `Hq/Hkv` (comma-separated; default 32/8,
    /// e.g. 32/4 for Qwen3, 64/8 for Llama-70B).
    #[arg(long, value_delimiter = ',')]
    gqa: Vec<String>,
    /// With --paged: head dims to run (comma-separated; default 128).
    #[arg(long, value_delimiter = ',')]
    head_dims: Vec<usize>,
    /// With --paged: page sizes to run (comma-separated; default 32).
    #[arg(long, value_delimiter = ',')]
    page_sizes: Vec<usize>,
    /// With --paged: skip the v1/v2 crossover measurement.
    #[arg(long)]
    no_crossover: bool,
    /// Issue every timed launch from the host each pass instead of replaying a recorded pass
    /// (CUDA graphs): shows the host's per-launch cost where it exceeds the kernel's. With
    /// --decode: skip the graph loop.
    #[arg(long)]
    eager: bool,
    /// Decode instead: models at real shapes with synthetic 4-bit weights, a prompt then
    /// greedy decode (batch 1, or --batches); tok/s, GPU time and host gap per step, the
    /// per-kernel profile, peak memory and a CSV row per model and batch (--csv appends them).
    #[arg(long)]
    decode: bool,
    /// With --decode: the models (comma-separated): shapes with synthetic weights
    /// (llama-3.1-8b, qwen3-30b-a3b, granite-4.0-h-tiny, nemotron-3-nano-30b-a3b, tiny-llama,
    /// tiny-moe, tiny-hybrid), Llama-architecture GGUF files (a path ending in .gguf) or MLX
    /// model directories (a directory): their own weights and config.
    #[arg(long, value_delimiter = ',', default_value = "llama-3.1-8b")]
    model: Vec<String>,
    /// With --decode: run only the first N layers (default: all of the model's).
    #[arg(long)]
    layers: Option<usize>,
    /// With --decode: prompt tokens (run token by token; prefill is reported, not tuned).
    #[arg(long, default_value_t = 512)]
    prompt_tokens: usize,
    /// With --decode: greedy decode tokens timed.
    #[arg(long, default_value_t = 128)]
    decode_tokens: usize,
    /// With --decode: seed of the synthetic weights and prompt.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// With --decode: the dtype of the activations, residual stream and KV pool (f32 or bf16;
    /// a bf16 row's model gains `-bf16`).
    #[arg(long, default_value = "f32")]
    act_dtype: ActDtype,
}

fn paged(dev: &kiln::Device, a: &Args) -> anyhow::Result<()> {
    use kiln_benches::paged::{crossover, run_paged_decode, PagedBenchConfig, PagedBenchRow};
    // The same copy figure `kiln bench` compares every kernel with, in bytes per second.
    let copy = copy_gbps(dev)? * 1e9;
    if !a.no_crossover {
        let (points, from) = crossover(dev, &[512, 1024, 2048, 4096, 8192, 16384, 32768])?;
        println!("# crossover (batch 1, Hq 8, Hkv 1, D 128, f16; kernel time): context,v1_s,v2_s");
        for p in &points {
            println!("# {},{:.4e},{:.4e}", p.context, p.v1_seconds, p.v2_seconds);
        }
        println!("# v2 faster from context: {from:?}");
    }
    let mut base = PagedBenchConfig {
        issue: issue(a),
        ..PagedBenchConfig::default()
    };
    if !a.contexts.is_empty() {
        base.contexts = a.contexts.clone();
    }
    if !a.batches.is_empty() {
        base.batches = a.batches.clone();
    }
    if !a.arms.is_empty() {
        base.arms = a
            .arms
            .iter()
            .map(|s| {
                kiln::paged::DecodeArm::parse(s)
                    .ok_or_else(|| anyhow::anyhow!("unknown arm `{s}` (v1, v2 or fallback)"))
            })
            .collect::<anyhow::Result<_>>()?;
    }
    let heads: Vec<(usize, usize)> = if a.gqa.is_empty() {
        vec![(base.heads_q, base.heads_kv)]
    } else {
        a.gqa
            .iter()
            .map(|s| parse_gqa(s))
            .collect::<anyhow::Result<_>>()?
    };
    let dims = given_or(&a.head_dims, base.head_dim);
    let pages = given_or(&a.page_sizes, base.page_size);
    let dtypes: Vec<kiln::DType> = if a.dtype.is_empty() {
        vec![base.pool_dtype]
    } else {
        a.dtype
            .iter()
            .map(|s| {
                kiln::DType::parse(s)
                    .ok_or_else(|| anyhow::anyhow!("unknown pool dtype `{s}` (f32, f16 or bf16)"))
            })
            .collect::<anyhow::Result<_>>()?
    };
    println!("{}", PagedBenchRow::CSV_HEADER);
    for &(heads_q, heads_kv) in &heads {
        for &head_dim in &dims {
            for &page_size in &pages {
                for &pool_dtype in &dtypes {
                    let cfg = PagedBenchConfig {
                        heads_q,
                        heads_kv,
                        head_dim,
                        page_size,
                        pool_dtype,
                        ..base.clone()
                    };
                    run_paged_decode(dev, &cfg, copy, |r| println!("{}", r.csv(&cfg)))?;
                }
            }
        }
    }
    Ok(())
}

/// The values given on the command line, else the default alone.
fn given_or(given: &[usize], default: usize) -> Vec<usize> {
    if given.is_empty() {
        vec![default]
    } else {
        given.to_vec()
    }
}

/// `Hq/Hkv` as two head counts.
fn parse_gqa(s: &str) -> anyhow::Result<(usize, usize)> {
    let bad = || anyhow::anyhow!("--gqa takes Hq/Hkv pairs such as 32/8, not `{s}`");
    let (q, kv) = s.split_once('/').ok_or_else(bad)?;
    let q: usize = q.trim().parse().map_err(|_| bad())?;
    let kv: usize = kv.trim().parse().map_err(|_| bad())?;
    if q == 0 || kv == 0 || !q.is_multiple_of(kv) {
        return Err(bad());
    }
    Ok((q, kv))
}

fn issue(a: &Args) -> kiln::timing::Issue {
    if a.eager {
        kiln::timing::Issue::Eager
    } else {
        kiln::timing::Issue::Replayed
    }
}

fn moe(dev: &kiln::Device, a: &Args) -> anyhow::Result<()> {
    use kiln_benches::moe_block::{run_moe_blocks, MoeBlockRow, MOE_BLOCKS};
    let copy = copy_gbps(dev)?;
    let gpu = dev.l2_bytes().is_some();
    let runs = a.runs.unwrap_or(if gpu { 50 } else { 3 });
    let rotate = 2 * dev.l2_bytes().unwrap_or(0);
    let dtypes = if a.dtype.is_empty() {
        vec![kiln::DType::Bf16]
    } else {
        a.dtype
            .iter()
            .map(|s| kiln::DType::parse(s).ok_or_else(|| anyhow::anyhow!("unknown dtype `{s}`")))
            .collect::<anyhow::Result<_>>()?
    };
    let shapes: Vec<_> = MOE_BLOCKS
        .iter()
        .filter(|s| a.shape.is_empty() || a.shape.iter().any(|x| s.model.contains(x.as_str())))
        .copied()
        .collect();
    let rpbs = if a.rows_per_block.is_empty() {
        vec![8]
    } else {
        a.rows_per_block.clone()
    };
    println!("{}", MoeBlockRow::CSV_HEADER);
    for dtype in dtypes {
        for &rpb in &rpbs {
            run_moe_blocks(
                dev,
                &shapes,
                dtype,
                rpb,
                runs,
                issue(a),
                copy,
                rotate,
                |r| println!("{}", r.csv()),
            )?;
        }
    }
    Ok(())
}

fn samplers(dev: &kiln::Device, a: &Args) -> anyhow::Result<()> {
    use kiln_benches::samplers::{run_samplers, SamplerRow};
    let runs = a
        .runs
        .unwrap_or(if dev.l2_bytes().is_some() { 50 } else { 3 });
    println!("# {}", dev.name());
    println!("{}", SamplerRow::CSV_HEADER);
    let rows = run_samplers(dev, runs, issue(a), |r| println!("{}", r.csv()))?;
    if let Some(path) = &a.csv {
        let mut text = format!("{}\n", SamplerRow::CSV_HEADER);
        for r in &rows {
            text += &format!("{}\n", r.csv());
        }
        std::fs::write(path, text)?;
    }
    Ok(())
}

fn stream(dev: &kiln::Device, a: &Args) -> anyhow::Result<()> {
    use kiln::timing::{time_stream, StreamKernel};
    // 128 MiB: past any L2, and within every adapter's storage-binding limit.
    const BYTES: usize = 128 << 20;
    let runs = a.runs.unwrap_or(20);
    copy_gbps(dev)?;
    println!("kernel,checks,workgroups,median_us,gb_s");
    // One 16-byte access per thread of 256 at the top of the sweep.
    let most = (BYTES / 16 / 256) as u32;
    let mut groups = vec![];
    let mut g = 64u32;
    while g < most {
        groups.push(g);
        g *= 2;
    }
    groups.push(most);
    for kernel in StreamKernel::ALL {
        for checked in [true, false] {
            for &g in &groups {
                let Some(t) = time_stream(dev, kernel, BYTES, g, checked, runs)? else {
                    println!("# {}: no stream kernels on this backend", dev.name());
                    return Ok(());
                };
                let s = kiln_benches::median(t);
                let moved = kernel.moved(BYTES);
                println!(
                    "{},{},{g},{:.1},{:.1}",
                    kernel.name(),
                    if checked { "on" } else { "off" },
                    s * 1e6,
                    moved as f64 / s / 1e9
                );
            }
        }
    }
    Ok(())
}

/// The device's copy bandwidth in GB/s (read + write bytes of a 256 MiB device copy, median
/// of 20), printed as a comment line.
fn copy_gbps(dev: &kiln::Device) -> anyhow::Result<f64> {
    let copy = kiln_benches::CopyBandwidth::measure(dev, 256 << 20, 20)?;
    println!(
        "# {} copy: {:.1} GB/s read + write (256 MiB, median of 20)",
        dev.name(),
        copy.gbps
    );
    Ok(copy.gbps)
}

pub fn main(a: Args) -> anyhow::Result<()> {
    if let Some(BenchCmd::Compare(c)) = a.cmd {
        return crate::decode_bench::compare_main(c);
    }
    let b = kiln::Backend::parse(&a.backend)
        .ok_or_else(|| anyhow::anyhow!("unknown backend `{}`", a.backend))?;
    let dev = kiln::Device::open(b)?;
    if a.decode {
        return crate::decode_bench::decode(
            &dev,
            &DecodeSettings {
                models: a.model.clone(),
                batches: if a.batches.is_empty() {
                    vec![1]
                } else {
                    a.batches.clone()
                },
                layers: a.layers,
                prompt_tokens: a.prompt_tokens,
                decode_tokens: a.decode_tokens,
                seed: a.seed,
                graphs: !a.eager,
                csv: a.csv.clone(),
                act: a.act_dtype,
            },
        );
    }
    if a.paged {
        return paged(&dev, &a);
    }
    if a.moe {
        return moe(&dev, &a);
    }
    if a.samplers {
        return samplers(&dev, &a);
    }
    if a.stream {
        return stream(&dev, &a);
    }
    let mut opts = kiln_benches::BenchOptions::for_device(&dev);
    opts.runs = a.runs.unwrap_or(opts.runs);
    opts.kernels = crate::args::parse_kernels(a.kernel.as_deref())?;
    opts.dtypes = a
        .dtype
        .iter()
        .map(|s| kiln::DType::parse(s).ok_or_else(|| anyhow::anyhow!("unknown dtype `{s}`")))
        .collect::<anyhow::Result<_>>()?;
    opts.shapes = a.shape.clone();
    opts.issue = issue(&a);
    // The table's rows as they are measured (a long run that is cut short keeps them).
    let mut header = !a.json;
    let report = kiln_benches::run_with(&dev, &opts, |copy, row| {
        if std::mem::take(&mut header) {
            print!(
                "{}",
                kiln_benches::BenchReport::table_header(
                    &a.backend,
                    dev.name(),
                    copy,
                    opts.issue.on(&dev).name()
                )
            );
        }
        if !a.json {
            println!("{}", kiln_benches::BenchReport::table_row(row));
        }
    })?;
    if a.json {
        println!("{}", report.json());
    }
    if let Some(path) = a.csv {
        std::fs::write(&path, report.csv())?;
    }
    Ok(())
}
