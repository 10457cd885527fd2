//! The sim catches planted bugs, each asserted by error kind, with a correct control beside it
//! so every test can also pass.

use kiln::debug::{run_body, Body, Views};
use kiln::math::{Block, Dst, Rw, Src};
use kiln::{DType, Device, DeviceError, PortError, SimConfig, Tensor};
use std::time::Duration;

fn sim(wave: u32) -> Device {
    Device::sim(wave).unwrap()
}

fn device_error(r: Result<(), PortError>) -> DeviceError {
    match r {
        Err(PortError::Device(e)) => e,
        other => panic!("expected a device error, got {other:?}"),
    }
}

/// Per-wave sums of `x` into `out[wave]`, with a fold that hard-codes a 32-lane warp (planted)
/// or folds from `B::WAVE / 2` (correct).
struct WaveSums {
    fold_from_16: bool,
}

impl Body for WaveSums {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let (x, out): (Src<f32>, Dst<f32>) = (v.get(0), v.get(1));
        let mut s = x.get((b.block_x() * b.size() + b.thread()) as usize);
        if self.fold_from_16 {
            let mut m = 16;
            while m > 0 {
                s += f32::from_bits(b.shuffle_xor(s.to_bits(), m));
                m /= 2;
            }
        } else {
            s = b.wave_sum(s);
        }
        if b.lane() == 0 {
            out.set((b.block_x() * b.waves() + b.wave_id()) as usize, s);
        }
    }
}

fn wave_sums(wave: u32, fold_from_16: bool) -> Result<Vec<f32>, PortError> {
    let dev = sim(wave);
    let block = 128;
    let x: Vec<f32> = (0..2 * block).map(|i| (i % 7) as f32).collect();
    let mut xt = Tensor::from_slice(&dev, &[x.len()], &x)?;
    let mut out = Tensor::zeros(&dev, DType::F32, &[x.len() / wave as usize])?;
    run_body(
        &dev,
        "wave_sums",
        &WaveSums { fold_from_16 },
        [2, 1, 1],
        block,
        0,
        &mut [("x", &mut xt), ("out", &mut out)],
    )?;
    out.to_vec()
}

fn expected_wave_sums(wave: usize) -> Vec<f32> {
    let x: Vec<f32> = (0..256).map(|i| (i % 7) as f32).collect();
    x.chunks(wave).map(|c| c.iter().sum()).collect()
}

#[test]
fn a_fold_from_lane_16_is_wrong_at_wave_64_and_out_of_wave_at_wave_8() {
    // At wave 32 the planted fold happens to be right, which is why it ships.
    assert_eq!(wave_sums(32, true).unwrap(), expected_wave_sums(32));
    // At wave 64 it sums only 32-lane halves: the parity check catches the wrong answer.
    let got = wave_sums(64, true).unwrap();
    assert_ne!(
        got,
        expected_wave_sums(64),
        "the planted fold must give wrong sums at wave 64"
    );
    // At wave 8 it shuffles with lanes that do not exist: the sim reports it.
    match device_error(wave_sums(8, true).map(|_| ())) {
        DeviceError::LaneOutOfWave {
            wave: 8,
            source_lane,
            at,
            ..
        } => {
            assert!(source_lane >= 8);
            // The shuffle's own line in this file, not the sim's.
            assert!(at.contains("sim_debugger.rs"), "{at}");
        }
        e => panic!("expected LaneOutOfWave, got {e}"),
    }
    // The fold from WAVE / 2 is right at every wave.
    for w in [4, 8, 32, 64] {
        assert_eq!(
            wave_sums(w, false).unwrap(),
            expected_wave_sums(w as usize),
            "wave {w}"
        );
    }
}

#[test]
fn a_fold_from_lane_16_is_out_of_wave_on_the_cpu_naming_its_line() {
    // The cpu's block is one lane: any shuffle mask is outside the wave.
    let dev = Device::cpu();
    let x: Vec<f32> = (0..256).map(|i| (i % 7) as f32).collect();
    let run = |planted: bool| -> Result<Vec<f32>, PortError> {
        let mut xt = Tensor::from_slice(&dev, &[256], &x)?;
        let mut out = Tensor::zeros(&dev, DType::F32, &[256])?;
        run_body(
            &dev,
            "wave_sums",
            &WaveSums {
                fold_from_16: planted,
            },
            [256, 1, 1],
            1,
            0,
            &mut [("x", &mut xt), ("out", &mut out)],
        )?;
        out.to_vec()
    };
    match device_error(run(true).map(|_| ())) {
        DeviceError::LaneOutOfWave {
            kernel: "wave_sums",
            wave: 1,
            source_lane: 16,
            at,
            ..
        } => assert!(at.contains("sim_debugger.rs"), "{at}"),
        e => panic!("expected LaneOutOfWave, got {e}"),
    }
    assert_eq!(run(false).unwrap(), x);
}

