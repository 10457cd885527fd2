//! The `kiln` binary end to end: devices, ports --json, parity --json, run.

use kiln::{ops, DType, Device, Tensor};
use safetensors::tensor::{Dtype, TensorView};
use std::process::Command;

fn kiln() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
}

#[test]
fn devices_lists_every_backend_and_exits_zero() {
    let out = kiln().arg("devices").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for b in ["cpu", "sim", "cuda", "rocm", "wgpu"] {
        assert!(
            text.lines().any(|l| l.starts_with(b)),
            "{b} missing from:\n{text}"
        );
    }
}

#[test]
fn ports_json_has_every_kernel_dtype_backend_with_reasons_for_absence() {
    let out = kiln().args(["ports", "--json"]).output().unwrap();
    assert!(out.status.success());
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    for &k in kiln::KernelId::ALL {
        for &d in k.dtypes() {
            for b in ["cpu", "sim", "cuda", "rocm", "wgpu"] {
                let r = rows
                    .iter()
                    .find(|r| {
                        r["kernel"] == k.name() && r["dtype"] == d.name() && r["backend"] == b
                    })
                    .unwrap_or_else(|| panic!("no row for {} {} {b}", k.name(), d.name()));
                let (present, reachable) = (
                    r["present"].as_bool().unwrap(),
                    r["reachable"].as_bool().unwrap(),
                );
                if b == "cpu" || b == "sim" {
                    assert!(present && reachable, "{r}");
                }
                if !reachable {
                    assert!(
                        r["reason"].as_str().is_some_and(|s| !s.is_empty()),
                        "absent without a reason: {r}"
                    );
                }
            }
        }
    }
}

#[test]
fn parity_json_passes_on_the_cpu() {
    let out = kiln()
        .args(["parity", "--backend", "cpu", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!rows.is_empty());
    for r in &rows {
        for key in [
            "kernel", "dtype", "backend", "nrms", "nmax", "tol_nrms", "tol_nmax", "pass",
        ] {
            assert!(r.get(key).is_some(), "missing {key}: {r}");
        }
        assert_eq!(r["pass"], true, "{r}");
    }
}

#[test]
fn run_reads_safetensors_and_writes_every_output() {
    let dir = std::env::temp_dir().join(format!("kiln-cli-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (rows, dim) = (3usize, 64usize);
    let x: Vec<f32> = (0..rows * dim).map(|i| (i as f32 * 0.37).sin()).collect();
    let r: Vec<f32> = (0..rows * dim).map(|i| (i as f32 * 0.11).cos()).collect();
    let w: Vec<f32> = (0..dim).map(|i| 1.0 + i as f32 / 100.0).collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
    let (xb, rb, wb) = (bytes(&x), bytes(&r), bytes(&w));
    let views = vec![
        (
            "x",
            TensorView::new(Dtype::F32, vec![rows, dim], &xb).unwrap(),
        ),
        (
            "residual",
            TensorView::new(Dtype::F32, vec![rows, dim], &rb).unwrap(),
        ),
        (
            "weight",
            TensorView::new(Dtype::F32, vec![dim], &wb).unwrap(),
        ),
    ];
    let input = dir.join("in.safetensors");
    let output = dir.join("out.safetensors");
    safetensors::serialize_to_file(views, &None, &input).unwrap();

    // Without a shape for the write-only `out`, the command says what is missing.
    let miss = kiln()
        .args([
            "run",
            "fused_add_rms_norm",
            "--dtype",
            "f32",
            "--backend",
            "sim",
        ])
        .arg("--inputs")
        .arg(&input)
        .arg("--out")
        .arg(&output)
        .output()
        .unwrap();
    assert!(!miss.status.success());
    assert!(String::from_utf8_lossy(&miss.stderr).contains("--shape out="));

    let ok = kiln()
        .args([
            "run",
            "fused_add_rms_norm",
            "--dtype",
            "f32",
            "--backend",
            "sim",
            "--param",
            "eps=1e-5",
            "--shape",
            "out=3x64",
        ])
        .arg("--inputs")
        .arg(&input)
        .arg("--out")
        .arg(&output)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    // The same through the op API on the cpu.
    let dev = Device::cpu();
    let xt = Tensor::from_slice(&dev, &[rows, dim], &x).unwrap();
    let mut rt = Tensor::from_slice(&dev, &[rows, dim], &r).unwrap();
    let wt = Tensor::from_slice(&dev, &[dim], &w).unwrap();
    let mut ot = Tensor::zeros(&dev, DType::F32, &[rows, dim]).unwrap();
    ops::fused_add_rms_norm(&dev, &xt, &mut rt, &wt, 1e-5, &mut ot).unwrap();

    let file = std::fs::read(&output).unwrap();
    let st = safetensors::SafeTensors::deserialize(&file).unwrap();
    let read = |n: &str| {
        st.tensor(n)
            .unwrap()
            .data()
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect::<Vec<f32>>()
    };
    assert_eq!(read("residual"), rt.to_vec::<f32>().unwrap());
    let (a, b) = (read("out"), ot.to_vec::<f32>().unwrap());
    let worst = a
        .iter()
        .zip(&b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "sim and cpu outputs differ by {worst}");
    std::fs::remove_dir_all(dir).unwrap();
}
