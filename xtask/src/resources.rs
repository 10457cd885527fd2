//! Per-entry registers and local memory, read from the artifacts themselves (ptxas is absent:
//! the PTX's `.reg` declarations and `.local` depots; the code objects' AMDGPU metadata), printed
//! by `cargo xtask kernels`, committed as `engine/artifacts/resources.txt` so a review sees a
//! register or spill change, and checked against `kiln_math::local_memory`.

use kiln_math::local_memory::local_memory;
use kiln_math::KernelId;
use std::collections::{BTreeMap, BTreeSet};

/// Where the table is committed, relative to the repository root.
pub const TABLE_FILE: &str = "engine/artifacts/resources.txt";

/// One entry of one artifact.
pub struct EntryResources {
    pub kernel: KernelId,
    pub symbol: String,
    /// `sm_90`, `gfx942`, …
    pub target: String,
    /// What the artifact says about registers, in its own terms.
    pub registers: String,
    /// Bytes of per-thread local memory: PTX `.local` (entry and callees) or amdgcn scratch.
    pub local_bytes: u64,
    /// How the local memory is used (`ld.local`/`st.local` counts, spills).
    pub local_detail: String,
}

/// One function of a PTX module: its declarations and the functions it calls.
#[derive(Default)]
struct PtxFunction {
    regs: BTreeMap<String, u64>,
    local_bytes: u64,
    loads: usize,
    stores: usize,
    calls: BTreeSet<String>,
}

/// The function name of a `.entry`/`.func` header line (after any return parameter list).
fn header_name(line: &str) -> Option<&str> {
    let rest = line
        .trim_start_matches(".visible ")
        .trim_start_matches(".weak ")
        .trim_start();
    let rest = rest
        .strip_prefix(".entry")
        .or_else(|| rest.strip_prefix(".func"))?
        .trim_start();
    let rest = match rest.strip_prefix('(') {
        Some(r) => r.split_once(')')?.1.trim_start(),
        None => rest,
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Every defined function of a PTX module, by name, with whether it is an entry.
fn ptx_functions(ptx: &str) -> BTreeMap<String, (bool, PtxFunction)> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, bool, PtxFunction)> = None;
    let mut in_body = false;
    for line in ptx.lines() {
        let t = line.trim();
        if !in_body {
            if let Some(name) = header_name(t) {
                current = Some((
                    name.to_string(),
                    t.contains(".entry"),
                    PtxFunction::default(),
                ));
            } else if t == "{" && current.is_some() {
                in_body = true;
            } else if t.ends_with(';') && line.starts_with(|c: char| !c.is_whitespace()) {
                // A prototype (`.func … ;`) has no body.
                current = None;
            }
            continue;
        }
        let Some((_, _, f)) = current.as_mut() else {
            continue;
        };
        if line == "}" {
            let (name, entry, f) = current.take().expect("inside a function");
            out.insert(name, (entry, f));
            in_body = false;
        } else if let Some(decl) = t.strip_prefix(".reg .") {
            // `.reg .b32 %r<57>;`
            let (ty, rest) = decl.split_once(char::is_whitespace).unwrap_or((decl, ""));
            let n = rest
                .split_once('<')
                .and_then(|(_, n)| n.split_once('>'))
                .and_then(|(n, _)| n.parse().ok())
                .unwrap_or(1);
            *f.regs.entry(ty.to_string()).or_default() += n;
        } else if t.starts_with(".local ") {
            // `.local .align 4 .b8 __local_depot3[8];`
            f.local_bytes += t
                .split_once('[')
                .and_then(|(_, n)| n.split_once(']'))
                .and_then(|(n, _)| n.parse().ok())
                .unwrap_or(0);
        } else {
            f.loads += t.matches("ld.local").count();
            f.stores += t.matches("st.local").count();
            if let Some(call) = t.strip_prefix("call") {
                for word in
                    call.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
                {
                    if !word.is_empty() && !word.starts_with("retval") && !word.starts_with("param")
                    {
                        f.calls.insert(word.to_string());
                    }
                }
            }
        }
    }
    out
}

