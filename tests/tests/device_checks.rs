//! Device checks driven by the kernel list: for every kernel × dtype, every committed PTX module
//! and every code object keeps its per-thread state in registers — no PTX `.local` memory, no
//! amdgcn private segment — beyond what `kiln_math::local_memory` declares for the kernel, with
//! its reason. A rolled chunk loop (arrays indexed in local memory) or a libm call that spills a
//! temporary fails here, naming the entry and the artifact.

use kiln::rocm::ARTIFACTS;
use kiln::KernelId;
use kiln_math::local_memory::{local_memory, LOCAL_MEMORY};
use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
use object::Endianness;
use rmpv::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn cuda_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/artifacts/cuda")
}

/// The target cpus the PTX is committed for: the directories beside the module table.
fn ptx_targets() -> Vec<String> {
    let mut targets: Vec<String> = std::fs::read_dir(cuda_dir())
        .expect("engine/artifacts/cuda")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    targets.sort();
    assert!(!targets.is_empty(), "no PTX target directories");
    targets
}

/// Local memory of one PTX function, and what it calls.
#[derive(Default)]
struct Function {
    local_bytes: u64,
    accesses: usize,
    calls: BTreeSet<String>,
}

fn identifier(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Every function defined in a PTX module, by name.
fn functions(ptx: &str) -> BTreeMap<String, Function> {
    let mut out = BTreeMap::new();
    let (mut name, mut body): (Option<String>, Option<Function>) = (None, None);
    for line in ptx.lines() {
        let t = line.trim();
        if body.is_none() {
            let header = t
                .trim_start_matches(".visible ")
                .trim_start_matches(".weak ")
                .strip_prefix(".entry ")
                .or_else(|| t.trim_start_matches(".visible ").strip_prefix(".func "));
            if let Some(h) = header {
                // Past a `(.param …)` return value, if any.
                let h = h.trim_start();
                let h = if h.starts_with('(') {
                    h.split_once(')').map_or("", |x| x.1)
                } else {
                    h
                };
                name = Some(identifier(h.trim_start()).to_string());
            } else if t == "{" && name.is_some() {
                body = Some(Function::default());
            } else if t.ends_with(';') && !line.starts_with(char::is_whitespace) {
                name = None;
            }
            continue;
        }
        let f = body.as_mut().expect("in a body");
        if line == "}" {
            out.insert(name.take().expect("named"), body.take().expect("in a body"));
        } else if t.starts_with(".local ") {
            f.local_bytes += t
                .split_once('[')
                .and_then(|(_, n)| n.split_once(']'))
                .and_then(|(n, _)| n.parse::<u64>().ok())
                .expect("a sized .local declaration");
        } else {
            f.accesses += t.matches("ld.local").count() + t.matches("st.local").count();
            if let Some(call) = t.strip_prefix("call") {
                f.calls.extend(
                    call.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
                        .filter(|w| !w.is_empty())
                        .map(str::to_string),
                );
            }
        }
    }
    out
}

/// Bytes of `.local` declared by `entry` and every function it reaches, and its local accesses.
fn entry_local(funcs: &BTreeMap<String, Function>, entry: &str) -> Option<(u64, usize)> {
    funcs.get(entry)?;
    let mut seen = BTreeSet::from([entry.to_string()]);
    let mut todo = vec![entry.to_string()];
    let (mut bytes, mut accesses) = (0, 0);
    while let Some(n) = todo.pop() {
        if let Some(f) = funcs.get(&n) {
            bytes += f.local_bytes;
            accesses += f.accesses;
            todo.extend(
                f.calls
                    .iter()
                    .filter(|c| seen.insert((*c).clone()))
                    .cloned(),
            );
        }
    }
    Some((bytes, accesses))
}

/// Per entry symbol, its private segment bytes and whether it has a dynamic stack.
fn scratch(bytes: &[u8]) -> BTreeMap<String, (u64, bool)> {
    let elf = ElfFile64::<Endianness>::parse(bytes).expect("an ELF64 file");
    let endian = elf.endian();
    let sections = elf.elf_header().sections(endian, bytes).expect("sections");
    let mut out = BTreeMap::new();
    for s in sections.iter() {
        let Some(mut notes) = s.notes(endian, bytes).expect("notes") else {
            continue;
        };
        while let Some(n) = notes.next().expect("note") {
            if n.name() != b"AMDGPU" {
                continue;
            }
            let meta = rmpv::decode::read_value(&mut n.desc()).expect("msgpack metadata");
            let get = |m: &Value, key: &str| -> Value {
                m.as_map()
                    .and_then(|m| m.iter().find(|(k, _)| k.as_str() == Some(key)))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| panic!("metadata has no `{key}`"))
            };
            for k in get(&meta, "amdhsa.kernels").as_array().expect("kernels") {
                out.insert(
                    get(k, ".name").as_str().expect("a name").to_string(),
                    (
                        get(k, ".private_segment_fixed_size")
                            .as_u64()
                            .expect("bytes"),
                        get(k, ".uses_dynamic_stack").as_bool().expect("a bool"),
                    ),
                );
            }
        }
    }
    out
}

