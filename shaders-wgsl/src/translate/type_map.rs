//! Rust type syntax to the translator's types (how each parameter is passed), and types to
//! WGSL type names, declaring the structs for tuples and kiln-math structs on first use.

use super::context::{FnContext, Generic, ParamType, SelfKind, Translator};
use super::types::{scalar_ty, ty_key, Ty};
use crate::error::{Error, Result};
use std::fmt::Write;
use syn::spanned::Spanned;

impl<'a> Translator<'a> {
    /// A parameter or return type.
    pub(super) fn param_ty(&mut self, fcx: &mut FnContext, t: &syn::Type) -> Result<ParamType> {
        match t {
            syn::Type::Reference(r) => {
                if r.mutability.is_some() {
                    return Err(Error::at(
                        fcx.file,
                        t.span(),
                        "`&mut` reference",
                        "views carry writes",
                    ));
                }
                match self.param_ty(fcx, &r.elem)? {
                    ParamType::Value(Ty::Unit) => Err(Error::at(fcx.file, t.span(), "reference", "unsupported")),
                    p @ (ParamType::Block | ParamType::Params(_)) => Ok(p),
                    ParamType::Value(v) => Ok(ParamType::Value(v)),
                    p => Ok(p),
                }
            }
            syn::Type::ImplTrait(it)
                if it.bounds.iter().any(|b| matches!(b, syn::TypeParamBound::Trait(t) if t.path.segments.last().is_some_and(|s| s.ident.to_string().starts_with("Fn")))) =>
            {
                Ok(ParamType::Closure)
            }
            syn::Type::Tuple(tt) => {
                let mut v = Vec::new();
                for e in &tt.elems {
                    match self.param_ty(fcx, e)? {
                        ParamType::Value(t) => v.push(t),
                        _ => {
                            return Err(Error::at(fcx.file, e.span(), "tuple element type", "values only"))
                        }
                    }
                }
                if v.is_empty() {
                    return Ok(ParamType::Value(Ty::Unit));
                }
                Ok(ParamType::Value(Ty::Tuple(v)))
            }
            syn::Type::Array(a) => {
                let ParamType::Value(e) = self.param_ty(fcx, &a.elem)? else {
                    return Err(Error::at(fcx.file, a.span(), "array element type", "values only"));
                };
                let n =
                    match &a.len {
                        syn::Expr::Lit(l) => match &l.lit {
                            syn::Lit::Int(i) => i.base10_parse::<u32>().ok(),
                            _ => None,
                        },
                        syn::Expr::Path(p) => p.path.get_ident().and_then(|id| {
                            match fcx.generics.get(&id.to_string()) {
                                Some(Generic::Const(Some(n))) => Some(*n),
                                Some(Generic::Const(None)) => Some(0),
                                _ => self.const_int(&id.to_string(), fcx.file),
                            }
                        }),
                        _ => None,
                    };
                let n = n.ok_or_else(|| {
                    Error::at(
                        fcx.file,
                        a.len.span(),
                        "array length",
                        "a literal or a const generic",
                    )
                })?;
                Ok(ParamType::Value(Ty::Array(Box::new(e), n)))
            }
            syn::Type::Path(tp) => {
                let seg = tp.path.segments.last().unwrap();
                let name = seg.ident.to_string();
                if let Some(g) = fcx.generics.get(&name) {
                    return Ok(match g {
                        Generic::Elem(t) => ParamType::Value(t.clone()),
                        Generic::Block => ParamType::Block,
                        Generic::Const(_) => ParamType::Value(Ty::U32),
                        Generic::Closure => ParamType::Closure,
                    });
                }
                if name == "Self" {
                    return Ok(match &fcx.self_kind {
                        SelfKind::Block => ParamType::Block,
                        SelfKind::Elem(t) => ParamType::Value(t.clone()),
                        SelfKind::None => {
                            return Err(Error::at(fcx.file, t.span(), "`Self`", "outside an impl"))
                        }
                    });
                }
                if let Some(t) = scalar_ty(&name) {
                    return Ok(ParamType::Value(t));
                }
                if matches!(name.as_str(), "Src" | "Dst" | "Rw") {
                    let inner = match &seg.arguments {
                        syn::PathArguments::AngleBracketed(ab) => ab.args.first(),
                        _ => None,
                    };
                    let Some(syn::GenericArgument::Type(it)) = inner else {
                        return Err(Error::at(fcx.file, t.span(), "view type", "write `Src<T>`"));
                    };
                    // The element type is checked here; the place a view points into fixes it.
                    let ParamType::Value(_) = self.param_ty(fcx, it)? else {
                        return Err(Error::at(fcx.file, it.span(), "view element", "a scalar type"));
                    };
                    return Ok(ParamType::View);
                }
                if name == self.params_struct {
                    return Ok(ParamType::Params(name));
                }
                if name == "Option" {
                    let inner = match &seg.arguments {
                        syn::PathArguments::AngleBracketed(ab) => ab.args.first(),
                        _ => None,
                    };
                    if let Some(syn::GenericArgument::Type(it)) = inner {
                        if let ParamType::View = self.param_ty(fcx, it)? {
                            return Ok(ParamType::OptView);
                        }
                    }
                    return Err(Error::at(
                        fcx.file,
                        t.span(),
                        "`Option` type",
                        "only `Option<&View>` parameters",
                    ));
                }
                if self.find_struct(&name).is_some() {
                    return Ok(ParamType::Value(Ty::Struct(name)));
                }
                Err(Error::at(
                    fcx.file,
                    t.span(),
                    format!("type `{name}`"),
                    "types are f32, u32, i32, u16, u8, usize, bool, F16, Bf16, T, tuples, arrays, views and params structs",
                ))
            }
            other => Err(Error::at(
                fcx.file,
                other.span(),
                format!("type `{}`", quote::quote!(#other)),
                "unsupported type form",
            )),
        }
    }

    /// The WGSL name of a type; tuple and kiln-math struct types are declared on first use.
    pub(super) fn render(&mut self, t: &Ty) -> String {
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

    /// A struct's fields and their (scalar) types, in declaration order.
    pub(super) fn struct_fields(&mut self, name: &str) -> Result<Vec<(String, Ty)>> {
        let Some((file, st)) = self.find_struct(name) else {
            return Ok(Vec::new());
        };
        let mut fcx = FnContext::new(file, SelfKind::None);
        let mut out = Vec::new();
        for f in &st.fields {
            match self.param_ty(&mut fcx, &f.ty)? {
                ParamType::Value(t)
                    if !matches!(t, Ty::Struct(_) | Ty::Array(..) | Ty::Tuple(_)) =>
                {
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
}
