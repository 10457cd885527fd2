//! The planted wave and block assumptions, as kernel sources under
//! `tests/fixtures/planted/`: each translates to WGSL and passes naga (the translator cannot see
//! the assumption), and each fails the host check — the cpu, then the sim at waves 4, 8, 32
//! and 64, each at the blocks `kiln check` uses — with the fixture's file and line in the
//! message, and none hangs.

use kiln::debug::{run_body, Body, Views};
use kiln::math::{Access, BufferDesc, DType, Elem, ParamField, ParamKind};
use kiln::parity::sim_blocks;
use kiln::{Device, DeviceError, PortError, SimConfig, Tensor};
use std::time::{Duration, Instant};

/// The fixtures' kernel bodies, compiled as the host backends run them.
mod planted {
    use kiln::math::{Block, Dst, Element, Src};

    kiln::math::params! {
        /// Elements per row (the row kernels).
        pub struct PlantedParams { pub n: u32, }
    }

    include!("../fixtures/planted/fold_from_16.rs");
    include!("../fixtures/planted/thread_mod_32.rs");
    include!("../fixtures/planted/stride_size_over_32.rs");
}

use planted::PlantedParams;

/// Elements per row of the row kernels: more than 32, so a second group of 32 threads exists.
const N: u32 = 40;
/// Blocks (rows) per launch.
const ROWS: u32 = 3;
/// The preferred block a list entry for these kernels would declare.
const PREFERRED: u32 = 256;

#[derive(Clone, Copy, Debug)]
enum Fixture {
    FoldFrom16,
    ThreadMod32,
    StrideSizeOver32,
}

impl Fixture {
    fn name(self) -> &'static str {
        match self {
            Fixture::FoldFrom16 => "fold_from_16",
            Fixture::ThreadMod32 => "thread_mod_32",
            Fixture::StrideSizeOver32 => "stride_size_over_32",
        }
    }

    fn source(self) -> &'static str {
        match self {
            Fixture::FoldFrom16 => include_str!("../fixtures/planted/fold_from_16.rs"),
            Fixture::ThreadMod32 => include_str!("../fixtures/planted/thread_mod_32.rs"),
            Fixture::StrideSizeOver32 => include_str!("../fixtures/planted/stride_size_over_32.rs"),
        }
    }

    /// `fixtures/planted/<name>.rs:<line>:` of the line marked `// planted`.
    fn planted_site(self) -> String {
        let line = self
            .source()
            .lines()
            .position(|l| l.contains("// planted"))
            .expect("a fixture marks its planted line")
            + 1;
        format!("fixtures/planted/{}.rs:{line}:", self.name())
    }

    /// Input and output lengths for a launch of `block` threads per block.
    fn len(self, block: u32) -> usize {
        match self {
            Fixture::FoldFrom16 => (ROWS * block) as usize,
            _ => (ROWS * N) as usize,
        }
    }

    /// What a correct body writes for input `x` at `wave` lanes.
    fn expected(self, x: &[f32], wave: usize) -> Vec<f32> {
        match self {
            Fixture::FoldFrom16 => x
                .chunks(wave)
                .flat_map(|w| {
                    let s: f32 = w.iter().sum();
                    vec![s; w.len()]
                })
                .collect(),
            _ => x.iter().map(|v| 2.0 * v).collect(),
        }
    }
}

impl Body for Fixture {
    fn run<B: kiln::math::Block>(&self, b: &B, v: &Views) {
        let p = PlantedParams { n: N };
        let (x, out) = (v.get(0), v.get(1));
        match self {
            Fixture::FoldFrom16 => planted::fold_from_16::<f32, B>(b, &p, x, out),
            Fixture::ThreadMod32 => planted::thread_mod_32::<f32, B>(b, &p, x, out),
            Fixture::StrideSizeOver32 => planted::stride_size_over_32::<f32, B>(b, &p, x, out),
        }
    }
}

