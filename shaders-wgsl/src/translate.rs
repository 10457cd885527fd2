//! The Rust → WGSL translation of one kernel × dtype × variant.
//!
//! Functions are monomorphised per call: `T: Element` is the kernel's element type, `B: Block`
//! is erased (its primitives read entry-level globals), a params reference is erased (fields
//! read `kiln_meta`), a view argument becomes a `vec2<u32>` (element offset, length) while the
//! binding it points into is fixed per instance. Literal types are inferred by unification:
//! text is emitted with placeholders that are filled once a function's types are known.

use crate::error::Error;
use crate::kernels::{elem_type_name, view_type_name, KernelSpec};
use crate::module::Module;
use crate::prelude;
use crate::sources::Sources;
use crate::variant::Variant;
use kiln_math::{Access, DType, Elem, ParamKind};
use proc_macro2::Span;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;
use syn::spanned::Spanned;

type R<T> = Result<T, Error>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Half {
    F16,
    Bf16,
}

/// A value type. 16- and 8-bit integers and the 16-bit floats' bits live in a u32.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Ty {
    F32,
    U32,
    I32,
    U16,
    U8,
    Bool,
    Unit,
    Half(Half),
    Tuple(Vec<Ty>),
    Array(Box<Ty>, u32),
    /// A plain struct of scalars declared in kiln-math.
    Struct(String),
    /// A literal's type, not yet known: `int` says whether it came from an integer literal.
    Var(usize),
}

/// Where a view points: a storage binding or the workgroup arrays.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Place {
    Buffer(usize),
    Scratch,
    Shared(Ty),
}

/// How a function parameter is passed.
#[derive(Clone, Debug)]
enum PTy {
    Block,
    Params(String),
    View,
    /// `Option<&View>`: which one (or none) is fixed per instance.
    OptView,
    /// A closure (`F: Fn(..)` or `impl Fn(..)`): its captures become parameters.
    Closure,
    Val(Ty),
}

#[derive(Clone, Debug)]
enum Val {
    E(String, Ty),
    View(Place, String),
    Block,
    Params(String),
    /// `None` where an `Option<&View>` is expected.
    NoView,
    /// A closure value with the scopes it was defined in.
    Closure(Box<syn::ExprClosure>, Vec<HashMap<String, Local>>),
    Unit,
}

#[derive(Clone, Debug)]
enum Local {
    Val {
        name: String,
        ty: Ty,
    },
    View(Place, String),
    OptView(Option<(Place, String)>),
    Block,
    Params(String),
    /// A closure, inlined where it is called, in the scopes it was defined in.
    Closure(Box<syn::ExprClosure>, Vec<HashMap<String, Local>>),
}

#[derive(Clone, Debug)]
enum Generic {
    Elem(Ty),
    Block,
    Const(Option<u32>),
    /// A `Fn(..)` parameter: a closure, inlined where the callee calls it.
    Closure,
}

/// Which item a call resolves to.
#[derive(Clone, Copy)]
enum FnItem<'a> {
    Free(&'a syn::ItemFn),
    Trait(&'a syn::TraitItemFn),
    Impl(&'a syn::ImplItemFn),
}

impl<'a> FnItem<'a> {
    fn sig(&self) -> &'a syn::Signature {
        match self {
            FnItem::Free(f) => &f.sig,
            FnItem::Trait(f) => &f.sig,
            FnItem::Impl(f) => &f.sig,
        }
    }
    fn body(&self) -> Option<&'a syn::Block> {
        match self {
            FnItem::Free(f) => Some(&f.block),
            FnItem::Trait(f) => f.default.as_ref(),
            FnItem::Impl(f) => Some(&f.block),
        }
    }
}

/// What `self` is inside the function being translated.
#[derive(Clone, Debug)]
enum SelfKind {
    None,
    Block,
    Elem(Ty),
}

#[derive(Clone, Debug)]
enum Ret {
    Unit,
    Val(Ty),
    View(Option<Place>),
}

struct Done {
    name: String,
    ret: Ret,
}

/// Per-function translation state.
struct Fx<'a> {
    file: &'a str,
    generics: HashMap<String, Generic>,
    self_kind: SelfKind,
    scopes: Vec<HashMap<String, Local>>,
    out: String,
    indent: usize,
    /// Union-find over literal types: parent, known type, integer-ness.
    vars: Vec<(usize, Option<Ty>, bool)>,
    /// Types rendered after inference (`\u{1}N\u{2}`).
    late_tys: Vec<Ty>,
    /// Variables of `let x;` bindings: any type, fixed by the first assignment.
    any: std::collections::HashSet<usize>,
    ret: Ret,
    next: usize,
}

pub(crate) struct Tr<'a> {
    src: &'a Sources,
    kernel: &'a KernelSpec,
    elem: Ty,
    variant: Variant,
    fns: Vec<String>,
    done: HashMap<String, Done>,
    active: BTreeSet<String>,
    structs: BTreeMap<String, String>,
    /// Emitted consts by WGSL name: the file each came from, and its declaration.
    consts: BTreeMap<String, (&'a str, String)>,
    accessors: BTreeMap<String, String>,
    pub(crate) prelude: BTreeSet<&'static str>,
    uses_shared: bool,
    uses_subgroups: bool,
    uses_f16: bool,
    next_fn: usize,
    /// The kernel body's params type: a parameter of that type reads `kiln_meta`.
    params_struct: String,
}

fn elem_of(name: &str) -> Option<Ty> {
    Some(match name {
        "f32" => Ty::F32,
        "u32" | "usize" => Ty::U32,
        "i32" | "isize" => Ty::I32,
        "u16" => Ty::U16,
        "u8" => Ty::U8,
        "bool" => Ty::Bool,
        "F16" | "f16" => Ty::Half(Half::F16),
        "Bf16" | "bf16" => Ty::Half(Half::Bf16),
        _ => return None,
    })
}

/// The type of a list dtype's elements.
fn dtype_ty(d: DType) -> Ty {
    match d {
        DType::F32 => Ty::F32,
        DType::F16 => Ty::Half(Half::F16),
        DType::Bf16 => Ty::Half(Half::Bf16),
        DType::U32 => Ty::U32,
        DType::I32 => Ty::I32,
        DType::U8 => Ty::U8,
    }
}

fn ty_key(t: &Ty) -> String {
    match t {
        Ty::F32 => "f32".into(),
        Ty::U32 => "u32".into(),
        Ty::I32 => "i32".into(),
        Ty::U16 => "u16".into(),
        Ty::U8 => "u8".into(),
        Ty::Bool => "bool".into(),
        Ty::Unit => "unit".into(),
        Ty::Half(Half::F16) => "f16".into(),
        Ty::Half(Half::Bf16) => "bf16".into(),
        Ty::Tuple(v) => v.iter().map(ty_key).collect::<Vec<_>>().join("_"),
        Ty::Array(t, n) => format!("a{n}{}", ty_key(t)),
        Ty::Struct(n) => n.clone(),
        Ty::Var(_) => "var".into(),
    }
}

fn place_key(p: &Place) -> String {
    match p {
        Place::Buffer(k) => format!("b{k}"),
        Place::Scratch => "scratch".into(),
        Place::Shared(t) => format!("shared_{}", ty_key(t)),
    }
}

/// Widths of the integers held in a u32.
fn narrow_mask(t: &Ty) -> Option<&'static str> {
    match t {
        Ty::U16 => Some("0xffffu"),
        Ty::U8 => Some("0xffu"),
        _ => None,
    }
}

pub(crate) fn module(
    src: &Sources,
    kernel: &KernelSpec,
    dtype: DType,
    variant: Variant,
) -> R<Module> {
    let elem = dtype_ty(dtype);
    let mut tr = Tr {
        src,
        kernel,
        elem,
        variant,
        fns: Vec::new(),
        done: HashMap::new(),
        active: BTreeSet::new(),
        structs: BTreeMap::new(),
        consts: BTreeMap::new(),
        accessors: BTreeMap::new(),
        prelude: BTreeSet::new(),
        uses_shared: false,
        uses_subgroups: false,
        uses_f16: false,
        next_fn: 0,
        params_struct: String::new(),
    };
    let (file, body) = tr.find_body()?;
    // The body: (b: &B, p: &P, views in list order).
    let sig = &body.sig;
    let n_views = sig.inputs.len().saturating_sub(2);
    if n_views != kernel.buffers.len() {
        return Err(Error::at(
            file,
            sig.ident.span(),
            format!("kernel body `{}`", kernel.name),
            format!(
                "takes {} views, the list declares {} buffers",
                n_views,
                kernel.buffers.len()
            ),
        ));
    }
    let params_ty = tr.params_struct_of(file, sig)?;
    tr.params_struct = params_ty.clone();
    let pw = kernel.params.len();
    let mut args = vec![Val::Block, Val::Params(params_ty)];
    for k in 0..kernel.buffers.len() {
        let w = crate::bindings::meta_buffer_word(pw, k);
        args.push(Val::View(
            Place::Buffer(k),
            format!("vec2<u32>(kiln_meta[{w}u], kiln_meta[{}u])", w + 1),
        ));
    }
    let call_span = sig.ident.span();
    let mut fx0 = Fx::new(file, SelfKind::None);
    let (name, _) = tr.instantiate(
        FnItem::Free(body),
        file,
        SelfKind::None,
        &args,
        None,
        &mut fx0,
        call_span,
    )?;
    let call_args: Vec<String> = args
        .iter()
        .filter_map(|a| match a {
            Val::View(_, rt) => Some(rt.clone()),
            _ => None,
        })
        .collect();
    let wgsl = tr.assemble(&name, &call_args, pw);
    Ok(Module {
        kernel: kernel.name.to_string(),
        dtype: dtype.name().to_string(),
        variant,
        wgsl,
        uses_f16: tr.uses_f16,
        uses_subgroups: tr.uses_subgroups,
        uses_shared: tr.uses_shared,
    })
}

