//! Control flow: `if` (also `if let Some(view)`, decided per instance), `match` on integers,
//! booleans and tuples of them, `for` over ranges, `while`, `loop`, `break`, `continue`, `return`.

use super::context::{indent_text, path_segments, FnContext, Local, ReturnKind, Translator, Value};
use super::types::Ty;
use crate::error::{Error, Result};
use proc_macro2::Span;
use std::collections::HashMap;
use syn::spanned::Spanned;

impl<'a> Translator<'a> {
    /// `if` as a statement or a value (a variable declared before it holds the value).
    pub(super) fn if_expr(&mut self, fcx: &mut FnContext, i: &syn::ExprIf) -> Result<Value> {
        let span = i.span();
        if let syn::Expr::Let(l) = &*i.cond {
            // `if let Some(v) = optional_view`: decided per instance, at translation time.
            let v = self.expr(fcx, &l.expr)?;
            let syn::Pat::TupleStruct(ts) = &*l.pat else {
                return Err(Error::at(
                    fcx.file,
                    l.span(),
                    "`if let` pattern",
                    "only `Some(name)` on an optional view",
                ));
            };
            match v {
                Value::View(p, w) if ts.elems.len() == 1 => {
                    fcx.line("{");
                    fcx.indent += 1;
                    fcx.scopes.push(HashMap::new());
                    self.bind_pat(fcx, &ts.elems[0], Value::View(p, w), None)?;
                    self.block(fcx, &i.then_branch)?;
                    fcx.scopes.pop();
                    fcx.indent -= 1;
                    fcx.line("}");
                }
                Value::NoView => {
                    if let Some((_, els)) = &i.else_branch {
                        self.stmt_expr(fcx, els)?;
                    }
                }
                _ => {
                    return Err(Error::at(
                        fcx.file,
                        l.span(),
                        "`if let`",
                        "only on an optional view",
                    ))
                }
            }
            return Ok(Value::Unit);
        }
        if starts_with_mma_native(fcx, &i.cond) {
            // `if B::MMA_NATIVE && …`: false in WGSL, so only the else branch is translated
            // (the multiply path's functions never reach the module).
            if let Some((_, els)) = &i.else_branch {
                self.stmt_expr(fcx, els)?;
            }
            return Ok(Value::Unit);
        }
        let (c, ct) = self.val(fcx, &i.cond)?;
        fcx.unify(&ct, &Ty::Bool, span, "if condition")?;
        let has_value = i.else_branch.is_some()
            && matches!(i.then_branch.stmts.last(), Some(syn::Stmt::Expr(e, None)) if !is_unit_expr(e));
        let result = if has_value {
            Some(fcx.fresh("ifv"))
        } else {
            None
        };
        let decl_at = fcx.out.len();
        fcx.line(&format!("if {c} {{"));
        fcx.indent += 1;
        let tv = self.block(fcx, &i.then_branch)?;
        let mut rty = None;
        if let (Some(r), Some(Value::Expr(s, t))) = (&result, &tv) {
            fcx.line(&format!("{r} = {s};"));
            rty = Some(t.clone());
        }
        fcx.indent -= 1;
        match &i.else_branch {
            None => fcx.line("}"),
            Some((_, els)) => {
                fcx.line("} else {");
                fcx.indent += 1;
                let ev = match &**els {
                    syn::Expr::Block(b) => self.block(fcx, &b.block)?,
                    syn::Expr::If(ei) => Some(self.if_expr(fcx, ei)?),
                    other => Some(self.expr(fcx, other)?),
                };
                if let (Some(r), Some(Value::Expr(s, t))) = (&result, &ev) {
                    if let Some(rt) = &rty {
                        fcx.unify(rt, t, span, "if branches")?;
                    }
                    if !s.is_empty() {
                        fcx.line(&format!("{r} = {s};"));
                    }
                }
                fcx.indent -= 1;
                fcx.line("}");
            }
        }
        match (result, rty) {
            (Some(r), Some(t)) => {
                let tn = fcx.tyname(self, &t);
                let decl = format!("{}var {r}: {tn};\n", "    ".repeat(fcx.indent));
                fcx.out.insert_str(decl_at, &decl);
                Ok(Value::Expr(r, t))
            }
            _ => Ok(Value::Unit),
        }
    }