#[test]
fn every_ptx_entry_keeps_to_its_declared_local_memory() {
    let mut failures = Vec::new();
    for target in ptx_targets() {
        for &kernel in KernelId::ALL {
            let path = cuda_dir()
                .join(&target)
                .join(format!("{}.ptx", kernel.name()));
            let ptx = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            let funcs = functions(&ptx);
            let allowed = local_memory(kernel).map_or(0, |l| l.ptx_bytes as u64);
            for &dtype in kernel.dtypes() {
                let symbol = kernel.symbol(dtype).expect("a listed dtype");
                let (bytes, accesses) = entry_local(&funcs, symbol).unwrap_or_else(|| {
                    panic!("{target}/{}.ptx has no entry {symbol}", kernel.name())
                });
                if bytes > allowed || (allowed == 0 && accesses > 0) {
                    failures.push(format!(
                        "{target} {symbol}: {bytes} B of .local ({accesses} ld/st.local), \
                         {allowed} B declared"
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "declare it with its reason in kiln_math::local_memory, or keep it in registers:\n{}",
        failures.join("\n")
    );
}

/// The `.maxntid` / `.minnctapersm` directives between an entry's parameter list and its body.
fn entry_bound(ptx: &str, symbol: &str) -> Option<(Option<String>, Option<String>)> {
    let start = ptx.find(&format!(".visible .entry {symbol}("))?;
    let body = start + ptx[start..].find("\n{")?;
    let head = &ptx[start..body];
    let value = |directive: &str| {
        head.lines()
            .find_map(|l| l.trim().strip_prefix(directive))
            .map(|v| v.trim().to_string())
    };
    Some((value(".maxntid"), value(".minnctapersm")))
}

#[test]
fn every_ptx_entry_declares_exactly_its_kernels_launch_bound() {
    let mut failures = Vec::new();
    for target in ptx_targets() {
        for &kernel in KernelId::ALL {
            let path = cuda_dir()
                .join(&target)
                .join(format!("{}.ptx", kernel.name()));
            let ptx = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            let want = kernel.launch_bound().map(|b| {
                (
                    Some(format!("{}, 1, 1", b.max_threads)),
                    Some(b.min_blocks.to_string()),
                )
            });
            for &dtype in kernel.dtypes() {
                let symbol = kernel.symbol(dtype).expect("a listed dtype");
                let got = entry_bound(&ptx, symbol).unwrap_or_else(|| {
                    panic!("{target}/{}.ptx has no entry {symbol}", kernel.name())
                });
                let want = want.clone().unwrap_or((None, None));
                if got != want {
                    failures.push(format!(
                        "{target} {symbol}: {got:?}, the kernel says {want:?}"
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "stale PTX (run `cargo xtask kernels`):\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_code_object_entry_keeps_to_its_declared_scratch() {
    let mut failures = Vec::new();
    for a in ARTIFACTS {
        for &kernel in KernelId::ALL {
            let c = a
                .code_object(kernel)
                .unwrap_or_else(|| panic!("{}: no code object for {}", a.arch, kernel.name()));
            let entries = scratch(c.bytes);
            let allowed = local_memory(kernel).map_or(0, |l| l.scratch_bytes as u64);
            for &dtype in kernel.dtypes() {
                let symbol = kernel.symbol(dtype).expect("a listed dtype");
                let &(bytes, dynamic) = entries.get(symbol).unwrap_or_else(|| {
                    panic!("{} {}: no metadata for {symbol}", a.arch, kernel.name())
                });
                if bytes > allowed || dynamic {
                    failures.push(format!(
                        "{} {symbol}: {bytes} B of private segment{}, {allowed} B declared",
                        a.arch,
                        if dynamic { " and a dynamic stack" } else { "" }
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "declare it with its reason in kiln_math::local_memory, or keep it in registers:\n{}",
        failures.join("\n")
    );
}

/// A declaration no artifact needs any more is stale: it would hide the next regression.
#[test]
fn every_local_memory_declaration_is_needed_and_gives_a_reason() {
    for l in LOCAL_MEMORY {
        let name = l.kernel.name();
        assert!(l.reason.len() > 20, "{name}: say why it needs local memory");
        let ptx_max = ptx_targets()
            .iter()
            .flat_map(|t| {
                let ptx = std::fs::read_to_string(cuda_dir().join(t).join(format!("{name}.ptx")))
                    .expect("the kernel's PTX");
                let funcs = functions(&ptx);
                l.kernel
                    .dtypes()
                    .iter()
                    .filter_map(|&d| entry_local(&funcs, l.kernel.symbol(d)?))
                    .map(|(b, _)| b)
                    .collect::<Vec<_>>()
            })
            .max()
            .unwrap_or(0);
        let scratch_max = ARTIFACTS
            .iter()
            .filter_map(|a| a.code_object(l.kernel))
            .flat_map(|c| scratch(c.bytes).into_values().map(|(b, _)| b))
            .max()
            .unwrap_or(0);
        assert!(
            (l.ptx_bytes == 0 || ptx_max > 0) && (l.scratch_bytes == 0 || scratch_max > 0),
            "{name} declares {} B of PTX local and {} B of scratch but uses {ptx_max} B and \
             {scratch_max} B: lower or drop the declaration",
            l.ptx_bytes,
            l.scratch_bytes
        );
        assert!(
            l.ptx_bytes as u64 <= 2 * ptx_max.max(4)
                && l.scratch_bytes as u64 <= 2 * scratch_max.max(4),
            "{name}: the declared bounds ({} B, {} B) are far above the use ({ptx_max} B, \
             {scratch_max} B)",
            l.ptx_bytes,
            l.scratch_bytes
        );
    }
}
