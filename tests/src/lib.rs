//! Helpers shared by kiln's test files.

use kiln::{Backend, DType, Device, KernelId, PortError, Tensor};

pub mod ggml;
pub mod moe_layer;
pub mod stats;

/// Backends `KILN_REQUIRE_BACKENDS` (comma-separated) demands; an absent one fails the run.
pub fn required_backends() -> Vec<Backend> {
    std::env::var("KILN_REQUIRE_BACKENDS")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            Backend::parse(s.trim())
                .unwrap_or_else(|| panic!("KILN_REQUIRE_BACKENDS names unknown backend `{s}`"))
        })
        .collect()
}

/// The devices to test: every backend that opens here (the sim at waves 4, 8, 32, 64). Absent
/// backends are reported as skipped by name, and fail the run when `KILN_REQUIRE_BACKENDS`
/// names them.
pub fn test_devices() -> Vec<Device> {
    let (devs, skipped) = kiln::parity::devices_for(&Backend::ALL);
    let required = required_backends();
    for (b, why) in &skipped {
        assert!(
            !required.contains(b),
            "required backend {b} is absent: {why}"
        );
        eprintln!("skipped backend {b}: {why}");
    }
    devs
}

/// The devices of the bitwise-invariance tests: every backend present but the default sims,
/// and the sim at each wave with a block of a few waves that is not a power of two (its waves
/// take a block's rows in turns): the sim's one thread per lane makes the default 256-thread
/// blocks slow to run many times.
pub fn ragged_sim_devices() -> Vec<Device> {
    let mut devices: Vec<Device> = test_devices()
        .into_iter()
        .filter(|d| d.backend() != Backend::Sim)
        .collect();
    for (wave, block) in [(4, 12), (8, 24), (32, 96), (64, 192)] {
        let cfg = kiln::SimConfig {
            block: Some(block),
            ..kiln::SimConfig::new(wave)
        };
        devices.push(Device::sim_with(cfg).unwrap());
    }
    devices
}

/// The seed for a test: `KILN_SEED` or fresh, printed so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let s = kiln::parity::base_seed();
    eprintln!("{test}: seed {s} (replay with KILN_SEED={s})");
    s
}

/// The kernels a parity run covers on `dev`: all of them, except that a software Vulkan
/// (lavapipe, whose LLVM spends over a minute per qlinear module and ~8 s per MoE gate/up
/// module) runs `qlinear_4bit` for its five siblings and the 4-bit MoE gate/up and fc1 for
/// their 8-bit ones (one body each, the bit width a constant); they run on every other backend
/// and on every hardware wgpu device.
pub fn parity_kernels(dev: &Device) -> Vec<kiln::KernelId> {
    use kiln::KernelId;
    let software = dev.gpu().is_some_and(|g| g.is_software());
    let sibling = |k: KernelId| {
        (k.name().starts_with("qlinear_") && k != KernelId::QLinear4Bit)
            || k == KernelId::MoeGateup8Bit
            || k == KernelId::MoeFc1Relu28Bit
    };
    KernelId::ALL
        .iter()
        .copied()
        .filter(|&k| !software || !sibling(k))
        .collect()
}

/// What an output holds before a launch: every element must be overwritten, or left alone on a
/// refusal. Exact in f16 and bf16, so a 16-bit output left unwritten still reads as poison.
pub const POISON: f32 = -12288.0;

/// A `dtype` tensor of `shape` on `dev` holding [`POISON`] everywhere.
pub fn poisoned(dev: &Device, dtype: DType, shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_f32(dev, dtype, shape, &vec![POISON; n]).unwrap()
}

/// Expects an invalid-input refusal (a typed error, printed), naming the case `what`.
pub fn assert_invalid<T: std::fmt::Debug>(r: Result<T, PortError>, what: &str) {
    match r {
        Err(e) if e.is_invalid_input() => eprintln!("{what}: refused: {e}"),
        other => panic!("{what}: expected an invalid-input refusal, got {other:?}"),
    }
}

/// Whether every element of `t` still holds [`POISON`].
pub fn untouched(t: &Tensor) -> bool {
    t.to_f32_vec().unwrap().iter().all(|&v| v == POISON)
}

