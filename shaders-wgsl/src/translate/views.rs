//! Views and their buffers: `get`/`set`/`len` and the chunk forms, the bounds-checked accessor
//! functions, and how each buffer is stored (plain, native f16, or packed in u32 words).

use super::context::{place_key, FnContext, Place, Translator, Value};
use super::types::{dtype_ty, Half, Ty};
use crate::error::{Error, Result};
use kiln_math::{Access, Elem};
use proc_macro2::Span;

impl<'a> Translator<'a> {
    /// A view method: `len`, `is_empty`, `get`/`set` (checked or not) and the chunk forms.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn view_method(
        &mut self,
        fcx: &mut FnContext,
        p: Place,
        rt: String,
        name: &str,
        args: &[Value],
        chunk: Option<u32>,
        span: Span,
    ) -> Result<Value> {
        let elem = self.place_elem(&p);
        let acc = self.place_access(&p);
        let checked = !name.ends_with("_unchecked");
        match (name, args) {
            ("chunk_aligned", [Value::Expr(_, it)]) => {
                fcx.unify(it, &Ty::U32, span, "view index")?;
                chunk.ok_or_else(|| {
                    Error::at(
                        fcx.file,
                        span,
                        "`chunk_aligned` without `::<N>`",
                        "name the chunk length",
                    )
                })?;
                // Chunks are element loads in WGSL, so the element-wise path a body takes when
                // this is false does the same loads without the chunk arrays, which NVIDIA's
                // Vulkan compiler keeps in memory: add-RMSNorm f32 at 4096×8192 on the H200 ran
                // 5.87 ms chunked, 0.85 ms element-wise. `get_chunk`/`set_chunk` still translate.
                return Ok(Value::Expr("false".into(), Ty::Bool));
            }
            // WGSL keeps the checks of the unchecked form: a fault is recorded, never a stray
            // access.
            ("get_chunk" | "get_chunk_unchecked", [Value::Expr(i, it)]) => {
                if acc == Access::Write {
                    return Err(Error::at(
                        fcx.file,
                        span,
                        "`get_chunk` on a Dst view",
                        "Dst is write-only",
                    ));
                }
                fcx.unify(it, &Ty::U32, span, "view index")?;
                let n = chunk.ok_or_else(|| {
                    Error::at(
                        fcx.file,
                        span,
                        "`get_chunk` without `::<N>`",
                        "name the chunk length",
                    )
                })?;
                let get = self.accessor(&p, true, false);
                let f = self.chunk_accessor(&p, &get, n, true);
                return Ok(Value::Expr(
                    format!("{f}({rt}, {i})"),
                    Ty::Array(Box::new(elem), n),
                ));
            }
            ("set_chunk" | "set_chunk_unchecked", [Value::Expr(i, it), Value::Expr(a, at_)]) => {
                if acc == Access::Read {
                    return Err(Error::at(
                        fcx.file,
                        span,
                        "`set_chunk` on a Src view",
                        "Src is read-only",
                    ));
                }
                fcx.unify(it, &Ty::U32, span, "view index")?;
                let Ty::Array(e, n) = fcx.norm(at_) else {
                    return Err(Error::at(fcx.file, span, "`set_chunk`", "an array value"));
                };
                fcx.unify(&e, &elem, span, "chunk element")?;
                let set = self.accessor(&p, false, false);
                let f = self.chunk_accessor(&p, &set, n, false);
                return Ok(Value::Expr(format!("{f}({rt}, {i}, {a})"), Ty::Unit));
            }
            _ => {}
        }
        match (name, args) {
            ("len", []) => Ok(Value::Expr(format!("({rt}).y"), Ty::U32)),
            ("is_empty", []) => Ok(Value::Expr(format!("(({rt}).y == 0u)"), Ty::Bool)),
            ("get" | "get_unchecked", [Value::Expr(i, it)]) => {
                if acc == Access::Write {
                    return Err(Error::at(
                        fcx.file,
                        span,
                        "`get` on a Dst view",
                        "Dst is write-only",
                    ));
                }
                fcx.unify(it, &Ty::U32, span, "view index")?;
                let f = self.accessor(&p, true, checked);
                Ok(Value::Expr(format!("{f}({rt}, {i})"), elem))
            }
            ("set" | "set_unchecked", [Value::Expr(i, it), Value::Expr(v, vt)]) => {
                if acc == Access::Read {
                    return Err(Error::at(
                        fcx.file,
                        span,
                        "`set` on a Src view",
                        "Src is read-only",
                    ));
                }
                fcx.unify(it, &Ty::U32, span, "view index")?;
                fcx.unify(vt, &elem, span, "stored value")?;
                let f = self.accessor(&p, false, checked);
                Ok(Value::Expr(format!("{f}({rt}, {i}, {v})"), Ty::Unit))
            }
            _ => Err(Error::at(
                fcx.file,
                span,
                format!("view method `{name}`"),
                "views offer get, set, len, is_empty and their _unchecked forms",
            )),
        }
    }

    /// The element type of a place.
    fn place_elem(&self, p: &Place) -> Ty {
        match p {
            Place::Buffer(k) => match self.kernel.buffers[*k].elem {
                Elem::Kernel => self.elem.clone(),
                Elem::Fixed(d) => dtype_ty(d),
            },
            Place::Scratch => Ty::U32,
            Place::Shared(t) => t.clone(),
        }
    }

    /// Whether a place may be read, written or both (workgroup memory is both).
    fn place_access(&self, p: &Place) -> Access {
        match p {
            Place::Buffer(k) => self.kernel.buffers[*k].access,
            _ => Access::ReadWrite,
        }
    }

    /// `N` element accesses of `p` after one bounds check of the whole chunk.
    fn chunk_accessor(&mut self, p: &Place, one: &str, n: u32, load: bool) -> String {
        let name = format!(
            "kiln_{}chunk{n}_{}",
            if load { "get" } else { "set" },
            place_key(p)
        );
        if self.accessors.contains_key(&name) {
            return name;
        }
        let elem = self.place_elem(p);
        let vt = self.render(&elem);
        let buf_id = match p {
            Place::Buffer(k) => *k as u32,
            Place::Scratch => u32::MAX - 1,
            Place::Shared(_) => u32::MAX - 2,
        };
        let text = if load {
            format!(
                "fn {name}(v: vec2<u32>, i: u32) -> array<{vt}, {n}> {{\n    var c: array<{vt}, {n}>;\n    if i >= v.y || v.y - i < {n}u {{ kiln_fault_at({buf_id}u, i + {n}u); return c; }}\n    for (var j = 0u; j < {n}u; j++) {{ c[j] = {one}(v, i + j); }}\n    return c;\n}}\n"
            )
        } else {
            format!(
                "fn {name}(v: vec2<u32>, i: u32, c: array<{vt}, {n}>) {{\n    if i >= v.y || v.y - i < {n}u {{ kiln_fault_at({buf_id}u, i + {n}u); return; }}\n    for (var j = 0u; j < {n}u; j++) {{ {one}(v, i + j, c[j]); }}\n}}\n"
            )
        };
        self.prelude.insert("fault");
        self.accessors.insert(name.clone(), text);
        name
    }

    /// How buffer `k` is declared and accessed.
    pub(super) fn storage(&self, k: usize) -> Storage {
        let e = self.place_elem(&Place::Buffer(k));
        let writable = self.place_access(&Place::Buffer(k)) != Access::Read;
        match e {
            Ty::F32 => Storage::Direct("f32"),
            Ty::U32 => Storage::Direct("u32"),
            Ty::I32 => Storage::Direct("i32"),
            Ty::Half(Half::F16) if self.variant.f16_storage => Storage::NativeF16,
            Ty::Half(_) | Ty::U16 => Storage::Packed { bits: 16, writable },
            Ty::U8 => Storage::Packed { bits: 8, writable },
            _ => Storage::Direct("u32"),
        }
    }

    /// The name of the accessor function for `p` (generated once).
    fn accessor(&mut self, p: &Place, load: bool, checked: bool) -> String {
        let name = format!(
            "kiln_{}_{}{}",
            if load { "get" } else { "set" },
            place_key(p),
            if checked { "" } else { "_u" }
        );
        if self.accessors.contains_key(&name) {
            return name;
        }
        let (buf_id, arr, elem) = match p {
            Place::Buffer(k) => (*k as u32, format!("kiln_buf{k}"), self.place_elem(p)),
            Place::Scratch => (u32::MAX - 1, "kiln_scratch".into(), Ty::U32),
            Place::Shared(t) => (u32::MAX - 2, "kiln_shared".into(), t.clone()),
        };
        let vt = self.render(&elem);
        let guard = if checked {
            format!(
                "    if i >= v.y {{ kiln_fault_at({buf_id}u, i); return{}; }}\n",
                if load {
                    " kiln_zero_".to_string() + &vt + "()"
                } else {
                    String::new()
                }
            )
        } else {
            String::new()
        };
        self.prelude.insert("fault");
        let storage = match p {
            Place::Buffer(k) => self.storage(*k),
            Place::Scratch => Storage::Direct("u32"),
            Place::Shared(t) => Storage::Shared(self.render(t)),
        };
        let body = match (&storage, load) {
            (Storage::Direct(_), true) => format!("    return {arr}[v.x + i];\n"),
            (Storage::Direct(_), false) => format!("    {arr}[v.x + i] = x;\n"),
            (Storage::Shared(t), true) => {
                if t == "u32" {
                    "    return kiln_shared[v.x + i];\n".to_string()
                } else {
                    format!("    return bitcast<{t}>(kiln_shared[v.x + i]);\n")
                }
            }
            (Storage::Shared(_), false) => {
                "    kiln_shared[v.x + i] = bitcast<u32>(x);\n".to_string()
            }
            (Storage::NativeF16, true) => {
                self.uses_f16 = true;
                self.prelude.insert("f16_storage");
                format!("    return kiln_f16_value_bits(f32({arr}[v.x + i]));\n")
            }
            (Storage::NativeF16, false) => {
                self.uses_f16 = true;
                self.prelude.insert("f16_storage");
                format!("    {arr}[v.x + i] = f16(kiln_f16_bits_value(x));\n")
            }
            (Storage::Packed { bits, writable }, true) => {
                let per = 32 / bits;
                let mask = if *bits == 16 { "0xffffu" } else { "0xffu" };
                let word = if *writable {
                    format!("atomicLoad(&{arr}[j / {per}u])")
                } else {
                    format!("{arr}[j / {per}u]")
                };
                format!("    let j = v.x + i;\n    return ({word} >> ((j % {per}u) * {bits}u)) & {mask};\n")
            }
            (Storage::Packed { bits, .. }, false) => {
                let per = 32 / bits;
                let mask = if *bits == 16 { "0xffffu" } else { "0xffu" };
                // Clear then set only this element's bits: the neighbours' stores never race.
                format!(
                    "    let j = v.x + i;\n    let s = (j % {per}u) * {bits}u;\n    atomicAnd(&{arr}[j / {per}u], ~({mask} << s));\n    atomicOr(&{arr}[j / {per}u], (x & {mask}) << s);\n"
                )
            }
        };
        let sig = if load {
            format!("fn {name}(v: vec2<u32>, i: u32) -> {vt} {{\n")
        } else {
            format!("fn {name}(v: vec2<u32>, i: u32, x: {vt}) {{\n")
        };
        let mut text = sig + &guard + &body + "}\n";
        if matches!(p, Place::Shared(_)) && checked {
            // Also keep inside the declared array when offset + len overshoots it.
            text = text.replace(
                "if i >= v.y {",
                "if i >= v.y || v.x + i >= KILN_SHARED_WORDS {",
            );
        }
        self.prelude.insert(match vt.as_str() {
            "f32" => "zero_f32",
            "i32" => "zero_i32",
            _ => "zero_u32",
        });
        self.accessors.insert(name.clone(), text);
        name
    }
}

pub(super) enum Storage {
    Direct(&'static str),
    NativeF16,
    Packed { bits: u32, writable: bool },
    Shared(String),
}
