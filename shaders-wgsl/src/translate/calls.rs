//! Calls by what they call: closures, `libm`, associated functions of scalar and element types,
//! kiln-math's free functions, and methods on values, views and the `Block`.

use super::context::{
    FnContext, FnItem, Generic, Local, ParamType, Place, SelfKind, Translator, Value,
};
use super::types::{scalar_ty, Ty};
use crate::error::{Error, Result};
use proc_macro2::Span;
use syn::spanned::Spanned;

impl<'a> Translator<'a> {
    /// A call by path: a closure, `libm::*`, an associated function, `Some`, `F16(..)`, or a free
    /// function of kiln-math.
    pub(super) fn call(&mut self, fcx: &mut FnContext, c: &syn::ExprCall) -> Result<Value> {
        let span = c.span();
        let syn::Expr::Path(p) = &*c.func else {
            return Err(Error::at(
                fcx.file,
                span,
                "call of a non-path",
                "call functions by name",
            ));
        };
        let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
        let names: Vec<String> = segs.iter().map(|s| s.ident.to_string()).collect();
        let last = names.last().unwrap().clone();
        if names.len() == 1 {
            if let Some(Local::Closure(cl, scopes)) = fcx.lookup(&last).cloned() {
                return self.inline_closure(fcx, &cl, scopes, &c.args, span);
            }
        }
        let args = self.args(fcx, &c.args)?;
        let qself_ty = p.qself.as_ref().map(|q| q.ty.clone());
        // `libm::f(x)`
        if names.len() >= 2 && names[names.len() - 2] == "libm" {
            return self.libm(fcx, &last, &args, span);
        }
        // `Type::f(..)` on a scalar / element type, or `<T as Element>::f(..)`.
        let owner: Option<Ty> = if let Some(q) = &qself_ty {
            match self.param_ty(fcx, q)? {
                ParamType::Value(t) => Some(t),
                _ => None,
            }
        } else if names.len() == 2 {
            let o = &names[0];
            match fcx.generics.get(o) {
                Some(Generic::Elem(t)) => Some(t.clone()),
                _ if o == "Self" => match &fcx.self_kind {
                    SelfKind::Elem(t) => Some(t.clone()),
                    _ => None,
                },
                _ => scalar_ty(o),
            }
        } else {
            None
        };
        if let Some(owner) = owner {
            if let Some(v) = self.std_assoc(fcx, &owner, &last, &args, span)? {
                return Ok(v);
            }
            if let Some((file, f)) = self.find_elem_method(&owner, &last) {
                return self.call_item(
                    fcx,
                    FnItem::Impl(f),
                    file,
                    SelfKind::Elem(owner),
                    &args,
                    None,
                    span,
                );
            }
            return Err(Error::at(
                fcx.file,
                span,
                format!("associated function `{}::{last}`", names.join("::")),
                "not in the subset",
            ));
        }
        if names.len() == 1 && last == "Some" {
            return match args.as_slice() {
                [v @ Value::View(..)] => Ok(v.clone()),
                _ => Err(Error::at(
                    fcx.file,
                    span,
                    "`Some(..)`",
                    "only around a view",
                )),
            };
        }
        // Tuple-struct constructors `F16(bits)`, `Bf16(bits)`.
        if names.len() == 1 && (last == "F16" || last == "Bf16") {
            let [Value::Expr(s, t)] = args.as_slice() else {
                return Err(Error::at(fcx.file, span, "constructor", "one argument"));
            };
            fcx.unify(t, &Ty::U16, span, "constructor argument")?;
            return Ok(Value::Expr(s.clone(), scalar_ty(&last).unwrap()));
        }
        let turbofish = match &segs.last().unwrap().arguments {
            syn::PathArguments::AngleBracketed(ab) => Some(self.turbofish(fcx, ab)?),
            _ => None,
        };
        let found = self.find_free(&last, fcx.file);
        match found.as_slice() {
            [(file, f)] => self.call_item(
                fcx,
                FnItem::Free(f),
                file,
                SelfKind::None,
                &args,
                turbofish.as_deref(),
                span,
            ),
            [] => Err(Error::at(
                fcx.file,
                span,
                format!("call of `{}`", names.join("::")),
                "no such function in kiln-math",
            )),
            _ => Err(Error::at(
                fcx.file,
                span,
                format!("call of `{}`", names.join("::")),
                "ambiguous: several functions have that name",
            )),
        }
    }

