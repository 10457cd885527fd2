//! Planted kernel bugs on the cpu and sim in a build whose panics abort (`--profile
//! panic-abort`): each must come back as its typed error, one per launch, with nothing printed
//! by a panic. Prints one `ok <check>: <error>` line per check; exits non-zero if one failed
//! (a panic would abort the process instead).

use kiln::debug::{run_body, Body, Views};
use kiln::launch::{default_params, launch_with_short_views, Arg};
use kiln::math::{Block, Dst, Rw, Src};
use kiln::{DType, Device, DeviceError, KernelId, PortError, Tensor};

/// Every thread reads past the end of `x`.
struct PastTheEnd;

impl Body for PastTheEnd {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let (x, out): (Src<f32>, Dst<f32>) = (v.get(0), v.get(1));
        let t = b.thread() as usize;
        out.set(t % out.len(), x.get(x.len() + t));
    }
}

/// Asks for more shared memory than the launch has.
struct TooMuchShared;

impl Body for TooMuchShared {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let out: Dst<f32> = v.get(1);
        let s: Rw<f32> = b.shared(0, 1 << 20);
        s.set(b.thread() as usize, 1.0);
        out.set(0, s.get(0));
    }
}

/// Every thread writes element 0.
struct SameElement;

impl Body for SameElement {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let out: Dst<u32> = v.get(1);
        out.set(0, b.thread());
    }
}

/// Thread 0 adds the waves' partials without waiting at a barrier for them.
struct WavePartials;

impl Body for WavePartials {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let (x, out): (Src<f32>, Dst<f32>) = (v.get(0), v.get(1));
        let t = b.thread();
        let s = b.wave_sum(x.get(t as usize));
        let waves = b.size() / B::WAVE;
        let partials: Rw<f32> = b.shared(0, waves as usize);
        if t.is_multiple_of(B::WAVE) {
            partials.set((t / B::WAVE) as usize, s);
        }
        if t == 0 {
            out.set(0, (0..waves).map(|w| partials.get(w as usize)).sum());
        }
    }
}

/// Half the block waits at a barrier the other half never reaches.
struct HalfBarrier;

impl Body for HalfBarrier {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let out: Dst<u32> = v.get(1);
        if b.thread() < b.size() / 2 {
            b.barrier();
        }
        out.set(b.thread() as usize, b.thread());
    }
}

/// A fold that assumes 32 lanes, on a narrower wave.
struct FoldFrom16;

impl Body for FoldFrom16 {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let out: Dst<u32> = v.get(1);
        out.set(b.thread() as usize, b.shuffle_xor(b.thread(), 16));
    }
}

/// Runs `body` on `dev` over two blocks of 64 threads (the cpu's are of one) with 64 bytes of
/// shared memory, a 64-element f32 `x` and a 64-element `out` of `dtype`.
fn launch(
    dev: &Device,
    name: &'static str,
    body: &impl Body,
    dtype: DType,
) -> Result<(), PortError> {
    let mut x = Tensor::from_slice(dev, &[64], &[1.0f32; 64])?;
    let mut out = Tensor::zeros(dev, dtype, &[64])?;
    let bufs: &mut [(&'static str, &mut Tensor)] = &mut [("x", &mut x), ("out", &mut out)];
    run_body(dev, name, body, [2, 1, 1], 64, 64, bufs)
}

/// `fused_add_rms_norm` with `x` shortened to one of its two rows: the second block reads past it.
fn short_view(dev: &Device) -> Result<(), PortError> {
    let (rows, dim) = (2, 64);
    let x = Tensor::from_f32(dev, DType::F32, &[rows, dim], &vec![0.5; rows * dim])?;
    let mut r = Tensor::from_f32(dev, DType::F32, &[rows, dim], &vec![0.25; rows * dim])?;
    let w = Tensor::from_f32(dev, DType::F32, &[dim], &vec![1.0; dim])?;
    let mut out = Tensor::zeros(dev, DType::F32, &[rows, dim])?;
    let k = KernelId::FusedAddRmsNorm;
    let mut args = [
        Arg::In(&x),
        Arg::Out(&mut r),
        Arg::In(&w),
        Arg::Out(&mut out),
    ];
    let lens = [dim, rows * dim, dim, rows * dim];
    launch_with_short_views(dev, k, &default_params(k), &mut args, &lens).map(|_| ())
}

/// Whether `r` is the error `want` names; prints the check's line.
fn check(name: &str, r: Result<(), PortError>, want: fn(&DeviceError) -> bool) -> bool {
    match r {
        Err(PortError::Device(e)) if want(&e) => {
            println!("ok {name}: {e}");
            true
        }
        other => {
            println!("FAILED {name}: {other:?}");
            false
        }
    }
}

fn fault(e: &DeviceError) -> bool {
    matches!(e, DeviceError::KernelFault { .. })
}

fn main() {
    let cpu = Device::cpu();
    let sim = Device::sim(8).expect("the sim opens");
    let race = |e: &DeviceError| matches!(e, DeviceError::Race { .. });
    let results = [
        check(
            "cpu out of bounds",
            launch(&cpu, "past_the_end", &PastTheEnd, DType::F32),
            fault,
        ),
        check(
            "sim out of bounds",
            launch(&sim, "past_the_end", &PastTheEnd, DType::F32),
            fault,
        ),
        check(
            "cpu shared request",
            launch(&cpu, "too_much_shared", &TooMuchShared, DType::F32),
            fault,
        ),
        check(
            "sim shared request",
            launch(&sim, "too_much_shared", &TooMuchShared, DType::F32),
            fault,
        ),
        check("cpu short view", short_view(&cpu), fault),
        check("sim short view", short_view(&sim), fault),
        check(
            "sim write race",
            launch(&sim, "same_element", &SameElement, DType::U32),
            race,
        ),
        check(
            "sim read race",
            launch(&sim, "wave_partials", &WavePartials, DType::F32),
            race,
        ),
        check(
            "sim divergence",
            launch(&sim, "half_barrier", &HalfBarrier, DType::U32),
            |e| matches!(e, DeviceError::Divergence { .. }),
        ),
        check(
            "cpu lane out of wave",
            launch(&cpu, "fold_from_16", &FoldFrom16, DType::U32),
            |e| matches!(e, DeviceError::LaneOutOfWave { .. }),
        ),
        check(
            "sim lane out of wave",
            launch(&sim, "fold_from_16", &FoldFrom16, DType::U32),
            |e| matches!(e, DeviceError::LaneOutOfWave { .. }),
        ),
    ];
    if results.contains(&false) {
        std::process::exit(1);
    }
}