    /// `match` as an `if` / `else if` chain over the scrutinee, evaluated once.
    pub(super) fn match_expr(&mut self, fcx: &mut FnContext, m: &syn::ExprMatch) -> Result<Value> {
        // The scrutinee, element-wise when it is a tuple literal.
        let scrut: Vec<(String, Ty)> = match &*m.expr {
            syn::Expr::Tuple(t) => {
                let mut v = Vec::new();
                for e in &t.elems {
                    let (s, ty) = self.val(fcx, e)?;
                    let n = fcx.fresh("m");
                    let tn = fcx.tyname(self, &ty);
                    fcx.line(&format!("let {n}: {tn} = {s};"));
                    v.push((n, ty));
                }
                v
            }
            e => {
                let (s, ty) = self.val(fcx, e)?;
                let n = fcx.fresh("m");
                let tn = fcx.tyname(self, &ty);
                fcx.line(&format!("let {n}: {tn} = {s};"));
                vec![(n, ty)]
            }
        };
        let result = fcx.fresh("mv");
        let decl_at = fcx.out.len();
        let mut rty: Option<Ty> = None;
        let mut first = true;
        let mut closed = false;
        for arm in &m.arms {
            if arm.guard.is_some() {
                return Err(Error::at(
                    fcx.file,
                    arm.span(),
                    "match guard",
                    "unsupported",
                ));
            }
            let cond = self.pat_cond(fcx, &arm.pat, &scrut)?;
            let head = match (&cond, first) {
                (None, true) => "{".to_string(),
                (None, false) => "} else {".to_string(),
                (Some(c), true) => format!("if {c} {{"),
                (Some(c), false) => format!("}} else if {c} {{"),
            };
            fcx.line(&head);
            fcx.indent += 1;
            let v = self.expr(fcx, &arm.body)?;
            if let Value::Expr(s, t) = v {
                // An arm that is a bare unit call (`1 => f(..),`) is a statement, not a value.
                if t == Ty::Unit && !s.is_empty() {
                    fcx.line(&format!("{s};"));
                }
                if t != Ty::Unit {
                    if let Some(r) = &rty {
                        fcx.unify(r, &t, arm.span(), "match arms")?;
                    } else {
                        rty = Some(t);
                    }
                    fcx.line(&format!("{result} = {s};"));
                }
            }
            fcx.indent -= 1;
            first = false;
            if cond.is_none() {
                fcx.line("}");
                closed = true;
                break;
            }
        }
        if !closed {
            fcx.line("}");
        }
        match rty {
            Some(t) => {
                let tn = fcx.tyname(self, &t);
                let decl = format!("{}var {result}: {tn};\n", "    ".repeat(fcx.indent));
                fcx.out.insert_str(decl_at, &decl);
                Ok(Value::Expr(result, t))
            }
            None => Ok(Value::Unit),
        }
    }

