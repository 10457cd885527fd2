//! The WGSL step of `cargo xtask kernels`: translates kiln-math's kernels with kiln-shaders-wgsl,
//! validates every module with naga, and writes them and their table to `engine/artifacts/wgsl/`
//! (or, with `--check`, fails when the committed files differ from a fresh translation). Stable Rust and seconds, so
//! it runs first, and `--wgsl-only` runs it alone.

use kiln_shaders_wgsl::{engine_artifacts, generate_all, Sources, ARTIFACT_DIR};

pub fn kernels(check: bool) -> Result<(), String> {
    let root = crate::paths::repo_root();
    let started = std::time::Instant::now();
    let src = root.join("shared-kernel-math/src");
    let sources = Sources::load(&src).map_err(|e| format!("kiln-math does not parse: {e}"))?;
    // A construct outside the translatable subset: its file, line and construct.
    let modules = generate_all(&sources).map_err(|e| format!("translation failed: {e}"))?;
    // naga's verdict here, not first at a device's pipeline creation.
    for m in &modules {
        kiln_shaders_wgsl::validate(m)?;
    }
    let files = engine_artifacts(&modules);
    let dir = root.join(ARTIFACT_DIR);
    if check {
        let stale = kiln_shaders_wgsl::stale_artifacts(&dir, &files)?;
        if !stale.is_empty() {
            return Err(format!(
                "{} is stale (run `cargo xtask kernels --wgsl-only` and commit it):\n  {}",
                dir.display(),
                stale.join("\n  ")
            ));
        }
    } else {
        kiln_shaders_wgsl::write_artifacts(&dir, &files)?;
    }
    println!(
        "wgsl: {} modules validated by naga, {} {} in {:.1} s",
        modules.len(),
        if check { "match" } else { "written to" },
        ARTIFACT_DIR,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