/// One launch of `f` on `dev` with `block` threads; `Err` holds the failure in words.
fn launch(f: Fixture, dev: &Device, block: u32) -> Result<(), String> {
    let x: Vec<f32> = (0..f.len(block)).map(|i| (i % 7) as f32).collect();
    let fail = |e: PortError| e.to_string();
    let mut xt = Tensor::from_slice(dev, &[x.len()], &x).map_err(fail)?;
    let mut out = Tensor::zeros(dev, DType::F32, &[x.len()]).map_err(fail)?;
    run_body(
        dev,
        f.name(),
        &f,
        [ROWS, 1, 1],
        block,
        0,
        &mut [("x", &mut xt), ("out", &mut out)],
    )
    .map_err(fail)?;
    let got: Vec<f32> = out.to_vec().map_err(fail)?;
    if got != f.expected(&x, dev.wave() as usize) {
        return Err("the output differs from the correct body's".into());
    }
    Ok(())
}

/// The sim at `wave` with a short watchdog (a hang costs a second, not the default 5 s).
fn sim(wave: u32) -> Device {
    Device::sim_with(SimConfig {
        watchdog: Duration::from_secs(1),
        ..SimConfig::new(wave)
    })
    .unwrap()
}

/// The host check `kiln check` runs for a listed kernel: the cpu, then every wave × block of
/// the sim; the first failure, naming where it ran.
fn check(f: Fixture) -> Result<(), String> {
    launch(f, &Device::cpu(), 1).map_err(|e| format!("cpu: {e}"))?;
    for wave in [4, 8, 32, 64] {
        let dev = sim(wave);
        for block in sim_blocks(&SimConfig::new(wave), PREFERRED) {
            launch(f, &dev, block).map_err(|e| format!("sim wave {wave} block {block}: {e}"))?;
        }
    }
    Ok(())
}

/// Asserts `f` fails the check naming its planted line, within `limit`.
fn fails_naming_its_line(f: Fixture, limit: Duration) -> String {
    let started = Instant::now();
    let e = check(f).expect_err("a planted bug must fail the check");
    eprintln!("{}: {e}", f.name());
    assert!(e.contains(&f.planted_site()), "{}: {e}", f.planted_site());
    assert!(started.elapsed() < limit, "took {:?}", started.elapsed());
    e
}

fn device_error(r: Result<(), PortError>) -> DeviceError {
    match r {
        Err(PortError::Device(e)) => e,
        other => panic!("expected a device error, got {other:?}"),
    }
}

/// `f` run once on `dev` (block `block`), its device error.
fn error_on(f: Fixture, dev: &Device, block: u32) -> DeviceError {
    let x = vec![1.0f32; f.len(block)];
    let mut xt = Tensor::from_slice(dev, &[x.len()], &x).unwrap();
    let mut out = Tensor::zeros(dev, DType::F32, &[x.len()]).unwrap();
    device_error(run_body(
        dev,
        f.name(),
        &f,
        [ROWS, 1, 1],
        block,
        0,
        &mut [("x", &mut xt), ("out", &mut out)],
    ))
}

#[test]
fn a_fold_from_16_fails_as_out_of_wave_on_the_cpu_and_at_waves_4_and_8() {
    let f = Fixture::FoldFrom16;
    let e = fails_naming_its_line(f, Duration::from_secs(20));
    assert!(
        e.starts_with("cpu: "),
        "the cpu's wave of 1 catches it first: {e}"
    );
    // A typed error, not a panic, on every host backend.
    for (dev, block) in [(Device::cpu(), 1), (sim(4), 12), (sim(8), 8)] {
        match error_on(f, &dev, block) {
            DeviceError::LaneOutOfWave {
                kernel: "fold_from_16",
                lane,
                source_lane,
                wave,
                at,
                ..
            } => {
                // Whichever lane reaches the shuffle first reports: lane ^ 16, outside the wave.
                assert_eq!(source_lane, lane ^ 16);
                assert!(source_lane >= wave, "{source_lane} in a wave of {wave}");
                assert!(at.contains(&f.planted_site()), "{at}");
            }
            e => panic!("{}: expected LaneOutOfWave, got {e}", dev.name()),
        }
    }
    // Wave 32 is what the fold assumed; at wave 64 it sums 32-lane halves only.
    launch(f, &sim(32), 96).unwrap();
    assert!(launch(f, &sim(64), 64).is_err());
}

