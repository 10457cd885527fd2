//! The precise libm functions of the WGSL prelude (`shaders-wgsl/src/libm_wgsl.rs`) as
//! translated WGSL, compiled by the driver of the adapter kiln opens (lavapipe in CI, Vulkan on
//! the H200: device compilers fold and fuse, so the functions are tested as the driver compiles
//! them) and run through a one-kernel probe module: every function within the bound the host
//! meets (per element, in ulps against f64, the sweeps of `shaders-wgsl/tests/accuracy`, one
//! summary line per function) and expm1f bit for bit the `libm` crate's, exp2f bit for bit
//! against the correctly rounded reference, sinf/cosf of every RoPE angle up to position
//! 131071 against f64. In `kiln-tests` so `cargo xtask device-bundle` ships it.

// The sweep table, the probe's source and the exp2 reference live beside the functions (the
// host test `shaders-wgsl/tests/libm.rs` holds the Rust to the same table).
#[path = "../../shaders-wgsl/tests/accuracy/mod.rs"]
mod accuracy;
#[path = "../../shaders-wgsl/tests/probe_source/mod.rs"]
mod probe_source;
#[path = "../../shaders-wgsl/tests/reference/mod.rs"]
mod reference;

use accuracy::{sweeps, Func, Rng};
use kiln::wgpu::api as wgpu;
use kiln::Backend;
use kiln_math::DType;
use kiln_shaders_wgsl::libm_wgsl as m;
use kiln_shaders_wgsl::{translate, Variant};
use kiln_tests::seed;
use probe_source::PROBE;

/// The probe for `expr` (of the input `v`), or `None`, said by name, when this machine has no
/// adapter and `KILN_REQUIRE_BACKENDS` does not name wgpu.
fn probe(expr: &str) -> Option<Probe> {
    probe_body(&format!(
        "    let i = (b.block_x() * b.size() + b.thread()) as usize;\n    \
         if i < p.n as usize {{ let v = x.get(i).to_f32(); out.set(i, T::from_f32({expr})); }}"
    ))
}

/// The probe running `body` (the kernel's statements), or `None` as for [`probe`].
fn probe_body(body: &str) -> Option<Probe> {
    let p = Probe::new(body);
    if p.is_none() {
        assert!(
            !kiln_tests::required_backends().contains(&Backend::Wgpu),
            "required backend wgpu is absent: no Vulkan, Metal or DX12 adapter"
        );
        eprintln!("skipped backend wgpu: no Vulkan, Metal or DX12 adapter");
    }
    p
}

/// A wgpu device and the probe's pipeline (the workgroup-memory, packed-f16 variant: it needs
/// no adapter feature).
struct Probe {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
    adapter: String,
}

const BLOCK: u32 = 64;

