//! Name resolution in kiln-math: the kernel body, free functions, consts, structs, the `Block`
//! trait's provided methods and `impl Element` methods, found across all source files.

use super::context::Translator;
use super::types::{Half, Ty};
use crate::error::{Error, Result};
use syn::spanned::Spanned;

impl<'a> Translator<'a> {
    /// The kernel's body: the function `name` in `kernels/name.rs`.
    pub(super) fn find_body(&self) -> Result<(&'a str, &'a syn::ItemFn)> {
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

    /// The params type of a kernel body: its second parameter, `&P`.
    pub(super) fn params_struct_of(&self, file: &str, sig: &syn::Signature) -> Result<String> {
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
    pub(super) fn find_free(
        &self,
        name: &str,
        caller_file: &str,
    ) -> Vec<(&'a str, &'a syn::ItemFn)> {
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

    /// A method of `trait Block` with a body (a provided collective).
    pub(super) fn find_block_method(&self, name: &str) -> Option<(&'a str, &'a syn::TraitItemFn)> {
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
    pub(super) fn find_elem_method(
        &self,
        ty: &Ty,
        name: &str,
    ) -> Option<(&'a str, &'a syn::ImplItemFn)> {
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
    pub(super) fn find_const(
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

    /// The value of an integer module const (array lengths).
    pub(super) fn const_int(&self, name: &str, caller_file: &str) -> Option<u32> {
        let (_, c) = self.find_const(name, caller_file).ok()??;
        match &*c.expr {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Int(i),
                ..
            }) => i.base10_parse().ok(),
            _ => None,
        }
    }

    /// A const generic argument: an integer literal or an integer module const.
    pub(super) fn const_arg(&self, a: &syn::GenericArgument, file: &str) -> Option<u32> {
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

    /// A struct with named fields declared in kiln-math.
    pub(super) fn find_struct(&self, name: &str) -> Option<(&'a str, &'a syn::ItemStruct)> {
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
}

/// The last path segment of a type, under any references.
fn ref_path_name(t: &syn::Type) -> Option<String> {
    match t {
        syn::Type::Reference(r) => ref_path_name(&r.elem),
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

/// The last path segment of a path type.
fn type_path_name(t: &syn::Type) -> Option<String> {
    match t {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}