    /// The condition under which `pat` matches; `None` when it always does.
    fn pat_cond(
        &mut self,
        fcx: &mut FnContext,
        pat: &syn::Pat,
        scrut: &[(String, Ty)],
    ) -> Result<Option<String>> {
        match pat {
            syn::Pat::Wild(_) => Ok(None),
            syn::Pat::Tuple(t) if t.elems.len() == scrut.len() && scrut.len() > 1 => {
                let mut parts = Vec::new();
                for (p, s) in t.elems.iter().zip(scrut) {
                    if let Some(c) = self.pat_cond(fcx, p, std::slice::from_ref(s))? {
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
                let float = || {
                    Error::at(
                        fcx.file,
                        l.span(),
                        format!("`match` on the float literal `{}`", quote::quote!(#l)),
                        "`match` takes integers and booleans only (float equality is rarely what a kernel means): write `if x == 1.0 { … } else { … }`",
                    )
                };
                if matches!(l.lit, syn::Lit::Float(_)) {
                    return Err(float());
                }
                let Value::Expr(v, t) = self.literal(fcx, &l.lit)? else {
                    unreachable!()
                };
                fcx.unify(&t, &scrut[0].1, l.span(), "match pattern")?;
                if matches!(fcx.norm(&t), Ty::F32 | Ty::Half(_)) {
                    return Err(float());
                }
                Ok(Some(format!("({} == {v})", scrut[0].0)))
            }
            syn::Pat::Or(o) => {
                let mut parts = Vec::new();
                for c in &o.cases {
                    match self.pat_cond(fcx, c, scrut)? {
                        None => return Ok(None),
                        Some(c) => parts.push(c),
                    }
                }
                Ok(Some(format!("({})", parts.join(" || "))))
            }
            other => Err(Error::at(
                fcx.file,
                other.span(),
                format!("match pattern `{}`", quote::quote!(#other)),
                "patterns are literals, `_`, tuples of those and `|`",
            )),
        }
    }

    /// `for i in a..b` / `a..=b` as a `loop` with a `continuing` increment.
    pub(super) fn for_loop(&mut self, fcx: &mut FnContext, f: &syn::ExprForLoop) -> Result<Value> {
        let span = f.span();
        let syn::Expr::Range(r) = &*f.expr else {
            return Err(Error::at(
                fcx.file,
                f.expr.span(),
                "`for` over a non-range",
                "loop over `a..b`",
            ));
        };
        let (Some(from), Some(to)) = (&r.start, &r.end) else {
            return Err(Error::at(fcx.file, span, "open range", "write `a..b`"));
        };
        let (a, at_) = self.val(fcx, from)?;
        let (b, bt) = self.val(fcx, to)?;
        fcx.unify(&at_, &bt, span, "range bounds")?;
        let inclusive = matches!(r.limits, syn::RangeLimits::Closed(_));
        let syn::Pat::Ident(pi) = &*f.pat else {
            return Err(Error::at(fcx.file, f.pat.span(), "for pattern", "a name"));
        };
        let i = fcx.fresh(&pi.ident.to_string());
        let end = fcx.fresh("end");
        let tn = fcx.tyname(self, &at_);
        fcx.line(&format!("let {end}: {tn} = {b};"));
        fcx.line(&format!("var {i}: {tn} = {a};"));
        fcx.line("loop {");
        fcx.indent += 1;
        let cmp = if inclusive { ">" } else { ">=" };
        fcx.line(&format!("if {i} {cmp} {end} {{ break; }}"));
        fcx.scopes.push(HashMap::new());
        fcx.bind(
            &pi.ident.to_string(),
            Local::Value {
                name: i.clone(),
                ty: at_.clone(),
            },
        );
        self.block(fcx, &f.body)?;
        fcx.scopes.pop();
        let one = fcx.lit("1", &at_);
        if inclusive {
            // `a..=MAX` must not wrap into an endless loop.
            fcx.line(&format!(
                "continuing {{ {i} = {i} + {one}; break if {i} == {end} + {one}; }}"
            ));
        } else {
            fcx.line(&format!("continuing {{ {i} = {i} + {one}; }}"));
        }
        fcx.indent -= 1;
        fcx.line("}");
        Ok(Value::Unit)
    }

    /// `while c { .. }`; a condition that needs statements is evaluated inside a `loop`.
    pub(super) fn while_loop(
        &mut self,
        fcx: &mut FnContext,
        w: &syn::ExprWhile,
        span: Span,
    ) -> Result<Value> {
        if w.label.is_some() {
            return Err(Error::at(fcx.file, span, "loop label", "unsupported"));
        }
        let mark = fcx.out.len();
        let (c, ct) = self.val(fcx, &w.cond)?;
        fcx.unify(&ct, &Ty::Bool, span, "while condition")?;
        let pre = fcx.out.split_off(mark);
        if pre.is_empty() {
            fcx.line(&format!("while {c} {{"));
        } else {
            fcx.line("loop {");
            fcx.out.push_str(&indent_text(&pre, 1));
            fcx.line(&format!("    if !({c}) {{ break; }}"));
        }
        fcx.indent += 1;
        self.block(fcx, &w.body)?;
        fcx.indent -= 1;
        fcx.line("}");
        Ok(Value::Unit)
    }

    pub(super) fn loop_expr(
        &mut self,
        fcx: &mut FnContext,
        l: &syn::ExprLoop,
        span: Span,
    ) -> Result<Value> {
        if l.label.is_some() {
            return Err(Error::at(fcx.file, span, "loop label", "unsupported"));
        }
        fcx.line("loop {");
        fcx.indent += 1;
        self.block(fcx, &l.body)?;
        fcx.indent -= 1;
        fcx.line("}");
        Ok(Value::Unit)
    }

    pub(super) fn break_expr(
        &mut self,
        fcx: &mut FnContext,
        b: &syn::ExprBreak,
        span: Span,
    ) -> Result<Value> {
        if b.label.is_some() || b.expr.is_some() {
            return Err(Error::at(
                fcx.file,
                span,
                "`break` with a label or value",
                "unsupported",
            ));
        }
        fcx.line("break;");
        Ok(Value::Unit)
    }

    pub(super) fn continue_expr(
        &mut self,
        fcx: &mut FnContext,
        c: &syn::ExprContinue,
        span: Span,
    ) -> Result<Value> {
        if c.label.is_some() {
            return Err(Error::at(
                fcx.file,
                span,
                "`continue` with a label",
                "unsupported",
            ));
        }
        fcx.line("continue;");
        Ok(Value::Unit)
    }

    /// `return` with the value the function returns (a view-returning one names its place).
    pub(super) fn return_expr(
        &mut self,
        fcx: &mut FnContext,
        r: &syn::ExprReturn,
        span: Span,
    ) -> Result<Value> {
        match &r.expr {
            None => fcx.line("return;"),
            Some(e) => {
                let v = self.expr(fcx, e)?;
                match (fcx.ret.clone(), v) {
                    (ReturnKind::Value(t), Value::Expr(s, vt)) => {
                        fcx.unify(&t, &vt, span, "returned value")?;
                        fcx.line(&format!("return {s};"));
                    }
                    (ReturnKind::View(_), Value::View(p, rt)) => {
                        self.ret_view(fcx, &p, span)?;
                        fcx.line(&format!("return {rt};"));
                    }
                    (ReturnKind::Unit, Value::Unit) => fcx.line("return;"),
                    (_, v) => {
                        return Err(Error::at(
                            fcx.file,
                            span,
                            "return",
                            format!("{} does not match the return type", v.describe()),
                        ))
                    }
                }
            }
        }
        Ok(Value::Unit)
    }
}

/// Whether an `if` branch tail is a statement, not the `if`'s value.
fn is_unit_expr(e: &syn::Expr) -> bool {
    matches!(
        e,
        syn::Expr::Assign(_) | syn::Expr::While(_) | syn::Expr::ForLoop(_) | syn::Expr::Loop(_)
    ) || matches!(e, syn::Expr::Binary(b) if matches!(b.op, syn::BinOp::AddAssign(_) | syn::BinOp::SubAssign(_) | syn::BinOp::MulAssign(_) | syn::BinOp::DivAssign(_)))
}

/// Whether `cond` is `B::MMA_NATIVE` or an `&&` chain that starts with it (`B` the block).
fn starts_with_mma_native(fcx: &FnContext, cond: &syn::Expr) -> bool {
    match cond {
        syn::Expr::Binary(b) if matches!(b.op, syn::BinOp::And(_)) => {
            starts_with_mma_native(fcx, &b.left)
        }
        syn::Expr::Paren(p) => starts_with_mma_native(fcx, &p.expr),
        syn::Expr::Path(p) => {
            let segs = path_segments(p);
            segs.len() == 2 && segs[1] == "MMA_NATIVE" && fcx.is_block_type(&segs[0])
        }
        _ => false,
    }
}
