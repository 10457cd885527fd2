//! The Rust → WGSL translation of one kernel × dtype × variant.
//!
//! Functions are monomorphised per call: `T: Element` is the kernel's element type, `B: Block`
//! is erased (its primitives read entry-level globals), a params reference is erased (fields
//! read `kiln_meta`), a view argument becomes a `vec2<u32>` (element offset, length) while the
//! binding it points into is fixed per instance. Literal types are inferred by unification:
//! text is emitted with placeholders that are filled once a function's types are known.

mod assemble;
mod calls;
mod context;
mod control;
mod expr;
mod instance;
mod operators;
mod resolve;
mod std_map;
mod stmt;
mod type_map;
mod types;
mod views;

use crate::error::{Error, Result};
use crate::kernels::KernelSpec;
use crate::module::Module;
use crate::sources::Sources;
use crate::variant::Variant;
use context::{FnContext, FnItem, Place, SelfKind, Translator, Value};
use kiln_math::DType;
use types::dtype_ty;

/// Translates `kernel` for `dtype` and `variant` into one module.
pub(crate) fn module(
    src: &Sources,
    kernel: &KernelSpec,
    dtype: DType,
    variant: Variant,
) -> Result<Module> {
    let mut tr = Translator::new(src, kernel, dtype_ty(dtype), variant);
    let (file, body) = tr.find_body()?;
    // The body: (b: &B, p: &P, views in list order).
    let sig = &body.sig;
    let n_views = sig.inputs.len().saturating_sub(2);
    if n_views != kernel.buffers.len() {
        return Err(Error::at(
            file,
            sig.ident.span(),
            format!("kernel body `{}`", kernel.name),
            format!(
                "takes {} views, the list declares {} buffers",
                n_views,
                kernel.buffers.len()
            ),
        ));
    }
    let params_ty = tr.params_struct_of(file, sig)?;
    tr.params_struct = params_ty.clone();
    let pw = kernel.params.len();
    let mut args = vec![Value::Block, Value::Params(params_ty)];
    for k in 0..kernel.buffers.len() {
        let w = crate::bindings::meta_buffer_word(pw, k);
        args.push(Value::View(
            Place::Buffer(k),
            format!("vec2<u32>(kiln_meta[{w}u], kiln_meta[{}u])", w + 1),
        ));
    }
    let call_span = sig.ident.span();
    let mut entry = FnContext::new(file, SelfKind::None);
    let (name, _) = tr.instantiate(
        FnItem::Free(body),
        file,
        SelfKind::None,
        &args,
        None,
        &mut entry,
        call_span,
    )?;
    let call_args: Vec<String> = args
        .iter()
        .filter_map(|a| match a {
            Value::View(_, rt) => Some(rt.clone()),
            _ => None,
        })
        .collect();
    let wgsl = tr.assemble(&name, &call_args, pw);
    Ok(Module {
        kernel: kernel.name.to_string(),
        dtype: dtype.name().to_string(),
        variant,
        wgsl,
        uses_f16: tr.uses_f16,
        uses_subgroups: tr.uses_subgroups,
        uses_shared: tr.uses_shared,
    })
}