/// Expects an invalid-input refusal that leaves every one of `outs` still poisoned.
pub fn refused(what: &str, outs: &[&Tensor], r: Result<kiln::Ran, PortError>) {
    assert_invalid(r, what);
    for t in outs {
        assert!(untouched(t), "{what}: a refused launch wrote an output");
    }
}

/// Paged attention's kernels: tests/paged.rs runs their parity matrix (counted) on
/// [`test_devices`], so the every-kernel parity test leaves them out.
pub const PAGED_KERNELS: [KernelId; 3] = [
    KernelId::PagedAttentionDecode,
    KernelId::PagedAttentionDecodeV2Partial,
    KernelId::PagedAttentionMergeStates,
];

/// The wgpu device, or `None` (skipped, by name) when absent and not required.
pub fn wgpu_device() -> Option<Device> {
    match Device::open(Backend::Wgpu) {
        Ok(d) => Some(d),
        Err(e) => {
            assert!(
                !required_backends().contains(&Backend::Wgpu),
                "required backend wgpu is absent: {e}"
            );
            eprintln!("skipped backend wgpu: {e}");
            None
        }
    }
}

/// The devices `dev`'s share of a parity run is spread over: `dev`, and on a software adapter
/// (a wgpu one: lavapipe builds each module's LLVM on its queue's one thread, so one device
/// leaves the other cores idle for most of a run) one more device from `open` per further core.
pub fn workers(dev: &Device, open: impl Fn() -> Result<Device, PortError>) -> Vec<Device> {
    let mut out = vec![dev.clone()];
    if dev.gpu().is_some_and(|g| g.is_software()) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for _ in 1..cores {
            match open() {
                Ok(d) => out.push(d),
                Err(e) => {
                    eprintln!("a further {} device did not open: {e}", dev.name());
                    break;
                }
            }
        }
    }
    out
}

/// [`run_pairs_where`](kiln::parity::run_pairs_where) with the pairs spread over `workers`
/// (devices of one backend, each taking the next pair in its own thread); the outcomes come
/// back in pair order, each case with the seed a single device would give it. The workers are
/// GPUs, so no sim block plan applies.
pub fn run_pairs_spread(
    workers: &[Device],
    pairs: &[(KernelId, DType)],
    seed: u64,
    keep: &(dyn Fn(usize, usize) -> bool + Sync),
) -> Vec<kiln::parity::Outcome> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, Vec<kiln::parity::Outcome>)> = std::thread::scope(|s| {
        let threads: Vec<_> = workers
            .iter()
            .map(|w| {
                let next = &next;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(pair) = pairs.get(i) else { break };
                        let one = std::slice::from_ref(w);
                        let ran = kiln::parity::run_pairs_where(
                            one,
                            std::slice::from_ref(pair),
                            seed,
                            kiln::parity::SimBlocks::Rotate,
                            keep,
                        );
                        mine.push((i, ran));
                    }
                    mine
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().expect("a parity worker panicked"))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().flat_map(|(_, o)| o).collect()
}

/// The parity matrix of `devs`: every device but the sims in its own thread over its
/// [`workers`], running the pairs `pairs` gives it, beside `on_sims(sims)` on the caller's
/// thread; the devices' outcomes in device order, then the sims'.
pub fn run_beside_sims(
    devs: &[Device],
    pairs: &(dyn Fn(&Device) -> Vec<(KernelId, DType)> + Sync),
    seed: u64,
    on_sims: impl FnOnce(&[Device]) -> Vec<kiln::parity::Outcome>,
) -> Vec<kiln::parity::Outcome> {
    let (sims, others): (Vec<_>, Vec<_>) = devs
        .iter()
        .cloned()
        .partition(|d| d.backend() == Backend::Sim);
    std::thread::scope(|s| {
        let threads: Vec<_> = others
            .iter()
            .map(|dev| {
                s.spawn(move || {
                    // `Device::open` returns the process's one device; a worker is a new one.
                    let open = || kiln::wgpu::open_with(kiln::wgpu::Options::from_env());
                    run_pairs_spread(&workers(dev, open), &pairs(dev), seed, &|_, _| true)
                })
            })
            .collect();
        let ran = on_sims(&sims);
        let mut all: Vec<_> = threads
            .into_iter()
            .flat_map(|t| t.join().expect("a device's parity thread panicked"))
            .collect();
        all.extend(ran);
        all
    })
}
