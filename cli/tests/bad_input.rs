//! `kiln run` on bad input (issue #20): a paged table that names a row outside the pool is
//! refused before launch on the port and the fallback (exit status 1, never NaN with status 0);
//! a safetensors dtype kiln does not know is named; an ordinary error is one line, with no
//! backtrace even under `RUST_BACKTRACE=1`.

use safetensors::tensor::{Dtype, TensorView};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kiln() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
}

fn scratch_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-cli-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(args: &[&str], input: &Path, output: &Path) -> Output {
    kiln()
        .arg("run")
        .args(args)
        .arg("--inputs")
        .arg(input)
        .arg("--out")
        .arg(output)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// The v1 paged kernel over a pool of 2 rows, with `rows` as its block table.
fn paged_inputs(path: &Path, rows: &[i32]) {
    let q = le(&[1.0f32, 2.0], f32::to_le_bytes);
    let pool = le(&[0.5f32; 8], f32::to_le_bytes);
    let i = |v: &[i32]| le(v, i32::to_le_bytes);
    let (rows, offsets, starts, lens) = (i(rows), i(&[0, 2]), i(&[0]), i(&[4]));
    let views = vec![
        ("q", TensorView::new(Dtype::F32, vec![1, 1, 2], &q).unwrap()),
        (
            "k_pool",
            TensorView::new(Dtype::F32, vec![2, 2, 1, 2], &pool).unwrap(),
        ),
        (
            "v_pool",
            TensorView::new(Dtype::F32, vec![2, 2, 1, 2], &pool).unwrap(),
        ),
        ("rows", TensorView::new(Dtype::I32, vec![2], &rows).unwrap()),
        (
            "row_offsets",
            TensorView::new(Dtype::I32, vec![2], &offsets).unwrap(),
        ),
        (
            "logical_starts",
            TensorView::new(Dtype::I32, vec![1], &starts).unwrap(),
        ),
        (
            "visible_lens",
            TensorView::new(Dtype::I32, vec![1], &lens).unwrap(),
        ),
    ];
    safetensors::serialize_to_file(views, &None, path).unwrap();
}

fn assert_one_line_error(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "one error line expected: {err}");
    assert!(lines[0].contains(needle), "`{needle}` not in: {err}");
    assert!(
        !err.to_lowercase().contains("backtrace"),
        "an ordinary error printed a backtrace: {err}"
    );
}

/// Case 6 on the CLI: a row index outside the pool, on the cpu and sim ports and the fallback.
#[test]
fn case6_run_refuses_a_row_outside_the_pool_on_every_path() {
    let dir = scratch_dir("bad-rows");
    let (input, output) = (dir.join("in.safetensors"), dir.join("out.safetensors"));
    paged_inputs(&input, &[0, 7]);
    for backend in ["cpu", "sim"] {
        for extra in [&[][..], &["--fallback"][..]] {
            let mut args = vec!["paged_attention_decode", "--dtype", "f32"];
            args.extend(["--backend", backend, "--shape", "out=1x1x2"]);
            args.extend(extra);
            let out = run(&args, &input, &output);
            assert_one_line_error(&out, "pool row 7");
            assert!(
                !output.exists(),
                "an output was written for a refused launch"
            );
        }
    }
    // The same table with its rows inside the pool runs.
    paged_inputs(&input, &[0, 1]);
    let ok = run(
        &[
            "paged_attention_decode",
            "--dtype",
            "f32",
            "--shape",
            "out=1x1x2",
        ],
        &input,
        &output,
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Case 9: an unknown dtype in the header is named, with the tensor it belongs to.
#[test]
fn case9_an_unknown_safetensors_dtype_is_named() {
    let dir = scratch_dir("bad-dtype");
    let (input, output) = (dir.join("in.safetensors"), dir.join("out.safetensors"));
    let header = br#"{"x":{"dtype":"F4_E9","shape":[2],"data_offsets":[0,8]}}"#;
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(header);
    file.extend_from_slice(&[0; 8]);
    std::fs::write(&input, file).unwrap();
    let out = run(&["fused_xielu", "--dtype", "f32"], &input, &output);
    assert_one_line_error(&out, "tensor `x` has dtype `F4_E9`");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Case 9: an ordinary error (an unknown kernel) under `RUST_BACKTRACE=1` is one line.
#[test]
fn case9_ordinary_errors_print_no_backtrace() {
    let dir = scratch_dir("no-backtrace");
    let (input, output) = (dir.join("in.safetensors"), dir.join("out.safetensors"));
    let out = run(&["no_such_kernel", "--dtype", "f32"], &input, &output);
    assert_one_line_error(&out, "unknown kernel `no_such_kernel`");
    std::fs::remove_dir_all(dir).unwrap();
}
