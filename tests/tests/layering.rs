//! Imports only point down: no import loop between the source files of any workspace crate.
//!
//! Every `use` tree and every path in code (`crate::…`, `super::…`, `self::…`) is resolved to the
//! file that defines what it names, following `pub use` re-exports; a cycle in that file graph
//! fails the test with the files and the lines that close it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The crates whose sources are checked, as (name, `src` dir) relative to the workspace root.
const CRATES: &[&str] = &[
    "shared-kernel-math/src",
    "shaders-wgsl/src",
    "shaders-cuda/src",
    "shaders-hip/src",
    "engine/src",
    "tests/src",
    "benches/src",
    "cli/src",
    "xtask/src",
];

/// One source file of a crate: its module path and parsed items.
struct SourceFile {
    module: Vec<String>,
    rel: String,
    ast: syn::File,
}

/// A reference from one file to a path, with the line it is on; `inline` is the path of the
/// inline modules it sits in (its `self` and `super` are relative to them).
#[derive(Default)]
struct Reference {
    path: Vec<String>,
    line: usize,
    inline: Vec<String>,
}

fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Collects use trees and code paths, each as segments with a line.
#[derive(Default)]
struct Collector {
    refs: Vec<Reference>,
    /// The inline modules (`mod tests { … }`) around the current item.
    inline: Vec<String>,
}

fn flatten_use(
    prefix: &mut Vec<String>,
    tree: &syn::UseTree,
    line: usize,
    out: &mut Vec<Reference>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(prefix, &p.tree, line, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            if n.ident != "self" {
                path.push(n.ident.to_string());
            }
            out.push(Reference {
                path,
                line,
                ..Default::default()
            });
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push(Reference {
                path,
                line,
                ..Default::default()
            });
        }
        syn::UseTree::Glob(_) => out.push(Reference {
            path: prefix.clone(),
            line,
            ..Default::default()
        }),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(prefix, t, line, out);
            }
        }
    }
}

impl Collector {
    fn push(&mut self, path: Vec<String>, line: usize) {
        self.refs.push(Reference {
            path,
            line,
            inline: self.inline.clone(),
        });
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.inline.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.inline.pop();
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = u.use_token.span.start().line;
        let mut refs = Vec::new();
        flatten_use(&mut Vec::new(), &u.tree, line, &mut refs);
        for r in refs {
            self.push(r.path, r.line);
        }
    }
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        // Paths of two or more segments may name a child module (`device::RocmDevice`); a lone
        // `crate` is a visibility (`pub(crate)`).
        if segs.len() > 1 {
            let line = p.segments[0].ident.span().start().line;
            self.push(segs, line);
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        // Paths inside macro calls (`format!`, the kernel list expansions) are tokens: scan them.
        let mut toks: Vec<String> = Vec::new();
        let mut line = 0;
        let inline = self.inline.clone();
        let flush = |toks: &mut Vec<String>, line: usize, refs: &mut Vec<Reference>| {
            if toks.len() > 1 {
                refs.push(Reference {
                    path: std::mem::take(toks),
                    line,
                    inline: inline.clone(),
                });
            }
            toks.clear();
        };
        let mut prev_colon = false;
        scan_tokens(m.tokens.clone(), &mut |t| match t {
            Token::Ident(s, l) => {
                if toks.is_empty() {
                    if matches!(s.as_str(), "crate" | "super" | "self") {
                        toks.push(s);
                        line = l;
                    }
                } else if prev_colon {
                    toks.push(s);
                } else {
                    flush(&mut toks, line, &mut self.refs);
                    if matches!(s.as_str(), "crate" | "super" | "self") {
                        toks.push(s);
                        line = l;
                    }
                }
                prev_colon = false;
            }
            Token::PathSep => prev_colon = true,
            Token::Other => {
                flush(&mut toks, line, &mut self.refs);
                prev_colon = false;
            }
        });
        flush(&mut toks, line, &mut self.refs);
        syn::visit::visit_macro(self, m);
    }
}

enum Token {
    Ident(String, usize),
    PathSep,
    Other,
}

fn scan_tokens(ts: proc_macro2::TokenStream, f: &mut impl FnMut(Token)) {
    let mut it = ts.into_iter().peekable();
    while let Some(t) = it.next() {
        match t {
            proc_macro2::TokenTree::Ident(i) => {
                f(Token::Ident(i.to_string(), i.span().start().line))
            }
            proc_macro2::TokenTree::Punct(p) if p.as_char() == ':' => {
                if let Some(proc_macro2::TokenTree::Punct(q)) = it.peek() {
                    if q.as_char() == ':' {
                        it.next();
                        f(Token::PathSep);
                        continue;
                    }
                }
                f(Token::Other)
            }
            proc_macro2::TokenTree::Group(g) => {
                f(Token::Other);
                scan_tokens(g.stream(), f);
                f(Token::Other);
            }
            _ => f(Token::Other),
        }
    }
}

