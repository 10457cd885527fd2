//! Derives the wavefront width from the target cpu, so every entry can assert it at compile time:
//! gfx10 and later run wave32 unless built with `+wavefrontsize64`; gfx9 (GCN, CDNA) is wave64 only.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(amdgpu_wave, values(\"32\", \"64\"))");
    println!("cargo::rustc-check-cfg=cfg(amdgpu_gfx10plus)");
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    // `cargo xtask kernels` builds one code object per kernel: KILN_HIP_KERNEL names it, and
    // only its entries are compiled (`kiln_kernel_<name>`); unset, every kernel is.
    println!("cargo::rerun-if-env-changed=KILN_HIP_KERNEL");
    println!("cargo::rustc-check-cfg=cfg(kiln_one_kernel)");
    if let Ok(kernel) = std::env::var("KILN_HIP_KERNEL") {
        println!("cargo::rustc-cfg=kiln_one_kernel");
        println!("cargo::rustc-cfg=kiln_kernel_{kernel}");
    }
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("amdgpu") {
        return;
    }
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let (cpu, features) = target_cpu_and_features(&flags);
    let Some(major) = gfx_major(&cpu) else {
        panic!("kiln-shaders-hip: cannot derive the wave size from target cpu `{cpu}` (pass -C target-cpu=gfxNNNN)");
    };
    let gfx10plus = major >= 10;
    let mut wave = if gfx10plus { 32 } else { 64 };
    if features.iter().any(|f| f == "+wavefrontsize64") {
        wave = 64;
    }
    if features.iter().any(|f| f == "+wavefrontsize32") {
        wave = 32;
    }
    println!("cargo::rustc-cfg=amdgpu_wave=\"{wave}\"");
    if gfx10plus {
        println!("cargo::rustc-cfg=amdgpu_gfx10plus");
    }
}

/// The `-C target-cpu` and `-C target-feature` values among the encoded rustflags.
fn target_cpu_and_features(encoded: &str) -> (String, Vec<String>) {
    let (mut cpu, mut features) = (String::new(), Vec::new());
    let mut it = encoded.split('\x1f');
    while let Some(flag) = it.next() {
        let flag = if flag == "-C" || flag == "--codegen" {
            it.next().unwrap_or("")
        } else {
            flag.strip_prefix("-C").unwrap_or(flag)
        };
        if let Some(c) = flag.strip_prefix("target-cpu=") {
            cpu = c.to_string();
        }
        if let Some(f) = flag.strip_prefix("target-feature=") {
            features.extend(f.split(',').map(str::to_string));
        }
    }
    (cpu, features)
}

/// `gfx1151` → 11, `gfx942` → 9, `gfx90a` → 9, `gfx11-generic` → 11, `gfx9-4-generic` → 9.
fn gfx_major(cpu: &str) -> Option<u32> {
    let s = cpu.strip_prefix("gfx")?;
    match s.split_once('-') {
        Some((m, _)) => m.parse().ok(),
        None => s.get(..s.len().checked_sub(2)?)?.parse().ok(),
    }
}
