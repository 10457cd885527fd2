//! Value types and their inference: a literal's type is a variable until unification with the
//! types around it fixes it, as in Rust.

use kiln_math::DType;
use std::collections::HashSet;

/// The 16-bit float formats; values of them are their bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Half {
    F16,
    Bf16,
}

/// A value type. 16- and 8-bit integers and the 16-bit floats' bits live in a u32.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Ty {
    F32,
    U32,
    I32,
    U16,
    U8,
    Bool,
    Unit,
    Half(Half),
    Tuple(Vec<Ty>),
    Array(Box<Ty>, u32),
    /// A plain struct of scalars declared in kiln-math.
    Struct(String),
    /// A type not yet known (a literal's, or a `let x;` binding's): a [`TypeVars`] index.
    Var(usize),
}

/// The type a scalar type's name stands for (Rust's spelling or a dtype's).
pub(super) fn scalar_ty(name: &str) -> Option<Ty> {
    Some(match name {
        "f32" => Ty::F32,
        "u32" | "usize" => Ty::U32,
        "i32" | "isize" => Ty::I32,
        "u16" => Ty::U16,
        "u8" => Ty::U8,
        "bool" => Ty::Bool,
        "F16" | "f16" => Ty::Half(Half::F16),
        "Bf16" | "bf16" => Ty::Half(Half::Bf16),
        _ => return None,
    })
}

/// The type as Rust spells it, for errors (`usize` and `u32` are one type here: `u32`).
impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ty::F32 => f.write_str("f32"),
            Ty::U32 => f.write_str("u32"),
            Ty::I32 => f.write_str("i32"),
            Ty::U16 => f.write_str("u16"),
            Ty::U8 => f.write_str("u8"),
            Ty::Bool => f.write_str("bool"),
            Ty::Unit => f.write_str("()"),
            Ty::Half(Half::F16) => f.write_str("F16"),
            Ty::Half(Half::Bf16) => f.write_str("Bf16"),
            Ty::Tuple(v) => {
                let parts: Vec<String> = v.iter().map(Ty::to_string).collect();
                write!(f, "({})", parts.join(", "))
            }
            Ty::Array(t, n) => write!(f, "[{t}; {n}]"),
            Ty::Struct(n) => f.write_str(n),
            Ty::Var(_) => f.write_str("an untyped number"),
        }
    }
}

/// The type of a list dtype's elements.
pub(super) fn dtype_ty(d: DType) -> Ty {
    match d {
        DType::F32 => Ty::F32,
        DType::F16 => Ty::Half(Half::F16),
        DType::Bf16 => Ty::Half(Half::Bf16),
        DType::U32 => Ty::U32,
        DType::I32 => Ty::I32,
        DType::U8 => Ty::U8,
    }
}

/// A name fragment unique to the type: instance keys, accessor and tuple struct names.
pub(super) fn ty_key(t: &Ty) -> String {
    match t {
        Ty::F32 => "f32".into(),
        Ty::U32 => "u32".into(),
        Ty::I32 => "i32".into(),
        Ty::U16 => "u16".into(),
        Ty::U8 => "u8".into(),
        Ty::Bool => "bool".into(),
        Ty::Unit => "unit".into(),
        Ty::Half(Half::F16) => "f16".into(),
        Ty::Half(Half::Bf16) => "bf16".into(),
        Ty::Tuple(v) => v.iter().map(ty_key).collect::<Vec<_>>().join("_"),
        Ty::Array(t, n) => format!("a{n}{}", ty_key(t)),
        Ty::Struct(n) => n.clone(),
        Ty::Var(_) => "var".into(),
    }
}

/// Widths of the integers held in a u32.
pub(super) fn narrow_mask(t: &Ty) -> Option<&'static str> {
    match t {
        Ty::U16 => Some("0xffffu"),
        Ty::U8 => Some("0xffu"),
        _ => None,
    }
}

/// Whether an unknown type is left inside `t`.
pub(super) fn has_var(t: &Ty) -> bool {
    match t {
        Ty::Var(_) => true,
        Ty::Tuple(v) => v.iter().any(has_var),
        Ty::Array(t, _) => has_var(t),
        _ => false,
    }
}

/// A type with open literal types defaulted (a captured literal's variable keeps Rust's default).
pub(super) fn default_ty(t: &Ty) -> Ty {
    match t {
        Ty::Var(_) => Ty::I32,
        Ty::Tuple(v) => Ty::Tuple(v.iter().map(default_ty).collect()),
        Ty::Array(e, n) => Ty::Array(Box::new(default_ty(e)), *n),
        t => t.clone(),
    }
}