impl<'a> Fx<'a> {
    fn new(file: &'a str, self_kind: SelfKind) -> Fx<'a> {
        Fx {
            file,
            generics: HashMap::new(),
            self_kind,
            scopes: vec![HashMap::new()],
            out: String::new(),
            indent: 1,
            vars: Vec::new(),
            late_tys: Vec::new(),
            any: std::collections::HashSet::new(),
            ret: Ret::Unit,
            next: 0,
        }
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn fresh(&mut self, base: &str) -> String {
        self.next += 1;
        format!("{base}_{}", self.next)
    }

    fn lookup(&self, name: &str) -> Option<&Local> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    fn bind(&mut self, name: &str, l: Local) {
        self.scopes.last_mut().unwrap().insert(name.to_string(), l);
    }

    fn new_var(&mut self, int: bool) -> Ty {
        let id = self.vars.len();
        self.vars.push((id, None, int));
        Ty::Var(id)
    }

    fn root(&mut self, v: usize) -> usize {
        let p = self.vars[v].0;
        if p == v {
            return v;
        }
        let r = self.root(p);
        self.vars[v].0 = r;
        r
    }

    /// The type with every known variable substituted.
    fn norm(&mut self, t: &Ty) -> Ty {
        match t {
            Ty::Var(v) => {
                let r = self.root(*v);
                match self.vars[r].1.clone() {
                    Some(t) => self.norm(&t),
                    None => Ty::Var(r),
                }
            }
            Ty::Tuple(v) => Ty::Tuple(v.iter().map(|t| self.norm(t)).collect()),
            Ty::Array(t, n) => Ty::Array(Box::new(self.norm(t)), *n),
            t => t.clone(),
        }
    }

    fn unify(&mut self, a: &Ty, b: &Ty, span: Span, what: &str) -> R<()> {
        let (a, b) = (self.norm(a), self.norm(b));
        match (&a, &b) {
            _ if a == b => Ok(()),
            (Ty::Var(x), Ty::Var(y)) => {
                let (ax, ay) = (self.any.contains(x), self.any.contains(y));
                let int = match (ax, ay) {
                    (true, false) => self.vars[*y].2,
                    (false, true) => self.vars[*x].2,
                    _ => self.vars[*x].2 || self.vars[*y].2,
                };
                self.vars[*x].0 = *y;
                self.vars[*y].2 = int;
                if !(ax && ay) {
                    self.any.remove(y);
                }
                Ok(())
            }
            (Ty::Var(x), t) | (t, Ty::Var(x)) if self.any.contains(x) => {
                self.vars[*x].1 = Some(t.clone());
                Ok(())
            }
            (Ty::Var(x), t) | (t, Ty::Var(x)) => {
                let int = self.vars[*x].2;
                let t_int = matches!(t, Ty::U32 | Ty::I32 | Ty::U16 | Ty::U8);
                if int && !t_int || !int && *t != Ty::F32 {
                    return Err(Error::at(
                        self.file,
                        span,
                        what.to_string(),
                        format!("a literal cannot have type {t:?}"),
                    ));
                }
                self.vars[*x].1 = Some(t.clone());
                Ok(())
            }
            (Ty::Array(x, n), Ty::Array(y, m)) if n == m => self.unify(x, y, span, what),
            (Ty::Tuple(x), Ty::Tuple(y)) if x.len() == y.len() => {
                for (p, q) in x.clone().iter().zip(y.clone().iter()) {
                    self.unify(p, q, span, what)?;
                }
                Ok(())
            }
            _ => Err(Error::at(
                self.file,
                span,
                what.to_string(),
                format!("type mismatch: {a:?} vs {b:?}"),
            )),
        }
    }

    /// Type text: concrete now, or a placeholder filled after inference.
    fn tyname(&mut self, tr: &mut Tr, t: &Ty) -> String {
        let t = self.norm(t);
        if has_var(&t) {
            self.late_tys.push(t);
            format!("\u{1}{}\u{2}", self.late_tys.len() - 1)
        } else {
            tr.render(&t)
        }
    }

    /// A literal whose type may still be open.
    fn lit(&mut self, text: &str, t: &Ty) -> String {
        let t = self.norm(t);
        match t {
            Ty::Var(v) => format!("\u{3}{v}:{text}\u{2}"),
            t => render_lit(text, &t),
        }
    }

    /// Resolves placeholders in `text`: open integer literals default to i32, floats to f32.
    fn finish(&mut self, tr: &mut Tr, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(i) = rest.find(['\u{1}', '\u{3}']) {
            out.push_str(&rest[..i]);
            let tag = rest.as_bytes()[i];
            let end = rest[i..].find('\u{2}').unwrap() + i;
            let inner = &rest[i + 1..end];
            if tag == 1 {
                let t = self.late_tys[inner.parse::<usize>().unwrap()].clone();
                let t = self.default_vars(&t);
                out.push_str(&tr.render(&t));
            } else {
                let (v, lit) = inner.split_once(':').unwrap();
                let t = self.default_vars(&Ty::Var(v.parse().unwrap()));
                out.push_str(&render_lit(lit, &t));
            }
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }

    fn default_vars(&mut self, t: &Ty) -> Ty {
        match self.norm(t) {
            Ty::Var(v) => {
                if self.vars[v].2 {
                    Ty::I32
                } else {
                    Ty::F32
                }
            }
            Ty::Tuple(v) => Ty::Tuple(v.iter().map(|t| self.default_vars(t)).collect()),
            Ty::Array(t, n) => Ty::Array(Box::new(self.default_vars(&t)), n),
            t => t,
        }
    }
}

/// Whether `#[cfg(..)]` attributes keep an item for the WGSL target: no `target_arch`, feature
/// or `test` holds, so `not(target_arch = "nvptx64")` does.
pub(crate) fn cfg_active(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().filter(|a| a.path().is_ident("cfg")).all(|a| {
        a.parse_args::<syn::Meta>()
            .map(|m| cfg_eval(&m))
            .unwrap_or(false)
    })
}

fn cfg_eval(m: &syn::Meta) -> bool {
    match m {
        syn::Meta::List(l) => {
            let inner: Vec<syn::Meta> = l
                .parse_args_with(
                    syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
                )
                .map(|p| p.into_iter().collect())
                .unwrap_or_default();
            if l.path.is_ident("not") {
                !inner.first().is_some_and(cfg_eval)
            } else if l.path.is_ident("all") {
                inner.iter().all(cfg_eval)
            } else if l.path.is_ident("any") {
                inner.iter().any(cfg_eval)
            } else {
                false
            }
        }
        _ => false,
    }
}

fn stmt_attrs(s: &syn::Stmt) -> &[syn::Attribute] {
    match s {
        syn::Stmt::Local(l) => &l.attrs,
        syn::Stmt::Macro(m) => &m.attrs,
        syn::Stmt::Item(_) => &[],
        syn::Stmt::Expr(e, _) => expr_attrs(e),
    }
}

fn expr_attrs(e: &syn::Expr) -> &[syn::Attribute] {
    use syn::Expr as X;
    match e {
        X::Block(x) => &x.attrs,
        X::Call(x) => &x.attrs,
        X::MethodCall(x) => &x.attrs,
        X::Path(x) => &x.attrs,
        X::If(x) => &x.attrs,
        X::While(x) => &x.attrs,
        X::Loop(x) => &x.attrs,
        X::ForLoop(x) => &x.attrs,
        X::Assign(x) => &x.attrs,
        X::Binary(x) => &x.attrs,
        X::Return(x) => &x.attrs,
        X::Unsafe(x) => &x.attrs,
        X::Match(x) => &x.attrs,
        X::Macro(x) => &x.attrs,
        _ => &[],
    }
}

fn fx_caller_file<'b>(fx: &Fx<'b>) -> &'b str {
    fx.file
}

/// A type with open literal types defaulted (a captured literal's variable keeps Rust's default).
fn default_ty(t: &Ty) -> Ty {
    match t {
        Ty::Var(_) => Ty::I32,
        Ty::Tuple(v) => Ty::Tuple(v.iter().map(default_ty).collect()),
        Ty::Array(e, n) => Ty::Array(Box::new(default_ty(e)), *n),
        t => t.clone(),
    }
}

/// Single-segment names a closure body mentions (a superset of what it captures).
fn free_names(cl: &syn::ExprClosure) -> Vec<String> {
    struct V(std::collections::BTreeSet<String>);
    impl<'ast> syn::visit::Visit<'ast> for V {
        fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
            if let Some(id) = p.path.get_ident() {
                self.0.insert(id.to_string());
            }
            syn::visit::visit_expr_path(self, p);
        }
    }
    let mut v = V(Default::default());
    syn::visit::Visit::visit_expr(&mut v, &cl.body);
    let params: Vec<String> = cl
        .inputs
        .iter()
        .filter_map(|p| match p {
            syn::Pat::Ident(i) => Some(i.ident.to_string()),
            syn::Pat::Type(t) => match &*t.pat {
                syn::Pat::Ident(i) => Some(i.ident.to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    v.0.into_iter().filter(|n| !params.contains(n)).collect()
}

fn has_var(t: &Ty) -> bool {
    match t {
        Ty::Var(_) => true,
        Ty::Tuple(v) => v.iter().any(has_var),
        Ty::Array(t, _) => has_var(t),
        _ => false,
    }
}

fn render_lit(text: &str, t: &Ty) -> String {
    match t {
        Ty::F32 => {
            let v: f32 = text.parse().unwrap_or(0.0);
            format!("{v:e}f")
        }
        Ty::I32 => {
            // i32::MIN cannot be written as a negated literal.
            if text == "2147483648" {
                "i32(-2147483647 - 1)".into()
            } else {
                format!("{text}i")
            }
        }
        Ty::Bool => text.to_string(),
        _ => format!("{text}u"),
    }
}

impl<'a> Tr<'a> {
    fn render(&mut self, t: &Ty) -> String {
        match t {
            Ty::F32 => "f32".into(),
            Ty::U32 | Ty::U16 | Ty::U8 | Ty::Half(_) => "u32".into(),
            Ty::I32 => "i32".into(),
            Ty::Bool => "bool".into(),
            Ty::Unit => "void".into(),
            Ty::Array(e, n) => format!("array<{}, {n}>", self.render(e)),
            Ty::Tuple(v) => {
                let name = format!("kiln_tuple_{}", ty_key(t));
                if !self.structs.contains_key(&name) {
                    let mut s = format!("struct {name} {{\n");
                    for (i, e) in v.iter().enumerate() {
                        let r = self.render(e);
                        let _ = writeln!(s, "    f{i}: {r},");
                    }
                    s.push_str("}\n");
                    self.structs.insert(name.clone(), s);
                }
                name
            }
            Ty::Struct(n) => {
                let name = format!("S_{n}");
                if !self.structs.contains_key(&name) {
                    let fields = self.struct_fields(n).unwrap_or_default();
                    let mut s = format!("struct {name} {{\n");
                    for (f, t) in &fields {
                        let r = self.render(t);
                        let _ = writeln!(s, "    {f}: {r},");
                    }
                    s.push_str("}\n");
                    self.structs.insert(name.clone(), s);
                }
                name
            }
            Ty::Var(_) => "i32".into(),
        }
    }

    fn find_struct(&self, name: &str) -> Option<(&'a str, &'a syn::ItemStruct)> {
        for f in &self.src.files {
            for item in &f.ast.items {
                if let syn::Item::Struct(st) = item {
                    if st.ident == name && matches!(st.fields, syn::Fields::Named(_)) {
                        return Some((f.path.as_str(), st));
                    }
                }
            }
        }
        None
    }

    /// A struct's fields and their (scalar) types, in declaration order.
    fn struct_fields(&mut self, name: &str) -> R<Vec<(String, Ty)>> {
        let Some((file, st)) = self.find_struct(name) else {
            return Ok(Vec::new());
        };
        let mut fx = Fx::new(file, SelfKind::None);
        let mut out = Vec::new();
        for f in &st.fields {
            match self.param_ty(&mut fx, &f.ty)? {
                PTy::Val(t) if !matches!(t, Ty::Struct(_) | Ty::Array(..) | Ty::Tuple(_)) => {
                    out.push((f.ident.as_ref().unwrap().to_string(), t))
                }
                _ => {
                    return Err(Error::at(
                        file,
                        f.span(),
                        format!("field type of struct `{name}`"),
                        "struct fields are scalars",
                    ))
                }
            }
        }
        Ok(out)
    }

    /// The value of an integer module const (array lengths).
    fn const_int(&self, name: &str, caller_file: &str) -> Option<u32> {
        let (_, c) = self.find_const(name, caller_file).ok()??;
        match &*c.expr {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse().ok(),
            _ => None,
        }
    }

    fn struct_lit(&mut self, fx: &mut Fx, st: &syn::ExprStruct) -> R<Val> {
        let span = st.span();
        let name = st.path.segments.last().unwrap().ident.to_string();
        if st.rest.is_some() || self.find_struct(&name).is_none() {
            return Err(Error::at(
                fx.file,
                span,
                format!("struct literal `{name}`"),
                "a plain struct of kiln-math with every field given",
            ));
        }
        let fields = self.struct_fields(&name)?;
        let mut vals = Vec::new();
        for (f, t) in &fields {
            let fv = st
                .fields
                .iter()
                .find(|fv| matches!(&fv.member, syn::Member::Named(m) if m == f));
            let Some(fv) = fv else {
                return Err(Error::at(
                    fx.file,
                    span,
                    format!("struct literal `{name}`"),
                    format!("field `{f}` missing"),
                ));
            };
            let (s, vt) = self.val(fx, &fv.expr)?;
            fx.unify(t, &vt, fv.span(), "struct field")?;
            vals.push(s);
        }
        let ty = Ty::Struct(name);
        let tn = self.render(&ty);
        Ok(Val::E(format!("{tn}({})", vals.join(", ")), ty))
    }

    fn find_body(&self) -> R<(&'a str, &'a syn::ItemFn)> {
        let want = format!("kernels/{}.rs", self.kernel.name);
        for f in &self.src.files {
            if !f.path.ends_with(&want) {
                continue;
            }
            for item in &f.ast.items {
                if let syn::Item::Fn(func) = item {
                    if func.sig.ident == self.kernel.name {
                        return Ok((f.path.as_str(), func));
                    }
                }
            }
        }
        Err(Error {
            file: format!("shared-kernel-math/src/{want}"),
            line: 1,
            column: 1,
            construct: format!("kernel `{}`", self.kernel.name),
            detail: "no body function of that name in its module".into(),
        })
    }

    fn params_struct_of(&self, file: &str, sig: &syn::Signature) -> R<String> {
        if let Some(syn::FnArg::Typed(pt)) = sig.inputs.iter().nth(1) {
            if let Some(name) = ref_path_name(&pt.ty) {
                return Ok(name);
            }
        }
        Err(Error::at(
            file,
            sig.span(),
            "kernel body signature",
            "expected `(b: &B, p: &Params, views…)`",
        ))
    }

    /// Free functions named `name` (the last path segment), the caller's file first.
    fn find_free(&self, name: &str, caller_file: &str) -> Vec<(&'a str, &'a syn::ItemFn)> {
        let mut found = Vec::new();
        for f in &self.src.files {
            for item in &f.ast.items {
                if let syn::Item::Fn(func) = item {
                    if func.sig.ident == name {
                        found.push((f.path.as_str(), func));
                    }
                }
            }
        }
        if found.len() > 1 {
            if let Some(own) = found.iter().find(|(p, _)| *p == caller_file) {
                return vec![*own];
            }
        }
        found
    }

    fn find_block_method(&self, name: &str) -> Option<(&'a str, &'a syn::TraitItemFn)> {
        for f in &self.src.files {
            for item in &f.ast.items {
                let syn::Item::Trait(t) = item else { continue };
                if t.ident != "Block" {
                    continue;
                }
                for ti in &t.items {
                    if let syn::TraitItem::Fn(func) = ti {
                        if func.sig.ident == name && func.default.is_some() {
                            return Some((f.path.as_str(), func));
                        }
                    }
                }
            }
        }
        None
    }

    /// `impl Element for <ty>`'s method `name`.
    fn find_elem_method(&self, ty: &Ty, name: &str) -> Option<(&'a str, &'a syn::ImplItemFn)> {
        let tname = match ty {
            Ty::F32 => "f32",
            Ty::Half(Half::F16) => "F16",
            Ty::Half(Half::Bf16) => "Bf16",
            _ => return None,
        };
        for f in &self.src.files {
            for item in &f.ast.items {
                let syn::Item::Impl(im) = item else { continue };
                let Some((_, tp, _)) = &im.trait_ else {
                    continue;
                };
                if tp.segments.last().is_none_or(|s| s.ident != "Element") {
                    continue;
                }
                if type_path_name(&im.self_ty).as_deref() != Some(tname) {
                    continue;
                }
                for ii in &im.items {
                    if let syn::ImplItem::Fn(func) = ii {
                        if func.sig.ident == name {
                            return Some((f.path.as_str(), func));
                        }
                    }
                }
            }
        }
        None
    }

    /// The module const `name` as seen from `caller_file`, with Rust's scoping: the caller's own
    /// file first, else the one non-private const of that name in another file. Several
    /// candidates and none in the caller's file is `Err(files)`, never a silent pick.
    fn find_const(
        &self,
        name: &str,
        caller_file: &str,
    ) -> Result<Option<(&'a str, &'a syn::ItemConst)>, Vec<&'a str>> {
        let mut visible = Vec::new();
        for f in &self.src.files {
            for item in &f.ast.items {
                let syn::Item::Const(c) = item else { continue };
                if c.ident != name {
                    continue;
                }
                if f.path == caller_file {
                    return Ok(Some((f.path.as_str(), c)));
                }
                if !matches!(c.vis, syn::Visibility::Inherited) {
                    visible.push((f.path.as_str(), c));
                }
            }
        }
        match visible.len() {
            0 => Ok(None),
            1 => Ok(Some(visible[0])),
            _ => Err(visible.iter().map(|(f, _)| *f).collect()),
        }
    }

    /// Translates (once per instance) `item` called with `args`; returns its WGSL name and what
    /// it returns.
    #[allow(clippy::too_many_arguments)]
    fn instantiate(
        &mut self,
        item: FnItem<'a>,
        file: &'a str,
        self_kind: SelfKind,
        args: &[Val],
        turbofish: Option<&[Ty]>,
        caller: &mut Fx,
        call_span: Span,
    ) -> R<(String, Ret)> {
        let sig = item.sig();
        let body = item.body().ok_or_else(|| {
            Error::at(
                file,
                sig.span(),
                "required trait method",
                "no body to translate",
            )
        })?;
        let mut fx = Fx::new(file, self_kind.clone());
        // Generics: Element → the kernel's T, Block → erased, const → from array arguments.
        let mut type_params = Vec::new();
        for g in &sig.generics.params {
            match g {
                syn::GenericParam::Type(tp) => {
                    let bound = tp.bounds.iter().find_map(|b| match b {
                        syn::TypeParamBound::Trait(t) => {
                            t.path.segments.last().map(|s| s.ident.to_string())
                        }
                        _ => None,
                    });
                    let gen = match bound.as_deref() {
                        Some("Element") => Generic::Elem(self.elem.clone()),
                        Some("Block") => Generic::Block,
                        Some("Scalar") => Generic::Elem(Ty::Unit),
                        Some("Fn" | "FnMut" | "FnOnce") => Generic::Closure,
                        _ => {
                            return Err(Error::at(
                                file,
                                tp.span(),
                                format!("type parameter `{}`", tp.ident),
                                "type parameters must be bounded by Element, Scalar or Block",
                            ))
                        }
                    };
                    type_params.push(tp.ident.to_string());
                    fx.generics.insert(tp.ident.to_string(), gen);
                }
                syn::GenericParam::Const(c) => {
                    fx.generics
                        .insert(c.ident.to_string(), Generic::Const(None));
                }
                syn::GenericParam::Lifetime(_) => {}
            }
        }
        // Explicit turbofish types (`shared::<T>` style calls of helpers) override the bound.
        if let Some(tys) = turbofish {
            for (name, t) in type_params.iter().zip(tys) {
                fx.generics.insert(name.clone(), Generic::Elem(t.clone()));
            }
        }
        let params: Vec<&syn::FnArg> = sig.inputs.iter().collect();
        if params.len() != args.len() {
            return Err(Error::at(
                caller.file,
                call_span,
                format!("call of `{}`", sig.ident),
                format!("{} arguments for {} parameters", args.len(), params.len()),
            ));
        }
        let mut key = format!("{file}::{}", sig.ident);
        let mut wparams = Vec::new();
        let mut prologue = Vec::new();
        for (p, a) in params.iter().zip(args) {
            match p {
                syn::FnArg::Receiver(_) => match (&self_kind, a) {
                    (SelfKind::Block, _) => {}
                    (SelfKind::Elem(t), Val::E(s, _)) => {
                        let _ = s;
                        let tn = self.render(t);
                        wparams.push(format!("self_v: {tn}"));
                        fx.bind(
                            "self",
                            Local::Val {
                                name: "self_v".into(),
                                ty: t.clone(),
                            },
                        );
                    }
                    _ => {
                        return Err(Error::at(
                            file,
                            p.span(),
                            "receiver",
                            "unsupported `self` here",
                        ))
                    }
                },
                syn::FnArg::Typed(pt) => {
                    let pty = self.param_ty(&mut fx, &pt.ty)?;
                    // Bind const generics from array argument lengths.
                    if let (syn::Type::Array(arr), Val::E(_, Ty::Array(_, n))) = (&*pt.ty, a) {
                        if let syn::Expr::Path(ep) = &arr.len {
                            if let Some(id) = ep.path.get_ident() {
                                fx.generics.insert(id.to_string(), Generic::Const(Some(*n)));
                                let _ = write!(key, "|{id}={n}");
                            }
                        }
                    }
                    let pty = match pty {
                        PTy::Val(Ty::Array(e, 0)) => {
                            let n = match a {
                                Val::E(_, Ty::Array(_, n)) => *n,
                                _ => 0,
                            };
                            PTy::Val(Ty::Array(e, n))
                        }
                        p => p,
                    };
                    let (pname, mutable) = match &*pt.pat {
                        syn::Pat::Ident(pi) => (pi.ident.to_string(), pi.mutability.is_some()),
                        syn::Pat::Wild(_) => ("_".to_string(), false),
                        other => {
                            return Err(Error::at(
                                file,
                                other.span(),
                                "parameter pattern",
                                "parameters are plain names",
                            ))
                        }
                    };
                    match (pty, a) {
                        (PTy::Block, Val::Block) => fx.bind(&pname, Local::Block),
                        (PTy::Params(n), Val::Params(m)) if n == *m => {
                            fx.bind(&pname, Local::Params(n))
                        }
                        (PTy::Closure, Val::Closure(cl, scopes)) => {
                            let mut dummy = Vec::new();
                            let l = self.pass_closure(
                                fx_caller_file(caller),
                                cl,
                                scopes,
                                &pname,
                                &mut wparams,
                                &mut dummy,
                                &mut key,
                            )?;
                            fx.bind(&pname, l);
                        }
                        (PTy::OptView, Val::NoView) => {
                            let _ = write!(key, "|{pname}@none");
                            fx.bind(&pname, Local::OptView(None));
                        }
                        (PTy::OptView, Val::View(place, _)) => {
                            let w = format!("{pname}_v");
                            let _ = write!(key, "|{pname}@{}", place_key(place));
                            wparams.push(format!("{w}: vec2<u32>"));
                            fx.bind(&pname, Local::OptView(Some((place.clone(), w))));
                        }
                        (PTy::View, Val::View(place, _)) => {
                            let w = format!("{pname}_v");
                            let _ = write!(key, "|{pname}@{}", place_key(place));
                            wparams.push(format!("{w}: vec2<u32>"));
                            fx.bind(&pname, Local::View(place.clone(), w));
                        }
                        (PTy::Val(t), Val::E(_, at_)) => {
                            caller.unify(&t, at_, call_span, "argument")?;
                            let tn = self.render(&t);
                            let w = format!("{pname}_p");
                            if mutable || matches!(t, Ty::Array(..)) {
                                let local = format!("{pname}_m");
                                prologue.push(format!("var {local}: {tn} = {w};"));
                                fx.bind(
                                    &pname,
                                    Local::Val {
                                        name: local,
                                        ty: t.clone(),
                                    },
                                );
                            } else {
                                fx.bind(
                                    &pname,
                                    Local::Val {
                                        name: w.clone(),
                                        ty: t.clone(),
                                    },
                                );
                            }
                            wparams.push(format!("{w}: {tn}"));
                        }
                        (p, a) => {
                            return Err(Error::at(
                                caller.file,
                                call_span,
                                format!("argument `{pname}` of `{}`", sig.ident),
                                format!("a {a:?} cannot be passed where {p:?} is expected"),
                            ))
                        }
                    }
                }
            }
        }
        if let Some(tys) = turbofish {
            for t in tys {
                let _ = write!(key, "|T={}", ty_key(t));
            }
        }
        if let SelfKind::Elem(t) = &self_kind {
            let _ = write!(key, "|Self={}", ty_key(t));
        }
        if let Some(d) = self.done.get(&key) {
            return Ok((d.name.clone(), d.ret.clone()));
        }
        if !self.active.insert(key.clone()) {
            return Err(Error::at(
                file,
                sig.ident.span(),
                format!("recursive call of `{}`", sig.ident),
                "WGSL has no recursion",
            ));
        }
        fx.ret = match &sig.output {
            syn::ReturnType::Default => Ret::Unit,
            syn::ReturnType::Type(_, t) => match self.param_ty(&mut fx, t)? {
                PTy::Val(t) => Ret::Val(t),
                PTy::View => Ret::View(None),
                _ => {
                    return Err(Error::at(
                        file,
                        t.span(),
                        "return type",
                        "functions return values, tuples or views",
                    ))
                }
            },
        };
        for l in &prologue {
            fx.line(l);
        }
        let tail = self.block(&mut fx, body)?;
        match (&fx.ret.clone(), tail) {
            (_, None) => {}
            (Ret::Unit, Some(Val::Unit)) => {}
            (Ret::Val(t), Some(Val::E(s, vt))) => {
                fx.unify(t, &vt, body.span(), "returned value")?;
                fx.line(&format!("return {s};"));
            }
            (Ret::View(_), Some(Val::View(p, rt))) => {
                self.ret_view(&mut fx, &p, body.span())?;
                fx.line(&format!("return {rt};"));
            }
            (_, Some(v)) => {
                return Err(Error::at(
                    file,
                    body.span(),
                    "function tail",
                    format!("the value {v:?} does not match the return type"),
                ))
            }
        }
        self.next_fn += 1;
        let name = format!("k_{}_{}", sig.ident, self.next_fn);
        let ret_text = match fx.ret.clone() {
            Ret::Unit => String::new(),
            Ret::Val(t) => {
                let t = fx.default_vars(&t);
                format!(" -> {}", self.render(&t))
            }
            Ret::View(_) => " -> vec2<u32>".into(),
        };
        let body_text = fx.out.clone();
        let body_text = fx.finish(self, &body_text);
        let text = format!(
            "fn {name}({}){ret_text} {{\n{body_text}}}\n",
            wparams.join(", ")
        );
        self.fns.push(text);
        self.active.remove(&key);
        let ret = fx.ret.clone();
        self.done.insert(
            key,
            Done {
                name: name.clone(),
                ret: ret.clone(),
            },
        );
        Ok((name, ret))
    }

    fn ret_view(&mut self, fx: &mut Fx, p: &Place, span: Span) -> R<()> {
        match &fx.ret {
            Ret::View(None) => {
                fx.ret = Ret::View(Some(p.clone()));
                Ok(())
            }
            Ret::View(Some(q)) if q == p => Ok(()),
            _ => Err(Error::at(
                fx.file,
                span,
                "returned view",
                "every return of a view-returning function must return the same buffer",
            )),
        }
    }

    /// A parameter or return type.
    fn param_ty(&mut self, fx: &mut Fx, t: &syn::Type) -> R<PTy> {
        match t {
            syn::Type::Reference(r) => {
                if r.mutability.is_some() {
                    return Err(Error::at(
                        fx.file,
                        t.span(),
                        "`&mut` reference",
                        "views carry writes",
                    ));
                }
                match self.param_ty(fx, &r.elem)? {
                    PTy::Val(Ty::Unit) => Err(Error::at(fx.file, t.span(), "reference", "unsupported")),
                    p @ (PTy::Block | PTy::Params(_)) => Ok(p),
                    PTy::Val(v) => Ok(PTy::Val(v)),
                    p => Ok(p),
                }
            }
            syn::Type::ImplTrait(it)
                if it.bounds.iter().any(|b| matches!(b, syn::TypeParamBound::Trait(t) if t.path.segments.last().is_some_and(|s| s.ident.to_string().starts_with("Fn")))) =>
            {
                Ok(PTy::Closure)
            }
            syn::Type::Tuple(tt) => {
                let mut v = Vec::new();
                for e in &tt.elems {
                    match self.param_ty(fx, e)? {
                        PTy::Val(t) => v.push(t),
                        _ => {
                            return Err(Error::at(fx.file, e.span(), "tuple element type", "values only"))
                        }
                    }
                }
                if v.is_empty() {
                    return Ok(PTy::Val(Ty::Unit));
                }
                Ok(PTy::Val(Ty::Tuple(v)))
            }
            syn::Type::Array(a) => {
                let PTy::Val(e) = self.param_ty(fx, &a.elem)? else {
                    return Err(Error::at(fx.file, a.span(), "array element type", "values only"));
                };
                let n =
                    match &a.len {
                        syn::Expr::Lit(l) => match &l.lit {
                            syn::Lit::Int(i) => i.base10_parse::<u32>().ok(),
                            _ => None,
                        },
                        syn::Expr::Path(p) => p.path.get_ident().and_then(|id| {
                            match fx.generics.get(&id.to_string()) {
                                Some(Generic::Const(Some(n))) => Some(*n),
                                Some(Generic::Const(None)) => Some(0),
                                _ => self.const_int(&id.to_string(), fx.file),
                            }
                        }),
                        _ => None,
                    };
                let n = n.ok_or_else(|| {
                    Error::at(
                        fx.file,
                        a.len.span(),
                        "array length",
                        "a literal or a const generic",
                    )
                })?;
                Ok(PTy::Val(Ty::Array(Box::new(e), n)))
            }
            syn::Type::Path(tp) => {
                let seg = tp.path.segments.last().unwrap();
                let name = seg.ident.to_string();
                if let Some(g) = fx.generics.get(&name) {
                    return Ok(match g {
                        Generic::Elem(t) => PTy::Val(t.clone()),
                        Generic::Block => PTy::Block,
                        Generic::Const(_) => PTy::Val(Ty::U32),
                        Generic::Closure => PTy::Closure,
                    });
                }
                if name == "Self" {
                    return Ok(match &fx.self_kind {
                        SelfKind::Block => PTy::Block,
                        SelfKind::Elem(t) => PTy::Val(t.clone()),
                        SelfKind::None => {
                            return Err(Error::at(fx.file, t.span(), "`Self`", "outside an impl"))
                        }
                    });
                }
                if let Some(t) = elem_of(&name) {
                    return Ok(PTy::Val(t));
                }
                if matches!(name.as_str(), "Src" | "Dst" | "Rw") {
                    let inner = match &seg.arguments {
                        syn::PathArguments::AngleBracketed(ab) => ab.args.first(),
                        _ => None,
                    };
                    let Some(syn::GenericArgument::Type(it)) = inner else {
                        return Err(Error::at(fx.file, t.span(), "view type", "write `Src<T>`"));
                    };
                    let PTy::Val(e) = self.param_ty(fx, it)? else {
                        return Err(Error::at(fx.file, it.span(), "view element", "a scalar type"));
                    };
                    let _ = e;
                    return Ok(PTy::View);
                }
                if name == self.params_struct {
                    return Ok(PTy::Params(name));
                }
                if name == "Option" {
                    let inner = match &seg.arguments {
                        syn::PathArguments::AngleBracketed(ab) => ab.args.first(),
                        _ => None,
                    };
                    if let Some(syn::GenericArgument::Type(it)) = inner {
                        if let PTy::View = self.param_ty(fx, it)? {
                            return Ok(PTy::OptView);
                        }
                    }
                    return Err(Error::at(
                        fx.file,
                        t.span(),
                        "`Option` type",
                        "only `Option<&View>` parameters",
                    ));
                }
                if self.find_struct(&name).is_some() {
                    return Ok(PTy::Val(Ty::Struct(name)));
                }
                Err(Error::at(
                    fx.file,
                    t.span(),
                    format!("type `{name}`"),
                    "types are f32, u32, i32, u16, u8, usize, bool, F16, Bf16, T, tuples, arrays, views and params structs",
                ))
            }
            other => Err(Error::at(
                fx.file,
                other.span(),
                format!("type `{}`", quote::quote!(#other)),
                "unsupported type form",
            )),
        }
    }

    fn block(&mut self, fx: &mut Fx, b: &syn::Block) -> R<Option<Val>> {
        fx.scopes.push(HashMap::new());
        let mut tail = None;
        // Statements another target compiles (`#[cfg(target_arch = "nvptx64")]`) are dropped.
        let stmts: Vec<&syn::Stmt> = b
            .stmts
            .iter()
            .filter(|s| cfg_active(stmt_attrs(s)))
            .collect();
        let n = stmts.len();
        for (i, s) in stmts.into_iter().enumerate() {
            let last = i + 1 == n;
            match s {
                syn::Stmt::Local(l) => self.local(fx, l)?,
                syn::Stmt::Expr(e, semi) => {
                    if last && semi.is_none() {
                        tail = Some(self.expr(fx, e)?);
                    } else {
                        self.stmt_expr(fx, e)?;
                    }
                }
                syn::Stmt::Item(it) => {
                    return Err(Error::at(
                        fx.file,
                        it.span(),
                        "nested item",
                        "define items at module level",
                    ))
                }
                syn::Stmt::Macro(m) => {
                    let name = m.mac.path.segments.last().map(|s| s.ident.to_string());
                    return Err(Error::at(
                        fx.file,
                        m.span(),
                        format!("macro call `{}!`", name.unwrap_or_default()),
                        "macros do not translate; a view access traps on its own",
                    ));
                }
            }
        }
        fx.scopes.pop();
        Ok(tail)
    }

    /// An expression used as a statement.
    fn stmt_expr(&mut self, fx: &mut Fx, e: &syn::Expr) -> R<()> {
        match e {
            syn::Expr::If(_) | syn::Expr::Match(_) | syn::Expr::Block(_) => {
                let v = self.expr(fx, e)?;
                if let Val::E(s, _) = v {
                    if !s.is_empty() && !is_plain_name(&s) {
                        fx.line(&format!("_ = {s};"));
                    }
                }
                Ok(())
            }
            _ => {
                let v = self.expr(fx, e)?;
                if let Val::E(s, t) = v {
                    if t == Ty::Unit {
                        if !s.is_empty() {
                            fx.line(&format!("{s};"));
                        }
                    } else if s.contains('(') {
                        fx.line(&format!("_ = {s};"));
                    }
                }
                Ok(())
            }
        }
    }

    fn local(&mut self, fx: &mut Fx, l: &syn::Local) -> R<()> {
        let Some(init) = &l.init else {
            // `let x;` assigned later: declared here, typed by its assignments.
            let (pat, annot) = match &l.pat {
                syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
                p => (p, None),
            };
            let syn::Pat::Ident(pi) = pat else {
                return Err(Error::at(
                    fx.file,
                    l.span(),
                    "`let` pattern without a value",
                    "a name",
                ));
            };
            let t = match annot {
                Some(a) => match self.param_ty(fx, a)? {
                    PTy::Val(t) => t,
                    _ => {
                        return Err(Error::at(
                            fx.file,
                            a.span(),
                            "deferred binding type",
                            "a value type",
                        ))
                    }
                },
                None => {
                    let t = fx.new_var(false);
                    if let Ty::Var(v) = t {
                        fx.any.insert(v);
                    }
                    t
                }
            };
            let name = pi.ident.to_string();
            let w = fx.fresh(&name);
            let tn = fx.tyname(self, &t);
            fx.line(&format!("var {w}: {tn};"));
            fx.bind(&name, Local::Val { name: w, ty: t });
            return Ok(());
        };
        if init.diverge.is_some() {
            return Err(Error::at(fx.file, l.span(), "`let … else`", "unsupported"));
        }
        let (pat, annot) = match &l.pat {
            syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        // `let (a, b) = (x, y);` binds element-wise.
        if let (syn::Pat::Tuple(pt), syn::Expr::Tuple(et)) = (pat, &*init.expr) {
            if pt.elems.len() == et.elems.len() && annot.is_none() {
                let mut vals = Vec::new();
                for e in &et.elems {
                    vals.push(self.expr(fx, e)?);
                }
                // Evaluate every element before binding any (the right side may name the left).
                let mut tmp = Vec::new();
                for v in vals {
                    match v {
                        Val::E(s, t) => {
                            let n = fx.fresh("t");
                            let tn = fx.tyname(self, &t);
                            fx.line(&format!("let {n}: {tn} = {s};"));
                            tmp.push(Val::E(n, t));
                        }
                        v => tmp.push(v),
                    }
                }
                for (p, v) in pt.elems.iter().zip(tmp) {
                    self.bind_pat(fx, p, v, None)?;
                }
                return Ok(());
            }
        }
        if let (syn::Expr::Closure(c), syn::Pat::Ident(pi)) = (&*init.expr, pat) {
            let scopes = fx.scopes.clone();
            fx.bind(
                &pi.ident.to_string(),
                Local::Closure(Box::new(c.clone()), scopes),
            );
            return Ok(());
        }
        let v = self.expr(fx, &init.expr)?;
        let annot_ty = match annot {
            Some(t) => Some(self.param_ty(fx, t)?),
            None => None,
        };
        self.bind_pat(fx, pat, v, annot_ty)
    }

    fn bind_pat(&mut self, fx: &mut Fx, pat: &syn::Pat, v: Val, annot: Option<PTy>) -> R<()> {
        match pat {
            syn::Pat::Wild(_) => {
                if let Val::E(s, t) = v {
                    if t != Ty::Unit && s.contains('(') {
                        fx.line(&format!("_ = {s};"));
                    }
                }
                Ok(())
            }
            syn::Pat::Ident(pi) => {
                if pi.by_ref.is_some() || pi.subpat.is_some() {
                    return Err(Error::at(
                        fx.file,
                        pi.span(),
                        "`ref` binding",
                        "unsupported",
                    ));
                }
                let name = pi.ident.to_string();
                match v {
                    Val::E(s, t) => {
                        if let Some(PTy::Val(at_)) = &annot {
                            fx.unify(at_, &t, pi.span(), "annotated binding")?;
                        }
                        let w = fx.fresh(&name);
                        let tn = fx.tyname(self, &t);
                        let kw = if pi.mutability.is_some() || matches!(t, Ty::Array(..)) {
                            "var"
                        } else {
                            "let"
                        };
                        fx.line(&format!("{kw} {w}: {tn} = {s};"));
                        fx.bind(&name, Local::Val { name: w, ty: t });
                    }
                    Val::View(p, rt) => {
                        let w = fx.fresh(&name);
                        fx.line(&format!("let {w}: vec2<u32> = {rt};"));
                        fx.bind(&name, Local::View(p, w));
                    }
                    Val::Block => fx.bind(&name, Local::Block),
                    Val::Params(n) => fx.bind(&name, Local::Params(n)),
                    Val::NoView => fx.bind(&name, Local::OptView(None)),
                    Val::Closure(c, sc) => fx.bind(&name, Local::Closure(c, sc)),
                    Val::Unit => {}
                }
                Ok(())
            }
            syn::Pat::Tuple(pt) => {
                let Val::E(s, t) = v else {
                    return Err(Error::at(
                        fx.file,
                        pt.span(),
                        "tuple pattern",
                        "binds a tuple value",
                    ));
                };
                let t = fx.norm(&t);
                let Ty::Tuple(elems) = t.clone() else {
                    return Err(Error::at(
                        fx.file,
                        pt.span(),
                        "tuple pattern",
                        format!("on {t:?}"),
                    ));
                };
                if elems.len() != pt.elems.len() {
                    return Err(Error::at(
                        fx.file,
                        pt.span(),
                        "tuple pattern",
                        "arity mismatch",
                    ));
                }
                let n = fx.fresh("t");
                let tn = fx.tyname(self, &t);
                fx.line(&format!("let {n}: {tn} = {s};"));
                for (i, (p, et)) in pt.elems.iter().zip(elems).enumerate() {
                    self.bind_pat(fx, p, Val::E(format!("{n}.f{i}"), et), None)?;
                }
                Ok(())
            }
            syn::Pat::Type(pt) => {
                let a = self.param_ty(fx, &pt.ty)?;
                self.bind_pat(fx, &pt.pat, v, Some(a))
            }
            other => Err(Error::at(
                fx.file,
                other.span(),
                format!("pattern `{}`", quote::quote!(#other)),
                "let patterns are names, `_` and tuples",
            )),
        }
    }

    fn val(&mut self, fx: &mut Fx, e: &syn::Expr) -> R<(String, Ty)> {
        match self.expr(fx, e)? {
            Val::E(s, t) => Ok((s, t)),
            v => Err(Error::at(
                fx.file,
                e.span(),
                format!("`{}`", quote::quote!(#e)),
                format!("expected a value, found {v:?}"),
            )),
        }
    }

    fn expr(&mut self, fx: &mut Fx, e: &syn::Expr) -> R<Val> {
        use syn::Expr as X;
        let span = e.span();
        match e {
            X::Paren(p) => {
                let v = self.expr(fx, &p.expr)?;
                Ok(match v {
                    Val::E(s, t) => Val::E(format!("({s})"), t),
                    v => v,
                })
            }
            X::Group(g) => self.expr(fx, &g.expr),
            X::Lit(l) => self.literal(fx, &l.lit),
            X::Path(p) => self.path_expr(fx, p),
            X::Reference(r) => {
                if r.mutability.is_some() {
                    return Err(Error::at(
                        fx.file,
                        span,
                        "`&mut` borrow",
                        "views carry writes",
                    ));
                }
                self.expr(fx, &r.expr)
            }
            X::Unary(u) => {
                let v = self.expr(fx, &u.expr)?;
                match (&u.op, v) {
                    (syn::UnOp::Deref(_), v) => Ok(v),
                    (syn::UnOp::Neg(_), Val::E(s, t)) => Ok(Val::E(format!("-({s})"), t)),
                    (syn::UnOp::Not(_), Val::E(s, t)) => {
                        let t = fx.norm(&t);
                        Ok(match t {
                            Ty::Bool => Val::E(format!("!({s})"), t),
                            _ => match narrow_mask(&t) {
                                Some(m) => Val::E(format!("(~({s}) & {m})"), t),
                                None => Val::E(format!("~({s})"), t),
                            },
                        })
                    }
                    _ => Err(Error::at(fx.file, span, "unary operator", "on a non-value")),
                }
            }
            X::Binary(b) => self.binary(fx, b),
            X::Assign(a) if matches!(&*a.left, syn::Expr::Tuple(_)) => {
                // `(a, b) = pair`: every target gets its element.
                let syn::Expr::Tuple(targets) = &*a.left else {
                    unreachable!()
                };
                let (rhs, rt) = self.val(fx, &a.right)?;
                let rt = fx.norm(&rt);
                let Ty::Tuple(elems) = rt.clone() else {
                    return Err(Error::at(
                        fx.file,
                        span,
                        "destructuring assignment",
                        "of a tuple value",
                    ));
                };
                let tmp = fx.fresh("da");
                let tn = fx.tyname(self, &rt);
                fx.line(&format!("let {tmp}: {tn} = {rhs};"));
                for (k, (t, et)) in targets.elems.iter().zip(elems).enumerate() {
                    if matches!(t, syn::Expr::Infer(_)) {
                        continue;
                    }
                    let (lhs, lt) = self.place(fx, t)?;
                    fx.unify(&lt, &et, span, "assignment")?;
                    fx.line(&format!("{lhs} = {tmp}.f{k};"));
                }
                Ok(Val::E(String::new(), Ty::Unit))
            }
            X::Assign(a) => {
                let (rhs, rt) = self.val(fx, &a.right)?;
                let (lhs, lt) = self.place(fx, &a.left)?;
                fx.unify(&lt, &rt, span, "assignment")?;
                fx.line(&format!("{lhs} = {rhs};"));
                Ok(Val::E(String::new(), Ty::Unit))
            }
            X::Cast(c) => self.cast(fx, c),
            X::MethodCall(m) => self.method(fx, m),
            X::Call(c) => self.call(fx, c),
            X::Field(f) => self.field(fx, f),
            X::Index(ix) => {
                let (base, bt) = self.val(fx, &ix.expr)?;
                let (i, it) = self.val(fx, &ix.index)?;
                fx.unify(&it, &Ty::U32, span, "array index")?;
                match fx.norm(&bt) {
                    Ty::Array(e, _) => Ok(Val::E(format!("{base}[{i}]"), *e)),
                    t => Err(Error::at(
                        fx.file,
                        span,
                        "indexing",
                        format!("of {t:?}: use view.get(i)"),
                    )),
                }
            }
            X::Tuple(t) => {
                if t.elems.is_empty() {
                    return Ok(Val::Unit);
                }
                let mut parts = Vec::new();
                let mut tys = Vec::new();
                for e in &t.elems {
                    let (s, ty) = self.val(fx, e)?;
                    parts.push(s);
                    tys.push(ty);
                }
                let ty = Ty::Tuple(tys);
                let tn = fx.tyname(self, &ty);
                Ok(Val::E(format!("{tn}({})", parts.join(", ")), ty))
            }
            X::Array(a) => {
                let mut parts = Vec::new();
                let mut et: Option<Ty> = None;
                for e in &a.elems {
                    let (s, ty) = self.val(fx, e)?;
                    if let Some(p) = &et {
                        fx.unify(p, &ty, e.span(), "array element")?;
                    } else {
                        et = Some(ty);
                    }
                    parts.push(s);
                }
                let et = et.unwrap_or(Ty::U32);
                let ty = Ty::Array(Box::new(et), parts.len() as u32);
                let tn = fx.tyname(self, &ty);
                Ok(Val::E(format!("{tn}({})", parts.join(", ")), ty))
            }
            X::Block(b) => {
                if b.label.is_some() {
                    return Err(Error::at(fx.file, span, "labelled block", "unsupported"));
                }
                self.block_value(fx, &b.block, span)
            }
            X::If(i) => self.if_expr(fx, i),
            X::Match(m) => self.match_expr(fx, m),
            X::While(w) => {
                if w.label.is_some() {
                    return Err(Error::at(fx.file, span, "loop label", "unsupported"));
                }
                let mark = fx.out.len();
                let (c, ct) = self.val(fx, &w.cond)?;
                fx.unify(&ct, &Ty::Bool, span, "while condition")?;
                let pre = fx.out.split_off(mark);
                if pre.is_empty() {
                    fx.line(&format!("while {c} {{"));
                } else {
                    fx.line("loop {");
                    fx.out.push_str(&indent_text(&pre, 1));
                    fx.line(&format!("    if !({c}) {{ break; }}"));
                }
                fx.indent += 1;
                self.block(fx, &w.body)?;
                fx.indent -= 1;
                fx.line("}");
                Ok(Val::Unit)
            }
            X::Loop(l) => {
                if l.label.is_some() {
                    return Err(Error::at(fx.file, span, "loop label", "unsupported"));
                }
                fx.line("loop {");
                fx.indent += 1;
                self.block(fx, &l.body)?;
                fx.indent -= 1;
                fx.line("}");
                Ok(Val::Unit)
            }
            X::ForLoop(f) => self.for_loop(fx, f),
            X::Break(b) => {
                if b.label.is_some() || b.expr.is_some() {
                    return Err(Error::at(
                        fx.file,
                        span,
                        "`break` with a label or value",
                        "unsupported",
                    ));
                }
                fx.line("break;");
                Ok(Val::Unit)
            }
            X::Continue(c) => {
                if c.label.is_some() {
                    return Err(Error::at(
                        fx.file,
                        span,
                        "`continue` with a label",
                        "unsupported",
                    ));
                }
                fx.line("continue;");
                Ok(Val::Unit)
            }
            X::Return(r) => {
                match &r.expr {
                    None => fx.line("return;"),
                    Some(e) => {
                        let v = self.expr(fx, e)?;
                        match (fx.ret.clone(), v) {
                            (Ret::Val(t), Val::E(s, vt)) => {
                                fx.unify(&t, &vt, span, "returned value")?;
                                fx.line(&format!("return {s};"));
                            }
                            (Ret::View(_), Val::View(p, rt)) => {
                                self.ret_view(fx, &p, span)?;
                                fx.line(&format!("return {rt};"));
                            }
                            (Ret::Unit, Val::Unit) => fx.line("return;"),
                            (_, v) => {
                                return Err(Error::at(
                                    fx.file,
                                    span,
                                    "return",
                                    format!("{v:?} does not match the return type"),
                                ))
                            }
                        }
                    }
                }
                Ok(Val::Unit)
            }
            X::Closure(c) => Ok(Val::Closure(Box::new(c.clone()), fx.scopes.clone())),
            X::Macro(m) => {
                let name = m.mac.path.segments.last().map(|s| s.ident.to_string());
                Err(Error::at(
                    fx.file,
                    span,
                    format!("macro call `{}!`", name.unwrap_or_default()),
                    "macros do not translate",
                ))
            }
            X::Range(_) => Err(Error::at(
                fx.file,
                span,
                "range",
                "ranges appear only in `for` loops",
            )),
            X::Unsafe(u) => self.block_value(fx, &u.block, span),
            X::Let(_) => Err(Error::at(
                fx.file,
                span,
                "`if let` / `let` expression",
                "unsupported",
            )),
            X::Struct(st) => self.struct_lit(fx, st),
            X::Repeat(r) => {
                let (s, t) = self.val(fx, &r.expr)?;
                let n = match &*r.len {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(i),
                        ..
                    }) => i.base10_parse::<u32>().ok(),
                    syn::Expr::Path(p) => p
                        .path
                        .get_ident()
                        .and_then(|id| self.const_int(&id.to_string(), fx.file)),
                    _ => None,
                }
                .ok_or_else(|| {
                    Error::at(
                        fx.file,
                        span,
                        "array repeat length",
                        "a literal or an integer const",
                    )
                })?;
                let ty = Ty::Array(Box::new(t), n);
                let tn = fx.tyname(self, &ty);
                let parts = vec![s; n as usize];
                Ok(Val::E(format!("{tn}({})", parts.join(", ")), ty))
            }
            other => Err(Error::at(
                fx.file,
                span,
                format!("expression `{}`", quote::quote!(#other)),
                "unsupported expression",
            )),
        }
    }

    fn block_value(&mut self, fx: &mut Fx, b: &syn::Block, span: Span) -> R<Val> {
        // A block with a value needs a variable declared before it.
        let has_tail = matches!(b.stmts.last(), Some(syn::Stmt::Expr(_, None)));
        if !has_tail {
            fx.line("{");
            fx.indent += 1;
            self.block(fx, b)?;
            fx.indent -= 1;
            fx.line("}");
            return Ok(Val::Unit);
        }
        let mark = fx.out.len();
        fx.indent += 1;
        let tail = self.block(fx, b)?;
        fx.indent -= 1;
        let inner = fx.out.split_off(mark);
        match tail {
            Some(Val::E(s, t)) if t != Ty::Unit => {
                let n = fx.fresh("blk");
                let tn = fx.tyname(self, &t);
                fx.line(&format!("var {n}: {tn};"));
                fx.line("{");
                fx.out.push_str(&inner);
                fx.line(&format!("    {n} = {s};"));
                fx.line("}");
                Ok(Val::E(n, t))
            }
            Some(Val::View(..)) => Err(Error::at(
                fx.file,
                span,
                "block yielding a view",
                "unsupported",
            )),
            _ => {
                fx.line("{");
                fx.out.push_str(&inner);
                fx.line("}");
                Ok(Val::Unit)
            }
        }
    }

    fn if_expr(&mut self, fx: &mut Fx, i: &syn::ExprIf) -> R<Val> {
        let span = i.span();
        if let syn::Expr::Let(l) = &*i.cond {
            // `if let Some(v) = optional_view`: decided per instance, at translation time.
            let v = self.expr(fx, &l.expr)?;
            let syn::Pat::TupleStruct(ts) = &*l.pat else {
                return Err(Error::at(
                    fx.file,
                    l.span(),
                    "`if let` pattern",
                    "only `Some(name)` on an optional view",
                ));
            };
            match v {
                Val::View(p, w) if ts.elems.len() == 1 => {
                    fx.line("{");
                    fx.indent += 1;
                    fx.scopes.push(HashMap::new());
                    self.bind_pat(fx, &ts.elems[0], Val::View(p, w), None)?;
                    self.block(fx, &i.then_branch)?;
                    fx.scopes.pop();
                    fx.indent -= 1;
                    fx.line("}");
                }
                Val::NoView => {
                    if let Some((_, els)) = &i.else_branch {
                        self.stmt_expr(fx, els)?;
                    }
                }
                _ => {
                    return Err(Error::at(
                        fx.file,
                        l.span(),
                        "`if let`",
                        "only on an optional view",
                    ))
                }
            }
            return Ok(Val::Unit);
        }
        let (c, ct) = self.val(fx, &i.cond)?;
        fx.unify(&ct, &Ty::Bool, span, "if condition")?;
        let has_value = i.else_branch.is_some()
            && matches!(i.then_branch.stmts.last(), Some(syn::Stmt::Expr(e, None)) if !is_unit_expr(e));
        let result = if has_value {
            Some(fx.fresh("ifv"))
        } else {
            None
        };
        let decl_at = fx.out.len();
        fx.line(&format!("if {c} {{"));
        fx.indent += 1;
        let tv = self.block(fx, &i.then_branch)?;
        let mut rty = None;
        if let (Some(r), Some(Val::E(s, t))) = (&result, &tv) {
            fx.line(&format!("{r} = {s};"));
            rty = Some(t.clone());
        }
        fx.indent -= 1;
        match &i.else_branch {
            None => fx.line("}"),
            Some((_, els)) => {
                fx.line("} else {");
                fx.indent += 1;
                let ev = match &**els {
                    syn::Expr::Block(b) => self.block(fx, &b.block)?,
                    syn::Expr::If(ei) => Some(self.if_expr(fx, ei)?),
                    other => Some(self.expr(fx, other)?),
                };
                if let (Some(r), Some(Val::E(s, t))) = (&result, &ev) {
                    if let Some(rt) = &rty {
                        fx.unify(rt, t, span, "if branches")?;
                    }
                    if !s.is_empty() {
                        fx.line(&format!("{r} = {s};"));
                    }
                }
                fx.indent -= 1;
                fx.line("}");
            }
        }
        match (result, rty) {
            (Some(r), Some(t)) => {
                let tn = fx.tyname(self, &t);
                let decl = format!("{}var {r}: {tn};\n", "    ".repeat(fx.indent));
                fx.out.insert_str(decl_at, &decl);
                Ok(Val::E(r, t))
            }
            _ => Ok(Val::Unit),
        }
    }

    fn match_expr(&mut self, fx: &mut Fx, m: &syn::ExprMatch) -> R<Val> {
        let span = m.span();
        // The scrutinee, element-wise when it is a tuple literal.
        let scrut: Vec<(String, Ty)> = match &*m.expr {
            syn::Expr::Tuple(t) => {
                let mut v = Vec::new();
                for e in &t.elems {
                    let (s, ty) = self.val(fx, e)?;
                    let n = fx.fresh("m");
                    let tn = fx.tyname(self, &ty);
                    fx.line(&format!("let {n}: {tn} = {s};"));
                    v.push((n, ty));
                }
                v
            }
            e => {
                let (s, ty) = self.val(fx, e)?;
                let n = fx.fresh("m");
                let tn = fx.tyname(self, &ty);
                fx.line(&format!("let {n}: {tn} = {s};"));
                vec![(n, ty)]
            }
        };
        let result = fx.fresh("mv");
        let decl_at = fx.out.len();
        let mut rty: Option<Ty> = None;
        let mut first = true;
        let mut closed = false;
        for arm in &m.arms {
            if arm.guard.is_some() {
                return Err(Error::at(fx.file, arm.span(), "match guard", "unsupported"));
            }
            let cond = self.pat_cond(fx, &arm.pat, &scrut)?;
            let head = match (&cond, first) {
                (None, true) => "{".to_string(),
                (None, false) => "} else {".to_string(),
                (Some(c), true) => format!("if {c} {{"),
                (Some(c), false) => format!("}} else if {c} {{"),
            };
            fx.line(&head);
            fx.indent += 1;
            let v = self.expr(fx, &arm.body)?;
            if let Val::E(s, t) = v {
                if t != Ty::Unit {
                    if let Some(r) = &rty {
                        fx.unify(r, &t, arm.span(), "match arms")?;
                    } else {
                        rty = Some(t);
                    }
                    fx.line(&format!("{result} = {s};"));
                }
            }
            fx.indent -= 1;
            first = false;
            if cond.is_none() {
                fx.line("}");
                closed = true;
                break;
            }
        }
        if !closed {
            fx.line("}");
        }
        match rty {
            Some(t) => {
                let tn = fx.tyname(self, &t);
                let decl = format!("{}var {result}: {tn};\n", "    ".repeat(fx.indent));
                fx.out.insert_str(decl_at, &decl);
                Ok(Val::E(result, t))
            }
            None => {
                let _ = span;
                Ok(Val::Unit)
            }
        }
    }

    /// The condition under which `pat` matches; `None` when it always does.
    fn pat_cond(
        &mut self,
        fx: &mut Fx,
        pat: &syn::Pat,
        scrut: &[(String, Ty)],
    ) -> R<Option<String>> {
        match pat {
            syn::Pat::Wild(_) => Ok(None),
            syn::Pat::Tuple(t) if t.elems.len() == scrut.len() && scrut.len() > 1 => {
                let mut parts = Vec::new();
                for (p, s) in t.elems.iter().zip(scrut) {
                    if let Some(c) = self.pat_cond(fx, p, std::slice::from_ref(s))? {
                        parts.push(c);
                    }
                }
                Ok(if parts.is_empty() {
                    None
                } else {
                    Some(format!("({})", parts.join(" && ")))
                })
            }
            syn::Pat::Lit(l) if scrut.len() == 1 => {
                let Val::E(v, t) = self.literal(fx, &l.lit)? else {
                    unreachable!()
                };
                fx.unify(&t, &scrut[0].1, l.span(), "match pattern")?;
                Ok(Some(format!("({} == {v})", scrut[0].0)))
            }
            syn::Pat::Or(o) => {
                let mut parts = Vec::new();
                for c in &o.cases {
                    match self.pat_cond(fx, c, scrut)? {
                        None => return Ok(None),
                        Some(c) => parts.push(c),
                    }
                }
                Ok(Some(format!("({})", parts.join(" || "))))
            }
            other => Err(Error::at(
                fx.file,
                other.span(),
                format!("match pattern `{}`", quote::quote!(#other)),
                "patterns are literals, `_`, tuples of those and `|`",
            )),
        }
    }

    fn for_loop(&mut self, fx: &mut Fx, f: &syn::ExprForLoop) -> R<Val> {
        let span = f.span();
        let syn::Expr::Range(r) = &*f.expr else {
            return Err(Error::at(
                fx.file,
                f.expr.span(),
                "`for` over a non-range",
                "loop over `a..b`",
            ));
        };
        let (Some(from), Some(to)) = (&r.start, &r.end) else {
            return Err(Error::at(fx.file, span, "open range", "write `a..b`"));
        };
        let (a, at_) = self.val(fx, from)?;
        let (b, bt) = self.val(fx, to)?;
        fx.unify(&at_, &bt, span, "range bounds")?;
        let inclusive = matches!(r.limits, syn::RangeLimits::Closed(_));
        let syn::Pat::Ident(pi) = &*f.pat else {
            return Err(Error::at(fx.file, f.pat.span(), "for pattern", "a name"));
        };
        let i = fx.fresh(&pi.ident.to_string());
        let end = fx.fresh("end");
        let tn = fx.tyname(self, &at_);
        fx.line(&format!("let {end}: {tn} = {b};"));
        fx.line(&format!("var {i}: {tn} = {a};"));
        fx.line("loop {");
        fx.indent += 1;
        let cmp = if inclusive { ">" } else { ">=" };
        fx.line(&format!("if {i} {cmp} {end} {{ break; }}"));
        fx.scopes.push(HashMap::new());
        fx.bind(
            &pi.ident.to_string(),
            Local::Val {
                name: i.clone(),
                ty: at_.clone(),
            },
        );
        self.block(fx, &f.body)?;
        fx.scopes.pop();
        let one = fx.lit("1", &at_);
        if inclusive {
            // `a..=MAX` must not wrap into an endless loop.
            fx.line(&format!(
                "continuing {{ {i} = {i} + {one}; break if {i} == {end} + {one}; }}"
            ));
        } else {
            fx.line(&format!("continuing {{ {i} = {i} + {one}; }}"));
        }
        fx.indent -= 1;
        fx.line("}");
        Ok(Val::Unit)
    }

    fn literal(&mut self, fx: &mut Fx, l: &syn::Lit) -> R<Val> {
        match l {
            syn::Lit::Bool(b) => Ok(Val::E(b.value.to_string(), Ty::Bool)),
            syn::Lit::Int(i) => {
                let v: u64 = i
                    .base10_parse()
                    .map_err(|_| Error::at(fx.file, i.span(), "integer literal", "too large"))?;
                let t = match i.suffix() {
                    "" => fx.new_var(true),
                    s => elem_of(s)
                        .filter(|t| matches!(t, Ty::U32 | Ty::I32 | Ty::U16 | Ty::U8))
                        .ok_or_else(|| {
                            Error::at(
                                fx.file,
                                i.span(),
                                format!("literal suffix `{s}`"),
                                "u32, i32, usize, u16 or u8",
                            )
                        })?,
                };
                if v > u32::MAX as u64 {
                    return Err(Error::at(
                        fx.file,
                        i.span(),
                        "integer literal",
                        "wider than 32 bits",
                    ));
                }
                let text = v.to_string();
                Ok(Val::E(fx.lit(&text, &t), t))
            }
            syn::Lit::Float(f) => {
                let t = match f.suffix() {
                    "" | "f32" => Ty::F32,
                    s => {
                        return Err(Error::at(
                            fx.file,
                            f.span(),
                            format!("literal suffix `{s}`"),
                            "f32 only (WGSL has no f64)",
                        ))
                    }
                };
                let v: f32 = f
                    .base10_parse()
                    .map_err(|_| Error::at(fx.file, f.span(), "float literal", "unparsable"))?;
                Ok(Val::E(render_lit(&v.to_string(), &t), t))
            }
            other => Err(Error::at(
                fx.file,
                other.span(),
                "literal",
                "numbers and booleans only",
            )),
        }
    }

    fn path_expr(&mut self, fx: &mut Fx, p: &syn::ExprPath) -> R<Val> {
        let span = p.span();
        let segs: Vec<String> = p
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        if segs.len() == 1 {
            let name = &segs[0];
            if let Some(l) = fx.lookup(name).cloned() {
                return Ok(match l {
                    Local::Val { name, ty } => Val::E(name, ty),
                    Local::View(p, w) => Val::View(p, w),
                    Local::OptView(Some((p, w))) => Val::View(p, w),
                    Local::OptView(None) => Val::NoView,
                    Local::Block => Val::Block,
                    Local::Params(n) => Val::Params(n),
                    Local::Closure(c, sc) => Val::Closure(c, sc),
                });
            }
            if name == "None" {
                return Ok(Val::NoView);
            }
            if name == "self" {
                return match &fx.self_kind {
                    SelfKind::Block => Ok(Val::Block),
                    _ => Err(Error::at(fx.file, span, "`self`", "unsupported here")),
                };
            }
            if let Some(Generic::Const(Some(n))) = fx.generics.get(name) {
                return Ok(Val::E(format!("{n}u"), Ty::U32));
            }
            match self.find_const(name, fx.file) {
                Ok(Some((file, c))) => return self.module_const(fx, file, c),
                Ok(None) => {}
                Err(files) => {
                    return Err(Error::at(
                        fx.file,
                        span,
                        format!("path `{name}`"),
                        format!(
                            "ambiguous: consts of that name in {}; rename one",
                            files.join(", ")
                        ),
                    ))
                }
            }
        }
        if segs.len() == 2 {
            let (ty, item) = (&segs[0], &segs[1]);
            let is_block = matches!(fx.generics.get(ty), Some(Generic::Block))
                || (ty == "Self" && matches!(fx.self_kind, SelfKind::Block));
            if is_block && item == "WAVE" {
                return Ok(Val::E("KILN_WAVE".into(), Ty::U32));
            }
            if let Some(v) = std_const(ty, item) {
                return Ok(v);
            }
        }
        if segs.len() >= 2 && segs[segs.len() - 2] == "consts" {
            if let Some(v) = std_const("f32", &segs[segs.len() - 1]) {
                return Ok(v);
            }
        }
        Err(Error::at(
            fx.file,
            span,
            format!("path `{}`", segs.join("::")),
            "not a local, a module const, `B::WAVE` or a known std constant",
        ))
    }

    fn module_const(&mut self, fx: &mut Fx, file: &'a str, c: &'a syn::ItemConst) -> R<Val> {
        let mut cx = Fx::new(file, SelfKind::None);
        let PTy::Val(t) = self.param_ty(&mut cx, &c.ty)? else {
            return Err(Error::at(file, c.ty.span(), "const type", "a value type"));
        };
        // Consts of one name from two files in one module get the file's stem as well.
        let mut name = format!("K_{}", c.ident);
        if self.consts.get(&name).is_some_and(|(f, _)| *f != file) {
            let stem = file
                .rsplit('/')
                .next()
                .unwrap_or(file)
                .trim_end_matches(".rs");
            name = format!("K_{stem}_{}", c.ident);
        }
        if !self.consts.contains_key(&name) {
            let (s, vt) = self.val(&mut cx, &c.expr)?;
            cx.unify(&t, &vt, c.span(), "const value")?;
            if !cx.out.is_empty() {
                return Err(Error::at(
                    file,
                    c.expr.span(),
                    "const initialiser",
                    "a plain expression",
                ));
            }
            let s = cx.finish(self, &s);
            let tn = self.render(&t);
            let decl = format!("const {name}: {tn} = {s};\n");
            self.consts.insert(name.clone(), (file, decl));
        }
        let _ = fx;
        Ok(Val::E(name, t))
    }

    /// An assignable place: a mutable local or an array element.
    fn place(&mut self, fx: &mut Fx, e: &syn::Expr) -> R<(String, Ty)> {
        match e {
            syn::Expr::Path(_) | syn::Expr::Index(_) | syn::Expr::Paren(_) => self.val(fx, e),
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => Err(Error::at(
                fx.file,
                e.span(),
                "assignment through a reference",
                "assign to locals; write buffers with view.set",
            )),
            syn::Expr::Field(_) => self.val(fx, e),
            other => Err(Error::at(
                fx.file,
                other.span(),
                "assignment target",
                "a local or an array element",
            )),
        }
    }

    fn binary(&mut self, fx: &mut Fx, b: &syn::ExprBinary) -> R<Val> {
        use syn::BinOp as B;
        let span = b.span();
        let compound = match b.op {
            B::AddAssign(_) => Some("+"),
            B::SubAssign(_) => Some("-"),
            B::MulAssign(_) => Some("*"),
            B::DivAssign(_) => Some("/"),
            B::RemAssign(_) => Some("%"),
            B::BitAndAssign(_) => Some("&"),
            B::BitOrAssign(_) => Some("|"),
            B::BitXorAssign(_) => Some("^"),
            B::ShlAssign(_) => Some("<<"),
            B::ShrAssign(_) => Some(">>"),
            _ => None,
        };
        if let Some(op) = compound {
            let (r, rt) = self.val(fx, &b.right)?;
            let (l, lt) = self.place(fx, &b.left)?;
            let v = self.arith(fx, op, (l.clone(), lt.clone()), (r, rt), span)?;
            let Val::E(s, _) = v else { unreachable!() };
            fx.line(&format!("{l} = {s};"));
            return Ok(Val::E(String::new(), Ty::Unit));
        }
        if matches!(b.op, B::And(_) | B::Or(_)) {
            let (l, lt) = self.val(fx, &b.left)?;
            fx.unify(&lt, &Ty::Bool, span, "logical operand")?;
            let mark = fx.out.len();
            let (r, rt) = self.val(fx, &b.right)?;
            fx.unify(&rt, &Ty::Bool, span, "logical operand")?;
            let pre = fx.out.split_off(mark);
            let op = if matches!(b.op, B::And(_)) {
                "&&"
            } else {
                "||"
            };
            if pre.is_empty() {
                return Ok(Val::E(format!("({l} {op} {r})"), Ty::Bool));
            }
            // The right side needs statements: evaluate it only when Rust would.
            let t = fx.fresh("sc");
            fx.line(&format!("var {t}: bool = {l};"));
            let test = if op == "&&" {
                t.clone()
            } else {
                format!("!{t}")
            };
            fx.line(&format!("if {test} {{"));
            fx.out.push_str(&indent_text(&pre, 1));
            fx.line(&format!("    {t} = {r};"));
            fx.line("}");
            return Ok(Val::E(t, Ty::Bool));
        }
        let l = self.val(fx, &b.left)?;
        let r = self.val(fx, &b.right)?;
        let op = match b.op {
            B::Add(_) => "+",
            B::Sub(_) => "-",
            B::Mul(_) => "*",
            B::Div(_) => "/",
            B::Rem(_) => "%",
            B::BitAnd(_) => "&",
            B::BitOr(_) => "|",
            B::BitXor(_) => "^",
            B::Shl(_) => "<<",
            B::Shr(_) => ">>",
            B::Eq(_) => "==",
            B::Ne(_) => "!=",
            B::Lt(_) => "<",
            B::Le(_) => "<=",
            B::Gt(_) => ">",
            B::Ge(_) => ">=",
            _ => return Err(Error::at(fx.file, span, "operator", "unsupported")),
        };
        self.arith(fx, op, l, r, span)
    }

    fn arith(
        &mut self,
        fx: &mut Fx,
        op: &str,
        l: (String, Ty),
        r: (String, Ty),
        span: Span,
    ) -> R<Val> {
        let (l, lt) = l;
        let (r, rt) = r;
        if op == "<<" || op == ">>" {
            let lt = fx.norm(&lt);
            let rt = fx.norm(&rt);
            // WGSL shifts take a u32 amount; Rust takes any integer.
            let amount = match rt {
                Ty::U32 | Ty::U16 | Ty::U8 => r,
                Ty::Var(v) => {
                    fx.unify(&Ty::Var(v), &Ty::U32, span, "shift amount")?;
                    r
                }
                _ => format!("u32({r})"),
            };
            let s = format!("({l} {op} {amount})");
            return Ok(Val::E(
                match (op, narrow_mask(&lt)) {
                    ("<<", Some(m)) => format!("({s} & {m})"),
                    _ => s,
                },
                lt,
            ));
        }
        fx.unify(&lt, &rt, span, &format!("operands of `{op}`"))?;
        let t = fx.norm(&lt);
        let cmp = matches!(op, "==" | "!=" | "<" | "<=" | ">" | ">=");
        if cmp {
            return Ok(Val::E(format!("({l} {op} {r})"), Ty::Bool));
        }
        if t == Ty::Bool && matches!(op, "&" | "|" | "^") {
            let op = if op == "^" { "!=" } else { op };
            return Ok(Val::E(format!("({l} {op} {r})"), Ty::Bool));
        }
        let s = format!("({l} {op} {r})");
        Ok(Val::E(
            match (op, narrow_mask(&t)) {
                ("+" | "-" | "*", Some(m)) => format!("({s} & {m})"),
                _ => s,
            },
            t,
        ))
    }

    fn cast(&mut self, fx: &mut Fx, c: &syn::ExprCast) -> R<Val> {
        let (s, from) = self.val(fx, &c.expr)?;
        let PTy::Val(to) = self.param_ty(fx, &c.ty)? else {
            return Err(Error::at(
                fx.file,
                c.ty.span(),
                "cast target",
                "a scalar type",
            ));
        };
        let from = match fx.norm(&from) {
            Ty::Var(v) => {
                let d = if fx.vars[v].2 { Ty::I32 } else { Ty::F32 };
                fx.unify(&Ty::Var(v), &d, c.span(), "cast operand")?;
                d
            }
            t => t,
        };
        let u = |x: &Ty| matches!(x, Ty::U32 | Ty::U16 | Ty::U8);
        let out = match (&from, &to) {
            (a, b) if a == b => s,
            (a, Ty::U32) if u(a) => s,
            (Ty::I32, Ty::U32) => format!("bitcast<u32>({s})"),
            (Ty::U32, Ty::I32) => format!("bitcast<i32>({s})"),
            (a, Ty::I32) if u(a) => format!("i32({s})"),
            (Ty::U8, Ty::U16) => s,
            (a, Ty::U16 | Ty::U8) if u(a) => format!("({s} & {})", narrow_mask(&to).unwrap()),
            (Ty::I32, Ty::U16 | Ty::U8) => {
                format!("(bitcast<u32>({s}) & {})", narrow_mask(&to).unwrap())
            }
            (Ty::F32, Ty::U32 | Ty::I32) => {
                // Rust saturates and maps NaN to 0.
                self.prelude.insert("cast");
                format!(
                    "kiln_f32_to_{}({s})",
                    if to == Ty::U32 { "u32" } else { "i32" }
                )
            }
            (Ty::F32, Ty::U16 | Ty::U8) => {
                self.prelude.insert("cast");
                format!("min(kiln_f32_to_u32({s}), {})", narrow_mask(&to).unwrap())
            }
            (a, Ty::F32) if u(a) || *a == Ty::I32 => format!("f32({s})"),
            (Ty::Bool, Ty::U32 | Ty::I32 | Ty::U16 | Ty::U8) => {
                let one = render_lit("1", &to);
                let zero = render_lit("0", &to);
                format!("select({zero}, {one}, {s})")
            }
            _ => {
                return Err(Error::at(
                    fx.file,
                    c.span(),
                    format!("cast {from:?} as {to:?}"),
                    "unsupported conversion",
                ))
            }
        };
        Ok(Val::E(out, to))
    }

    fn field(&mut self, fx: &mut Fx, f: &syn::ExprField) -> R<Val> {
        let span = f.span();
        let base = self.expr(fx, &f.base)?;
        match (base, &f.member) {
            (Val::Params(ps), syn::Member::Named(n)) => {
                let fields = self.kernel.params;
                let Some(i) = fields.iter().position(|p| n == p.name) else {
                    return Err(Error::at(
                        fx.file,
                        span,
                        format!("field `{n}`"),
                        format!("not a field of {ps}"),
                    ));
                };
                let w = format!("kiln_meta[{i}u]");
                Ok(match fields[i].kind {
                    ParamKind::F32 => Val::E(format!("bitcast<f32>({w})"), Ty::F32),
                    ParamKind::I32 => Val::E(format!("bitcast<i32>({w})"), Ty::I32),
                    ParamKind::U32 => Val::E(w, Ty::U32),
                })
            }
            (Val::E(s, Ty::Struct(n)), syn::Member::Named(f)) => {
                let fields = self.struct_fields(&n)?;
                match fields.iter().find(|(name, _)| f == name) {
                    Some((name, t)) => Ok(Val::E(format!("{s}.{name}"), t.clone())),
                    None => Err(Error::at(
                        fx.file,
                        span,
                        format!("field `{f}`"),
                        format!("not a field of {n}"),
                    )),
                }
            }
            (Val::E(s, t), syn::Member::Unnamed(idx)) => match fx.norm(&t) {
                Ty::Half(_) if idx.index == 0 => Ok(Val::E(s, Ty::U16)),
                Ty::Tuple(v) if (idx.index as usize) < v.len() => Ok(Val::E(
                    format!("{s}.f{}", idx.index),
                    v[idx.index as usize].clone(),
                )),
                t => Err(Error::at(
                    fx.file,
                    span,
                    format!("field .{} of {t:?}", idx.index),
                    "unsupported",
                )),
            },
            (v, m) => Err(Error::at(
                fx.file,
                span,
                format!("field `{}`", quote::quote!(#m)),
                format!("of {v:?}"),
            )),
        }
    }

    fn turbofish(&mut self, fx: &mut Fx, args: &syn::AngleBracketedGenericArguments) -> R<Vec<Ty>> {
        let mut v = Vec::new();
        for a in &args.args {
            match a {
                syn::GenericArgument::Type(t) => match self.param_ty(fx, t)? {
                    PTy::Val(t) => v.push(t),
                    _ => {
                        return Err(Error::at(
                            fx.file,
                            t.span(),
                            "type argument",
                            "a scalar type",
                        ))
                    }
                },
                other => {
                    return Err(Error::at(
                        fx.file,
                        other.span(),
                        "generic argument",
                        "types only",
                    ))
                }
            }
        }
        Ok(v)
    }

    fn args(
        &mut self,
        fx: &mut Fx,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
    ) -> R<Vec<Val>> {
        let mut v = Vec::new();
        for a in args {
            v.push(self.expr(fx, a)?);
        }
        Ok(v)
    }

    #[allow(clippy::too_many_arguments)]
    fn call_item(
        &mut self,
        fx: &mut Fx,
        item: FnItem<'a>,
        file: &'a str,
        self_kind: SelfKind,
        args: &[Val],
        turbofish: Option<&[Ty]>,
        span: Span,
    ) -> R<Val> {
        let (name, ret) = self.instantiate(item, file, self_kind, args, turbofish, fx, span)?;
        let mut wargs: Vec<String> = Vec::new();
        for a in args {
            match a {
                Val::E(s, _) => wargs.push(s.clone()),
                Val::View(_, rt) => wargs.push(rt.clone()),
                Val::Closure(cl, scopes) => {
                    let (mut p, mut k) = (Vec::new(), String::new());
                    self.pass_closure(fx.file, cl, scopes, "c", &mut p, &mut wargs, &mut k)?;
                }
                _ => {}
            }
        }
        let call = format!("{name}({})", wargs.join(", "));
        Ok(match ret {
            Ret::Unit => Val::E(call, Ty::Unit),
            Ret::Val(t) => Val::E(call, t),
            Ret::View(Some(p)) => Val::View(p, call),
            Ret::View(None) => {
                return Err(Error::at(
                    fx.file,
                    span,
                    "view-returning function",
                    "returns no view",
                ))
            }
        })
    }

    fn call(&mut self, fx: &mut Fx, c: &syn::ExprCall) -> R<Val> {
        let span = c.span();
        let syn::Expr::Path(p) = &*c.func else {
            return Err(Error::at(
                fx.file,
                span,
                "call of a non-path",
                "call functions by name",
            ));
        };
        let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
        let names: Vec<String> = segs.iter().map(|s| s.ident.to_string()).collect();
        let last = names.last().unwrap().clone();
        if names.len() == 1 {
            if let Some(Local::Closure(cl, scopes)) = fx.lookup(&last).cloned() {
                return self.inline_closure(fx, &cl, scopes, &c.args, span);
            }
        }
        let args = self.args(fx, &c.args)?;
        let qself_ty = p.qself.as_ref().map(|q| q.ty.clone());
        // `libm::f(x)`
        if names.len() >= 2 && names[names.len() - 2] == "libm" {
            return self.libm(fx, &last, &args, span);
        }
        // `Type::f(..)` on a scalar / element type, or `<T as Element>::f(..)`.
        let owner: Option<Ty> = if let Some(q) = &qself_ty {
            match self.param_ty(fx, q)? {
                PTy::Val(t) => Some(t),
                _ => None,
            }
        } else if names.len() == 2 {
            let o = &names[0];
            match fx.generics.get(o) {
                Some(Generic::Elem(t)) => Some(t.clone()),
                _ if o == "Self" => match &fx.self_kind {
                    SelfKind::Elem(t) => Some(t.clone()),
                    _ => None,
                },
                _ => elem_of(o),
            }
        } else {
            None
        };
        if let Some(owner) = owner {
            if let Some(v) = self.std_assoc(fx, &owner, &last, &args, span)? {
                return Ok(v);
            }
            if let Some((file, f)) = self.find_elem_method(&owner, &last) {
                return self.call_item(
                    fx,
                    FnItem::Impl(f),
                    file,
                    SelfKind::Elem(owner),
                    &args,
                    None,
                    span,
                );
            }
            return Err(Error::at(
                fx.file,
                span,
                format!("associated function `{}::{last}`", names.join("::")),
                "not in the subset",
            ));
        }
        if names.len() == 1 && last == "Some" {
            return match args.as_slice() {
                [v @ Val::View(..)] => Ok(v.clone()),
                _ => Err(Error::at(fx.file, span, "`Some(..)`", "only around a view")),
            };
        }
        // Tuple-struct constructors `F16(bits)`, `Bf16(bits)`.
        if names.len() == 1 && (last == "F16" || last == "Bf16") {
            let [Val::E(s, t)] = args.as_slice() else {
                return Err(Error::at(fx.file, span, "constructor", "one argument"));
            };
            fx.unify(t, &Ty::U16, span, "constructor argument")?;
            return Ok(Val::E(s.clone(), elem_of(&last).unwrap()));
        }
        let turbofish = match &segs.last().unwrap().arguments {
            syn::PathArguments::AngleBracketed(ab) => Some(self.turbofish(fx, ab)?),
            _ => None,
        };
        let found = self.find_free(&last, fx.file);
        match found.as_slice() {
            [(file, f)] => self.call_item(
                fx,
                FnItem::Free(f),
                file,
                SelfKind::None,
                &args,
                turbofish.as_deref(),
                span,
            ),
            [] => Err(Error::at(
                fx.file,
                span,
                format!("call of `{}`", names.join("::")),
                "no such function in kiln-math",
            )),
            _ => Err(Error::at(
                fx.file,
                span,
                format!("call of `{}`", names.join("::")),
                "ambiguous: several functions have that name",
            )),
        }
    }

    /// A closure passed to a function: its captured locals become parameters `{prefix}_{name}`
    /// (views as their `vec2`, closures it captures recursively). Returns the callee's binding;
    /// `wargs` receives the caller's arguments in parameter order.
    #[allow(clippy::too_many_arguments)]
    fn pass_closure(
        &mut self,
        file: &str,
        cl: &syn::ExprClosure,
        scopes: &[HashMap<String, Local>],
        prefix: &str,
        wparams: &mut Vec<String>,
        wargs: &mut Vec<String>,
        key: &mut String,
    ) -> R<Local> {
        let s = cl.span().start();
        let _ = write!(key, "|{prefix}=closure@{file}:{}:{}", s.line, s.column);
        let mut env = HashMap::new();
        for n in free_names(cl) {
            let Some(l) = scopes.iter().rev().find_map(|sc| sc.get(&n)).cloned() else {
                continue;
            };
            let pn = format!("{prefix}_{n}");
            match l {
                Local::Val { name, ty } => {
                    let t = default_ty(&ty);
                    wparams.push(format!("{pn}: {}", self.render(&t)));
                    wargs.push(name);
                    env.insert(n, Local::Val { name: pn, ty: t });
                }
                Local::View(p, w) | Local::OptView(Some((p, w))) => {
                    wparams.push(format!("{pn}: vec2<u32>"));
                    wargs.push(w);
                    let _ = write!(key, "|{pn}@{}", place_key(&p));
                    env.insert(n, Local::View(p, pn));
                }
                Local::Closure(c2, s2) => {
                    let l2 = self.pass_closure(file, &c2, &s2, &pn, wparams, wargs, key)?;
                    env.insert(n, l2);
                }
                other => {
                    env.insert(n, other);
                }
            }
        }
        Ok(Local::Closure(Box::new(cl.clone()), vec![env]))
    }

    /// A closure call: the body inlined in the closure's defining scopes, parameters bound first.
    fn inline_closure(
        &mut self,
        fx: &mut Fx,
        cl: &syn::ExprClosure,
        scopes: Vec<HashMap<String, Local>>,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        span: Span,
    ) -> R<Val> {
        if cl.inputs.len() != args.len() {
            return Err(Error::at(fx.file, span, "closure call", "argument count"));
        }
        let mut bound = Vec::new();
        for (p, a) in cl.inputs.iter().zip(args) {
            let v = self.expr(fx, a)?;
            bound.push((p, v));
        }
        let saved = std::mem::replace(&mut fx.scopes, scopes);
        fx.scopes.push(HashMap::new());
        let mut result = Ok(Val::Unit);
        for (p, v) in bound {
            if let Err(e) = self.bind_pat(fx, p, v, None) {
                result = Err(e);
                break;
            }
        }
        if result.is_ok() {
            result = self.expr(fx, &cl.body);
        }
        // The value may name the closure's locals: keep it in a fresh local of the caller.
        let result = match result {
            Ok(Val::E(s, t)) if t != Ty::Unit => {
                let n = fx.fresh("cl");
                let tn = fx.tyname(self, &t);
                fx.line(&format!("let {n}: {tn} = {s};"));
                Ok(Val::E(n, t))
            }
            r => r,
        };
        fx.scopes = saved;
        result
    }

    /// `libm::name(..)`: the precise version in `libm_wgsl.rs`, translated like kernel code.
    fn libm(&mut self, fx: &mut Fx, name: &str, args: &[Val], span: Span) -> R<Val> {
        let found = self
            .src
            .files
            .iter()
            .find(|f| f.path == crate::sources::LIBM_PATH)
            .and_then(|f| {
                f.ast.items.iter().find_map(|it| match it {
                    syn::Item::Fn(func)
                        if func.sig.ident == name
                            && matches!(func.vis, syn::Visibility::Public(_)) =>
                    {
                        Some((f.path.as_str(), func))
                    }
                    _ => None,
                })
            });
        let Some((file, func)) = found else {
            return Err(Error::at(
                fx.file,
                span,
                format!("`libm::{name}`"),
                "not among the precise functions of shaders-wgsl/src/libm_wgsl.rs",
            ));
        };
        self.call_item(
            fx,
            FnItem::Free(func),
            file,
            SelfKind::None,
            args,
            None,
            span,
        )
    }

    /// `f32::from_bits` and friends; `None` when `name` is not a std function.
    fn std_assoc(
        &mut self,
        fx: &mut Fx,
        owner: &Ty,
        name: &str,
        args: &[Val],
        span: Span,
    ) -> R<Option<Val>> {
        let one = |fx: &mut Fx, want: &Ty| -> R<String> {
            match args {
                [Val::E(s, t)] => {
                    fx.unify(t, want, span, "argument")?;
                    Ok(s.clone())
                }
                _ => Err(Error::at(
                    fx.file,
                    span,
                    format!("`{name}`"),
                    "one value argument",
                )),
            }
        };
        Ok(Some(match (owner, name) {
            (Ty::F32, "from_bits") => {
                Val::E(format!("bitcast<f32>({})", one(fx, &Ty::U32)?), Ty::F32)
            }
            (Ty::U32, "from") | (Ty::I32, "from") | (Ty::F32, "from") => {
                let [Val::E(s, t)] = args else {
                    return Ok(None);
                };
                let c: syn::ExprCast = syn::parse_quote!(x as u32);
                let _ = c;
                let t = fx.norm(t);
                let s = match (owner, &t) {
                    (Ty::F32, _) => format!("f32({s})"),
                    (Ty::I32, _) => format!("i32({s})"),
                    _ => s.clone(),
                };
                Val::E(s, owner.clone())
            }
            _ => return Ok(None),
        }))
    }

    fn method(&mut self, fx: &mut Fx, m: &syn::ExprMethodCall) -> R<Val> {
        let span = m.span();
        let name = m.method.to_string();
        let recv = self.expr(fx, &m.receiver)?;
        let args = self.args(fx, &m.args)?;
        let is_view = matches!(recv, Val::View(..));
        let turbofish = match &m.turbofish {
            Some(t) if !is_view => Some(self.turbofish(fx, t)?),
            _ => None,
        };
        match recv {
            Val::Block => self.block_method(fx, &name, &args, turbofish, span),
            Val::View(p, rt) => {
                let n = m
                    .turbofish
                    .as_ref()
                    .and_then(|t| t.args.first())
                    .and_then(|a| self.const_arg(a, fx.file));
                self.view_method(fx, p, rt, &name, &args, n, span)
            }
            Val::E(s, t) => {
                let t = fx.norm(&t);
                if let Some(v) = self.std_method(fx, &s, &t, &name, &args, span)? {
                    return Ok(v);
                }
                if let Some((file, f)) = self.find_elem_method(&t, &name) {
                    let mut all = vec![Val::E(s, t.clone())];
                    all.extend(args);
                    return self.call_item(
                        fx,
                        FnItem::Impl(f),
                        file,
                        SelfKind::Elem(t),
                        &all,
                        None,
                        span,
                    );
                }
                Err(Error::at(
                    fx.file,
                    span,
                    format!("method `{name}` on {t:?}"),
                    "not in the subset",
                ))
            }
            v => Err(Error::at(
                fx.file,
                span,
                format!("method `{name}`"),
                format!("on {v:?}"),
            )),
        }
    }

    fn block_method(
        &mut self,
        fx: &mut Fx,
        name: &str,
        args: &[Val],
        turbofish: Option<Vec<Ty>>,
        span: Span,
    ) -> R<Val> {
        let prim = |s: &str| Ok(Val::E(s.to_string(), Ty::U32));
        match name {
            "thread" => return prim("kiln_thread"),
            "size" => return prim("KILN_BLOCK"),
            "block_x" => return prim("kiln_block.x"),
            "block_y" => return prim("kiln_block.y"),
            "block_z" => return prim("kiln_block.z"),
            "grid_x" => return prim("kiln_grid.x"),
            "grid_y" => return prim("kiln_grid.y"),
            "grid_z" => return prim("kiln_grid.z"),
            "barrier" => {
                // Buffers and workgroup memory alike are visible after it, as on CUDA.
                return Ok(Val::E(
                    "storageBarrier(); workgroupBarrier()".into(),
                    Ty::Unit,
                ));
            }
            "shuffle_xor" => {
                let [Val::E(v, vt), Val::E(m, mt)] = args else {
                    return Err(Error::at(fx.file, span, "`shuffle_xor`", "two values"));
                };
                fx.unify(vt, &Ty::U32, span, "shuffle value")?;
                fx.unify(mt, &Ty::U32, span, "shuffle mask")?;
                return Ok(Val::E(
                    if self.variant.subgroups {
                        self.uses_subgroups = true;
                        format!("subgroupShuffleXor({v}, {m})")
                    } else {
                        self.prelude.insert("shuffle_wg");
                        format!("kiln_shuffle_xor({v}, {m})")
                    },
                    Ty::U32,
                ));
            }
            "scratch" => {
                self.prelude.insert("scratch");
                return Ok(Val::View(
                    Place::Scratch,
                    "vec2<u32>(0u, 2u * ((KILN_BLOCK + KILN_WAVE - 1u) / KILN_WAVE))".into(),
                ));
            }
            "shared" => {
                let Some([t]) = turbofish.as_deref() else {
                    return Err(Error::at(
                        fx.file,
                        span,
                        "`shared` without a turbofish",
                        "write `b.shared::<T>(offset, len)`",
                    ));
                };
                let t = t.clone();
                if !matches!(t, Ty::F32 | Ty::U32 | Ty::I32) {
                    return Err(Error::at(
                        fx.file,
                        span,
                        format!("`shared::<{t:?}>`"),
                        "shared memory holds 4-byte scalars (f32, u32, i32)",
                    ));
                }
                let [Val::E(o, ot), Val::E(l, lt)] = args else {
                    return Err(Error::at(fx.file, span, "`shared`", "(offset, len)"));
                };
                fx.unify(ot, &Ty::U32, span, "shared offset")?;
                fx.unify(lt, &Ty::U32, span, "shared length")?;
                self.uses_shared = true;
                self.prelude.insert("shared");
                return Ok(Val::View(
                    Place::Shared(t),
                    format!("kiln_shared_view({o}, {l})"),
                ));
            }
            _ => {}
        }
        let Some((file, f)) = self.find_block_method(name) else {
            return Err(Error::at(
                fx.file,
                span,
                format!("Block method `{name}`"),
                "not a primitive and not provided by the Block trait",
            ));
        };
        let mut all = vec![Val::Block];
        all.extend(args.iter().cloned());
        self.call_item(
            fx,
            FnItem::Trait(f),
            file,
            SelfKind::Block,
            &all,
            turbofish.as_deref(),
            span,
        )
    }

    /// A const generic argument: an integer literal or an integer module const.
    fn const_arg(&self, a: &syn::GenericArgument, file: &str) -> Option<u32> {
        match a {
            syn::GenericArgument::Const(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            })) => i.base10_parse().ok(),
            syn::GenericArgument::Const(syn::Expr::Path(p)) => p
                .path
                .get_ident()
                .and_then(|id| self.const_int(&id.to_string(), file)),
            syn::GenericArgument::Type(syn::Type::Path(p)) => p
                .path
                .get_ident()
                .and_then(|id| self.const_int(&id.to_string(), file)),
            _ => None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn view_method(
        &mut self,
        fx: &mut Fx,
        p: Place,
        rt: String,
        name: &str,
        args: &[Val],
        chunk: Option<u32>,
        span: Span,
    ) -> R<Val> {
        let elem = self.place_elem(&p);
        let acc = self.place_access(&p);
        let checked = !name.ends_with("_unchecked");
        match (name, args) {
            ("chunk_aligned", [Val::E(_, it)]) => {
                fx.unify(it, &Ty::U32, span, "view index")?;
                chunk.ok_or_else(|| {
                    Error::at(
                        fx.file,
                        span,
                        "`chunk_aligned` without `::<N>`",
                        "name the chunk length",
                    )
                })?;
                // Chunks are element loads in WGSL, so the element-wise path a body takes when
                // this is false does the same loads without the chunk arrays, which NVIDIA's
                // Vulkan compiler keeps in memory: add-RMSNorm f32 at 4096×8192 on the H200 ran
                // 5.87 ms chunked, 0.85 ms element-wise. `get_chunk`/`set_chunk` still translate.
                return Ok(Val::E("false".into(), Ty::Bool));
            }
            ("get_chunk", [Val::E(i, it)]) => {
                if acc == Access::Write {
                    return Err(Error::at(
                        fx.file,
                        span,
                        "`get_chunk` on a Dst view",
                        "Dst is write-only",
                    ));
                }
                fx.unify(it, &Ty::U32, span, "view index")?;
                let n = chunk.ok_or_else(|| {
                    Error::at(
                        fx.file,
                        span,
                        "`get_chunk` without `::<N>`",
                        "name the chunk length",
                    )
                })?;
                let get = self.accessor(&p, true, false);
                let f = self.chunk_accessor(&p, &get, n, true);
                return Ok(Val::E(
                    format!("{f}({rt}, {i})"),
                    Ty::Array(Box::new(elem), n),
                ));
            }
            ("set_chunk", [Val::E(i, it), Val::E(a, at_)]) => {
                if acc == Access::Read {
                    return Err(Error::at(
                        fx.file,
                        span,
                        "`set_chunk` on a Src view",
                        "Src is read-only",
                    ));
                }
                fx.unify(it, &Ty::U32, span, "view index")?;
                let Ty::Array(e, n) = fx.norm(at_) else {
                    return Err(Error::at(fx.file, span, "`set_chunk`", "an array value"));
                };
                fx.unify(&e, &elem, span, "chunk element")?;
                let set = self.accessor(&p, false, false);
                let f = self.chunk_accessor(&p, &set, n, false);
                return Ok(Val::E(format!("{f}({rt}, {i}, {a})"), Ty::Unit));
            }
            _ => {}
        }
        match (name, args) {
            ("len", []) => Ok(Val::E(format!("({rt}).y"), Ty::U32)),
            ("is_empty", []) => Ok(Val::E(format!("(({rt}).y == 0u)"), Ty::Bool)),
            ("get" | "get_unchecked", [Val::E(i, it)]) => {
                if acc == Access::Write {
                    return Err(Error::at(
                        fx.file,
                        span,
                        "`get` on a Dst view",
                        "Dst is write-only",
                    ));
                }
                fx.unify(it, &Ty::U32, span, "view index")?;
                let f = self.accessor(&p, true, checked);
                Ok(Val::E(format!("{f}({rt}, {i})"), elem))
            }
            ("set" | "set_unchecked", [Val::E(i, it), Val::E(v, vt)]) => {
                if acc == Access::Read {
                    return Err(Error::at(
                        fx.file,
                        span,
                        "`set` on a Src view",
                        "Src is read-only",
                    ));
                }
                fx.unify(it, &Ty::U32, span, "view index")?;
                fx.unify(vt, &elem, span, "stored value")?;
                let f = self.accessor(&p, false, checked);
                Ok(Val::E(format!("{f}({rt}, {i}, {v})"), Ty::Unit))
            }
            _ => Err(Error::at(
                fx.file,
                span,
                format!("view method `{name}`"),
                "views offer get, set, len, is_empty and their _unchecked forms",
            )),
        }
    }

    fn place_elem(&self, p: &Place) -> Ty {
        match p {
            Place::Buffer(k) => match self.kernel.buffers[*k].elem {
                Elem::Kernel => self.elem.clone(),
                Elem::Fixed(d) => dtype_ty(d),
            },
            Place::Scratch => Ty::U32,
            Place::Shared(t) => t.clone(),
        }
    }

    fn place_access(&self, p: &Place) -> Access {
        match p {
            Place::Buffer(k) => self.kernel.buffers[*k].access,
            _ => Access::ReadWrite,
        }
    }

    /// `N` element accesses of `p` after one bounds check of the whole chunk.
    fn chunk_accessor(&mut self, p: &Place, one: &str, n: u32, load: bool) -> String {
        let name = format!(
            "kiln_{}chunk{n}_{}",
            if load { "get" } else { "set" },
            place_key(p)
        );
        if self.accessors.contains_key(&name) {
            return name;
        }
        let elem = self.place_elem(p);
        let vt = self.render(&elem);
        let buf_id = match p {
            Place::Buffer(k) => *k as u32,
            Place::Scratch => u32::MAX - 1,
            Place::Shared(_) => u32::MAX - 2,
        };
        let text = if load {
            format!(
                "fn {name}(v: vec2<u32>, i: u32) -> array<{vt}, {n}> {{\n    var c: array<{vt}, {n}>;\n    if i >= v.y || v.y - i < {n}u {{ kiln_fault_at({buf_id}u, i + {n}u); return c; }}\n    for (var j = 0u; j < {n}u; j++) {{ c[j] = {one}(v, i + j); }}\n    return c;\n}}\n"
            )
        } else {
            format!(
                "fn {name}(v: vec2<u32>, i: u32, c: array<{vt}, {n}>) {{\n    if i >= v.y || v.y - i < {n}u {{ kiln_fault_at({buf_id}u, i + {n}u); return; }}\n    for (var j = 0u; j < {n}u; j++) {{ {one}(v, i + j, c[j]); }}\n}}\n"
            )
        };
        self.prelude.insert("fault");
        self.accessors.insert(name.clone(), text);
        name
    }

    /// How buffer `k` is declared and accessed.
    fn storage(&self, k: usize) -> Storage {
        let e = self.place_elem(&Place::Buffer(k));
        let writable = self.place_access(&Place::Buffer(k)) != Access::Read;
        match e {
            Ty::F32 => Storage::Direct("f32"),
            Ty::U32 => Storage::Direct("u32"),
            Ty::I32 => Storage::Direct("i32"),
            Ty::Half(Half::F16) if self.variant.f16_storage => Storage::NativeF16,
            Ty::Half(_) | Ty::U16 => Storage::Packed { bits: 16, writable },
            Ty::U8 => Storage::Packed { bits: 8, writable },
            _ => Storage::Direct("u32"),
        }
    }

    /// The name of the accessor function for `p` (generated once).
    fn accessor(&mut self, p: &Place, load: bool, checked: bool) -> String {
        let name = format!(
            "kiln_{}_{}{}",
            if load { "get" } else { "set" },
            place_key(p),
            if checked { "" } else { "_u" }
        );
        if self.accessors.contains_key(&name) {
            return name;
        }
        let (buf_id, arr, elem) = match p {
            Place::Buffer(k) => (*k as u32, format!("kiln_buf{k}"), self.place_elem(p)),
            Place::Scratch => (u32::MAX - 1, "kiln_scratch".into(), Ty::U32),
            Place::Shared(t) => (u32::MAX - 2, "kiln_shared".into(), t.clone()),
        };
        let vt = self.render(&elem);
        let guard = if checked {
            format!(
                "    if i >= v.y {{ kiln_fault_at({buf_id}u, i); return{}; }}\n",
                if load {
                    " kiln_zero_".to_string() + &vt + "()"
                } else {
                    String::new()
                }
            )
        } else {
            String::new()
        };
        self.prelude.insert("fault");
        let storage = match p {
            Place::Buffer(k) => self.storage(*k),
            Place::Scratch => Storage::Direct("u32"),
            Place::Shared(t) => Storage::Shared(self.render(t)),
        };
        let body = match (&storage, load) {
            (Storage::Direct(_), true) => format!("    return {arr}[v.x + i];\n"),
            (Storage::Direct(_), false) => format!("    {arr}[v.x + i] = x;\n"),
            (Storage::Shared(t), true) => {
                if t == "u32" {
                    "    return kiln_shared[v.x + i];\n".to_string()
                } else {
                    format!("    return bitcast<{t}>(kiln_shared[v.x + i]);\n")
                }
            }
            (Storage::Shared(_), false) => {
                "    kiln_shared[v.x + i] = bitcast<u32>(x);\n".to_string()
            }
            (Storage::NativeF16, true) => {
                self.uses_f16 = true;
                self.prelude.insert("f16_storage");
                format!("    return kiln_f16_value_bits(f32({arr}[v.x + i]));\n")
            }
            (Storage::NativeF16, false) => {
                self.uses_f16 = true;
                self.prelude.insert("f16_storage");
                format!("    {arr}[v.x + i] = f16(kiln_f16_bits_value(x));\n")
            }
            (Storage::Packed { bits, writable }, true) => {
                let per = 32 / bits;
                let mask = if *bits == 16 { "0xffffu" } else { "0xffu" };
                let word = if *writable {
                    format!("atomicLoad(&{arr}[j / {per}u])")
                } else {
                    format!("{arr}[j / {per}u]")
                };
                format!("    let j = v.x + i;\n    return ({word} >> ((j % {per}u) * {bits}u)) & {mask};\n")
            }
            (Storage::Packed { bits, .. }, false) => {
                let per = 32 / bits;
                let mask = if *bits == 16 { "0xffffu" } else { "0xffu" };
                // Clear then set only this element's bits: the neighbours' stores never race.
                format!(
                    "    let j = v.x + i;\n    let s = (j % {per}u) * {bits}u;\n    atomicAnd(&{arr}[j / {per}u], ~({mask} << s));\n    atomicOr(&{arr}[j / {per}u], (x & {mask}) << s);\n"
                )
            }
        };
        let sig = if load {
            format!("fn {name}(v: vec2<u32>, i: u32) -> {vt} {{\n")
        } else {
            format!("fn {name}(v: vec2<u32>, i: u32, x: {vt}) {{\n")
        };
        let mut text = sig + &guard + &body + "}\n";
        if matches!(p, Place::Shared(_)) && checked {
            // Also keep inside the declared array when offset + len overshoots it.
            text = text.replace(
                "if i >= v.y {",
                "if i >= v.y || v.x + i >= KILN_SHARED_WORDS {",
            );
        }
        self.prelude.insert(match vt.as_str() {
            "f32" => "zero_f32",
            "i32" => "zero_i32",
            _ => "zero_u32",
        });
        self.accessors.insert(name.clone(), text);
        name
    }

    #[allow(clippy::too_many_arguments)]
    fn std_method(
        &mut self,
        fx: &mut Fx,
        s: &str,
        t: &Ty,
        name: &str,
        args: &[Val],
        span: Span,
    ) -> R<Option<Val>> {
        let arg = |fx: &mut Fx, i: usize, want: &Ty| -> R<String> {
            match args.get(i) {
                Some(Val::E(a, at_)) => {
                    fx.unify(at_, want, span, "method argument")?;
                    Ok(a.clone())
                }
                _ => Err(Error::at(
                    fx.file,
                    span,
                    format!("`{name}`"),
                    "value arguments",
                )),
            }
        };
        let v = |s: String, t: Ty| Ok(Some(Val::E(s, t)));
        let is_int = matches!(t, Ty::U32 | Ty::I32 | Ty::U16 | Ty::U8 | Ty::Var(_));
        match (t, name, args.len()) {
            (Ty::F32, "to_bits", 0) => v(format!("bitcast<u32>({s})"), Ty::U32),
            (Ty::F32, "is_nan", 0) => {
                self.prelude.insert("float_bits");
                v(format!("kiln_is_nan({s})"), Ty::Bool)
            }
            (Ty::F32, "is_finite", 0) => v(
                format!("((bitcast<u32>({s}) & 0x7f800000u) != 0x7f800000u)"),
                Ty::Bool,
            ),
            (Ty::F32, "is_infinite", 0) => v(
                format!("((bitcast<u32>({s}) & 0x7fffffffu) == 0x7f800000u)"),
                Ty::Bool,
            ),
            (Ty::F32, "is_sign_positive", 0) => {
                v(format!("((bitcast<u32>({s}) >> 31u) == 0u)"), Ty::Bool)
            }
            (Ty::F32, "is_sign_negative", 0) => {
                v(format!("((bitcast<u32>({s}) >> 31u) != 0u)"), Ty::Bool)
            }
            (Ty::F32, "abs", 0) => v(
                format!("bitcast<f32>(bitcast<u32>({s}) & 0x7fffffffu)"),
                Ty::F32,
            ),
            (Ty::F32, "copysign", 1) => {
                let o = arg(fx, 0, &Ty::F32)?;
                v(format!("bitcast<f32>((bitcast<u32>({s}) & 0x7fffffffu) | (bitcast<u32>({o}) & 0x80000000u))"), Ty::F32)
            }
            (Ty::F32, "max" | "min", 1) => {
                let o = arg(fx, 0, &Ty::F32)?;
                self.prelude.insert("float_bits");
                v(format!("kiln_f{name}({s}, {o})"), Ty::F32)
            }
            (Ty::F32, "clamp", 2) => {
                let lo = arg(fx, 0, &Ty::F32)?;
                let hi = arg(fx, 1, &Ty::F32)?;
                self.prelude.insert("float_bits");
                v(format!("kiln_fmin(kiln_fmax({s}, {lo}), {hi})"), Ty::F32)
            }
            (Ty::F32, "recip", 0) => v(format!("(1.0f / {s})"), Ty::F32),
            (_, "max" | "min", 1) if is_int => {
                let o = arg(fx, 0, t)?;
                v(format!("{name}({s}, {o})"), t.clone())
            }
            (_, "clamp", 2) if is_int => {
                let lo = arg(fx, 0, t)?;
                let hi = arg(fx, 1, t)?;
                v(format!("clamp({s}, {lo}, {hi})"), t.clone())
            }
            (Ty::U32 | Ty::Var(_), "div_ceil", 1) => {
                fx.unify(t, &Ty::U32, span, "div_ceil")?;
                let o = arg(fx, 0, &Ty::U32)?;
                v(
                    format!("({s} / {o} + select(0u, 1u, {s} % {o} != 0u))"),
                    Ty::U32,
                )
            }
            (_, "wrapping_add" | "wrapping_sub" | "wrapping_mul", 1) if is_int => {
                let o = arg(fx, 0, t)?;
                let op = match name {
                    "wrapping_add" => "+",
                    "wrapping_sub" => "-",
                    _ => "*",
                };
                let e = format!("({s} {op} {o})");
                v(
                    match narrow_mask(t) {
                        Some(m) => format!("({e} & {m})"),
                        None => e,
                    },
                    t.clone(),
                )
            }
            (Ty::U32 | Ty::I32, "count_ones", 0) => v(format!("u32(countOneBits({s}))"), Ty::U32),
            (Ty::U32 | Ty::I32, "leading_zeros", 0) => {
                v(format!("u32(countLeadingZeros({s}))"), Ty::U32)
            }
            (Ty::U32 | Ty::I32, "trailing_zeros", 0) => {
                v(format!("u32(countTrailingZeros({s}))"), Ty::U32)
            }
            (Ty::U32, "rotate_left", 1) => {
                let o = arg(fx, 0, &Ty::U32)?;
                v(
                    format!("(({s} << ({o} % 32u)) | ({s} >> ((32u - {o} % 32u) % 32u)))"),
                    Ty::U32,
                )
            }
            (Ty::U32, "rotate_right", 1) => {
                let o = arg(fx, 0, &Ty::U32)?;
                v(
                    format!("(({s} >> ({o} % 32u)) | ({s} << ((32u - {o} % 32u) % 32u)))"),
                    Ty::U32,
                )
            }
            (Ty::U32 | Ty::Var(_), "is_multiple_of", 1) => {
                fx.unify(t, &Ty::U32, span, "is_multiple_of")?;
                let o = arg(fx, 0, &Ty::U32)?;
                // Rust: x.is_multiple_of(0) is x == 0.
                v(
                    format!("select({s} == 0u, {s} % {o} == 0u, {o} != 0u)"),
                    Ty::Bool,
                )
            }
            (Ty::U32, "saturating_sub", 1) => {
                let o = arg(fx, 0, &Ty::U32)?;
                v(format!("select({s} - {o}, 0u, {o} > {s})"), Ty::U32)
            }
            (Ty::U32, "is_power_of_two", 0) => {
                v(format!("({s} != 0u && ({s} & ({s} - 1u)) == 0u)"), Ty::Bool)
            }
            (Ty::I32, "abs", 0) => v(format!("abs({s})"), Ty::I32),
            (Ty::I32, "signum", 0) => v(format!("sign({s})"), Ty::I32),
            _ => Ok(None),
        }
    }

    /// The whole module text.
    fn assemble(&mut self, body: &str, views: &[String], param_words: usize) -> String {
        let mut m = String::new();
        let _ = writeln!(
            m,
            "// Generated by kiln-shaders-wgsl from shared-kernel-math: {} as {}, variant {}. Do not edit.",
            self.kernel.name,
            ty_key(&self.elem),
            self.variant.tag()
        );
        if self.uses_f16 {
            m.push_str("enable f16;\n");
        }
        m.push_str("override KILN_BLOCK: u32;\noverride KILN_WAVE: u32;\n");
        if self.uses_shared {
            m.push_str("override KILN_SHARED_WORDS: u32;\n");
        }
        m.push('\n');
        for (k, b) in self.kernel.buffers.iter().enumerate() {
            let access = if b.access == Access::Read {
                "read"
            } else {
                "read_write"
            };
            let arr = match self.storage(k) {
                Storage::Direct(t) => format!("array<{t}>"),
                Storage::NativeF16 => "array<f16>".into(),
                Storage::Packed { writable: true, .. } => "array<atomic<u32>>".into(),
                Storage::Packed {
                    writable: false, ..
                } => "array<u32>".into(),
                Storage::Shared(_) => unreachable!(),
            };
            let _ = writeln!(
                m,
                "// buffer `{}`: {}<{}>",
                b.name,
                view_type_name(b.access),
                elem_type_name(b.elem)
            );
            let _ = writeln!(
                m,
                "@group(0) @binding({k}) var<storage, {access}> kiln_buf{k}: {arr};"
            );
        }
        let nb = self.kernel.buffers.len();
        let _ = writeln!(
            m,
            "@group(0) @binding({nb}) var<storage, read> kiln_meta: array<u32>;"
        );
        let _ = writeln!(
            m,
            "@group(0) @binding({}) var<storage, read_write> kiln_fault: array<atomic<u32>, {}>;",
            nb + 1,
            crate::bindings::FAULT_WORDS
        );
        m.push_str("var<private> kiln_thread: u32;\nvar<private> kiln_block: vec3<u32>;\nvar<private> kiln_grid: vec3<u32>;\n\n");
        for s in self.structs.values() {
            m.push_str(s);
        }
        for (_, c) in self.consts.values() {
            m.push_str(c);
        }
        m.push_str(&prelude::text(&self.prelude));
        for a in self.accessors.values() {
            m.push_str(a);
        }
        for f in &self.fns {
            m.push_str(f);
        }
        let g = crate::bindings::meta_grid_word(param_words, nb);
        let sg = self.uses_subgroups;
        let _ = writeln!(m, "\n@compute @workgroup_size(KILN_BLOCK)");
        let _ = write!(m, "fn main(@builtin(local_invocation_index) lii: u32, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>");
        if sg {
            m.push_str(", @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32");
        }
        m.push_str(") {\n");
        let _ = writeln!(
            m,
            "    kiln_grid = vec3<u32>(kiln_meta[{g}u], kiln_meta[{}u], kiln_meta[{}u]);",
            g + 1,
            g + 2
        );
        m.push_str("    // Grids wider than a dispatch dimension are folded into y and z.\n");
        m.push_str("    let linear = wid.x + nwg.x * (wid.y + nwg.y * wid.z);\n");
        m.push_str("    if linear >= kiln_grid.x * kiln_grid.y * kiln_grid.z { return; }\n");
        m.push_str("    kiln_block = vec3<u32>(linear % kiln_grid.x, (linear / kiln_grid.x) % kiln_grid.y, linear / (kiln_grid.x * kiln_grid.y));\n");
        m.push_str("    kiln_thread = lii;\n");
        if sg {
            self.prelude.insert("fault");
            m.push_str(
                "    // The lane the kernel computes must be the subgroup lane its shuffles use.\n",
            );
            m.push_str("    if sg_size != KILN_WAVE || sg_lane != lii % KILN_WAVE { kiln_fault_at(0xffffffffu, sg_size); }\n");
        }
        let _ = writeln!(m, "    {body}({});", views.join(", "));
        m.push_str("}\n");
        // The fault helper may have been requested by the entry after the prelude was written.
        if sg && !m.contains("fn kiln_fault_at") {
            m.push_str(prelude::FAULT);
        }
        m
    }
}

enum Storage {
    Direct(&'static str),
    NativeF16,
    Packed { bits: u32, writable: bool },
    Shared(String),
}

fn is_plain_name(s: &str) -> bool {
    s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

fn is_unit_expr(e: &syn::Expr) -> bool {
    matches!(
        e,
        syn::Expr::Assign(_) | syn::Expr::While(_) | syn::Expr::ForLoop(_) | syn::Expr::Loop(_)
    ) || matches!(e, syn::Expr::Binary(b) if matches!(b.op, syn::BinOp::AddAssign(_) | syn::BinOp::SubAssign(_) | syn::BinOp::MulAssign(_) | syn::BinOp::DivAssign(_)))
}

fn indent_text(s: &str, levels: usize) -> String {
    let pad = "    ".repeat(levels);
    s.lines().map(|l| format!("{pad}{l}\n")).collect()
}

fn ref_path_name(t: &syn::Type) -> Option<String> {
    match t {
        syn::Type::Reference(r) => ref_path_name(&r.elem),
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn type_path_name(t: &syn::Type) -> Option<String> {
    match t {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn std_const(ty: &str, item: &str) -> Option<Val> {
    let f = |bits: u32| Some(Val::E(format!("bitcast<f32>({bits:#010x}u)"), Ty::F32));
    match (ty, item) {
        ("f32", "INFINITY") => f(0x7f80_0000),
        ("f32", "NEG_INFINITY") => f(0xff80_0000),
        ("f32", "NAN") => f(0x7fc0_0000),
        ("f32", "MAX") => f(f32::MAX.to_bits()),
        ("f32", "MIN") => f(f32::MIN.to_bits()),
        ("f32", "MIN_POSITIVE") => f(f32::MIN_POSITIVE.to_bits()),
        ("f32", "EPSILON") => f(f32::EPSILON.to_bits()),
        ("f32", "PI") => f(core::f32::consts::PI.to_bits()),
        ("f32", "TAU") => f(core::f32::consts::TAU.to_bits()),
        ("f32", "FRAC_PI_2") => f(core::f32::consts::FRAC_PI_2.to_bits()),
        ("f32", "LN_2") => f(core::f32::consts::LN_2.to_bits()),
        ("f32", "LOG2_E") => f(core::f32::consts::LOG2_E.to_bits()),
        ("f32", "E") => f(core::f32::consts::E.to_bits()),
        ("f32", "SQRT_2") => f(core::f32::consts::SQRT_2.to_bits()),
        ("u32" | "usize", "MAX") => Some(Val::E("0xffffffffu".into(), Ty::U32)),
        ("u32" | "usize", "MIN") => Some(Val::E("0u".into(), Ty::U32)),
        ("u32" | "usize", "BITS") => Some(Val::E("32u".into(), Ty::U32)),
        ("i32", "MAX") => Some(Val::E("2147483647i".into(), Ty::I32)),
        ("i32", "MIN") => Some(Val::E("i32(-2147483647 - 1)".into(), Ty::I32)),
        ("u16", "MAX") => Some(Val::E("0xffffu".into(), Ty::U16)),
        ("u8", "MAX") => Some(Val::E("0xffu".into(), Ty::U8)),
        _ => None,
    }
}
