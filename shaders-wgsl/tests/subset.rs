//! The translator's contract at its edges: constructs outside the subset are build errors that
//! name the file, line and construct; every precise libm function translates and validates.

mod probe_source;

use kiln_math::DType;
use kiln_shaders_wgsl::{translate, Error, Variant};
use probe_source::{with_probe, with_probe_and, PROBE};

fn translate_probe(body: &str) -> Result<kiln_shaders_wgsl::Module, Error> {
    let src = with_probe(body);
    translate(
        &src,
        &PROBE,
        DType::F32,
        Variant {
            subgroups: true,
            f16_storage: false,
        },
    )
}

/// The body starts on line 4 of the probe file.
const BODY_LINE: usize = 4;

#[test]
fn unsupported_constructs_name_file_line_and_construct() {
    let cases = [
        (
            "    let i = b.thread() as usize;\n    for v in [1u32, 2] {\n        out.set(i, x.get(v as usize));\n    }",
            1,
            "`for` over a non-range",
        ),
        (
            "    let i = b.thread() as usize;\n    if i > 4 {\n        panic!(\"no\");\n    }",
            2,
            "macro call `panic!`",
        ),
        (
            "    let i = b.thread() as usize;\n    let v: f64 = 1.0;\n    out.set(i, T::from_f32(v as f32));",
            1,
            "type `f64`",
        ),
        (
            "    let v = x.get(0).to_f32();\n    out.set(0, T::from_f32(v.sqrt()));",
            1,
            "method `sqrt`",
        ),
        (
            "    let i = b.thread() as usize;\n    let w = 1.5f64;\n    out.set(i, x.get(i));",
            1,
            "literal suffix `f64`",
        ),
    ];
    for (body, line_in_body, construct) in cases {
        let e = translate_probe(body).expect_err(construct);
        eprintln!("{e}");
        assert_eq!(e.file, "shared-kernel-math/src/kernels/probe.rs", "{e}");
        assert_eq!(e.line, BODY_LINE + line_in_body, "{e}");
        assert!(e.construct.contains(construct), "{e}");
        let shown = e.to_string();
        assert!(
            shown.starts_with(&format!(
                "shared-kernel-math/src/kernels/probe.rs:{}:",
                e.line
            )),
            "{shown}"
        );
    }
}

fn translate_sources(src: &kiln_shaders_wgsl::Sources) -> Result<kiln_shaders_wgsl::Module, Error> {
    let variant = Variant {
        subgroups: true,
        f16_storage: false,
    };
    translate(src, &PROBE, DType::F32, variant)
}

const PROBE_BODY_WITH_TILES: &str =
    "    let i = b.thread() as usize;\n    out.set(i, T::from_f32((TILE + tile_of_other()) as f32));";
const OTHER_FILE: &str = "shared-kernel-math/src/kernels/other.rs";

/// Consts resolve as in Rust: the caller's file first. xIELU's `TILE = 256` once took the paged
/// kernels' `TILE = 4` and wrote 4 elements of every 256-element tile.
#[test]
fn consts_of_one_name_in_two_files_resolve_per_file() {
    let other = "pub const TILE: u32 = 4;\npub fn tile_of_other() -> u32 { TILE }\n";
    let src = with_probe_and(
        PROBE_BODY_WITH_TILES,
        "const TILE: u32 = 7;",
        &[(OTHER_FILE, other)],
    );
    let m = translate_sources(&src).expect("translates");
    assert!(m.wgsl.contains("const K_TILE: u32 = 7u;"), "{}", m.wgsl);
    assert!(
        m.wgsl.contains("const K_other_TILE: u32 = 4u;"),
        "{}",
        m.wgsl
    );
    assert!(!m.wgsl.contains("const K_TILE: u32 = 4u;"), "{}", m.wgsl);
}

#[test]
fn a_const_name_two_other_files_export_is_an_error() {
    let other = "pub const TILE: u32 = 4;\npub fn tile_of_other() -> u32 { 1 }\n";
    let third = "pub const TILE: u32 = 5;\n";
    let src = with_probe_and(
        PROBE_BODY_WITH_TILES,
        "",
        &[
            (OTHER_FILE, other),
            ("shared-kernel-math/src/kernels/third.rs", third),
        ],
    );
    let e = translate_sources(&src).expect_err("ambiguous const");
    eprintln!("{e}");
    assert_eq!(e.file, "shared-kernel-math/src/kernels/probe.rs", "{e}");
    assert_eq!(e.line, BODY_LINE + 1, "{e}");
    assert!(e.construct.contains("path `TILE`"), "{e}");
    assert!(e.to_string().contains("ambiguous"), "{e}");
}

