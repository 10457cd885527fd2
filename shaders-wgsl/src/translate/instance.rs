//! Monomorphisation: one WGSL function per distinct instance of a kiln-math function (its
//! element type, const generics, the views and closures passed to it), and closure calls.

use super::context::{
    place_key, FnContext, FnItem, Generic, Instance, Local, ParamType, Place, ReturnKind, SelfKind,
    Translator, Value,
};
use super::types::{default_ty, ty_key, Ty};
use crate::error::{Error, Result};
use proc_macro2::Span;
use std::collections::HashMap;
use std::fmt::Write;
use syn::spanned::Spanned;

impl<'a> Translator<'a> {
    /// Translates (once per instance) `item` called with `args`; returns its WGSL name and what
    /// it returns.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn instantiate(
        &mut self,
        item: FnItem<'a>,
        file: &'a str,
        self_kind: SelfKind,
        args: &[Value],
        turbofish: Option<&[Ty]>,
        caller: &mut FnContext,
        call_span: Span,
    ) -> Result<(String, ReturnKind)> {
        let sig = item.sig();
        let body = item.body().ok_or_else(|| {
            Error::at(
                file,
                sig.span(),
                "required trait method",
                "no body to translate",
            )
        })?;
        let mut fcx = FnContext::new(file, self_kind.clone());
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
                    fcx.generics.insert(tp.ident.to_string(), gen);
                }
                syn::GenericParam::Const(c) => {
                    fcx.generics
                        .insert(c.ident.to_string(), Generic::Const(None));
                }
                syn::GenericParam::Lifetime(_) => {}
            }
        }
        // Explicit turbofish types (`shared::<T>` style calls of helpers) override the bound.
        if let Some(tys) = turbofish {
            for (name, t) in type_params.iter().zip(tys) {
                fcx.generics.insert(name.clone(), Generic::Elem(t.clone()));
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
                    (SelfKind::Elem(t), Value::Expr(..)) => {
                        let tn = self.render(t);
                        wparams.push(format!("self_v: {tn}"));
                        fcx.bind(
                            "self",
                            Local::Value {
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
                    // Bind const generics from array argument lengths, nested arrays included.
                    if let Value::Expr(_, ty) = a {
                        bind_array_lengths(&pt.ty, ty, &mut fcx, &mut key);
                    }
                    let pty = self.param_ty(&mut fcx, &pt.ty)?;
                    let pty = match pty {
                        ParamType::Value(Ty::Array(e, 0)) => {
                            let n = match a {
                                Value::Expr(_, Ty::Array(_, n)) => *n,
                                _ => 0,
                            };
                            ParamType::Value(Ty::Array(e, n))
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
                        (ParamType::Block, Value::Block) => fcx.bind(&pname, Local::Block),
                        (ParamType::Params(n), Value::Params(m)) if n == *m => {
                            fcx.bind(&pname, Local::Params(n))
                        }
                        (ParamType::Closure, Value::Closure(cl, scopes)) => {
                            // call_item passes the captured values; here only the parameters count.
                            let mut unused_args = Vec::new();
                            let l = self.pass_closure(
                                caller.file,
                                cl,
                                scopes,
                                &pname,
                                &mut wparams,
                                &mut unused_args,
                                &mut key,
                            )?;
                            fcx.bind(&pname, l);
                        }
                        (ParamType::OptView, Value::NoView) => {
                            let _ = write!(key, "|{pname}@none");
                            fcx.bind(&pname, Local::OptView(None));
                        }
                        (ParamType::OptView, Value::View(place, _)) => {
                            let w = format!("{pname}_v");
                            let _ = write!(key, "|{pname}@{}", place_key(place));
                            wparams.push(format!("{w}: vec2<u32>"));
                            fcx.bind(&pname, Local::OptView(Some((place.clone(), w))));
                        }
                        (ParamType::View, Value::View(place, _)) => {
                            let w = format!("{pname}_v");
                            let _ = write!(key, "|{pname}@{}", place_key(place));
                            wparams.push(format!("{w}: vec2<u32>"));
                            fcx.bind(&pname, Local::View(place.clone(), w));
                        }
                        (ParamType::Value(t), Value::Expr(_, at_)) => {
                            caller.unify(&t, at_, call_span, "argument")?;
                            let tn = self.render(&t);
                            let w = format!("{pname}_p");
                            if mutable || matches!(t, Ty::Array(..)) {
                                let local = format!("{pname}_m");
                                prologue.push(format!("var {local}: {tn} = {w};"));
                                fcx.bind(
                                    &pname,
                                    Local::Value {
                                        name: local,
                                        ty: t.clone(),
                                    },
                                );
                            } else {
                                fcx.bind(
                                    &pname,
                                    Local::Value {
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
                                format!(
                                    "{} cannot be passed where {} is expected",
                                    a.describe(),
                                    p.describe()
                                ),
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
        if let Some(d) = self.instances.get(&key) {
            return Ok((d.name.clone(), d.ret.clone()));
        }
        if !self.in_progress.insert(key.clone()) {
            return Err(Error::at(
                file,
                sig.ident.span(),
                format!("recursive call of `{}`", sig.ident),
                "WGSL has no recursion",
            ));
        }
        fcx.ret = match &sig.output {
            syn::ReturnType::Default => ReturnKind::Unit,
            syn::ReturnType::Type(_, t) => match self.param_ty(&mut fcx, t)? {
                ParamType::Value(t) => ReturnKind::Value(t),
                ParamType::View => ReturnKind::View(None),
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
            fcx.line(l);
        }
        let tail = self.block(&mut fcx, body)?;
        match (&fcx.ret.clone(), tail) {
            (_, None) => {}
            (ReturnKind::Unit, Some(Value::Unit)) => {}
            (ReturnKind::Value(t), Some(Value::Expr(s, vt))) => {
                fcx.unify(t, &vt, body.span(), "returned value")?;
                fcx.line(&format!("return {s};"));
            }
            (ReturnKind::View(_), Some(Value::View(p, rt))) => {
                self.ret_view(&mut fcx, &p, body.span())?;
                fcx.line(&format!("return {rt};"));
            }
            (_, Some(v)) => {
                return Err(Error::at(
                    file,
                    body.span(),
                    "function tail",
                    format!("{} does not match the return type", v.describe()),
                ))
            }
        }
        self.next_fn += 1;
        let name = format!("k_{}_{}", sig.ident, self.next_fn);
        let ret_text = match fcx.ret.clone() {
            ReturnKind::Unit => String::new(),
            ReturnKind::Value(t) => {
                let t = fcx.default_vars(&t);
                format!(" -> {}", self.render(&t))
            }
            ReturnKind::View(_) => " -> vec2<u32>".into(),
        };
        let body_text = fcx.out.clone();
        let body_text = fcx.finish(self, &body_text);
        let text = format!(
            "fn {name}({}){ret_text} {{\n{body_text}}}\n",
            wparams.join(", ")
        );
        self.functions.push(text);
        self.in_progress.remove(&key);
        let ret = fcx.ret.clone();
        self.instances.insert(
            key,
            Instance {
                name: name.clone(),
                ret: ret.clone(),
            },
        );
        Ok((name, ret))
    }

    /// Records that the function returns a view into `p`; every return must name the same place.
    pub(super) fn ret_view(&mut self, fcx: &mut FnContext, p: &Place, span: Span) -> Result<()> {
        match &fcx.ret {
            ReturnKind::View(None) => {
                fcx.ret = ReturnKind::View(Some(p.clone()));
                Ok(())
            }
            ReturnKind::View(Some(q)) if q == p => Ok(()),
            _ => Err(Error::at(
                fcx.file,
                span,
                "returned view",
                "every return of a view-returning function must return the same buffer",
            )),
        }
    }

    /// A call of a kiln-math function: its instance for these arguments, called with their WGSL
    /// values.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn call_item(
        &mut self,
        fcx: &mut FnContext,
        item: FnItem<'a>,
        file: &'a str,
        self_kind: SelfKind,
        args: &[Value],
        turbofish: Option<&[Ty]>,
        span: Span,
    ) -> Result<Value> {
        let (name, ret) = self.instantiate(item, file, self_kind, args, turbofish, fcx, span)?;
        let mut wargs: Vec<String> = Vec::new();
        for a in args {
            match a {
                Value::Expr(s, _) => wargs.push(s.clone()),
                Value::View(_, rt) => wargs.push(rt.clone()),
                Value::Closure(cl, scopes) => {
                    let (mut p, mut k) = (Vec::new(), String::new());
                    self.pass_closure(fcx.file, cl, scopes, "c", &mut p, &mut wargs, &mut k)?;
                }
                _ => {}
            }
        }
        let call = format!("{name}({})", wargs.join(", "));
        Ok(match ret {
            ReturnKind::Unit => Value::Expr(call, Ty::Unit),
            ReturnKind::Value(t) => Value::Expr(call, t),
            ReturnKind::View(Some(p)) => Value::View(p, call),
            ReturnKind::View(None) => {
                return Err(Error::at(
                    fcx.file,
                    span,
                    "view-returning function",
                    "returns no view",
                ))
            }
        })
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
    ) -> Result<Local> {
        let s = cl.span().start();
        let _ = write!(key, "|{prefix}=closure@{file}:{}:{}", s.line, s.column);
        let mut env = HashMap::new();
        for n in free_names(cl) {
            let Some(l) = scopes.iter().rev().find_map(|sc| sc.get(&n)).cloned() else {
                continue;
            };
            let pn = format!("{prefix}_{n}");
            match l {
                Local::Value { name, ty } => {
                    let t = default_ty(&ty);
                    wparams.push(format!("{pn}: {}", self.render(&t)));
                    wargs.push(name);
                    env.insert(n, Local::Value { name: pn, ty: t });
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
    pub(super) fn inline_closure(
        &mut self,
        fcx: &mut FnContext,
        cl: &syn::ExprClosure,
        scopes: Vec<HashMap<String, Local>>,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
        span: Span,
    ) -> Result<Value> {
        if cl.inputs.len() != args.len() {
            return Err(Error::at(fcx.file, span, "closure call", "argument count"));
        }
        let mut bound = Vec::new();
        for (p, a) in cl.inputs.iter().zip(args) {
            let v = self.expr(fcx, a)?;
            bound.push((p, v));
        }
        let saved = std::mem::replace(&mut fcx.scopes, scopes);
        fcx.scopes.push(HashMap::new());
        let mut result = Ok(Value::Unit);
        for (p, v) in bound {
            if let Err(e) = self.bind_pat(fcx, p, v, None) {
                result = Err(e);
                break;
            }
        }
        if result.is_ok() {
            result = self.expr(fcx, &cl.body);
        }
        // The value may name the closure's locals: keep it in a fresh local of the caller.
        let result = match result {
            Ok(Value::Expr(s, t)) if t != Ty::Unit => {
                let n = fcx.fresh("cl");
                let tn = fcx.tyname(self, &t);
                fcx.line(&format!("let {n}: {tn} = {s};"));
                Ok(Value::Expr(n, t))
            }
            r => r,
        };
        fcx.scopes = saved;
        result
    }
}

/// Single-segment names a closure body mentions (a superset of what it captures).
fn free_names(cl: &syn::ExprClosure) -> Vec<String> {
    struct PathNames(std::collections::BTreeSet<String>);
    impl<'ast> syn::visit::Visit<'ast> for PathNames {
        fn visit_expr_path(&mut self, p: &'ast syn::ExprPath) {
            if let Some(id) = p.path.get_ident() {
                self.0.insert(id.to_string());
            }
            syn::visit::visit_expr_path(self, p);
        }
    }
    let mut v = PathNames(Default::default());
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

/// Binds the const generics named as array lengths in `declared` (`[[u32; BITS]; R]`) to the
/// lengths of the argument's type, outermost first, and records them in the instance key.
fn bind_array_lengths(declared: &syn::Type, arg: &Ty, fcx: &mut FnContext, key: &mut String) {
    if let (syn::Type::Array(arr), Ty::Array(inner, n)) = (declared, arg) {
        if let syn::Expr::Path(ep) = &arr.len {
            if let Some(id) = ep.path.get_ident() {
                fcx.generics
                    .insert(id.to_string(), Generic::Const(Some(*n)));
                let _ = write!(key, "|{id}={n}");
            }
        }
        bind_array_lengths(&arr.elem, inner, fcx, key);
    }
}
