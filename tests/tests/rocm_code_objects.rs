//! Static verification of the amdgcn code objects the engine embeds, one per kernel and arch (no
//! AMD GPU, no ROCm tools): the ELF header names the arch and code object V5; every kernel ×
//! dtype of the list has its entry and kernel descriptor in its kernel's code object; the AMDGPU metadata says the wavefront width build.rs derived,
//! reports registers, LDS and scratch, and lays the kernargs out exactly as the engine packs them.

use kiln::rocm::{kernarg_layout, Artifact, CodeObject, ARTIFACTS};
use kiln::KernelId;
use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
use object::{Endianness, Object, ObjectSymbol, SymbolKind};
use rmpv::Value;
use std::collections::BTreeSet;

/// (arch, wavefront width, EF_AMDGPU_MACH value) the issue asks for.
const EXPECTED: &[(&str, u64, u32)] = &[("gfx1151", 32, 0x4a), ("gfx942", 64, 0x4c)];
const EM_AMDGPU: u16 = 224;
const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// e_ident ABI version 3 is code object V5.
const ABI_VERSION_V5: u8 = 3;
const NT_AMDGPU_METADATA: u32 = 32;

fn artifact(arch: &str) -> &'static Artifact {
    ARTIFACTS
        .iter()
        .find(|a| a.arch == arch)
        .unwrap_or_else(|| panic!("the engine embeds no {arch} code object"))
}

/// The entry symbols of the kernel whose entries `c` holds.
fn expected_symbols(c: &CodeObject) -> BTreeSet<String> {
    let k = KernelId::from_name(c.kernel).expect("a code object of a listed kernel");
    k.dtypes()
        .iter()
        .map(|&d| k.symbol(d).unwrap().to_string())
        .collect()
}

/// The code objects of `arch`, one per kernel of the list, in list order.
fn code_objects(arch: &str) -> Vec<&'static CodeObject> {
    let a = artifact(arch);
    KernelId::ALL
        .iter()
        .map(|&k| {
            a.code_object(k)
                .unwrap_or_else(|| panic!("{arch}: no code object for {}", k.name()))
        })
        .collect()
}

fn get<'a>(map: &'a Value, key: &str) -> &'a Value {
    map.as_map()
        .and_then(|m| m.iter().find(|(k, _)| k.as_str() == Some(key)))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("metadata has no `{key}` in {map}"))
}

fn int(map: &Value, key: &str) -> u64 {
    get(map, key)
        .as_u64()
        .unwrap_or_else(|| panic!("`{key}` is not an unsigned integer"))
}

fn text<'a>(map: &'a Value, key: &str) -> &'a str {
    get(map, key)
        .as_str()
        .unwrap_or_else(|| panic!("`{key}` is not a string"))
}

/// The decoded NT_AMDGPU_METADATA note of a code object.
fn metadata(elf: &ElfFile64<Endianness>, bytes: &[u8]) -> Value {
    let endian = elf.endian();
    let sections = elf.elf_header().sections(endian, bytes).expect("sections");
    for s in sections.iter() {
        let Some(mut notes) = s.notes(endian, bytes).expect("notes") else {
            continue;
        };
        while let Some(n) = notes.next().expect("note") {
            if n.name() == b"AMDGPU" && n.n_type(endian) == NT_AMDGPU_METADATA {
                return rmpv::decode::read_value(&mut n.desc()).expect("msgpack metadata");
            }
        }
    }
    panic!("no AMDGPU metadata note");
}

#[test]
fn the_engine_embeds_exactly_the_expected_arches() {
    let got: Vec<(&str, u32)> = ARTIFACTS.iter().map(|a| (a.arch, a.wave)).collect();
    let want: Vec<(&str, u32)> = EXPECTED.iter().map(|&(a, w, _)| (a, w as u32)).collect();
    assert_eq!(got, want);
}

#[test]
fn headers_name_the_arch_and_code_object_v5() {
    for &(arch, _, mach) in EXPECTED {
        assert_eq!(artifact(arch).code_object_version, 5);
        for c in code_objects(arch) {
            let arch = format!("{arch} {}", c.kernel);
            let elf = ElfFile64::<Endianness>::parse(c.bytes).expect("an ELF64 file");
            let h = elf.elf_header();
            let e = elf.endian();
            assert_eq!(h.e_machine(e), EM_AMDGPU, "{arch}: e_machine");
            assert_eq!(h.e_ident().os_abi, ELFOSABI_AMDGPU_HSA, "{arch}: OS ABI");
            assert_eq!(
                h.e_ident().abi_version,
                ABI_VERSION_V5,
                "{arch}: ABI version"
            );
            assert_eq!(h.e_flags(e) & 0xff, mach, "{arch}: EF_AMDGPU_MACH");
            assert_eq!(h.e_type(e), object::elf::ET_DYN, "{arch}: a shared object");
        }
    }
}