/// The resources of every entry of one kernel's PTX module.
pub fn ptx_resources(kernel: KernelId, target: &str, ptx: &str) -> Vec<EntryResources> {
    let funcs = ptx_functions(ptx);
    let mut out = Vec::new();
    for (name, (entry, f)) in &funcs {
        if !entry {
            continue;
        }
        // The entry and every function it reaches: a callee's depot is on the same stack.
        let mut seen = BTreeSet::from([name.clone()]);
        let mut todo = vec![name.clone()];
        let (mut bytes, mut loads, mut stores) = (0, 0, 0);
        while let Some(n) = todo.pop() {
            let Some((_, g)) = funcs.get(&n) else {
                continue;
            };
            bytes += g.local_bytes;
            loads += g.loads;
            stores += g.stores;
            for c in &g.calls {
                if seen.insert(c.clone()) {
                    todo.push(c.clone());
                }
            }
        }
        let registers = f
            .regs
            .iter()
            .map(|(ty, n)| format!("{ty} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        out.push(EntryResources {
            kernel,
            symbol: name.clone(),
            target: target.to_string(),
            registers,
            local_bytes: bytes,
            local_detail: format!("ld.local {loads}, st.local {stores}"),
        });
    }
    out.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    out
}

/// The resources of every kernel in a code object's metadata as `llvm-readobj --notes` prints
/// it (one YAML map per kernel under `amdhsa.kernels`).
pub fn code_object_resources(kernel: KernelId, arch: &str, notes: &str) -> Vec<EntryResources> {
    let mut maps: Vec<BTreeMap<&str, &str>> = Vec::new();
    for line in notes.lines() {
        // `  - .key: v` opens a kernel's map; `    .key: v` continues it.
        let rest = if let Some(first) = line.strip_prefix("  - ") {
            maps.push(BTreeMap::new());
            first
        } else if let Some(next) = line.strip_prefix("    ") {
            next
        } else {
            continue;
        };
        let (Some(map), Some((key, value))) = (maps.last_mut(), rest.split_once(':')) else {
            continue;
        };
        if key.starts_with('.') && !key.contains(' ') {
            map.insert(key, value.trim());
        }
    }
    let num = |m: &BTreeMap<&str, &str>, k: &str| {
        m.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
    };
    let mut out: Vec<EntryResources> = maps
        .iter()
        .filter_map(|m| {
            let name = m.get(".name")?;
            Some(EntryResources {
                kernel,
                symbol: name.to_string(),
                target: arch.to_string(),
                registers: format!(
                    "vgpr {}, sgpr {}, agpr {}",
                    num(m, ".vgpr_count"),
                    num(m, ".sgpr_count"),
                    num(m, ".agpr_count")
                ),
                local_bytes: num(m, ".private_segment_fixed_size"),
                local_detail: format!(
                    "vgpr spills {}, sgpr spills {}",
                    num(m, ".vgpr_spill_count"),
                    num(m, ".sgpr_spill_count")
                ),
            })
        })
        .collect();
    out.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    out
}

/// The committed table: one line per entry × target, kernel by kernel in list order, so a new
/// kernel adds its own lines and changes no other.
pub fn table(rows: &[EntryResources]) -> String {
    let mut s = String::from(
        "# Generated by `cargo xtask kernels`: registers and per-thread local memory of every \
         entry, read from\n# the PTX (`.reg` declarations, `.local` depots of the entry and its \
         callees) and the code objects'\n# AMDGPU metadata (register counts, private segment). \
         Allowed local memory: kiln_math::local_memory.\n",
    );
    for &k in KernelId::ALL {
        for r in rows.iter().filter(|r| r.kernel == k) {
            s.push_str(&format!(
                "{:<44} {:<8} local {:>5} B ({})  registers: {}\n",
                r.symbol, r.target, r.local_bytes, r.local_detail, r.registers
            ));
        }
    }
    s
}

/// Every entry whose local memory exceeds what its kernel declares (none declared: zero).
pub fn undeclared_local_memory(rows: &[EntryResources]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| {
            let declared = local_memory(r.kernel);
            let allowed = match (declared, r.target.starts_with("sm_")) {
                (None, _) => 0,
                (Some(d), true) => d.ptx_bytes as u64,
                (Some(d), false) => d.scratch_bytes as u64,
            };
            (r.local_bytes > allowed).then(|| {
                format!(
                    "{} {}: {} B of local memory ({}), {allowed} B declared in \
                     kiln_math::local_memory",
                    r.symbol, r.target, r.local_bytes, r.local_detail
                )
            })
        })
        .collect()
}