impl Probe {
    /// `None` when this machine has no Vulkan/Metal/DX12 adapter.
    fn new(body: &str) -> Option<Probe> {
        let src = probe_source::with_probe(body);
        let m = translate(
            &src,
            &PROBE,
            DType::F32,
            Variant {
                subgroups: false,
                f16_storage: false,
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        // The adapter kiln's wgpu backend opens (engine/src/wgpu/device.rs).
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .ok()?;
        let name = adapter.get_info().name;
        let (device, queue) =
            pollster::block_on(adapter.request_device(&Default::default())).unwrap();
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("probe"),
            source: wgpu::ShaderSource::Wgsl(m.wgsl.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("probe"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[("KILN_BLOCK", BLOCK as f64), ("KILN_WAVE", BLOCK as f64)],
                zero_initialize_workgroup_memory: true,
            },
            cache: None,
        });
        Some(Probe {
            device,
            queue,
            pipeline,
            adapter: name,
        })
    }

    fn storage(&self, bytes: &[u8], extra: wgpu::BufferUsages) -> wgpu::Buffer {
        let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes.len().max(4) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | extra,
            mapped_at_creation: false,
        });
        self.queue.write_buffer(&buf, 0, bytes);
        buf
    }

    /// `f(x)` for every input, computed on the device.
    fn run(&self, xs: &[f32]) -> Vec<f32> {
        self.run_with(xs, xs.len())
    }

    /// `n` results of the probe over the input `xs` (its `p.n` is `n`).
    fn run_with(&self, xs: &[f32], n: usize) -> Vec<f32> {
        let bytes = |w: &[u32]| w.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
        let input = self.storage(
            &bytes(&xs.iter().map(|v| v.to_bits()).collect::<Vec<_>>()),
            wgpu::BufferUsages::empty(),
        );
        let out = self.storage(&vec![0xffu8; n * 4], wgpu::BufferUsages::COPY_SRC);
        let blocks = (n as u32).div_ceil(BLOCK);
        // params (n, scale), then (offset, len) per buffer, then the grid.
        let meta = self.storage(
            &bytes(&[
                n as u32,
                1f32.to_bits(),
                0,
                xs.len() as u32,
                0,
                n as u32,
                blocks,
                1,
                1,
            ]),
            wgpu::BufferUsages::empty(),
        );
        let fault = self.storage(&[0u8; 24], wgpu::BufferUsages::COPY_SRC);
        let layout = self.pipeline.get_bind_group_layout(0);
        let bind = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &[&input, &out, &meta, &fault]
                .iter()
                .enumerate()
                .map(|(k, b)| wgpu::BindGroupEntry {
                    binding: k as u32,
                    resource: b.as_entire_binding(),
                })
                .collect::<Vec<_>>(),
        });
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: (n * 4 + 24) as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &bind, &[]);
            let x = blocks.min(65535);
            pass.dispatch_workgroups(x, blocks.div_ceil(x), 1);
        }
        enc.copy_buffer_to_buffer(&out, 0, &staging, 0, (n * 4) as u64);
        enc.copy_buffer_to_buffer(&fault, 0, &staging, (n * 4) as u64, 24);
        self.queue.submit([enc.finish()]);
        let slice = staging.slice(..);
        slice.map_async(wgpu::MapMode::Read, |r| r.unwrap());
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
        let data = slice.get_mapped_range().unwrap().to_vec();
        let words: Vec<u32> = data
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(words[n], 0, "the probe faulted: {:?}", &words[n..]);
        words[..n].iter().map(|&w| f32::from_bits(w)).collect()
    }
}

/// Random inputs per sweep (plus each sweep's edge cases): 34 sweeps in one dispatch.
const PER_SWEEP: usize = 16_384;

/// Whether the adapter flushes subnormals (Vulkan's float controls allow it unless the
/// shader asks to preserve them): a subnormal times 0.75 comes back zero.
fn flushes_subnormals() -> bool {
    let tiny = f32::from_bits(0x0040_0000);
    let flushes = probe("v * 0.75").is_some_and(|p| p.run(&[tiny])[0] == 0.0);
    eprintln!("adapter flushes subnormals: {flushes}");
    flushes
}