#[test]
fn thread_mod_32_fails_as_a_race_at_blocks_over_32() {
    let f = Fixture::ThreadMod32;
    let e = fails_naming_its_line(f, Duration::from_secs(20));
    assert!(e.contains("race"), "{e}");
    // Blocks of at most 32 threads hide it; the cpu's block of 1 too.
    launch(f, &Device::cpu(), 1).unwrap();
    launch(f, &sim(8), 24).unwrap();
    match error_on(f, &sim(8), 256) {
        DeviceError::Race { detail, .. } => {
            assert!(detail.contains(&f.planted_site()), "{detail}")
        }
        e => panic!("expected Race, got {e}"),
    }
}

#[test]
fn a_stride_of_size_over_32_is_stopped_by_the_watchdog_instead_of_hanging() {
    let f = Fixture::StrideSizeOver32;
    // The cpu's block of 1 strides by 0: its watchdog (default 5 s) stops it.
    let e = fails_naming_its_line(f, Duration::from_secs(30));
    assert!(e.contains("no progress after"), "{e}");
    // The sim strides by 0 below 32 threads (the watchdog) and overlaps above (a race).
    match error_on(f, &sim(4), 12) {
        DeviceError::KernelFault { detail, .. } => {
            assert!(detail.contains("no progress after 1 s"), "{detail}");
            // Where the thread was when the watchdog looked: a line of the loop.
            assert!(detail.contains("stride_size_over_32.rs:"), "{detail}");
        }
        e => panic!("expected KernelFault, got {e}"),
    }
    match error_on(f, &sim(32), 256) {
        DeviceError::Race { detail, .. } => {
            assert!(detail.contains("stride_size_over_32.rs"), "{detail}")
        }
        e => panic!("expected Race, got {e}"),
    }
}

/// The fixtures' list entry for the translator: `(x: Src<T>, out: Dst<T>)`, params `n`.
fn spec(f: Fixture) -> kiln_shaders_wgsl::KernelSpec {
    kiln_shaders_wgsl::KernelSpec {
        name: f.name(),
        dtypes: &[DType::F32],
        buffers: &[
            BufferDesc {
                name: "x",
                access: Access::Read,
                elem: Elem::Kernel,
            },
            BufferDesc {
                name: "out",
                access: Access::Write,
                elem: Elem::Kernel,
            },
        ],
        params: &[ParamField {
            name: "n",
            kind: ParamKind::U32,
            user: false,
            doc: "",
        }],
    }
}

#[test]
fn the_planted_kernels_are_in_the_wgsl_subset_so_only_the_host_check_catches_them() {
    let dir = std::path::Path::new(kiln_shaders_wgsl::KILN_MATH_SRC);
    for f in [
        Fixture::FoldFrom16,
        Fixture::ThreadMod32,
        Fixture::StrideSizeOver32,
    ] {
        let mut texts = Vec::new();
        for file in ["block.rs", "element.rs", "view.rs", "kernel.rs", "lib.rs"] {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            texts.push((format!("shared-kernel-math/src/{file}"), text));
        }
        let kernel = format!(
            "use crate::{{Block, Dst, Element, Src}};\n\
             crate::params! {{ pub struct PlantedParams {{ pub n: u32, }} }}\n{}",
            f.source()
        );
        texts.push((
            format!("shared-kernel-math/src/kernels/{}.rs", f.name()),
            kernel,
        ));
        let src = kiln_shaders_wgsl::Sources::from_texts(
            texts.iter().map(|(a, b)| (a.as_str(), b.as_str())),
        )
        .unwrap();
        for v in kiln_shaders_wgsl::Variant::ALL {
            let m = kiln_shaders_wgsl::translate(&src, &spec(f), DType::F32, v)
                .unwrap_or_else(|e| panic!("{e}"));
            kiln_shaders_wgsl::validate(&m).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
