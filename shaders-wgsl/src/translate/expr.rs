//! The expression walk: each Rust expression becomes WGSL expression text and its type, with
//! any statements it needs emitted before it.

use super::context::{
    path_segments, FnContext, Generic, Local, ParamType, SelfKind, Translator, Value,
};
use super::std_map::std_const;
use super::types::{narrow_mask, render_lit, scalar_ty, Ty};
use crate::error::{Error, Result};
use kiln_math::ParamKind;
use syn::spanned::Spanned;

impl<'a> Translator<'a> {
    /// An expression that must be a value (not a view, the block or a closure).
    pub(super) fn val(&mut self, fcx: &mut FnContext, e: &syn::Expr) -> Result<(String, Ty)> {
        match self.expr(fcx, e)? {
            Value::Expr(s, t) => Ok((s, t)),
            v => Err(Error::at(
                fcx.file,
                e.span(),
                format!("`{}`", quote::quote!(#e)),
                format!("expected a value, found {}", v.describe()),
            )),
        }
    }

    pub(super) fn expr(&mut self, fcx: &mut FnContext, e: &syn::Expr) -> Result<Value> {
        use syn::Expr as X;
        let span = e.span();
        match e {
            X::Paren(p) => {
                let v = self.expr(fcx, &p.expr)?;
                Ok(match v {
                    Value::Expr(s, t) => Value::Expr(format!("({s})"), t),
                    v => v,
                })
            }
            X::Group(g) => self.expr(fcx, &g.expr),
            X::Lit(l) => self.literal(fcx, &l.lit),
            X::Path(p) => self.path_expr(fcx, p),
            X::Reference(r) => {
                if r.mutability.is_some() {
                    return Err(Error::at(
                        fcx.file,
                        span,
                        "`&mut` borrow",
                        "views carry writes",
                    ));
                }
                self.expr(fcx, &r.expr)
            }
            X::Unary(u) => {
                let v = self.expr(fcx, &u.expr)?;
                match (&u.op, v) {
                    (syn::UnOp::Deref(_), v) => Ok(v),
                    (syn::UnOp::Neg(_), Value::Expr(s, t)) => Ok(Value::Expr(format!("-({s})"), t)),
                    (syn::UnOp::Not(_), Value::Expr(s, t)) => {
                        let t = fcx.norm(&t);
                        Ok(match t {
                            Ty::Bool => Value::Expr(format!("!({s})"), t),
                            _ => match narrow_mask(&t) {
                                Some(m) => Value::Expr(format!("(~({s}) & {m})"), t),
                                None => Value::Expr(format!("~({s})"), t),
                            },
                        })
                    }
                    _ => Err(Error::at(
                        fcx.file,
                        span,
                        "unary operator",
                        "on a non-value",
                    )),
                }
            }
            X::Binary(b) => self.binary(fcx, b),
            X::Assign(a) if matches!(&*a.left, syn::Expr::Tuple(_)) => {
                // `(a, b) = pair`: every target gets its element.
                let syn::Expr::Tuple(targets) = &*a.left else {
                    unreachable!()
                };
                let (rhs, rt) = self.val(fcx, &a.right)?;
                let rt = fcx.norm(&rt);
                let Ty::Tuple(elems) = rt.clone() else {
                    return Err(Error::at(
                        fcx.file,
                        span,
                        "destructuring assignment",
                        "of a tuple value",
                    ));
                };
                let tmp = fcx.fresh("da");
                let tn = fcx.tyname(self, &rt);
                fcx.line(&format!("let {tmp}: {tn} = {rhs};"));
                for (k, (t, et)) in targets.elems.iter().zip(elems).enumerate() {
                    if matches!(t, syn::Expr::Infer(_)) {
                        continue;
                    }
                    let (lhs, lt) = self.place(fcx, t)?;
                    fcx.unify(&lt, &et, span, "assignment")?;
                    fcx.line(&format!("{lhs} = {tmp}.f{k};"));
                }
                Ok(Value::Expr(String::new(), Ty::Unit))
            }
            X::Assign(a) => {
                let (rhs, rt) = self.val(fcx, &a.right)?;
                let (lhs, lt) = self.place(fcx, &a.left)?;
                fcx.unify(&lt, &rt, span, "assignment")?;
                fcx.line(&format!("{lhs} = {rhs};"));
                Ok(Value::Expr(String::new(), Ty::Unit))
            }
            X::Cast(c) => self.cast(fcx, c),
            X::MethodCall(m) => self.method(fcx, m),
            X::Call(c) => self.call(fcx, c),
            X::Field(f) => self.field(fcx, f),
            X::Index(ix) if matches!(&*ix.index, syn::Expr::Range(_)) => Err(Error::at(
                fcx.file,
                span,
                // quote spaces every token (`a [.. 2]`); a slice reads as written without them.
                format!("slice `{}`", quote::quote!(#ix).to_string().replace(' ', "")),
                "slices do not exist in WGSL: pass the whole array (or view) with a start and a length, and index it `a[start + k]` in a loop",
            )),
            X::Index(ix) => {
                let (base, bt) = self.val(fcx, &ix.expr)?;
                let (i, it) = self.val(fcx, &ix.index)?;
                fcx.unify(&it, &Ty::U32, span, "array index")?;
                match fcx.norm(&bt) {
                    Ty::Array(e, _) => Ok(Value::Expr(format!("{base}[{i}]"), *e)),
                    t => Err(Error::at(
                        fcx.file,
                        span,
                        "indexing",
                        format!("of `{t}`: use view.get(i)"),
                    )),
                }
            }
            X::Tuple(t) => {
                if t.elems.is_empty() {
                    return Ok(Value::Unit);
                }
                let mut parts = Vec::new();
                let mut tys = Vec::new();
                for e in &t.elems {
                    let (s, ty) = self.val(fcx, e)?;
                    parts.push(s);
                    tys.push(ty);
                }
                let ty = Ty::Tuple(tys);
                let tn = fcx.tyname(self, &ty);
                Ok(Value::Expr(format!("{tn}({})", parts.join(", ")), ty))
            }
            X::Array(a) => {
                let mut parts = Vec::new();
                let mut et: Option<Ty> = None;
                for e in &a.elems {
                    let (s, ty) = self.val(fcx, e)?;
                    if let Some(p) = &et {
                        fcx.unify(p, &ty, e.span(), "array element")?;
                    } else {
                        et = Some(ty);
                    }
                    parts.push(s);
                }
                let et = et.unwrap_or(Ty::U32);
                let ty = Ty::Array(Box::new(et), parts.len() as u32);
                let tn = fcx.tyname(self, &ty);
                Ok(Value::Expr(format!("{tn}({})", parts.join(", ")), ty))
            }
            X::Block(b) => {
                if b.label.is_some() {
                    return Err(Error::at(fcx.file, span, "labelled block", "unsupported"));
                }
                self.block_value(fcx, &b.block, span)
            }
            X::If(i) => self.if_expr(fcx, i),
            X::Match(m) => self.match_expr(fcx, m),
            X::While(w) => self.while_loop(fcx, w, span),
            X::Loop(l) => self.loop_expr(fcx, l, span),
            X::ForLoop(f) => self.for_loop(fcx, f),
            X::Break(b) => self.break_expr(fcx, b, span),
            X::Continue(c) => self.continue_expr(fcx, c, span),
            X::Return(r) => self.return_expr(fcx, r, span),
            X::Closure(c) => Ok(Value::Closure(Box::new(c.clone()), fcx.scopes.clone())),
            X::Macro(m) => {
                let name = m.mac.path.segments.last().map(|s| s.ident.to_string());
                Err(Error::at(
                    fcx.file,
                    span,
                    format!("macro call `{}!`", name.unwrap_or_default()),
                    "macros do not translate",
                ))
            }
            X::Range(_) => Err(Error::at(
                fcx.file,
                span,
                "range",
                "a range is only the bounds of a `for` loop (`for i in a..b`); slices (`&a[..n]`, `x[i..j]`) do not exist in WGSL: pass the whole array or view with a start and a length",
            )),
            X::Unsafe(u) => self.block_value(fcx, &u.block, span),
            X::Let(_) => Err(Error::at(
                fcx.file,
                span,
                "`if let` / `let` expression",
                "unsupported",
            )),
            X::Struct(st) => self.struct_lit(fcx, st),
            X::Repeat(r) => {
                let (s, t) = self.val(fcx, &r.expr)?;
                let n = match &*r.len {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(i),
                        ..
                    }) => i.base10_parse::<u32>().ok(),
                    syn::Expr::Path(p) => p.path.get_ident().and_then(|id| {
                        let name = id.to_string();
                        match fcx.generics.get(&name) {
                            Some(Generic::Const(Some(n))) => Some(*n),
                            _ => self.const_int(&name, fcx.file),
                        }
                    }),
                    _ => None,
                }
                .ok_or_else(|| {
                    Error::at(
                        fcx.file,
                        span,
                        "array repeat length",
                        "a literal, an integer const or a const generic",
                    )
                })?;
                let ty = Ty::Array(Box::new(t), n);
                let tn = fcx.tyname(self, &ty);
                let parts = vec![s; n as usize];
                Ok(Value::Expr(format!("{tn}({})", parts.join(", ")), ty))
            }
            other => Err(Error::at(
                fcx.file,
                span,
                format!("expression `{}`", quote::quote!(#other)),
                "unsupported expression",
            )),
        }
    }

    /// A literal; an unsuffixed number gets a type variable fixed by its use.
    pub(super) fn literal(&mut self, fcx: &mut FnContext, l: &syn::Lit) -> Result<Value> {
        match l {
            syn::Lit::Bool(b) => Ok(Value::Expr(b.value.to_string(), Ty::Bool)),
            syn::Lit::Int(i) => {
                let v: u64 = i
                    .base10_parse()
                    .map_err(|_| Error::at(fcx.file, i.span(), "integer literal", "too large"))?;
                let t = match i.suffix() {
                    "" => fcx.new_var(true),
                    s => scalar_ty(s)
                        .filter(|t| matches!(t, Ty::U32 | Ty::I32 | Ty::U16 | Ty::U8))
                        .ok_or_else(|| {
                            Error::at(
                                fcx.file,
                                i.span(),
                                format!("literal suffix `{s}`"),
                                "u32, i32, usize, u16 or u8",
                            )
                        })?,
                };
                if v > u32::MAX as u64 {
                    return Err(Error::at(
                        fcx.file,
                        i.span(),
                        "integer literal",
                        "wider than 32 bits",
                    ));
                }
                let text = v.to_string();
                Ok(Value::Expr(fcx.lit(&text, &t), t))
            }
            syn::Lit::Float(f) => {
                let t = match f.suffix() {
                    "" | "f32" => Ty::F32,
                    s => {
                        return Err(Error::at(
                            fcx.file,
                            f.span(),
                            format!("literal suffix `{s}`"),
                            "f32 only (WGSL has no f64)",
                        ))
                    }
                };
                let v: f32 = f
                    .base10_parse()
                    .map_err(|_| Error::at(fcx.file, f.span(), "float literal", "unparsable"))?;
                Ok(Value::Expr(render_lit(&v.to_string(), &t), t))
            }
            other => Err(Error::at(
                fcx.file,
                other.span(),
                "literal",
                "numbers and booleans only",
            )),
        }
    }

    /// A path: a local, `None`, `self`, a const generic, a module const, `B::WAVE`,
    /// `B::MMA_NATIVE` or a std constant.
    fn path_expr(&mut self, fcx: &mut FnContext, p: &syn::ExprPath) -> Result<Value> {
        let span = p.span();
        let segs = path_segments(p);
        if segs.len() == 1 {
            let name = &segs[0];
            if let Some(l) = fcx.lookup(name).cloned() {
                return Ok(match l {
                    Local::Value { name, ty } => Value::Expr(name, ty),
                    Local::View(p, w) => Value::View(p, w),
                    Local::OptView(Some((p, w))) => Value::View(p, w),
                    Local::OptView(None) => Value::NoView,
                    Local::Block => Value::Block,
                    Local::Params(n) => Value::Params(n),
                    Local::Closure(c, sc) => Value::Closure(c, sc),
                });
            }
            if name == "None" {
                return Ok(Value::NoView);
            }
            if name == "self" {
                return match &fcx.self_kind {
                    SelfKind::Block => Ok(Value::Block),
                    _ => Err(Error::at(fcx.file, span, "`self`", "unsupported here")),
                };
            }
            if let Some(Generic::Const(Some(n))) = fcx.generics.get(name) {
                return Ok(Value::Expr(format!("{n}u"), Ty::U32));
            }
            match self.find_const(name, fcx.file) {
                Ok(Some((file, c))) => return self.module_const(file, c),
                Ok(None) => {}
                Err(files) => {
                    return Err(Error::at(
                        fcx.file,
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
            let is_block = fcx.is_block_type(ty);
            if is_block && item == "WAVE" {
                return Ok(Value::Expr("KILN_WAVE".into(), Ty::U32));
            }
            // WGSL's wave multiply is the shuffle version.
            if is_block && item == "MMA_NATIVE" {
                return Ok(Value::Expr("false".into(), Ty::Bool));
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
            fcx.file,
            span,
            format!("path `{}`", segs.join("::")),
            "not a local, a module const, `B::WAVE` or a known std constant",
        ))
    }

    /// A module const: declared once per module, named by its file when two files share a name.
    fn module_const(&mut self, file: &'a str, c: &'a syn::ItemConst) -> Result<Value> {
        let mut cx = FnContext::new(file, SelfKind::None);
        let ParamType::Value(t) = self.param_ty(&mut cx, &c.ty)? else {
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
        Ok(Value::Expr(name, t))
    }

    /// An assignable place: a mutable local or an array element.
    pub(super) fn place(&mut self, fcx: &mut FnContext, e: &syn::Expr) -> Result<(String, Ty)> {
        match e {
            syn::Expr::Path(_) | syn::Expr::Index(_) | syn::Expr::Paren(_) => self.val(fcx, e),
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => Err(Error::at(
                fcx.file,
                e.span(),
                "assignment through a reference",
                "assign to locals; write buffers with view.set",
            )),
            syn::Expr::Field(_) => self.val(fcx, e),
            other => Err(Error::at(
                fcx.file,
                other.span(),
                "assignment target",
                "a local or an array element",
            )),
        }
    }

    /// A field: a params field (a `kiln_meta` word), a struct field, a tuple element, or a 16-bit
    /// float's bits.
    fn field(&mut self, fcx: &mut FnContext, f: &syn::ExprField) -> Result<Value> {
        let span = f.span();
        let base = self.expr(fcx, &f.base)?;
        match (base, &f.member) {
            (Value::Params(ps), syn::Member::Named(n)) => {
                let fields = self.kernel.params;
                let Some(i) = fields.iter().position(|p| n == p.name) else {
                    return Err(Error::at(
                        fcx.file,
                        span,
                        format!("field `{n}`"),
                        format!("not a field of {ps}"),
                    ));
                };
                let w = format!("kiln_meta[{i}u]");
                Ok(match fields[i].kind {
                    ParamKind::F32 => Value::Expr(format!("bitcast<f32>({w})"), Ty::F32),
                    ParamKind::I32 => Value::Expr(format!("bitcast<i32>({w})"), Ty::I32),
                    ParamKind::U32 => Value::Expr(w, Ty::U32),
                })
            }
            (Value::Expr(s, Ty::Struct(n)), syn::Member::Named(f)) => {
                let fields = self.struct_fields(&n)?;
                match fields.iter().find(|(name, _)| f == name) {
                    Some((name, t)) => Ok(Value::Expr(format!("{s}.{name}"), t.clone())),
                    None => Err(Error::at(
                        fcx.file,
                        span,
                        format!("field `{f}`"),
                        format!("not a field of {n}"),
                    )),
                }
            }
            (Value::Expr(s, t), syn::Member::Unnamed(idx)) => match fcx.norm(&t) {
                Ty::Half(_) if idx.index == 0 => Ok(Value::Expr(s, Ty::U16)),
                Ty::Tuple(v) if (idx.index as usize) < v.len() => Ok(Value::Expr(
                    format!("{s}.f{}", idx.index),
                    v[idx.index as usize].clone(),
                )),
                t => Err(Error::at(
                    fcx.file,
                    span,
                    format!("field .{} of `{t}`", idx.index),
                    "unsupported",
                )),
            },
            (v, m) => Err(Error::at(
                fcx.file,
                span,
                format!("field `{}`", quote::quote!(#m)),
                format!("of {}", v.describe()),
            )),
        }
    }

    /// A struct literal of a kiln-math struct, every field given.
    fn struct_lit(&mut self, fcx: &mut FnContext, st: &syn::ExprStruct) -> Result<Value> {
        let span = st.span();
        let name = st.path.segments.last().unwrap().ident.to_string();
        if st.rest.is_some() || self.find_struct(&name).is_none() {
            return Err(Error::at(
                fcx.file,
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
                    fcx.file,
                    span,
                    format!("struct literal `{name}`"),
                    format!("field `{f}` missing"),
                ));
            };
            let (s, vt) = self.val(fcx, &fv.expr)?;
            fcx.unify(t, &vt, fv.span(), "struct field")?;
            vals.push(s);
        }
        let ty = Ty::Struct(name);
        let tn = self.render(&ty);
        Ok(Value::Expr(format!("{tn}({})", vals.join(", ")), ty))
    }

    /// The types of a turbofish (`::<T>`).
    pub(super) fn turbofish(
        &mut self,
        fcx: &mut FnContext,
        args: &syn::AngleBracketedGenericArguments,
    ) -> Result<Vec<Ty>> {
        let mut v = Vec::new();
        for a in &args.args {
            match a {
                syn::GenericArgument::Type(t) => match self.param_ty(fcx, t)? {
                    ParamType::Value(t) => v.push(t),
                    _ => {
                        return Err(Error::at(
                            fcx.file,
                            t.span(),
                            "type argument",
                            "a scalar type",
                        ))
                    }
                },
                other => {
                    return Err(Error::at(
                        fcx.file,
                        other.span(),
                        "generic argument",
                        "types only",
                    ))
                }
            }
        }
        Ok(v)
    }

    /// Call arguments, left to right.
    pub(super) fn args(
        &mut self,
        fcx: &mut FnContext,
        args: &syn::punctuated::Punctuated<syn::Expr, syn::Token![,]>,
    ) -> Result<Vec<Value>> {
        let mut v = Vec::new();
        for a in args {
            v.push(self.expr(fcx, a)?);
        }
        Ok(v)
    }
}