/// Every precise function of `libm_wgsl`, translated and compiled by the adapter's driver (one
/// module: the function is chosen per element), over the sweeps of `accuracy` — the ranges,
/// edge cases and bounds the host test holds the Rust to — per element in ulps against f64,
/// and expm1f bit for bit the `libm` crate's.
#[test]
fn every_function_is_within_its_host_bound_on_the_device() {
    // Element i reads (function index, a, b) at x[3i..3i+3].
    let mut body = String::from(
        "    let i = (b.block_x() * b.size() + b.thread()) as usize;\n    \
         if i < p.n as usize {\n        \
         let f = x.get(3 * i).to_f32() as u32;\n        \
         let a = x.get(3 * i + 1).to_f32();\n        \
         let c = x.get(3 * i + 2).to_f32();\n        \
         let mut y: f32 = 0.0;\n",
    );
    for (k, f) in Func::ALL.iter().enumerate() {
        let args = if f.arity() == 2 { "a, c" } else { "a" };
        body += &format!(
            "        if f == {k} {{ y = libm::{}({args}); }}\n",
            f.name()
        );
    }
    body += "        out.set(i, T::from_f32(y));\n    }";
    let Some(p) = probe_body(&body) else {
        return;
    };
    let mut rng = Rng(seed("wgsl_libm"));
    let sweeps = sweeps();
    let inputs: Vec<Vec<(f32, f32)>> = sweeps
        .iter()
        .map(|s| s.inputs(&mut rng, PER_SWEEP))
        .collect();
    let mut words = Vec::new();
    for (s, ins) in sweeps.iter().zip(&inputs) {
        let k = Func::ALL.iter().position(|&f| f == s.func).unwrap() as f32;
        for &(a, b) in ins {
            words.extend([k, a, b]);
        }
    }
    let got = p.run_with(&words, words.len() / 3);
    let flushes = flushes_subnormals();
    eprintln!(
        "{}: {} inputs, per element against f64\n{:<10} {:<24} {:>10} {:>6}  worst input",
        p.adapter,
        got.len(),
        "function",
        "input range",
        "max ulp",
        "bound"
    );
    let mut at = 0;
    // Per function: its worst error and the sweep and input it came from.
    let mut worst: Vec<(Func, f64, String)> = Vec::new();
    let mut failed = Vec::new();
    for (s, ins) in sweeps.iter().zip(&inputs) {
        let o = s.check_flushing(ins, &got[at..at + ins.len()], flushes);
        if o.flushed > 0 {
            eprintln!(
                "{}: {} elements as the function of flushed subnormals",
                s.label(),
                o.flushed
            );
        }
        at += ins.len();
        let range = format!("[{:e}, {:e}]", s.lo, s.hi);
        let x = if s.func.arity() == 2 {
            format!("({:e}, {:e})", o.at.0, o.at.1)
        } else {
            format!("{:e} ({:#010x})", o.at.0, o.at.0.to_bits())
        };
        eprintln!(
            "{:<10} {range:<24} {:>10.3} {:>6}  {x}",
            s.func.name(),
            o.worst,
            s.max_ulps
        );
        let this = format!("{:.3} ulp at {x} on {range}", o.worst);
        match worst.iter_mut().find(|(f, _, _)| *f == s.func) {
            Some((_, w, what)) if o.worst.is_nan() || o.worst > *w => (*w, *what) = (o.worst, this),
            Some(_) => {}
            None => worst.push((s.func, o.worst, this)),
        }
        if o.count > 0 {
            failed.push(format!(
                "{}: {} inputs\n  {}",
                s.label(),
                o.count,
                o.failures.join("\n  ")
            ));
        }
    }
    eprintln!("{}: worst per function:", p.adapter);
    for (f, _, what) in &worst {
        eprintln!("  {:<10} {what}", f.name());
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// `Block::div_exact` on the device is Rust's `/` bit for bit wherever operands and quotient
/// are normal: RoPE's `p / half` for every pair of every half-width up to 256 (a device `/` off
/// by one ulp there is radians at long positions), and quotients by random divisors.
#[test]
fn div_exact_is_correctly_rounded_on_the_device() {
    let Some(by_half) = probe_body(
        "    let i = (b.block_x() * b.size() + b.thread()) as usize;\n    \
         if i < p.n as usize {\n        \
         let half = x.get(2 * i + 1).to_f32();\n        \
         out.set(i, T::from_f32(b.div_exact(x.get(2 * i).to_f32(), half)));\n    }",
    ) else {
        return;
    };
    let mut rng = Rng(seed("wgsl_libm division"));
    let mut pairs: Vec<(f32, f32)> = (1..=256u32)
        .flat_map(|half| (0..half).map(move |p| (p as f32, half as f32)))
        .collect();
    pairs.extend((0..200_000).map(|_| (rng.uniform(-1e6, 1e6), rng.uniform(-1e3, 1e3))));
    pairs.retain(|&(a, b)| (a == 0.0 || (a / b).is_normal()) && b.is_normal());
    let xs: Vec<f32> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
    let got = by_half.run_with(&xs, pairs.len());
    let wrong: Vec<String> = pairs
        .iter()
        .zip(&got)
        .filter(|&(&(a, b), g)| g.to_bits() != (a / b).to_bits())
        .take(8)
        .map(|(&(a, b), g)| format!("{a:e} / {b:e} = {g:e}, want {:e}", a / b))
        .collect();
    assert!(
        wrong.is_empty(),
        "{}: {}",
        by_half.adapter,
        wrong.join("\n")
    );
}

#[test]
fn exp2f_on_the_device_is_correctly_rounded() {
    let Some(p) = probe("libm::exp2f(v)") else {
        return;
    };
    let stride = 1021u32;
    let offset = (seed("wgsl_libm") % stride as u64) as u32;
    let mut xs: Vec<f32> = [0x3200_0000u32..0x4300_0000, 0xb200_0000..0xc316_0001]
        .into_iter()
        .flat_map(|r| r.step_by(stride as usize))
        .map(|b| f32::from_bits(b + offset))
        .collect();
    // RoPE's arguments at base 10^4 and 10^6 for half-widths up to 256.
    for log2_base in [13.287_712f32, 19.931_568] {
        for half in 1..=256u32 {
            xs.extend((0..half).map(|p| -(p as f32 / half as f32) * log2_base));
        }
    }
    // Inputs the integer path decides: the fast path's value near a rounding midpoint.
    let near: Vec<f32> = (0..4_000_000u32)
        .map(|i| -125.0 + i as f32 * (252.0 / 4_000_000.0))
        .filter(|&x| {
            if x.abs() < 1e-7 {
                return false;
            }
            let (_, hi, lo) = m::exp2_split(x);
            let y = hi as f64 + lo as f64;
            let quantum = if y < 1.0 {
                2f64.powi(-24)
            } else {
                2f64.powi(-23)
            };
            ((y / quantum).fract() - 0.5).abs() * quantum * 2f64.powi(40) <= 8.0
        })
        .collect();
    assert!(near.len() > 100, "{} inputs near a midpoint", near.len());
    xs.extend(&near);
    xs.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -149.5,
        -126.5,
        127.99,
    ]);
    let got = p.run(&xs);
    let mut bad = Vec::new();
    for (&x, &g) in xs.iter().zip(&got) {
        let want = reference::exp2_correct(x);
        if g.to_bits() != want.to_bits() && !(g.is_nan() && want.is_nan()) {
            bad.push(format!(
                "exp2f({x:e} = {:#010x}) = {g:e}, want {want:e}",
                x.to_bits()
            ));
        }
    }
    eprintln!(
        "{}: exp2f of {} inputs ({} near a midpoint), {} differ from the correctly rounded value",
        p.adapter,
        xs.len(),
        near.len(),
        bad.len()
    );
    assert!(bad.is_empty(), "{}", bad[..bad.len().min(20)].join("\n"));
}