#[test]
fn every_kernel_and_dtype_has_its_entry_and_descriptor() {
    for &(arch, _, _) in EXPECTED {
        for c in code_objects(arch) {
            let want = expected_symbols(c);
            let arch = format!("{arch} {}", c.kernel);
            let elf = ElfFile64::<Endianness>::parse(c.bytes).expect("an ELF64 file");
            let mut entries = BTreeSet::new();
            let mut descriptors = BTreeSet::new();
            for s in elf.symbols() {
                let name = s.name().expect("symbol name");
                if s.is_global() && s.kind() == SymbolKind::Text {
                    entries.insert(name.to_string());
                }
                if let Some(k) = name.strip_suffix(".kd") {
                    assert_eq!(
                        s.size(),
                        64,
                        "{arch}: {name} is a 64-byte kernel descriptor"
                    );
                    descriptors.insert(k.to_string());
                }
            }
            assert_eq!(entries, want, "{arch}: exported entries");
            assert_eq!(descriptors, want, "{arch}: kernel descriptors");
        }
    }
}

#[test]
fn metadata_reports_wave_resources_and_the_engine_kernarg_layout() {
    for &(arch, wave, _) in EXPECTED {
        for c in code_objects(arch) {
            let want = expected_symbols(c);
            let arch = format!("{arch} {}", c.kernel);
            let elf = ElfFile64::<Endianness>::parse(c.bytes).expect("an ELF64 file");
            let meta = metadata(&elf, c.bytes);
            let version = get(&meta, "amdhsa.version").as_array().expect("version");
            assert_eq!(version[0].as_u64(), Some(1), "{arch}: amdhsa.version major");
            let kernels = get(&meta, "amdhsa.kernels").as_array().expect("kernels");
            let names: BTreeSet<String> = kernels
                .iter()
                .map(|k| text(k, ".name").to_string())
                .collect();
            assert_eq!(names, want, "{arch}: metadata kernels");
            for k in kernels {
                let name = text(k, ".name");
                assert_eq!(text(k, ".symbol"), format!("{name}.kd"));
                assert_eq!(
                    int(k, ".wavefront_size"),
                    wave,
                    "{arch} {name}: .wavefront_size"
                );
                let scratch = int(k, ".private_segment_fixed_size");
                let lds = int(k, ".group_segment_fixed_size");
                let (vgpr, sgpr) = (int(k, ".vgpr_count"), int(k, ".sgpr_count"));
                let spills = int(k, ".vgpr_spill_count") + int(k, ".sgpr_spill_count");
                eprintln!(
                    "{arch} {name}: wave{wave} vgpr {vgpr} sgpr {sgpr} spills {spills} \
                 static LDS {lds} B (+ launch-sized) scratch {scratch} B"
                );
                // No entry calls anything (xtask refuses it), so none needs a dynamic stack.
                assert_eq!(
                    get(k, ".uses_dynamic_stack").as_bool(),
                    Some(false),
                    "{arch} {name}: dynamic stack"
                );
                // kiln carves all LDS from the launch-sized allocation.
                assert_eq!(lds, 0, "{arch} {name}: static LDS {lds} B");
                // The engine launches up to 1024 threads per block.
                assert!(
                    int(k, ".max_flat_workgroup_size") >= 1024,
                    "{arch} {name}: max workgroup"
                );

                let kernel = KernelId::ALL
                    .iter()
                    .copied()
                    .find(|id| id.dtypes().iter().any(|&d| id.symbol(d) == Some(name)))
                    .expect("a listed kernel");
                let layout = kernarg_layout(kernel);
                let args = get(k, ".args").as_array().expect("args");
                let explicit: Vec<(u64, u64, &str)> = args
                    .iter()
                    .map(|a| (int(a, ".offset"), int(a, ".size"), text(a, ".value_kind")))
                    .filter(|(_, _, kind)| !kind.starts_with("hidden_"))
                    .collect();
                // The params words: by-value args tiling [0, params_bytes) with no gap.
                let mut at = 0u64;
                let mut i = 0;
                while at < layout.params_bytes as u64 {
                    let (off, size, kind) = explicit[i];
                    assert_eq!(
                        (off, kind),
                        (at, "by_value"),
                        "{arch} {name}: params arg {i}"
                    );
                    at += size;
                    i += 1;
                }
                assert_eq!(
                    at, layout.params_bytes as u64,
                    "{arch} {name}: params bytes"
                );
                let rest = &explicit[i..];
                assert_eq!(
                    rest.len(),
                    2 * layout.buffers.len(),
                    "{arch} {name}: buffer args"
                );
                for (b, &(ptr, len)) in layout.buffers.iter().enumerate() {
                    assert_eq!(
                        rest[2 * b],
                        (ptr as u64, 8, "global_buffer"),
                        "{arch} {name}: buffer {b} pointer"
                    );
                    assert_eq!(
                        rest[2 * b + 1],
                        (len as u64, 8, "by_value"),
                        "{arch} {name}: buffer {b} length"
                    );
                }
                let segment = int(k, ".kernarg_segment_size");
                let hidden = explicit.len() < args.len();
                assert!(
                    segment == layout.size as u64 || (hidden && segment > layout.size as u64),
                    "{arch} {name}: kernarg segment {segment} B, engine packs {} B",
                    layout.size
                );
            }
        }
    }
}
