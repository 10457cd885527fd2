//! Translates a kiln-math source tree and writes every module: `cargo run -p kiln-shaders-wgsl
//! --example dump -- [SRC_DIR] [OUT_DIR]` (defaults: this workspace's kiln-math, `wgsl-out`).
//! Reports the first construct outside the subset, with its file and line. The kernel list is
//! the kiln-math this example is built with; SRC_DIR supplies the sources translated.

fn main() {
    let mut args = std::env::args().skip(1);
    let src = args
        .next()
        .unwrap_or_else(|| kiln_shaders_wgsl::KILN_MATH_SRC.to_string());
    let out = args.next().unwrap_or_else(|| "wgsl-out".to_string());
    let sources = kiln_shaders_wgsl::Sources::load(src.as_ref()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let kernels = kiln_shaders_wgsl::kernels();
    std::fs::create_dir_all(&out).unwrap();
    let mut failed = false;
    for k in &kernels {
        for &dt in k.dtypes {
            for v in kiln_shaders_wgsl::Variant::ALL {
                match kiln_shaders_wgsl::translate(&sources, k, dt, v) {
                    Ok(m) => {
                        let name = std::path::Path::new(&out).join(m.file_name());
                        std::fs::write(&name, &m.wgsl).unwrap();
                    }
                    Err(e) => {
                        eprintln!("{} {} {}: {e}", k.name, dt.name(), v.tag());
                        failed = true;
                        break;
                    }
                }
            }
        }
    }
    println!("{} kernels translated from {src} into {out}", kernels.len());
    if failed {
        std::process::exit(1);
    }
}
