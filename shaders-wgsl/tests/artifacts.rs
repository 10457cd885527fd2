//! The WGSL the engine embeds (`engine/artifacts/wgsl/`, committed) is what this translator
//! writes from the kiln-math here: a kernel changed without `cargo xtask kernels --wgsl-only`
//! fails `cargo test`, not only CI's `cargo xtask kernels --check`.

use kiln_shaders_wgsl::{
    engine_artifacts, generate_all, stale_artifacts, write_artifacts, Sources, ARTIFACT_DIR,
    KILN_MATH_SRC, TABLE_FILE,
};
use std::path::Path;

fn fresh() -> Vec<(String, String)> {
    let src = Sources::load(KILN_MATH_SRC.as_ref()).expect("kiln-math parses");
    engine_artifacts(&generate_all(&src).unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn the_committed_engine_wgsl_is_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(ARTIFACT_DIR);
    let stale = stale_artifacts(&dir, &fresh()).unwrap();
    assert!(
        stale.is_empty(),
        "{} is stale: run `cargo xtask kernels --wgsl-only` and commit it:\n  {}",
        dir.display(),
        stale.join("\n  ")
    );
}

#[test]
fn the_check_names_a_changed_a_missing_and_an_extra_file() {
    let files = fresh();
    let dir = std::env::temp_dir().join(format!("kiln-wgsl-artifacts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("left_over.wgsl"),
        "// a module no longer generated",
    )
    .unwrap();
    write_artifacts(&dir, &files).unwrap();
    assert!(
        !dir.join("left_over.wgsl").exists(),
        "write keeps only what it generates"
    );
    assert_eq!(stale_artifacts(&dir, &files).unwrap(), Vec::<String>::new());

    let (changed, _) = &files[0];
    let (missing, _) = &files[1];
    std::fs::write(dir.join(changed), "// edited").unwrap();
    std::fs::remove_file(dir.join(missing)).unwrap();
    std::fs::write(dir.join("extra.wgsl"), "").unwrap();
    assert_eq!(
        stale_artifacts(&dir, &files).unwrap(),
        [
            format!("{changed}: differs"),
            format!("{missing}: missing"),
            "extra.wgsl: not generated".to_string()
        ]
    );
    // The table lists every module, each embedded from its file beside it.
    let table = &files.iter().find(|(n, _)| n == TABLE_FILE).unwrap().1;
    for (name, _) in files.iter().filter(|(n, _)| n != TABLE_FILE) {
        assert!(
            table.contains(&format!("source: include_str!({name:?})")),
            "{name}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
