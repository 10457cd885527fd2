//! `KILN_WGSL_DIR` replaces exactly the embedded WGSL modules it has files for (its own test
//! binary: the variable is process-wide).

use kiln::{ops, Backend, DType, Device, Tensor};

#[test]
fn a_module_in_kiln_wgsl_dir_replaces_the_embedded_one() {
    let dir = std::env::temp_dir().join(format!("kiln-wgsl-override-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Every variant of xIELU f32 is replaced by text that is not WGSL; f16 keeps its modules.
    for variant in ["sg_h16", "sg_p16", "wg_h16", "wg_p16"] {
        std::fs::write(
            dir.join(format!("fused_xielu_f32_{variant}.wgsl")),
            "not a shader",
        )
        .unwrap();
    }
    std::env::set_var("KILN_WGSL_DIR", &dir);
    let dev = match Device::open(Backend::Wgpu) {
        Ok(d) => d,
        Err(e) => {
            assert!(
                !kiln_tests::required_backends().contains(&Backend::Wgpu),
                "required backend wgpu is absent: {e}"
            );
            eprintln!("skipped backend wgpu: {e}");
            return;
        }
    };
    let xielu = |dev: &Device, dtype: DType| {
        let x: Vec<f32> = (0..300).map(|i| i as f32 / 50.0 - 3.0).collect();
        let x = Tensor::from_f32(dev, dtype, &[300], &x).unwrap();
        let mut out = Tensor::zeros(dev, dtype, &[300]).unwrap();
        ops::fused_xielu(dev, &x, 0.8, 0.8, 0.5, -1e-6, &mut out).map(|_| out.to_bytes().unwrap())
    };
    let err = xielu(&dev, DType::F32).expect_err("the replaced module does not compile");
    let shown = err.to_string();
    assert!(
        shown.contains("fused_xielu") && shown.contains("f32"),
        "{shown}"
    );
    // f16 is bit-identical to the cpu port (spec tolerances are for f32 only).
    let got = xielu(&dev, DType::F16).expect("the embedded f16 module runs");
    assert_eq!(got, xielu(&Device::cpu(), DType::F16).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}