#[test]
fn every_precise_libm_function_translates_and_validates() {
    let calls = [
        "sqrtf", "expf", "expm1f", "logf", "log1pf", "log2f", "log10f", "exp2f", "tanhf", "sinf",
        "cosf", "fabsf", "truncf", "floorf", "ceilf", "roundf",
    ];
    let mut body = String::from("    let i = b.thread() as usize;\n    let v = x.get(i).to_f32() * p.scale;\n    let mut acc = 0.0f32;\n");
    for c in calls {
        body.push_str(&format!("    acc += libm::{c}(v);\n"));
    }
    body.push_str(
        "    acc += libm::copysignf(v, acc) + libm::fmaxf(v, acc) + libm::fminf(v, acc);\n",
    );
    body.push_str("    let round = |v: f32| T::from_f32(v).to_f32();\n");
    body.push_str("    out.set(i, T::from_f32(round(acc) + b.sum(acc)));");
    let src = with_probe(&body);
    for dtype in [DType::F32, DType::F16] {
        for v in Variant::ALL {
            let m = translate(&src, &PROBE, dtype, v).unwrap_or_else(|e| panic!("{e}"));
            let module = naga::front::wgsl::parse_str(&m.wgsl)
                .unwrap_or_else(|e| panic!("{}\n{}", e.emit_to_string(&m.wgsl), m.wgsl));
            let mut caps = naga::valid::Capabilities::empty();
            if m.uses_subgroups {
                caps |= naga::valid::Capabilities::SUBGROUP;
            }
            if m.uses_f16 {
                caps |= naga::valid::Capabilities::SHADER_FLOAT16;
            }
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
                .validate(&module)
                .unwrap_or_else(|e| panic!("{}\n{}", e.emit_to_string(&m.wgsl), m.wgsl));
        }
    }
}

#[test]
fn unknown_libm_function_is_refused() {
    let e = translate_probe("    out.set(0, T::from_f32(libm::powf(x.get(0).to_f32(), 2.0)));")
        .unwrap_err();
    assert_eq!(e.line, BODY_LINE);
    assert!(e.construct.contains("libm::powf"), "{e}");
}

#[test]
fn refusals_speak_rust_and_say_what_to_write_instead() {
    let cases = [
        (
            "    let a = [x.get(0).to_f32(), 1.0];\n    let s: f32 = a.iter().sum();\n    out.set(0, T::from_f32(s));",
            "method `iter` on `[f32; 2]`",
            "index them in a loop",
        ),
        (
            "    let a = [x.get(0).to_f32(), 1.0, 2.0];\n    let h = &a[..2];\n    out.set(0, T::from_f32(h[0]));",
            "slice `a[..2]`",
            "slices do not exist in WGSL",
        ),
        (
            "    let v = x.get(0).to_f32();\n    let y = match v {\n        1.0 => 2.0,\n        _ => v,\n    };\n    out.set(0, T::from_f32(y));",
            "`match` on the float literal `1.0`",
            "integers and booleans only",
        ),
    ];
    for (body, construct, instead) in cases {
        let e = translate_probe(body).expect_err(construct);
        let shown = e.to_string();
        eprintln!("{shown}");
        assert_eq!(
            e.line,
            BODY_LINE + 1 + (construct.contains("match") as usize),
            "{shown}"
        );
        assert!(e.construct.contains(construct), "{shown}");
        assert!(e.detail.contains(instead), "{shown}");
        // Rust's names, not the translator's (`Array(F32, 2)`, `Value(..)`, `Expr(..)`).
        for internal in ["Array(", "F32", "Expr(", "Value("] {
            assert!(!shown.contains(internal), "{shown}");
        }
    }
}

/// Const generics bind from nested array lengths (`[[u32; W]; R]`, outer first) and serve as
/// array repeat lengths, as a kernel passing a row of words per row of a group does.
#[test]
fn const_generics_bind_from_nested_arrays_and_size_repeats() {
    let body = "    let i = b.thread() as usize;\n    let t = row_totals([[1u32; 3]; 2]);\n    out.set(i, T::from_f32((t[0] + t[1]) as f32));";
    let items = "fn row_totals<const W: usize, const R: usize>(w: [[u32; W]; R]) -> [u32; R] {\n    let mut t = [0u32; R];\n    let mut r = 0;\n    while r < R {\n        let mut j = 0;\n        while j < W {\n            t[r] += w[r][j];\n            j += 1;\n        }\n        r += 1;\n    }\n    t\n}\n";
    let m = translate_sources(&with_probe_and(body, items, &[])).expect("translates");
    assert!(m.wgsl.contains("3u"), "{}", m.wgsl);
    assert!(m.wgsl.contains("array<u32, 2>"), "{}", m.wgsl);
    assert!(m.wgsl.contains("array<array<u32, 3>, 2>"), "{}", m.wgsl);
}

/// A match arm that is a bare unit call (`0 => out.set(..),`) is kept as a statement: it used
/// to be dropped, so the module silently wrote nothing.
#[test]
fn a_match_arm_that_is_a_unit_call_is_kept() {
    let body = "    let i = b.thread() as usize;\n    match i {\n        0 => out.set(i, T::from_f32(3.0)),\n        _ => out.set(i, T::from_f32(5.0)),\n    }";
    let m = translate_probe(body).expect("translates");
    let module = naga::front::wgsl::parse_str(&m.wgsl)
        .unwrap_or_else(|e| panic!("{}\n{}", e.emit_to_string(&m.wgsl), m.wgsl));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{}\n{}", e.emit_to_string(&m.wgsl), m.wgsl));
    let body_start = m.wgsl.find("if (i").or(m.wgsl.find("if i")).unwrap_or(0);
    let arms = &m.wgsl[body_start..];
    for lit in ["3", "5"] {
        assert!(
            arms.lines().any(|l| l.contains("set") && l.contains(lit)),
            "the arm writing {lit} is missing:\n{}",
            m.wgsl
        );
    }
}