/// A barrier only half the block reaches (planted) or all of it (correct).
struct HalfBarrier {
    planted: bool,
}

impl Body for HalfBarrier {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let out: Dst<u32> = v.get(0);
        if !self.planted || b.thread() < b.size() / 2 {
            b.barrier();
        }
        out.set(b.thread() as usize, b.thread());
    }
}

fn half_barrier(planted: bool, cfg: SimConfig) -> Result<(), PortError> {
    let dev = Device::sim_with(cfg)?;
    let mut out = Tensor::zeros(&dev, DType::U32, &[64])?;
    run_body(
        &dev,
        "half_barrier",
        &HalfBarrier { planted },
        [1, 1, 1],
        64,
        0,
        &mut [("out", &mut out)],
    )
}

#[test]
fn a_barrier_inside_a_branch_is_reported_as_divergence() {
    half_barrier(false, SimConfig::new(8)).unwrap();
    match device_error(half_barrier(true, SimConfig::new(8))) {
        DeviceError::Divergence {
            kernel: "half_barrier",
            block: [0, 0, 0],
            detail,
        } => {
            assert!(
                detail.contains("sim_debugger.rs"),
                "the report names the barrier's site: {detail}"
            )
        }
        e => panic!("expected Divergence, got {e}"),
    }
}

/// Half the block waits at a barrier while the other half works longer than the timeout.
struct SlowHalf;

impl Body for SlowHalf {
    fn run<B: Block>(&self, b: &B, _v: &Views) {
        if b.thread() >= b.size() / 2 {
            std::thread::sleep(Duration::from_millis(1500));
        }
        b.barrier();
    }
}

#[test]
fn a_barrier_wait_longer_than_the_timeout_is_reported() {
    let mut cfg = SimConfig::new(4);
    cfg.timeout = Duration::from_millis(200);
    let dev = Device::sim_with(cfg).unwrap();
    match device_error(run_body(
        &dev,
        "slow_half",
        &SlowHalf,
        [1, 1, 1],
        8,
        0,
        &mut [],
    )) {
        DeviceError::Divergence { detail, .. } => {
            assert!(detail.contains("never arrived"), "{detail}")
        }
        e => panic!("expected Divergence, got {e}"),
    }
}

/// Every thread writes element 0 (planted) or its own element (correct).
struct SameElement {
    planted: bool,
}

impl Body for SameElement {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let out: Dst<u32> = v.get(0);
        let i = if self.planted { 0 } else { b.thread() as usize };
        out.set(i, b.thread());
    }
}

fn same_element(planted: bool) -> Result<(), PortError> {
    let dev = sim(4);
    let mut out = Tensor::zeros(&dev, DType::U32, &[16])?;
    run_body(
        &dev,
        "same_element",
        &SameElement { planted },
        [1, 1, 1],
        16,
        0,
        &mut [("out", &mut out)],
    )
}

#[test]
fn two_threads_writing_one_element_between_barriers_is_a_race() {
    same_element(false).unwrap();
    match device_error(same_element(true)) {
        DeviceError::Race {
            kernel: "same_element",
            detail,
            ..
        } => {
            assert!(
                detail.contains("`out` byte 0"),
                "the report names the buffer: {detail}"
            )
        }
        e => panic!("expected Race, got {e}"),
    }
}

/// Threads publish into shared memory and read a neighbour's slot, with or without a barrier.
struct Neighbour {
    barrier: bool,
}

impl Body for Neighbour {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let out: Dst<u32> = v.get(0);
        let s: Rw<u32> = b.shared(0, b.size() as usize);
        s.set(b.thread() as usize, b.thread() * 3);
        if self.barrier {
            b.barrier();
        }
        out.set(
            b.thread() as usize,
            s.get(((b.thread() + 1) % b.size()) as usize),
        );
    }
}

#[test]
fn reading_a_neighbours_shared_write_without_a_barrier_is_a_race() {
    let dev = sim(8);
    let mut out = Tensor::zeros(&dev, DType::U32, &[32]).unwrap();
    run_body(
        &dev,
        "neighbour",
        &Neighbour { barrier: true },
        [1, 1, 1],
        32,
        128,
        &mut [("out", &mut out)],
    )
    .unwrap();
    let want: Vec<u32> = (0..32).map(|t| ((t + 1) % 32) * 3).collect();
    assert_eq!(out.to_vec::<u32>().unwrap(), want);
    let r = run_body(
        &dev,
        "neighbour",
        &Neighbour { barrier: false },
        [1, 1, 1],
        32,
        128,
        &mut [("out", &mut out)],
    );
    assert!(matches!(device_error(r), DeviceError::Race { .. }));
}

