//! Reads the kernel list (`for_each_kernel!`) and the `params!` structs out of kiln-math.

use crate::error::Error;
use crate::sources::Sources;
use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};

/// One buffer of a kernel, as the list declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferSpec {
    pub name: String,
    /// `Src`, `Dst` or `Rw`.
    pub access: String,
    /// `T` (the kernel's element type) or a fixed scalar type (`u32`, `i32`, `u8`, `f32`, …).
    pub elem: String,
}

/// One field of a params struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    pub name: String,
    /// `f32`, `u32` or `i32`.
    pub ty: String,
}

/// One kernel of the list.
#[derive(Clone, Debug)]
pub struct KernelSpec {
    /// The module and body function name.
    pub name: String,
    /// The descriptor type (`FusedAddRmsNorm`).
    pub id: String,
    pub dtypes: Vec<String>,
    pub buffers: Vec<BufferSpec>,
}

impl KernelSpec {
    /// Whether a buffer has the fixed element type F16 (its modules then vary with f16 storage).
    pub fn has_fixed_f16(&self) -> bool {
        self.buffers.iter().any(|b| b.elem == "F16")
    }
}

fn err(file: &str, span: Span, construct: &str, detail: &str) -> Error {
    let at = span.start();
    Error {
        file: file.to_string(),
        line: at.line,
        column: at.column + 1,
        construct: construct.to_string(),
        detail: detail.to_string(),
    }
}

/// The entries of `for_each_kernel!` in `list.rs`.
pub fn kernels(src: &Sources) -> Result<Vec<KernelSpec>, Error> {
    for f in &src.files {
        for item in &f.ast.items {
            let syn::Item::Macro(m) = item else { continue };
            if m.ident.as_ref().is_none_or(|i| i != "for_each_kernel") {
                continue;
            }
            // macro_rules! for_each_kernel { ($m:ident) => { $m! { ENTRIES } }; }
            let entries = find_innermost_entries(m.mac.tokens.clone()).ok_or_else(|| {
                err(
                    &f.path,
                    m.ident.as_ref().unwrap().span(),
                    "kernel list",
                    "expected `($m:ident) => { $m! { entries } }`",
                )
            })?;
            return parse_entries(&f.path, entries);
        }
    }
    Err(Error {
        file: "shared-kernel-math/src/list.rs".into(),
        line: 1,
        column: 1,
        construct: "kernel list".into(),
        detail: "no `macro_rules! for_each_kernel` found".into(),
    })
}

/// The brace group after `$m!` inside the macro's single rule.
fn find_innermost_entries(ts: TokenStream) -> Option<TokenStream> {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    for (i, t) in toks.iter().enumerate() {
        if let TokenTree::Punct(p) = t {
            if p.as_char() == '!' && i > 0 {
                if let Some(TokenTree::Group(g)) = toks.get(i + 1) {
                    if g.delimiter() == Delimiter::Brace {
                        return Some(g.stream());
                    }
                }
            }
        }
        if let TokenTree::Group(g) = t {
            if let Some(s) = find_innermost_entries(g.stream()) {
                return Some(s);
            }
        }
    }
    None
}

fn parse_entries(file: &str, ts: TokenStream) -> Result<Vec<KernelSpec>, Error> {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let bad = |t: &TokenTree| {
        err(
            file,
            t.span(),
            "kernel list entry",
            "expected `name: Id [dtypes] (buffer: Access<Elem>, …);`",
        )
    };
    while i < toks.len() {
        let (TokenTree::Ident(name), Some(TokenTree::Punct(_)), Some(TokenTree::Ident(id))) =
            (&toks[i], toks.get(i + 1), toks.get(i + 2))
        else {
            return Err(bad(&toks[i]));
        };
        let Some(TokenTree::Group(dts)) = toks.get(i + 3) else {
            return Err(bad(&toks[i]));
        };
        let Some(TokenTree::Group(bufs)) = toks.get(i + 4) else {
            return Err(bad(&toks[i]));
        };
        let dtypes = dts
            .stream()
            .into_iter()
            .filter_map(|t| match t {
                TokenTree::Ident(i) => Some(i.to_string()),
                _ => None,
            })
            .collect();
        // buffer: Access < Elem > , …
        let bt: Vec<TokenTree> = bufs.stream().into_iter().collect();
        let mut buffers = Vec::new();
        for chunk in bt.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ',')) {
            let idents: Vec<String> = chunk
                .iter()
                .filter_map(|t| match t {
                    TokenTree::Ident(i) => Some(i.to_string()),
                    _ => None,
                })
                .collect();
            match idents.as_slice() {
                [] => {}
                [n, a, e] => buffers.push(BufferSpec {
                    name: n.clone(),
                    access: a.clone(),
                    elem: e.clone(),
                }),
                _ => return Err(bad(&chunk[0])),
            }
        }
        out.push(KernelSpec {
            name: name.to_string(),
            id: id.to_string(),
            dtypes,
            buffers,
        });
        i += 5;
        if matches!(toks.get(i), Some(TokenTree::Punct(p)) if p.as_char() == ';') {
            i += 1;
        }
    }
    Ok(out)
}

/// The fields of the `params!` struct named `name`, in order.
pub fn params_fields(src: &Sources, name: &str) -> Option<Vec<ParamSpec>> {
    for f in &src.files {
        for item in &f.ast.items {
            let syn::Item::Macro(m) = item else { continue };
            if m.mac
                .path
                .segments
                .last()
                .is_none_or(|s| s.ident != "params")
            {
                continue;
            }
            let toks: Vec<TokenTree> = m.mac.tokens.clone().into_iter().collect();
            let mut i = 0;
            while i < toks.len() {
                if matches!(&toks[i], TokenTree::Ident(id) if id == "struct") {
                    let is_it = matches!(toks.get(i + 1), Some(TokenTree::Ident(id)) if id == name);
                    if let (true, Some(TokenTree::Group(g))) = (is_it, toks.get(i + 2)) {
                        return Some(parse_fields(g.stream()));
                    }
                }
                i += 1;
            }
        }
    }
    None
}

fn parse_fields(ts: TokenStream) -> Vec<ParamSpec> {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i] {
            // `#[doc = ..]` attributes
            TokenTree::Punct(p) if p.as_char() == '#' => i += 2,
            TokenTree::Ident(id) if id == "pub" => i += 1,
            TokenTree::Ident(field) => {
                let ty = match toks.get(i + 2) {
                    Some(TokenTree::Ident(t)) => t.to_string(),
                    _ => String::new(),
                };
                out.push(ParamSpec {
                    name: field.to_string(),
                    ty,
                });
                // skip to the next top-level comma
                while i < toks.len()
                    && !matches!(&toks[i], TokenTree::Punct(p) if p.as_char() == ',')
                {
                    i += 1;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}