    /// A method call, dispatched on what the receiver is: the block, a view or a value.
    pub(super) fn method(&mut self, fcx: &mut FnContext, m: &syn::ExprMethodCall) -> Result<Value> {
        let span = m.span();
        let name = m.method.to_string();
        let recv = self.expr(fcx, &m.receiver)?;
        let args = self.args(fcx, &m.args)?;
        let is_view = matches!(recv, Value::View(..));
        let turbofish = match &m.turbofish {
            Some(t) if !is_view => Some(self.turbofish(fcx, t)?),
            _ => None,
        };
        match recv {
            Value::Block => self.block_method(fcx, &name, &args, turbofish, span),
            Value::View(p, rt) => {
                let n = m
                    .turbofish
                    .as_ref()
                    .and_then(|t| t.args.first())
                    .and_then(|a| self.const_arg(a, fcx.file));
                self.view_method(fcx, p, rt, &name, &args, n, span)
            }
            Value::Expr(s, t) => {
                let t = fcx.norm(&t);
                if let Some(v) = self.std_method(fcx, &s, &t, &name, &args, span)? {
                    return Ok(v);
                }
                if let Some((file, f)) = self.find_elem_method(&t, &name) {
                    let mut all = vec![Value::Expr(s, t.clone())];
                    all.extend(args);
                    return self.call_item(
                        fcx,
                        FnItem::Impl(f),
                        file,
                        SelfKind::Elem(t),
                        &all,
                        None,
                        span,
                    );
                }
                let instead = match t {
                    Ty::Array(_, n) => format!(
                        "arrays have no methods in WGSL; index them in a loop: `let mut k = 0; while k < {n} {{ … a[k] … k += 1; }}` (or `for k in 0..{n}`)"
                    ),
                    _ => format!(
                        "`{t}` has no method `{name}` in the subset; the methods it has are listed under Calls in shaders-wgsl/README.md"
                    ),
                };
                Err(Error::at(
                    fcx.file,
                    span,
                    format!("method `{name}` on `{t}`"),
                    instead,
                ))
            }
            v => Err(Error::at(
                fcx.file,
                span,
                format!("method `{name}` on {}", v.describe()),
                "only views, the block and scalar values have methods in the subset",
            )),
        }
    }

    /// A `Block` primitive (a WGSL builtin or global), else a provided method of the trait,
    /// translated.
    fn block_method(
        &mut self,
        fcx: &mut FnContext,
        name: &str,
        args: &[Value],
        turbofish: Option<Vec<Ty>>,
        span: Span,
    ) -> Result<Value> {
        let prim = |s: &str| Ok(Value::Expr(s.to_string(), Ty::U32));
        match name {
            "thread" => return prim("kiln_thread"),
            "size" => return prim("KILN_BLOCK"),
            "block_x" => return prim("kiln_block.x"),
            "block_y" => return prim("kiln_block.y"),
            "block_z" => return prim("kiln_block.z"),
            "grid_x" => return prim("kiln_grid.x"),
            "grid_y" => return prim("kiln_grid.y"),
            "grid_z" => return prim("kiln_grid.z"),
            "div_exact" => {
                // Rust's `/` in integers: a device's may be 2.5 ulp off (spec'd by Vulkan).
                return self.libm(fcx, "div_ieee", args, span);
            }
            "unfused" => {
                let [Value::Expr(v, vt)] = args else {
                    return Err(Error::at(fcx.file, span, "`unfused`", "one value"));
                };
                fcx.unify(vt, &Ty::F32, span, "unfused value")?;
                // An exact copy through integers, xor a zero the driver cannot prove (grids stay
                // far below 2^31 blocks): the product is rounded before anything adds to it.
                return Ok(Value::Expr(
                    format!("bitcast<f32>(bitcast<u32>({v}) ^ (kiln_grid.x >> 31u))"),
                    Ty::F32,
                ));
            }
            "barrier" => {
                // Buffers and workgroup memory alike are visible after it, as on CUDA.
                return Ok(Value::Expr(
                    "storageBarrier(); workgroupBarrier()".into(),
                    Ty::Unit,
                ));
            }
            "shuffle_xor" => {
                let [Value::Expr(v, vt), Value::Expr(m, mt)] = args else {
                    return Err(Error::at(fcx.file, span, "`shuffle_xor`", "two values"));
                };
                fcx.unify(vt, &Ty::U32, span, "shuffle value")?;
                fcx.unify(mt, &Ty::U32, span, "shuffle mask")?;
                return Ok(Value::Expr(
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
                return Ok(Value::View(
                    Place::Scratch,
                    "vec2<u32>(0u, 2u * ((KILN_BLOCK + KILN_WAVE - 1u) / KILN_WAVE))".into(),
                ));
            }
            "shared" => {
                let Some([t]) = turbofish.as_deref() else {
                    return Err(Error::at(
                        fcx.file,
                        span,
                        "`shared` without a turbofish",
                        "write `b.shared::<T>(offset, len)`",
                    ));
                };
                let t = t.clone();
                if !matches!(t, Ty::F32 | Ty::U32 | Ty::I32) {
                    return Err(Error::at(
                        fcx.file,
                        span,
                        format!("`shared::<{t}>`"),
                        "shared memory holds 4-byte scalars (f32, u32, i32)",
                    ));
                }
                let [Value::Expr(o, ot), Value::Expr(l, lt)] = args else {
                    return Err(Error::at(fcx.file, span, "`shared`", "(offset, len)"));
                };
                fcx.unify(ot, &Ty::U32, span, "shared offset")?;
                fcx.unify(lt, &Ty::U32, span, "shared length")?;
                self.uses_shared = true;
                self.prelude.insert("shared");
                return Ok(Value::View(
                    Place::Shared(t),
                    format!("kiln_shared_view({o}, {l})"),
                ));
            }
            _ => {}
        }
        let Some((file, f)) = self.find_block_method(name) else {
            return Err(Error::at(
                fcx.file,
                span,
                format!("Block method `{name}`"),
                "not a primitive and not provided by the Block trait",
            ));
        };
        let mut all = vec![Value::Block];
        all.extend(args.iter().cloned());
        self.call_item(
            fcx,
            FnItem::Trait(f),
            file,
            SelfKind::Block,
            &all,
            turbofish.as_deref(),
            span,
        )
    }
}