/// Issue 6's RoPE bound through the WGSL path: for the f32 angle the kernel forms at every
/// position 0..=131071 (spec §4: θ = (scale·pos)·inv_freq, inv_freq = exp2f(−d·log2 10^4)),
/// sinf and cosf on the device are within 2e-6 of sin and cos of that angle in f64.
#[test]
fn sin_and_cos_of_every_rope_angle_are_within_2e6_on_the_device() {
    let (Some(sin), Some(cos)) = (probe("libm::sinf(v)"), probe("libm::cosf(v)")) else {
        return;
    };
    // A 128-dim head: 64 frequencies; every fourth, and the fastest two (θ = pos, the largest).
    let half = 64u32;
    let pairs: Vec<u32> = (0..half).filter(|p| p % 4 == 0 || *p < 2).collect();
    let mut worst = (0.0f64, 0.0f32);
    for &pair in &pairs {
        let d = pair as f32 / half as f32;
        let inv_freq = m::exp2f(-d * 13.287_712);
        let angles: Vec<f32> = (0..131_072u32)
            .map(|pos| (1.0 * pos as f32) * inv_freq)
            .collect();
        for (probe, exact) in [(&sin, f64::sin as fn(f64) -> f64), (&cos, f64::cos)] {
            for (&t, &got) in angles.iter().zip(&probe.run(&angles)) {
                let err = (got as f64 - exact(t as f64)).abs();
                if err > worst.0 {
                    worst = (err, t);
                }
            }
        }
    }
    eprintln!(
        "{}: sinf/cosf of {} RoPE angles, worst error {:.3e} at {:e}",
        sin.adapter,
        2 * 131_072 * pairs.len(),
        worst.0,
        worst.1
    );
    assert!(worst.0 < 2e-6, "{worst:?}");
}

/// Every f32 in [−64, 0] (about 1.1e9 inputs: RoPE's and attention's range) through the
/// device's exp2f, in chunks; tens of minutes on lavapipe:
/// `cargo test --release -p kiln-tests --test wgsl_libm -- --ignored --nocapture`
#[test]
#[ignore]
fn exp2f_on_the_device_is_correctly_rounded_on_minus_64_to_0() {
    let Some(p) = probe("libm::exp2f(v)") else {
        return;
    };
    let (first, last) = (0x8000_0000u32, (-64.0f32).to_bits());
    let chunk = 1u32 << 22;
    let (mut checked, mut bad) = (0u64, Vec::new());
    let mut start = first;
    while start <= last {
        let end = last.min(start.saturating_add(chunk - 1));
        let xs: Vec<f32> = (start..=end).map(f32::from_bits).collect();
        for (&x, &g) in xs.iter().zip(&p.run(&xs)) {
            if g.to_bits() != reference::exp2_correct(x).to_bits() && bad.len() < 20 {
                bad.push(format!("exp2f({x:e} = {:#010x}) = {g:e}", x.to_bits()));
            }
        }
        checked += xs.len() as u64;
        start = end + 1;
    }
    eprintln!(
        "{}: exp2f of every f32 in [-64, 0] ({checked}), {} wrong",
        p.adapter,
        bad.len()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
