//! Statements and control flow: blocks, `let`, patterns, `if`, `match`, loops and jumps.

use super::context::{FnContext, Local, ParamType, Translator, Value};
use super::types::Ty;
use crate::error::{Error, Result};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::spanned::Spanned;

impl<'a> Translator<'a> {
    /// The statements of a block in a new scope; returns the value of its tail expression.
    pub(super) fn block(&mut self, fcx: &mut FnContext, b: &syn::Block) -> Result<Option<Value>> {
        fcx.scopes.push(HashMap::new());
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
                syn::Stmt::Local(l) => self.local(fcx, l)?,
                syn::Stmt::Expr(e, semi) => {
                    if last && semi.is_none() {
                        tail = Some(self.expr(fcx, e)?);
                    } else {
                        self.stmt_expr(fcx, e)?;
                    }
                }
                syn::Stmt::Item(it) => {
                    return Err(Error::at(
                        fcx.file,
                        it.span(),
                        "nested item",
                        "define items at module level",
                    ))
                }
                syn::Stmt::Macro(m) => {
                    let name = m.mac.path.segments.last().map(|s| s.ident.to_string());
                    return Err(Error::at(
                        fcx.file,
                        m.span(),
                        format!("macro call `{}!`", name.unwrap_or_default()),
                        "macros do not translate; a view access traps on its own",
                    ));
                }
            }
        }
        fcx.scopes.pop();
        Ok(tail)
    }

    /// An expression used as a statement.
    pub(super) fn stmt_expr(&mut self, fcx: &mut FnContext, e: &syn::Expr) -> Result<()> {
        match e {
            syn::Expr::If(_) | syn::Expr::Match(_) | syn::Expr::Block(_) => {
                let v = self.expr(fcx, e)?;
                if let Value::Expr(s, _) = v {
                    if !s.is_empty() && !is_plain_name(&s) {
                        fcx.line(&format!("_ = {s};"));
                    }
                }
                Ok(())
            }
            _ => {
                let v = self.expr(fcx, e)?;
                if let Value::Expr(s, t) = v {
                    if t == Ty::Unit {
                        if !s.is_empty() {
                            fcx.line(&format!("{s};"));
                        }
                    } else if s.contains('(') {
                        fcx.line(&format!("_ = {s};"));
                    }
                }
                Ok(())
            }
        }
    }

    /// `let`: a name, `_`, a tuple pattern, a closure (kept to be inlined) or `let x;` assigned
    /// later.
    fn local(&mut self, fcx: &mut FnContext, l: &syn::Local) -> Result<()> {
        let Some(init) = &l.init else {
            // `let x;` assigned later: declared here, typed by its assignments.
            let (pat, annot) = match &l.pat {
                syn::Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
                p => (p, None),
            };
            let syn::Pat::Ident(pi) = pat else {
                return Err(Error::at(
                    fcx.file,
                    l.span(),
                    "`let` pattern without a value",
                    "a name",
                ));
            };
            let t = match annot {
                Some(a) => match self.param_ty(fcx, a)? {
                    ParamType::Value(t) => t,
                    _ => {
                        return Err(Error::at(
                            fcx.file,
                            a.span(),
                            "deferred binding type",
                            "a value type",
                        ))
                    }
                },
                None => fcx.types.new_any_var(),
            };
            let name = pi.ident.to_string();
            let w = fcx.fresh(&name);
            let tn = fcx.tyname(self, &t);
            fcx.line(&format!("var {w}: {tn};"));
            fcx.bind(&name, Local::Value { name: w, ty: t });
            return Ok(());
        };
        if init.diverge.is_some() {
            return Err(Error::at(fcx.file, l.span(), "`let … else`", "unsupported"));
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
                    vals.push(self.expr(fcx, e)?);
                }
                // Evaluate every element before binding any (the right side may name the left).
                let mut tmp = Vec::new();
                for v in vals {
                    match v {
                        Value::Expr(s, t) => {
                            let n = fcx.fresh("t");
                            let tn = fcx.tyname(self, &t);
                            fcx.line(&format!("let {n}: {tn} = {s};"));
                            tmp.push(Value::Expr(n, t));
                        }
                        v => tmp.push(v),
                    }
                }
                for (p, v) in pt.elems.iter().zip(tmp) {
                    self.bind_pat(fcx, p, v, None)?;
                }
                return Ok(());
            }
        }
        if let (syn::Expr::Closure(c), syn::Pat::Ident(pi)) = (&*init.expr, pat) {
            let scopes = fcx.scopes.clone();
            fcx.bind(
                &pi.ident.to_string(),
                Local::Closure(Box::new(c.clone()), scopes),
            );
            return Ok(());
        }
        let v = self.expr(fcx, &init.expr)?;
        let annot_ty = match annot {
            Some(t) => Some(self.param_ty(fcx, t)?),
            None => None,
        };
        self.bind_pat(fcx, pat, v, annot_ty)
    }

    /// Binds a pattern to a value: a WGSL `let`/`var` for values, a translation-time binding
    /// otherwise.
    pub(super) fn bind_pat(
        &mut self,
        fcx: &mut FnContext,
        pat: &syn::Pat,
        v: Value,
        annot: Option<ParamType>,
    ) -> Result<()> {
        match pat {
            syn::Pat::Wild(_) => {
                if let Value::Expr(s, t) = v {
                    if t != Ty::Unit && s.contains('(') {
                        fcx.line(&format!("_ = {s};"));
                    }
                }
                Ok(())
            }
            syn::Pat::Ident(pi) => {
                if pi.by_ref.is_some() || pi.subpat.is_some() {
                    return Err(Error::at(
                        fcx.file,
                        pi.span(),
                        "`ref` binding",
                        "unsupported",
                    ));
                }
                let name = pi.ident.to_string();
                match v {
                    Value::Expr(s, t) => {
                        if let Some(ParamType::Value(at_)) = &annot {
                            fcx.unify(at_, &t, pi.span(), "annotated binding")?;
                        }
                        let w = fcx.fresh(&name);
                        let tn = fcx.tyname(self, &t);
                        let kw = if pi.mutability.is_some() || matches!(t, Ty::Array(..)) {
                            "var"
                        } else {
                            "let"
                        };
                        fcx.line(&format!("{kw} {w}: {tn} = {s};"));
                        fcx.bind(&name, Local::Value { name: w, ty: t });
                    }
                    Value::View(p, rt) => {
                        let w = fcx.fresh(&name);
                        fcx.line(&format!("let {w}: vec2<u32> = {rt};"));
                        fcx.bind(&name, Local::View(p, w));
                    }
                    Value::Block => fcx.bind(&name, Local::Block),
                    Value::Params(n) => fcx.bind(&name, Local::Params(n)),
                    Value::NoView => fcx.bind(&name, Local::OptView(None)),
                    Value::Closure(c, sc) => fcx.bind(&name, Local::Closure(c, sc)),
                    Value::Unit => {}
                }
                Ok(())
            }
            syn::Pat::Tuple(pt) => {
                let Value::Expr(s, t) = v else {
                    return Err(Error::at(
                        fcx.file,
                        pt.span(),
                        "tuple pattern",
                        "binds a tuple value",
                    ));
                };
                let t = fcx.norm(&t);
                let Ty::Tuple(elems) = t.clone() else {
                    return Err(Error::at(
                        fcx.file,
                        pt.span(),
                        "tuple pattern",
                        format!("on a `{t}` value"),
                    ));
                };
                if elems.len() != pt.elems.len() {
                    return Err(Error::at(
                        fcx.file,
                        pt.span(),
                        "tuple pattern",
                        "arity mismatch",
                    ));
                }
                let n = fcx.fresh("t");
                let tn = fcx.tyname(self, &t);
                fcx.line(&format!("let {n}: {tn} = {s};"));
                for (i, (p, et)) in pt.elems.iter().zip(elems).enumerate() {
                    self.bind_pat(fcx, p, Value::Expr(format!("{n}.f{i}"), et), None)?;
                }
                Ok(())
            }
            syn::Pat::Type(pt) => {
                let a = self.param_ty(fcx, &pt.ty)?;
                self.bind_pat(fcx, &pt.pat, v, Some(a))
            }
            other => Err(Error::at(
                fcx.file,
                other.span(),
                format!("pattern `{}`", quote::quote!(#other)),
                "let patterns are names, `_` and tuples",
            )),
        }
    }

    /// A block expression; one with a tail value stores it in a variable declared before the block.
    pub(super) fn block_value(
        &mut self,
        fcx: &mut FnContext,
        b: &syn::Block,
        span: Span,
    ) -> Result<Value> {
        // A block with a value needs a variable declared before it.
        let has_tail = matches!(b.stmts.last(), Some(syn::Stmt::Expr(_, None)));
        if !has_tail {
            fcx.line("{");
            fcx.indent += 1;
            self.block(fcx, b)?;
            fcx.indent -= 1;
            fcx.line("}");
            return Ok(Value::Unit);
        }
        let mark = fcx.out.len();
        fcx.indent += 1;
        let tail = self.block(fcx, b)?;
        fcx.indent -= 1;
        let inner = fcx.out.split_off(mark);
        match tail {
            Some(Value::Expr(s, t)) if t != Ty::Unit => {
                let n = fcx.fresh("blk");
                let tn = fcx.tyname(self, &t);
                fcx.line(&format!("var {n}: {tn};"));
                fcx.line("{");
                fcx.out.push_str(&inner);
                fcx.line(&format!("    {n} = {s};"));
                fcx.line("}");
                Ok(Value::Expr(n, t))
            }
            Some(Value::View(..)) => Err(Error::at(
                fcx.file,
                span,
                "block yielding a view",
                "unsupported",
            )),
            _ => {
                fcx.line("{");
                fcx.out.push_str(&inner);
                fcx.line("}");
                Ok(Value::Unit)
            }
        }
    }
}

/// Whether `#[cfg(..)]` attributes keep an item for the WGSL target: no `target_arch`, feature
/// or `test` holds, so `not(target_arch = "nvptx64")` does.
fn cfg_active(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().filter(|a| a.path().is_ident("cfg")).all(|a| {
        a.parse_args::<syn::Meta>()
            .map(|m| cfg_eval(&m))
            .unwrap_or(false)
    })
}

/// Evaluates a `cfg` predicate for the WGSL target: no target_arch, feature or `test` holds.
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

/// The attributes of a statement (where `#[cfg]` may sit).
fn stmt_attrs(s: &syn::Stmt) -> &[syn::Attribute] {
    match s {
        syn::Stmt::Local(l) => &l.attrs,
        syn::Stmt::Macro(m) => &m.attrs,
        syn::Stmt::Item(_) => &[],
        syn::Stmt::Expr(e, _) => expr_attrs(e),
    }
}

/// The attributes of an expression statement.
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

/// Whether WGSL text is a bare identifier: a value block's result variable needs no `_ =`.
fn is_plain_name(s: &str) -> bool {
    s.chars().all(|c| c.is_alphanumeric() || c == '_')
}