/// The file graph of one crate: for each file, the files it imports from, with a line each.
pub struct Graph {
    pub files: Vec<String>,
    pub edges: BTreeMap<usize, BTreeMap<usize, (usize, String)>>,
}

/// Builds the graph of a crate from `(relative path, source)` pairs under its `src` dir.
pub fn graph(sources: &[(String, String)]) -> Result<Graph, String> {
    let mut files = Vec::new();
    for (rel, text) in sources {
        let ast = syn::parse_file(text).map_err(|e| format!("{rel}: {e}"))?;
        files.push(SourceFile {
            module: module_path(Path::new(""), Path::new(rel)),
            rel: rel.clone(),
            ast,
        });
    }
    let by_module: HashMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.clone(), i))
        .collect();
    // Re-exports: (module, name) → the absolute path it names.
    let mut reexports: HashMap<(usize, String), Vec<String>> = HashMap::new();
    for (i, f) in files.iter().enumerate() {
        for item in &f.ast.items {
            let syn::Item::Use(u) = item else { continue };
            if matches!(u.vis, syn::Visibility::Inherited) {
                continue;
            }
            let mut refs = Vec::new();
            flatten_use(&mut Vec::new(), &u.tree, 0, &mut refs);
            for r in refs {
                if let Some(abs) = absolute(&f.module, &r.path, &by_module) {
                    if let Some(name) = abs.last() {
                        let key = match &u.tree {
                            syn::UseTree::Rename(rn) => rn.rename.to_string(),
                            _ => name.clone(),
                        };
                        reexports.insert((i, key), abs);
                    }
                }
            }
        }
    }
    // `#[macro_export]` macros live at the crate root but are defined in their own file.
    for f in &files {
        for item in &f.ast.items {
            let syn::Item::Macro(m) = item else { continue };
            let exported = m.attrs.iter().any(|a| a.path().is_ident("macro_export"));
            if let (true, Some(name)) = (exported, &m.ident) {
                let defined_in = f.module.iter().cloned().chain([name.to_string()]).collect();
                reexports.insert((by_module[&Vec::new()], name.to_string()), defined_in);
            }
        }
    }
    let mut edges: BTreeMap<usize, BTreeMap<usize, (usize, String)>> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        let mut c = Collector::default();
        c.visit_file(&f.ast);
        for r in c.refs {
            let scope: Vec<String> = f.module.iter().chain(&r.inline).cloned().collect();
            let Some(abs) = absolute(&scope, &r.path, &by_module) else {
                continue;
            };
            if let Some(j) = resolve(&abs, &by_module, &reexports, 0) {
                if j != i {
                    edges
                        .entry(i)
                        .or_default()
                        .entry(j)
                        .or_insert((r.line, r.path.join("::")));
                }
            }
        }
    }
    Ok(Graph {
        files: files.iter().map(|f| f.rel.clone()).collect(),
        edges,
    })
}

