//! The `kiln` binary end to end: devices, ports --json, parity --json, run.

use kiln::{ops, DType, Device, Tensor};
use safetensors::tensor::{Dtype, TensorView};
use std::path::Path;
use std::process::{Command, Output};

fn kiln() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
}

/// `kiln run <kernel> --dtype f32 --backend <backend> <extra…> --inputs <input> --out <output>`.
fn kiln_run(kernel: &str, backend: &str, extra: &[&str], input: &Path, output: &Path) -> Output {
    kiln()
        .args(["run", kernel, "--dtype", "f32", "--backend", backend])
        .args(extra)
        .arg("--inputs")
        .arg(input)
        .arg("--out")
        .arg(output)
        .output()
        .unwrap()
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
    let miss = kiln_run("fused_add_rms_norm", "sim", &[], &input, &output);
    assert!(!miss.status.success());
    assert!(String::from_utf8_lossy(&miss.stderr).contains("--shape out="));

    let shape = ["--param", "eps=1e-5", "--shape", "out=3x64"];
    let ok = kiln_run("fused_add_rms_norm", "sim", &shape, &input, &output);
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

    assert_eq!(read_f32(&output, "residual"), rt.to_vec::<f32>().unwrap());
    let (a, b) = (read_f32(&output, "out"), ot.to_vec::<f32>().unwrap());
    let worst = a
        .iter()
        .zip(&b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-5, "sim and cpu outputs differ by {worst}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Writes `(name, dtype, shape, bytes)` tensors to a safetensors file.
fn write_inputs(path: &Path, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
    let views: Vec<_> = tensors
        .iter()
        .map(|(n, d, s, b)| (*n, TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize_to_file(views, &None, path).unwrap();
}

/// The 4-byte words of tensor `name` in a safetensors file.
fn read_words(path: &Path, name: &str) -> Vec<[u8; 4]> {
    let file = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&file).unwrap();
    let data = st.tensor(name).unwrap().data().to_vec();
    data.chunks(4).map(|c| c.try_into().unwrap()).collect()
}

fn read_u32(path: &Path, name: &str) -> Vec<u32> {
    read_words(path, name)
        .into_iter()
        .map(u32::from_le_bytes)
        .collect()
}

fn read_f32(path: &Path, name: &str) -> Vec<f32> {
    read_words(path, name)
        .into_iter()
        .map(f32::from_le_bytes)
        .collect()
}

#[test]
fn run_samples_with_per_row_filters_and_split_rows() {
    let dir = std::env::temp_dir().join(format!("kiln-cli-samplers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f32_bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
    let run = |kernel: &str, input: &Path, output: &Path, extra: &[&str]| {
        let out = kiln_run(kernel, "cpu", extra, input, output);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let dev = Device::cpu();
    let (rows, vocab) = (4usize, 3000usize);
    let probs: Vec<f32> = (0..rows * vocab)
        .map(|i| 1.0 + ((i * 7919) % 1013) as f32)
        .collect();

    // rejection_sample: one filter row per batch row, read from the inputs file.
    let filters = [
        ops::SamplingFilters::default(),
        ops::SamplingFilters {
            top_k: 40,
            ..Default::default()
        },
        ops::SamplingFilters {
            top_p: 0.5,
            ..Default::default()
        },
        ops::SamplingFilters {
            min_p: 0.9,
            ..Default::default()
        },
    ];
    let words: Vec<f32> = filters.iter().flat_map(|f| f.words()).collect();
    let (input, output) = (dir.join("rej.safetensors"), dir.join("rej-out.safetensors"));
    write_inputs(
        &input,
        &[
            ("probs", Dtype::F32, vec![rows, vocab], f32_bytes(&probs)),
            (
                "probs_draw",
                Dtype::F32,
                vec![rows, vocab],
                f32_bytes(&probs),
            ),
            ("filters", Dtype::F32, vec![rows, 3], f32_bytes(&words)),
        ],
    );
    let shapes = [
        "--shape",
        "ids=4",
        "--shape",
        "accepted=4",
        "--shape",
        "rounds=4",
    ];
    let key = ["--param", "key0=11", "--param", "key1=12"];
    run(
        "rejection_sample",
        &input,
        &output,
        &[&shapes[..], &key[..]].concat(),
    );
    let pt = Tensor::from_slice(&dev, &[rows, vocab], &probs).unwrap();
    let mut outs: Vec<Tensor> = (0..3)
        .map(|_| Tensor::zeros(&dev, DType::U32, &[rows]).unwrap())
        .collect();
    let [ids, accepted, rounds] = &mut outs[..] else {
        unreachable!()
    };
    ops::rejection_sample(&dev, &pt, &pt, &filters, [11, 12], ids, accepted, rounds).unwrap();
    for (name, t) in ["ids", "accepted", "rounds"].iter().zip(&outs) {
        assert_eq!(
            read_u32(&output, name),
            t.to_vec::<u32>().unwrap(),
            "{name}"
        );
    }

    // gumbel_max_sample with 4 splits per row: the first maximum over the partials is the
    // op's token.
    let (input, output) = (dir.join("gum.safetensors"), dir.join("gum-out.safetensors"));
    let logits: Vec<f32> = probs.iter().map(|p| p.ln()).collect();
    write_inputs(
        &input,
        &[("logits", Dtype::F32, vec![rows, vocab], f32_bytes(&logits))],
    );
    let args = [
        "--shape", "vals=4x4", "--shape", "idxs=4x4", "--param", "key0=5",
    ];
    run("gumbel_max_sample", &input, &output, &args);
    let vals = read_f32(&output, "vals");
    let idxs = read_u32(&output, "idxs");
    let lt = Tensor::from_slice(&dev, &[rows, vocab], &logits).unwrap();
    let mut index = Tensor::zeros(&dev, DType::U32, &[rows]).unwrap();
    ops::gumbel_max_sample(&dev, &lt, [5, 0], 1.0, &mut index).unwrap();
    for (r, &want) in index.to_vec::<u32>().unwrap().iter().enumerate() {
        let best = (r * 4..r * 4 + 4)
            .max_by(|&a, &b| vals[a].total_cmp(&vals[b]).then(idxs[b].cmp(&idxs[a])))
            .unwrap();
        assert_eq!(idxs[best], want, "row {r}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
