//! Translates kiln-math's kernels to WGSL (one module per kernel × dtype × variant) for the
//! wgpu backend. A construct outside the translatable subset fails the build with the file and
//! line in shared-kernel-math.

fn main() {
    #[cfg(feature = "wgpu")]
    wgsl::generate();
}

#[cfg(feature = "wgpu")]
mod wgsl {
    use std::fmt::Write;

    pub fn generate() {
        let src_dir = kiln_shaders_wgsl::KILN_MATH_SRC;
        println!("cargo::rerun-if-changed={src_dir}");
        let src = kiln_shaders_wgsl::Sources::load(src_dir.as_ref())
            .unwrap_or_else(|e| panic!("kiln-math does not parse: {e}"));
        let modules = kiln_shaders_wgsl::generate_all(&src).unwrap_or_else(|e| {
            // cargo shows a build script's panic message: the file, line and construct.
            panic!("\n\nWGSL translation failed:\n  {e}\n\n")
        });
        let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
        let mut table = String::from("&[\n");
        for m in &modules {
            let file = m.file_name();
            std::fs::write(out.join(&file), &m.wgsl).unwrap();
            let _ = writeln!(
                table,
                "    WgslModule {{ kernel: {:?}, dtype: {:?}, subgroups: {}, f16_storage: {}, uses_shared: {}, uses_f16: {}, file: {file:?}, source: include_str!(concat!(env!(\"OUT_DIR\"), \"/{file}\")) }},",
                m.kernel, m.dtype, m.variant.subgroups, m.variant.f16_storage, m.uses_shared, m.uses_f16
            );
        }
        table.push(']');
        std::fs::write(out.join("wgsl_modules.rs"), table).unwrap();
    }
}