/// The absolute module path of `path` as written in the file of `module`.
fn absolute(
    module: &[String],
    path: &[String],
    _by_module: &HashMap<Vec<String>, usize>,
) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = path;
    match path.first()?.as_str() {
        "crate" => {
            base = Vec::new();
            rest = &path[1..];
        }
        "self" => {
            base = module.to_vec();
            rest = &path[1..];
        }
        "super" => {
            base = module.to_vec();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => {
            // A path relative to the current module (`use device::X` in a mod.rs).
            base = module.to_vec();
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file defining what `abs` names: the longest prefix that is a file, following re-exports.
fn resolve(
    abs: &[String],
    by_module: &HashMap<Vec<String>, usize>,
    reexports: &HashMap<(usize, String), Vec<String>>,
    depth: usize,
) -> Option<usize> {
    for n in (0..=abs.len()).rev() {
        if let Some(&file) = by_module.get(&abs[..n]) {
            if depth < 16 {
                if let Some(next) = abs.get(n) {
                    if let Some(target) = reexports.get(&(file, next.clone())) {
                        let mut t = target.clone();
                        t.extend(abs[n + 1..].iter().cloned());
                        if let Some(f) = resolve(&t, by_module, reexports, depth + 1) {
                            return Some(f);
                        }
                    }
                }
            }
            // A path into the crate root that no file defines is an item of the root itself.
            return Some(file);
        }
    }
    None
}

/// Every import loop of the graph: each as its files in order, with the line of each import.
pub fn cycles(g: &Graph) -> Vec<Vec<(String, usize, String)>> {
    // Tarjan's strongly connected components, then one shortest loop through each.
    struct Tarjan<'g> {
        g: &'g Graph,
        index: Vec<usize>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        comps: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn strong(&mut self, v: usize) {
            self.index[v] = self.next;
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            let g = self.g;
            for &w in g.edges.get(&v).into_iter().flat_map(|e| e.keys()) {
                if self.index[w] == usize::MAX {
                    self.strong(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                } else if self.on_stack[w] {
                    self.low[v] = self.low[v].min(self.index[w]);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack[w] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    self.comps.push(comp);
                }
            }
        }
    }
    let n = g.files.len();
    let mut t = Tarjan {
        g,
        index: vec![usize::MAX; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        comps: Vec::new(),
    };
    for v in 0..n {
        if t.index[v] == usize::MAX {
            t.strong(v);
        }
    }
    let comps = t.comps;
    comps
        .into_iter()
        .map(|comp| {
            let set: BTreeSet<usize> = comp.iter().copied().collect();
            let start = *set.iter().next().unwrap();
            // Breadth-first search for the shortest path back to `start` inside the component.
            let mut prev: HashMap<usize, usize> = HashMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut end = None;
            while let Some(v) = queue.pop_front() {
                for &w in g.edges.get(&v).into_iter().flat_map(|e| e.keys()) {
                    if !set.contains(&w) {
                        continue;
                    }
                    if w == start {
                        end = Some(v);
                        queue.clear();
                        break;
                    }
                    if let std::collections::hash_map::Entry::Vacant(e) = prev.entry(w) {
                        e.insert(v);
                        queue.push_back(w);
                    }
                }
            }
            let mut path = vec![end.unwrap()];
            while *path.last().unwrap() != start {
                let p = prev[path.last().unwrap()];
                path.push(p);
            }
            path.reverse();
            path.iter()
                .enumerate()
                .map(|(k, &v)| {
                    let to = path[(k + 1) % path.len()];
                    let (line, path) = g.edges[&v][&to].clone();
                    (g.files[v].clone(), line, path)
                })
                .collect()
        })
        .collect()
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn crate_sources(src: &Path) -> Vec<(String, String)> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    paths.sort();
    paths
        .iter()
        .map(|p| {
            (
                p.strip_prefix(src).unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(p).unwrap(),
            )
        })
        .collect()
}

fn describe(crate_dir: &str, loops: &[Vec<(String, usize, String)>]) -> String {
    loops
        .iter()
        .map(|l| {
            let steps: Vec<String> = l
                .iter()
                .map(|(f, line, path)| format!("{crate_dir}/{f}:{line} ({path})"))
                .collect();
            format!("  loop: {} → (back to the first)", steps.join(" → "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_crate_has_an_import_loop() {
    let root = workspace_root();
    let mut report = String::new();
    for dir in CRATES {
        let sources = crate_sources(&root.join(dir));
        assert!(!sources.is_empty(), "{dir} has no sources");
        let g = graph(&sources).unwrap();
        let loops = cycles(&g);
        if !loops.is_empty() {
            report.push_str(&describe(dir, &loops));
            report.push('\n');
        }
    }
    assert!(
        report.is_empty(),
        "import loops (each line: file:line of the import that leads on):\n{report}"
    );
}

#[test]
fn a_planted_import_closing_a_loop_is_caught() {
    // The engine's tensors are vocabulary; making them import the op API closes a loop.
    let root = workspace_root();
    let mut sources = crate_sources(&root.join("engine/src"));
    let tensor = sources
        .iter_mut()
        .find(|(p, _)| p == "tensor.rs")
        .expect("engine/src/tensor.rs");
    tensor
        .1
        .push_str("\n#[allow(unused_imports)]\nuse crate::ops::fused_add_rms_norm;\n");
    let loops = cycles(&graph(&sources).unwrap());
    assert!(
        loops
            .iter()
            .any(|l| l.iter().any(|(f, _, _)| f == "tensor.rs")),
        "the planted `use crate::ops` in tensor.rs was not reported"
    );
}

#[test]
fn the_checker_resolves_reexports_and_relative_paths() {
    let src = |files: &[(&str, &str)]| -> Vec<(String, String)> {
        files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    };
    // lib re-exports `a::A`; b uses `crate::A` (→ a.rs); a uses `super::b` via a path in code.
    let clean = src(&[
        ("lib.rs", "mod a; mod b; pub use a::A;"),
        ("a.rs", "pub struct A;"),
        ("b.rs", "use crate::A; fn f(_: A) {}"),
    ]);
    assert!(cycles(&graph(&clean).unwrap()).is_empty());
    let looped = src(&[
        ("lib.rs", "mod a; mod b; pub use a::A;"),
        ("a.rs", "pub struct A; fn g() { crate::b::f(); }"),
        (
            "b.rs",
            "use crate::A; pub fn f() { let _ = format!(\"{:?}\", crate::A); }",
        ),
    ]);
    let loops = cycles(&graph(&looped).unwrap());
    assert_eq!(loops.len(), 1, "{}", describe("x", &loops));
    // A loop through a module's own mod.rs and a child (`super::` paths) counts as well.
    let child = src(&[
        ("lib.rs", "mod m;"),
        ("m/mod.rs", "mod c; pub fn top() { c::leaf(); }"),
        ("m/c.rs", "pub fn leaf() { super::top(); }"),
    ]);
    assert_eq!(cycles(&graph(&child).unwrap()).len(), 1);
}

/// The engine's layers, bottom first: each top-level module of engine/src and the layers it may
/// import from (its own module's files always may). docs/architecture.md states the same rules.
const ENGINE_LAYERS: &[(&str, &[&str], &[&str])] = &[
    // (layer, its modules, the layers it may import)
    (
        "vocabulary",
        &[
            "backend", "error", "host", "port", "gpu", "device", "storage", "tensor", "scratch",
            "case", "quant",
        ],
        &["vocabulary"],
    ),
    (
        "backend",
        &["cpu", "sim", "cuda", "rocm", "wgpu"],
        &["vocabulary"],
    ),
    ("reference", &["reference"], &["vocabulary"]),
    ("registry", &["registry"], &["vocabulary", "backend"]),
    (
        "catalog",
        &["catalog"],
        &["vocabulary", "backend", "reference"],
    ),
    ("ports", &["ports"], &["vocabulary", "catalog", "registry"]),
    (
        "above",
        &[
            "launch",
            "ops",
            "paged",
            "parity",
            "debug",
            "timing",
            "rng",
            "collective_tests",
            "rocm_tests",
            "wave_mma_tests",
        ],
        &[
            "vocabulary",
            "backend",
            "reference",
            "registry",
            "catalog",
            "ports",
            "above",
        ],
    ),
];

fn engine_layer(file: &str) -> Option<(&'static str, &'static str, &'static [&'static str])> {
    let top = file.split('/').next()?.trim_end_matches(".rs");
    ENGINE_LAYERS
        .iter()
        .find(|(_, mods, _)| mods.contains(&top))
        .map(|(layer, mods, may)| (*layer, *mods.iter().find(|m| **m == top).unwrap(), *may))
}

/// Every import of `g` that breaks the engine's layer rules, as `from:line (path) → to`.
fn layer_violations(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    for (&from, targets) in &g.edges {
        let f = &g.files[from];
        if f == "lib.rs" {
            continue; // the crate root re-exports from every layer
        }
        let Some((layer, module, may)) = engine_layer(f) else {
            out.push(format!("{f}: not assigned to a layer in ENGINE_LAYERS"));
            continue;
        };
        for (&to, (line, path)) in targets {
            let t = &g.files[to];
            if t == "lib.rs" {
                continue;
            }
            let Some((to_layer, to_module, _)) = engine_layer(t) else {
                continue; // reported as its own file
            };
            // A backend is one module: it never imports another backend.
            let ok = to_module == module
                || (may.contains(&to_layer) && !(layer == "backend" && to_layer == "backend"));
            if !ok {
                out.push(format!(
                    "engine/src/{f}:{line} ({path}) → {t}: {layer} may import only {may:?}"
                ));
            }
        }
    }
    out
}

#[test]
fn engine_imports_only_point_down() {
    let sources = crate_sources(&workspace_root().join("engine/src"));
    let v = layer_violations(&graph(&sources).unwrap());
    assert!(v.is_empty(), "layer rule broken:\n  {}", v.join("\n  "));
}

#[test]
fn a_backend_importing_the_port_table_is_caught() {
    let mut sources = crate_sources(&workspace_root().join("engine/src"));
    let cpu = sources
        .iter_mut()
        .find(|(p, _)| p == "cpu.rs")
        .expect("engine/src/cpu.rs");
    cpu.1
        .push_str("\n#[allow(unused_imports)]\nuse crate::ports::select_port;\n");
    let v = layer_violations(&graph(&sources).unwrap());
    assert!(
        v.iter().any(|l| l.starts_with("engine/src/cpu.rs")),
        "the planted `use crate::ports` in cpu.rs was not reported: {v:?}"
    );
}
