//! The state of a translation: the module being built ([`Translator`]), the function being
//! translated ([`FnContext`]) and the values and bindings they pass around.

use super::types::{has_var, render_lit, ty_key, Ty, TypeVars};
use crate::error::{Error, Result};
use crate::kernels::KernelSpec;
use crate::sources::Sources;
use crate::variant::Variant;
use proc_macro2::Span;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Where a view points: a storage binding or the workgroup arrays.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Place {
    Buffer(usize),
    Scratch,
    Shared(Ty),
}

/// The place's part of instance keys and accessor names.
pub(super) fn place_key(p: &Place) -> String {
    match p {
        Place::Buffer(k) => format!("b{k}"),
        Place::Scratch => "scratch".into(),
        Place::Shared(t) => format!("shared_{}", ty_key(t)),
    }
}

/// How a function parameter is passed.
#[derive(Clone, Debug)]
pub(super) enum ParamType {
    Block,
    Params(String),
    View,
    /// `Option<&View>`: which one (or none) is fixed per instance.
    OptView,
    /// A closure (`F: Fn(..)` or `impl Fn(..)`): its captures become parameters.
    Closure,
    Value(Ty),
}

/// What an expression yields: WGSL text of a type, or something that exists only while
/// translating (views are fixed to a place per instance, the block and params are erased).
#[derive(Clone, Debug)]
pub(super) enum Value {
    /// A WGSL expression and its type.
    Expr(String, Ty),
    /// A view into the place: the WGSL `vec2<u32>` (element offset, length) expression.
    View(Place, String),
    Block,
    Params(String),
    /// `None` where an `Option<&View>` is expected.
    NoView,
    /// A closure value with the scopes it was defined in.
    Closure(Box<syn::ExprClosure>, Vec<HashMap<String, Local>>),
    Unit,
}

impl ParamType {
    /// What the parameter takes, in Rust terms, for errors.
    pub(super) fn describe(&self) -> String {
        match self {
            ParamType::Block => "the block (`&B`)".into(),
            ParamType::Params(n) => format!("the params (`&{n}`)"),
            ParamType::View => "a view".into(),
            ParamType::OptView => "an `Option<&View>`".into(),
            ParamType::Closure => "a closure".into(),
            ParamType::Value(t) => format!("a `{t}`"),
        }
    }
}

impl Value {
    /// What the value is, in Rust terms, for errors.
    pub(super) fn describe(&self) -> String {
        match self {
            Value::Expr(_, t) => format!("a `{t}` value"),
            Value::View(..) => "a view".into(),
            Value::Block => "the block".into(),
            Value::Params(_) => "the params".into(),
            Value::NoView => "`None`".into(),
            Value::Closure(..) => "a closure".into(),
            Value::Unit => "`()`".into(),
        }
    }
}

/// What a name is bound to in the function being translated.
#[derive(Clone, Debug)]
pub(super) enum Local {
    /// A WGSL local (or parameter) of that name.
    Value {
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

/// What a generic parameter stands for in this instance.
#[derive(Clone, Debug)]
pub(super) enum Generic {
    Elem(Ty),
    Block,
    Const(Option<u32>),
    /// A `Fn(..)` parameter: a closure, inlined where the callee calls it.
    Closure,
}

/// Which item a call resolves to.
#[derive(Clone, Copy)]
pub(super) enum FnItem<'a> {
    Free(&'a syn::ItemFn),
    Trait(&'a syn::TraitItemFn),
    Impl(&'a syn::ImplItemFn),
}

impl<'a> FnItem<'a> {
    pub(super) fn sig(&self) -> &'a syn::Signature {
        match self {
            FnItem::Free(f) => &f.sig,
            FnItem::Trait(f) => &f.sig,
            FnItem::Impl(f) => &f.sig,
        }
    }

    pub(super) fn body(&self) -> Option<&'a syn::Block> {
        match self {
            FnItem::Free(f) => Some(&f.block),
            FnItem::Trait(f) => f.default.as_ref(),
            FnItem::Impl(f) => Some(&f.block),
        }
    }
}

/// What `self` is inside the function being translated.
#[derive(Clone, Debug)]
pub(super) enum SelfKind {
    None,
    Block,
    Elem(Ty),
}

/// What a function returns; every return of a view-returning function names one place.
#[derive(Clone, Debug)]
pub(super) enum ReturnKind {
    Unit,
    Value(Ty),
    View(Option<Place>),
}

/// A translated function instance: its WGSL name and what it returns.
pub(super) struct Instance {
    pub(super) name: String,
    pub(super) ret: ReturnKind,
}

/// Per-function translation state.
pub(super) struct FnContext<'a> {
    /// The source file of the function, for errors and const lookup.
    pub(super) file: &'a str,
    pub(super) generics: HashMap<String, Generic>,
    pub(super) self_kind: SelfKind,
    /// Bindings, innermost scope last.
    pub(super) scopes: Vec<HashMap<String, Local>>,
    /// The WGSL body so far.
    pub(super) out: String,
    pub(super) indent: usize,
    pub(super) types: TypeVars,
    /// Types rendered after inference (`\u{1}N\u{2}`).
    late_tys: Vec<Ty>,
    pub(super) ret: ReturnKind,
    /// Suffix of the last fresh local name.
    next_name: usize,
}

impl<'a> FnContext<'a> {
    pub(super) fn new(file: &'a str, self_kind: SelfKind) -> FnContext<'a> {
        FnContext {
            file,
            generics: HashMap::new(),
            self_kind,
            scopes: vec![HashMap::new()],
            out: String::new(),
            indent: 1,
            types: TypeVars::default(),
            late_tys: Vec::new(),
            ret: ReturnKind::Unit,
            next_name: 0,
        }
    }

    /// Appends one statement line at the current indentation.
    pub(super) fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    /// A WGSL local name not used before in this function.
    pub(super) fn fresh(&mut self, base: &str) -> String {
        self.next_name += 1;
        format!("{base}_{}", self.next_name)
    }

    /// Whether type name `ty` is the block (a `B: Block` generic, or `Self` in a Block method).
    pub(super) fn is_block_type(&self, ty: &str) -> bool {
        matches!(self.generics.get(ty), Some(Generic::Block))
            || (ty == "Self" && matches!(self.self_kind, SelfKind::Block))
    }

    /// The innermost binding of `name`.
    pub(super) fn lookup(&self, name: &str) -> Option<&Local> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }

