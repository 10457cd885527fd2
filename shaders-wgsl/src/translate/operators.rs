//! Operators and casts with Rust's semantics: narrow integers masked to their width, shift
//! amounts as u32, saturating float-to-int casts. f32 `/` is the device's (Vulkan allows 2.5
//! ulp); `Block::div_exact` is Rust's.

use super::context::{indent_text, FnContext, ParamType, Translator, Value};
use super::types::{narrow_mask, render_lit, Ty};
use crate::error::{Error, Result};
use proc_macro2::Span;
use syn::spanned::Spanned;

impl<'a> Translator<'a> {
    /// A binary operator: compound assignment, short-circuit `&&` / `||`, or arithmetic and
    /// comparison.
    pub(super) fn binary(&mut self, fcx: &mut FnContext, b: &syn::ExprBinary) -> Result<Value> {
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
            let (r, rt) = self.val(fcx, &b.right)?;
            let (l, lt) = self.place(fcx, &b.left)?;
            let v = self.arith(fcx, op, (l.clone(), lt.clone()), (r, rt), span)?;
            let Value::Expr(s, _) = v else { unreachable!() };
            fcx.line(&format!("{l} = {s};"));
            return Ok(Value::Expr(String::new(), Ty::Unit));
        }
        if matches!(b.op, B::And(_) | B::Or(_)) {
            let (l, lt) = self.val(fcx, &b.left)?;
            fcx.unify(&lt, &Ty::Bool, span, "logical operand")?;
            let mark = fcx.out.len();
            let (r, rt) = self.val(fcx, &b.right)?;
            fcx.unify(&rt, &Ty::Bool, span, "logical operand")?;
            let pre = fcx.out.split_off(mark);
            let op = if matches!(b.op, B::And(_)) {
                "&&"
            } else {
                "||"
            };
            if pre.is_empty() {
                return Ok(Value::Expr(format!("({l} {op} {r})"), Ty::Bool));
            }
            // The right side needs statements: evaluate it only when Rust would.
            let t = fcx.fresh("sc");
            fcx.line(&format!("var {t}: bool = {l};"));
            let test = if op == "&&" {
                t.clone()
            } else {
                format!("!{t}")
            };
            fcx.line(&format!("if {test} {{"));
            fcx.out.push_str(&indent_text(&pre, 1));
            fcx.line(&format!("    {t} = {r};"));
            fcx.line("}");
            return Ok(Value::Expr(t, Ty::Bool));
        }
        let l = self.val(fcx, &b.left)?;
        let r = self.val(fcx, &b.right)?;
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
            _ => return Err(Error::at(fcx.file, span, "operator", "unsupported")),
        };
        self.arith(fcx, op, l, r, span)
    }

    /// Arithmetic, bitwise and comparison operators on two values of one type.
    fn arith(
        &mut self,
        fcx: &mut FnContext,
        op: &str,
        l: (String, Ty),
        r: (String, Ty),
        span: Span,
    ) -> Result<Value> {
        let (l, lt) = l;
        let (r, rt) = r;
        if op == "<<" || op == ">>" {
            let lt = fcx.norm(&lt);
            let rt = fcx.norm(&rt);
            // WGSL shifts take a u32 amount; Rust takes any integer.
            let amount = match rt {
                Ty::U32 | Ty::U16 | Ty::U8 => r,
                Ty::Var(v) => {
                    fcx.unify(&Ty::Var(v), &Ty::U32, span, "shift amount")?;
                    r
                }
                _ => format!("u32({r})"),
            };
            let s = format!("({l} {op} {amount})");
            return Ok(Value::Expr(
                match (op, narrow_mask(&lt)) {
                    ("<<", Some(m)) => format!("({s} & {m})"),
                    _ => s,
                },
                lt,
            ));
        }
        fcx.unify(&lt, &rt, span, &format!("operands of `{op}`"))?;
        let t = fcx.norm(&lt);
        let cmp = matches!(op, "==" | "!=" | "<" | "<=" | ">" | ">=");
        if cmp {
            return Ok(Value::Expr(format!("({l} {op} {r})"), Ty::Bool));
        }
        if t == Ty::Bool && matches!(op, "&" | "|" | "^") {
            let op = if op == "^" { "!=" } else { op };
            return Ok(Value::Expr(format!("({l} {op} {r})"), Ty::Bool));
        }
        let s = format!("({l} {op} {r})");
        Ok(Value::Expr(
            match (op, narrow_mask(&t)) {
                ("+" | "-" | "*", Some(m)) => format!("({s} & {m})"),
                _ => s,
            },
            t,
        ))
    }

    /// `as` between the scalar types with Rust's results (float to int saturates, NaN is 0).
    pub(super) fn cast(&mut self, fcx: &mut FnContext, c: &syn::ExprCast) -> Result<Value> {
        let (s, from) = self.val(fcx, &c.expr)?;
        let ParamType::Value(to) = self.param_ty(fcx, &c.ty)? else {
            return Err(Error::at(
                fcx.file,
                c.ty.span(),
                "cast target",
                "a scalar type",
            ));
        };
        let from = match fcx.norm(&from) {
            Ty::Var(v) => {
                let d = if fcx.types.is_int(v) {
                    Ty::I32
                } else {
                    Ty::F32
                };
                fcx.unify(&Ty::Var(v), &d, c.span(), "cast operand")?;
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
                    fcx.file,
                    c.span(),
                    format!("cast `{from}` as `{to}`"),
                    "unsupported conversion",
                ))
            }
        };
        Ok(Value::Expr(out, to))
    }
}
