//! The standard library's functions and constants kiln-math uses, mapped to WGSL with Rust's
//! semantics, and `libm::*` calls, which go to the precise versions in `libm_wgsl.rs`.

use super::context::{FnContext, FnItem, SelfKind, Translator, Value};
use super::types::{narrow_mask, Ty};
use crate::error::{Error, Result};
use proc_macro2::Span;

impl<'a> Translator<'a> {
    /// `libm::name(..)`: the precise version in `libm_wgsl.rs`, translated like kernel code.
    pub(super) fn libm(
        &mut self,
        fcx: &mut FnContext,
        name: &str,
        args: &[Value],
        span: Span,
    ) -> Result<Value> {
        let found = self
            .src
            .files
            .iter()
            .filter(|f| crate::sources::is_prelude(&f.path))
            .find_map(|f| {
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
                fcx.file,
                span,
                format!("`libm::{name}`"),
                "not among the precise functions of shaders-wgsl/src/libm_wgsl.rs",
            ));
        };
        self.call_item(
            fcx,
            FnItem::Free(func),
            file,
            SelfKind::None,
            args,
            None,
            span,
        )
    }

    /// `f32::from_bits` and friends; `None` when `name` is not a std function.
    pub(super) fn std_assoc(
        &mut self,
        fcx: &mut FnContext,
        owner: &Ty,
        name: &str,
        args: &[Value],
        span: Span,
    ) -> Result<Option<Value>> {
        let one = |fcx: &mut FnContext, want: &Ty| -> Result<String> {
            match args {
                [Value::Expr(s, t)] => {
                    fcx.unify(t, want, span, "argument")?;
                    Ok(s.clone())
                }
                _ => Err(Error::at(
                    fcx.file,
                    span,
                    format!("`{name}`"),
                    "one value argument",
                )),
            }
        };
        Ok(Some(match (owner, name) {
            (Ty::F32, "from_bits") => {
                Value::Expr(format!("bitcast<f32>({})", one(fcx, &Ty::U32)?), Ty::F32)
            }
            (Ty::U32, "from") | (Ty::I32, "from") | (Ty::F32, "from") => {
                let [Value::Expr(s, t)] = args else {
                    return Ok(None);
                };
                let t = fcx.norm(t);
                let s = match (owner, &t) {
                    (Ty::F32, _) => format!("f32({s})"),
                    (Ty::I32, _) => format!("i32({s})"),
                    _ => s.clone(),
                };
                Value::Expr(s, owner.clone())
            }
            _ => return Ok(None),
        }))
    }

    /// A std method on a scalar value (`f32::max`, `u32::div_ceil`, …); `None` when it is not one.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn std_method(
        &mut self,
        fcx: &mut FnContext,
        s: &str,
        t: &Ty,
        name: &str,
        args: &[Value],
        span: Span,
    ) -> Result<Option<Value>> {
        let arg = |fcx: &mut FnContext, i: usize, want: &Ty| -> Result<String> {
            match args.get(i) {
                Some(Value::Expr(a, at_)) => {
                    fcx.unify(at_, want, span, "method argument")?;
                    Ok(a.clone())
                }
                _ => Err(Error::at(
                    fcx.file,
                    span,
                    format!("`{name}`"),
                    "value arguments",
                )),
            }
        };
        let v = |s: String, t: Ty| Ok(Some(Value::Expr(s, t)));
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
                let o = arg(fcx, 0, &Ty::F32)?;
                v(format!("bitcast<f32>((bitcast<u32>({s}) & 0x7fffffffu) | (bitcast<u32>({o}) & 0x80000000u))"), Ty::F32)
            }
            (Ty::F32, "max" | "min", 1) => {
                let o = arg(fcx, 0, &Ty::F32)?;
                self.prelude.insert("float_bits");
                v(format!("kiln_f{name}({s}, {o})"), Ty::F32)
            }
            (Ty::F32, "clamp", 2) => {
                let lo = arg(fcx, 0, &Ty::F32)?;
                let hi = arg(fcx, 1, &Ty::F32)?;
                self.prelude.insert("float_bits");
                v(format!("kiln_fmin(kiln_fmax({s}, {lo}), {hi})"), Ty::F32)
            }
            (Ty::F32, "recip", 0) => v(format!("(1.0f / {s})"), Ty::F32),
            (_, "max" | "min", 1) if is_int => {
                let o = arg(fcx, 0, t)?;
                v(format!("{name}({s}, {o})"), t.clone())
            }
            (_, "clamp", 2) if is_int => {
                let lo = arg(fcx, 0, t)?;
                let hi = arg(fcx, 1, t)?;
                v(format!("clamp({s}, {lo}, {hi})"), t.clone())
            }
            (Ty::U32 | Ty::Var(_), "div_ceil", 1) => {
                fcx.unify(t, &Ty::U32, span, "div_ceil")?;
                let o = arg(fcx, 0, &Ty::U32)?;
                v(
                    format!("({s} / {o} + select(0u, 1u, {s} % {o} != 0u))"),
                    Ty::U32,
                )
            }
            (_, "wrapping_add" | "wrapping_sub" | "wrapping_mul", 1) if is_int => {
                let o = arg(fcx, 0, t)?;
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
                let o = arg(fcx, 0, &Ty::U32)?;
                v(
                    format!("(({s} << ({o} % 32u)) | ({s} >> ((32u - {o} % 32u) % 32u)))"),
                    Ty::U32,
                )
            }
            (Ty::U32, "rotate_right", 1) => {
                let o = arg(fcx, 0, &Ty::U32)?;
                v(
                    format!("(({s} >> ({o} % 32u)) | ({s} << ((32u - {o} % 32u) % 32u)))"),
                    Ty::U32,
                )
            }
            (Ty::U32 | Ty::Var(_), "is_multiple_of", 1) => {
                fcx.unify(t, &Ty::U32, span, "is_multiple_of")?;
                let o = arg(fcx, 0, &Ty::U32)?;
                // Rust: x.is_multiple_of(0) is x == 0.
                v(
                    format!("select({s} == 0u, {s} % {o} == 0u, {o} != 0u)"),
                    Ty::Bool,
                )
            }
            (Ty::U32, "saturating_sub", 1) => {
                let o = arg(fcx, 0, &Ty::U32)?;
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
}

/// An associated constant of a std scalar type, or one of `core::f32::consts`.
pub(super) fn std_const(ty: &str, item: &str) -> Option<Value> {
    let f = |bits: u32| Some(Value::Expr(format!("bitcast<f32>({bits:#010x}u)"), Ty::F32));
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
        ("u32" | "usize", "MAX") => Some(Value::Expr("0xffffffffu".into(), Ty::U32)),
        ("u32" | "usize", "MIN") => Some(Value::Expr("0u".into(), Ty::U32)),
        ("u32" | "usize", "BITS") => Some(Value::Expr("32u".into(), Ty::U32)),
        ("i32", "MAX") => Some(Value::Expr("2147483647i".into(), Ty::I32)),
        ("i32", "MIN") => Some(Value::Expr("i32(-2147483647 - 1)".into(), Ty::I32)),
        ("u16", "MAX") => Some(Value::Expr("0xffffu".into(), Ty::U16)),
        ("u8", "MAX") => Some(Value::Expr("0xffu".into(), Ty::U8)),
        _ => None,
    }
}