/// Each wave's lane 0 publishes its wave's sum in shared memory and thread 0 adds the
/// partials, after a barrier (correct) or without one (planted: it may read a slot before the
/// slot's wave writes it, which the detector sees only if it records reads).
struct WavePartials {
    barrier: bool,
}

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
        if self.barrier {
            b.barrier();
        }
        if t == 0 {
            out.set(0, (0..waves).map(|w| partials.get(w as usize)).sum());
        }
    }
}

fn wave_partials(barrier: bool, x: &[f32]) -> Result<f32, PortError> {
    let dev = sim(8);
    let mut xt = Tensor::from_slice(&dev, &[x.len()], x)?;
    let mut out = Tensor::zeros(&dev, DType::F32, &[1])?;
    run_body(
        &dev,
        "wave_partials",
        &WavePartials { barrier },
        [1, 1, 1],
        x.len() as u32,
        64,
        &mut [("x", &mut xt), ("out", &mut out)],
    )?;
    Ok(out.to_vec::<f32>()?[0])
}

#[test]
fn reading_other_waves_partials_without_a_barrier_is_a_race_in_every_run() {
    let seed = kiln_tests::seed("wave partials");
    let mut rng = kiln::rng::Rng::new(seed);
    for run in 0..20 {
        // Small integers: the sum is exact in any order.
        let x: Vec<f32> = (0..32)
            .map(|_| (rng.next_u64() % 17) as f32 - 8.0)
            .collect();
        let want: f32 = x.iter().sum();
        assert_eq!(
            wave_partials(true, &x).unwrap(),
            want,
            "seed {seed} run {run}"
        );
        match device_error(wave_partials(false, &x).map(|_| ())) {
            DeviceError::Race { detail, .. } => assert!(
                detail.contains("shared memory byte") && detail.contains("since the last barrier"),
                "seed {seed} run {run}: {detail}"
            ),
            e => panic!("seed {seed} run {run}: expected Race, got {e}"),
        }
    }
}

/// Reads one past the end of its input.
struct PastTheEnd;

impl Body for PastTheEnd {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let (x, out): (Src<f32>, Dst<f32>) = (v.get(0), v.get(1));
        if b.thread() == 0 {
            out.set(0, x.get(x.len()));
        }
    }
}

#[test]
fn an_out_of_bounds_access_is_a_kernel_fault_on_cpu_and_sim() {
    for dev in [Device::cpu(), sim(8)] {
        let mut x = Tensor::from_slice(&dev, &[4], &[1.0f32; 4]).unwrap();
        let mut out = Tensor::zeros(&dev, DType::F32, &[1]).unwrap();
        let r = run_body(
            &dev,
            "past_the_end",
            &PastTheEnd,
            [3, 1, 1],
            8,
            0,
            &mut [("x", &mut x), ("out", &mut out)],
        );
        match device_error(r) {
            DeviceError::KernelFault {
                kernel: "past_the_end",
                detail: message,
                ..
            } => {
                assert!(message.contains("out of bounds"), "{message}")
            }
            e => panic!("expected KernelFault on {}, got {e}", dev.name()),
        }
    }
}

/// Block-wide collectives agree with a serial computation at every wave and block size.
struct Collectives;

impl Body for Collectives {
    fn run<B: Block>(&self, b: &B, v: &Views) {
        let (x, out): (Src<f32>, Dst<f32>) = (v.get(0), v.get(1));
        let t = b.thread() as usize;
        let val = x.get(t);
        let s = b.sum(val);
        let m = b.max(val);
        let (am, ai) = b.argmax(val, t as u32);
        if t == 0 {
            out.set(0, s);
            out.set(1, m);
            out.set(2, am);
            out.set(3, ai as f32);
        }
    }
}

#[test]
fn block_collectives_match_a_serial_fold_at_every_wave() {
    for (wave, block) in [(4, 4), (4, 64), (8, 24), (32, 96), (64, 128), (16, 256)] {
        let dev = sim(wave);
        // Small integers: sums are exact in any order. The max appears twice; the argmax is the first.
        let x: Vec<f32> = (0..block)
            .map(|i| ((i * 37 + 11) % 97) as f32 - 40.0)
            .collect();
        let max = x.iter().cloned().fold(f32::MIN, f32::max);
        let first = x.iter().position(|&v| v == max).unwrap();
        let mut x2 = x.clone();
        x2[block - 1] = max;
        let mut xt = Tensor::from_slice(&dev, &[block], &x2).unwrap();
        let mut out = Tensor::zeros(&dev, DType::F32, &[4]).unwrap();
        run_body(
            &dev,
            "collectives",
            &Collectives,
            [1, 1, 1],
            block as u32,
            0,
            &mut [("x", &mut xt), ("out", &mut out)],
        )
        .unwrap();
        let got = out.to_vec::<f32>().unwrap();
        assert_eq!(
            got,
            vec![x2.iter().sum(), max, max, first as f32],
            "wave {wave} block {block}"
        );
    }
}