/// The WGSL literal of `text` at type `t` (suffixed: WGSL does not convert literals).
pub(super) fn render_lit(text: &str, t: &Ty) -> String {
    match t {
        Ty::F32 => {
            let v: f32 = text.parse().unwrap_or(0.0);
            format!("{v:e}f")
        }
        Ty::I32 => {
            // i32::MIN cannot be written as a negated literal.
            if text == "2147483648" {
                "i32(-2147483647 - 1)".into()
            } else {
                format!("{text}i")
            }
        }
        Ty::Bool => text.to_string(),
        _ => format!("{text}u"),
    }
}

/// One literal type variable: its union-find parent, its type once known, and whether it
/// came from an integer literal.
#[derive(Clone, Debug)]
struct TypeVar {
    parent: usize,
    known: Option<Ty>,
    int: bool,
}

/// The literal type variables of one function, unified by union-find.
#[derive(Default)]
pub(super) struct TypeVars {
    vars: Vec<TypeVar>,
    /// Variables of `let x;` bindings: any type, fixed by the first assignment.
    any: HashSet<usize>,
}

impl TypeVars {
    pub(super) fn new_var(&mut self, int: bool) -> Ty {
        let id = self.vars.len();
        self.vars.push(TypeVar {
            parent: id,
            known: None,
            int,
        });
        Ty::Var(id)
    }

    /// A variable of any type (not a literal's), for `let x;`.
    pub(super) fn new_any_var(&mut self) -> Ty {
        let t = self.new_var(false);
        if let Ty::Var(v) = t {
            self.any.insert(v);
        }
        t
    }

    /// Whether the root variable `v` came from an integer literal.
    pub(super) fn is_int(&self, v: usize) -> bool {
        self.vars[v].int
    }

    /// The representative of `v`'s class, compressing the path to it.
    fn root(&mut self, v: usize) -> usize {
        let p = self.vars[v].parent;
        if p == v {
            return v;
        }
        let r = self.root(p);
        self.vars[v].parent = r;
        r
    }

    /// The type with every known variable substituted.
    pub(super) fn norm(&mut self, t: &Ty) -> Ty {
        match t {
            Ty::Var(v) => {
                let r = self.root(*v);
                match self.vars[r].known.clone() {
                    Some(t) => self.norm(&t),
                    None => Ty::Var(r),
                }
            }
            Ty::Tuple(v) => Ty::Tuple(v.iter().map(|t| self.norm(t)).collect()),
            Ty::Array(t, n) => Ty::Array(Box::new(self.norm(t)), *n),
            t => t.clone(),
        }
    }

    /// Makes `a` and `b` one type; `Err` says why they cannot be.
    pub(super) fn unify(&mut self, a: &Ty, b: &Ty) -> std::result::Result<(), String> {
        let (a, b) = (self.norm(a), self.norm(b));
        match (&a, &b) {
            _ if a == b => Ok(()),
            (Ty::Var(x), Ty::Var(y)) => {
                let (ax, ay) = (self.any.contains(x), self.any.contains(y));
                let int = match (ax, ay) {
                    (true, false) => self.vars[*y].int,
                    (false, true) => self.vars[*x].int,
                    _ => self.vars[*x].int || self.vars[*y].int,
                };
                self.vars[*x].parent = *y;
                self.vars[*y].int = int;
                if !(ax && ay) {
                    self.any.remove(y);
                }
                Ok(())
            }
            (Ty::Var(x), t) | (t, Ty::Var(x)) if self.any.contains(x) => {
                self.vars[*x].known = Some(t.clone());
                Ok(())
            }
            (Ty::Var(x), t) | (t, Ty::Var(x)) => {
                let int = self.vars[*x].int;
                let t_int = matches!(t, Ty::U32 | Ty::I32 | Ty::U16 | Ty::U8);
                if int && !t_int || !int && *t != Ty::F32 {
                    return Err(format!("a literal cannot have type `{t}`"));
                }
                self.vars[*x].known = Some(t.clone());
                Ok(())
            }
            (Ty::Array(x, n), Ty::Array(y, m)) if n == m => self.unify(x, y),
            (Ty::Tuple(x), Ty::Tuple(y)) if x.len() == y.len() => {
                for (p, q) in x.clone().iter().zip(y.clone().iter()) {
                    self.unify(p, q)?;
                }
                Ok(())
            }
            _ => Err(format!("type mismatch: `{a}` vs `{b}`")),
        }
    }

    /// The type with open variables defaulted as Rust does: integers to i32, floats to f32.
    pub(super) fn default_vars(&mut self, t: &Ty) -> Ty {
        match self.norm(t) {
            Ty::Var(v) => {
                if self.vars[v].int {
                    Ty::I32
                } else {
                    Ty::F32
                }
            }
            Ty::Tuple(v) => Ty::Tuple(v.iter().map(|t| self.default_vars(t)).collect()),
            Ty::Array(t, n) => Ty::Array(Box::new(self.default_vars(&t)), n),
            t => t,
        }
    }
}
