//! Every generated module (kernel × dtype × variant) parses, validates with exactly the
//! capabilities it declares, and is written as MSL and as SPIR-V 1.3 by naga.

use kiln_shaders_wgsl::{generate_all, Module, Sources, KILN_MATH_SRC};
use naga::valid::{Capabilities, ValidationFlags, Validator};

fn modules() -> Vec<Module> {
    // KILN_WGSL_SRC points the test at another kiln-math tree (a branch about to be merged).
    let dir = std::env::var("KILN_WGSL_SRC").unwrap_or_else(|_| KILN_MATH_SRC.to_string());
    let src = Sources::load(dir.as_ref()).expect("kiln-math parses");
    generate_all(&src).unwrap_or_else(|e| panic!("{e}"))
}

fn capabilities(m: &Module) -> Capabilities {
    let mut c = Capabilities::empty();
    if m.uses_subgroups {
        c |= Capabilities::SUBGROUP;
    }
    if m.uses_f16 {
        c |= Capabilities::SHADER_FLOAT16;
    }
    c
}

/// Parses and validates, then resolves the overrides as a pipeline would (block 256, wave 32).
fn compile(m: &Module) -> (naga::Module, naga::valid::ModuleInfo) {
    let label = format!("{}/{}/{}", m.kernel, m.dtype, m.variant.tag());
    let module = naga::front::wgsl::parse_str(&m.wgsl)
        .unwrap_or_else(|e| panic!("{label}: {}\n{}", e.emit_to_string(&m.wgsl), m.wgsl));
    let info = Validator::new(ValidationFlags::all(), capabilities(m))
        .validate(&module)
        .unwrap_or_else(|e| panic!("{label}: {}\n{}", e.emit_to_string(&m.wgsl), m.wgsl));
    let mut constants = naga::back::PipelineConstants::default();
    constants.insert("KILN_BLOCK".into(), 256.0);
    constants.insert("KILN_WAVE".into(), 32.0);
    if m.uses_shared {
        constants.insert("KILN_SHARED_WORDS".into(), 1024.0);
    }
    let (module, info) =
        naga::back::pipeline_constants::process_overrides(&module, &info, None, &constants)
            .unwrap_or_else(|e| panic!("{label}: overrides: {e}"));
    (module.into_owned(), info.into_owned())
}

#[test]
fn every_module_validates_and_writes_msl_and_spirv() {
    let mods = modules();
    assert!(!mods.is_empty());
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("wgsl");
    std::fs::create_dir_all(&out).unwrap();
    for m in &mods {
        let label = format!("{}_{}_{}", m.kernel, m.dtype, m.variant.tag());
        let (module, info) = compile(m);
        let msl_opts = naga::back::msl::Options {
            lang_version: (2, 4),
            ..Default::default()
        };
        let (msl, _) = naga::back::msl::write_string(
            &module,
            &info,
            &msl_opts,
            &naga::back::msl::PipelineOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{label}: MSL: {e}"));
        assert!(msl.contains("kernel void"), "{label}: no MSL kernel");
        let spv_opts = naga::back::spv::Options {
            lang_version: (1, 3),
            ..Default::default()
        };
        let spv = naga::back::spv::write_vec(&module, &info, &spv_opts, None)
            .unwrap_or_else(|e| panic!("{label}: SPIR-V: {e}"));
        assert_eq!(spv[0], 0x0723_0203, "{label}: SPIR-V magic");
        assert_eq!(spv[1], 0x0001_0300, "{label}: SPIR-V version 1.3");
        std::fs::write(out.join(format!("{label}.wgsl")), &m.wgsl).unwrap();
        std::fs::write(out.join(format!("{label}.metal")), msl).unwrap();
        eprintln!(
            "{label}: wgsl {} bytes, spir-v {} words",
            m.wgsl.len(),
            spv.len()
        );
    }
}

#[test]
fn capabilities_match_the_variant() {
    for m in modules() {
        assert!(
            !m.uses_subgroups || m.variant.subgroups,
            "{} {}",
            m.kernel,
            m.dtype
        );
        assert!(
            !m.uses_f16 || m.variant.f16_storage,
            "{} {}",
            m.kernel,
            m.dtype
        );
        // A module must not validate without a capability it declares.
        if m.uses_subgroups || m.uses_f16 {
            let module = naga::front::wgsl::parse_str(&m.wgsl);
            if let Ok(module) = module {
                let r =
                    Validator::new(ValidationFlags::all(), Capabilities::empty()).validate(&module);
                assert!(
                    r.is_err(),
                    "{} {} validated without its capabilities",
                    m.kernel,
                    m.dtype
                );
            }
        }
    }
}