    /// Binds `name` in the innermost scope.
    pub(super) fn bind(&mut self, name: &str, l: Local) {
        self.scopes.last_mut().unwrap().insert(name.to_string(), l);
    }

    pub(super) fn new_var(&mut self, int: bool) -> Ty {
        self.types.new_var(int)
    }

    pub(super) fn norm(&mut self, t: &Ty) -> Ty {
        self.types.norm(t)
    }

    pub(super) fn default_vars(&mut self, t: &Ty) -> Ty {
        self.types.default_vars(t)
    }

    /// Unifies `a` and `b`; a failure is an error at `span` about `what`.
    pub(super) fn unify(&mut self, a: &Ty, b: &Ty, span: Span, what: &str) -> Result<()> {
        self.types
            .unify(a, b)
            .map_err(|detail| Error::at(self.file, span, what.to_string(), detail))
    }

    /// Type text: concrete now, or a placeholder filled after inference.
    pub(super) fn tyname(&mut self, tr: &mut Translator, t: &Ty) -> String {
        let t = self.norm(t);
        if has_var(&t) {
            self.late_tys.push(t);
            format!("\u{1}{}\u{2}", self.late_tys.len() - 1)
        } else {
            tr.render(&t)
        }
    }

    /// A literal whose type may still be open.
    pub(super) fn lit(&mut self, text: &str, t: &Ty) -> String {
        let t = self.norm(t);
        match t {
            Ty::Var(v) => format!("\u{3}{v}:{text}\u{2}"),
            t => render_lit(text, &t),
        }
    }

    /// Resolves placeholders in `text`: open integer literals default to i32, floats to f32.
    pub(super) fn finish(&mut self, tr: &mut Translator, text: &str) -> String {
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
}

/// The translation of one kernel × dtype × variant: what the module will declare, collected
/// while the body and its callees are translated.
pub(super) struct Translator<'a> {
    pub(super) src: &'a Sources,
    pub(super) kernel: &'a KernelSpec,
    /// The kernel's element type `T`.
    pub(super) elem: Ty,
    pub(super) variant: Variant,
    /// Translated functions, callees before callers.
    pub(super) functions: Vec<String>,
    /// Translated instances by key (file, function, generics, places and closures passed).
    pub(super) instances: HashMap<String, Instance>,
    /// Instances being translated: meeting one again is recursion.
    pub(super) in_progress: BTreeSet<String>,
    /// Struct declarations by WGSL name (tuples and kiln-math structs).
    pub(super) structs: BTreeMap<String, String>,
    /// Emitted consts by WGSL name: the file each came from, and its declaration.
    pub(super) consts: BTreeMap<String, (&'a str, String)>,
    /// View accessor functions by name.
    pub(super) accessors: BTreeMap<String, String>,
    /// The pieces of `prelude.rs` the module uses.
    pub(super) prelude: BTreeSet<&'static str>,
    pub(super) uses_shared: bool,
    pub(super) uses_subgroups: bool,
    pub(super) uses_f16: bool,
    /// Suffix of the last function name handed out.
    pub(super) next_fn: usize,
    /// The kernel body's params type: a parameter of that type reads `kiln_meta`.
    pub(super) params_struct: String,
}

impl<'a> Translator<'a> {
    pub(super) fn new(
        src: &'a Sources,
        kernel: &'a KernelSpec,
        elem: Ty,
        variant: Variant,
    ) -> Self {
        Translator {
            src,
            kernel,
            elem,
            variant,
            functions: Vec::new(),
            instances: HashMap::new(),
            in_progress: BTreeSet::new(),
            structs: BTreeMap::new(),
            consts: BTreeMap::new(),
            accessors: BTreeMap::new(),
            prelude: BTreeSet::new(),
            uses_shared: false,
            uses_subgroups: false,
            uses_f16: false,
            next_fn: 0,
            params_struct: String::new(),
        }
    }
}

/// `s` with every line indented by `levels` more.
pub(super) fn indent_text(s: &str, levels: usize) -> String {
    let pad = "    ".repeat(levels);
    s.lines().map(|l| format!("{pad}{l}\n")).collect()
}

/// A path expression's segments, as names.
pub(super) fn path_segments(p: &syn::ExprPath) -> Vec<String> {
    p.path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect()
}
