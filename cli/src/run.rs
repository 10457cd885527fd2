//! `kiln run`: one kernel on tensors from a safetensors file; every output buffer written back.

use anyhow::{anyhow, bail, Context};
use kiln::launch::{args_in_list_order, default_params, launch, set_param, Mode, Path};
use kiln::math::Access;
use kiln::{DType, Device, KernelId, Tensor};
use safetensors::tensor::{Dtype as StDtype, TensorView};
use std::collections::BTreeMap;

#[derive(clap::Args)]
pub struct Args {
    /// Kernel name (see `kiln ports`).
    kernel: String,
    /// The kernel's element type (f32, f16, bf16); checked against the inputs.
    #[arg(long)]
    dtype: String,
    #[arg(long, default_value = "cpu")]
    backend: String,
    /// safetensors file holding every input buffer under its list name.
    #[arg(long)]
    inputs: std::path::PathBuf,
    /// safetensors file to write every output buffer to.
    #[arg(long)]
    out: std::path::PathBuf,
    /// User params, `name=value` (repeatable).
    #[arg(long = "param", value_parser = parse_kv)]
    params: Vec<(String, String)>,
    /// Shapes of write-only outputs not in the inputs file, `name=2x4096` (repeatable).
    #[arg(long = "shape", value_parser = parse_kv)]
    shapes: Vec<(String, String)>,
    /// Run the unfused reference chain instead of the port.
    #[arg(long)]
    fallback: bool,
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| format!("`{s}` is not name=value"))
}

fn to_st(d: DType) -> StDtype {
    match d {
        DType::F32 => StDtype::F32,
        DType::F16 => StDtype::F16,
        DType::Bf16 => StDtype::BF16,
        DType::U32 => StDtype::U32,
        DType::I32 => StDtype::I32,
        DType::U8 => StDtype::U8,
    }
}

fn from_st(d: StDtype) -> anyhow::Result<DType> {
    Ok(match d {
        StDtype::F32 => DType::F32,
        StDtype::F16 => DType::F16,
        StDtype::BF16 => DType::Bf16,
        StDtype::U32 => DType::U32,
        StDtype::I32 => DType::I32,
        StDtype::U8 => DType::U8,
        other => bail!("safetensors dtype {other:?} is not a kiln dtype"),
    })
}

/// The dtype names a safetensors header may hold that kiln reads.
const KILN_DTYPES: [&str; 6] = ["F32", "F16", "BF16", "U32", "I32", "U8"];

/// A header the safetensors crate refused, said better where it can be: safetensors only says
/// "InvalidHeaderDeserialization", so a tensor with a dtype it does not know is named here.
fn header_error(bytes: &[u8], e: safetensors::SafeTensorError) -> anyhow::Error {
    let header = bytes
        .get(..8)
        .and_then(|n| usize::try_from(u64::from_le_bytes(n.try_into().ok()?)).ok())
        .and_then(|n| bytes.get(8..8usize.checked_add(n)?))
        .and_then(|h| serde_json::from_slice::<serde_json::Value>(h).ok());
    let unknown = header.as_ref().and_then(|h| {
        h.as_object()?.iter().find_map(|(name, t)| {
            let dtype = t.get("dtype")?.as_str()?;
            let known = serde_json::from_value::<StDtype>(serde_json::Value::from(dtype)).is_ok();
            (name != "__metadata__" && !known).then(|| (name.clone(), dtype.to_string()))
        })
    });
    match unknown {
        Some((name, dtype)) => anyhow!(
            "tensor `{name}` has dtype `{dtype}`, which is not a safetensors dtype (kiln reads {})",
            KILN_DTYPES.join(", ")
        ),
        None => anyhow!("invalid safetensors file: {e}"),
    }
}

pub fn main(a: Args) -> anyhow::Result<()> {
    let kernel =
        KernelId::from_name(&a.kernel).ok_or_else(|| anyhow!("unknown kernel `{}`", a.kernel))?;
    let dtype = DType::parse(&a.dtype).ok_or_else(|| anyhow!("unknown dtype `{}`", a.dtype))?;
    let backend = kiln::Backend::parse(&a.backend)
        .ok_or_else(|| anyhow!("unknown backend `{}`", a.backend))?;
    let dev = Device::open(backend)?;
    let bytes =
        std::fs::read(&a.inputs).with_context(|| format!("reading {}", a.inputs.display()))?;
    let file = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| header_error(&bytes, e))
        .with_context(|| format!("parsing {}", a.inputs.display()))?;
    let shapes: BTreeMap<_, _> = a.shapes.iter().cloned().collect();

    let mut tensors = Vec::new();
    for d in kernel.buffers() {
        let want = d.elem.resolve(dtype);
        let t = match file.tensor(d.name) {
            Ok(v) => {
                let got = from_st(v.dtype())?;
                if got != want {
                    bail!(
                        "`{}` is {} in the inputs file; {} at {} needs {}",
                        d.name,
                        got.name(),
                        kernel.name(),
                        dtype.name(),
                        want.name()
                    );
                }
                Tensor::from_bytes(&dev, want, v.shape(), v.data())?
            }
            Err(_) if d.access == Access::Write => {
                let spec = shapes.get(d.name).ok_or_else(|| {
                    anyhow!("output `{}` needs a shape: pass --shape {}=AxB or include it in the inputs file", d.name, d.name)
                })?;
                let shape = spec
                    .split('x')
                    .map(|n| n.parse::<usize>())
                    .collect::<Result<Vec<_>, _>>()
                    .with_context(|| format!("--shape {}={spec}", d.name))?;
                Tensor::zeros(&dev, want, &shape)?
            }
            Err(_) => bail!(
                "the inputs file has no tensor `{}` ({} reads it)",
                d.name,
                kernel.name()
            ),
        };
        tensors.push(t);
    }
    let mut params = default_params(kernel);
    for (k, v) in &a.params {
        set_param(kernel, &mut params, k, v)?;
    }
    let mode = if a.fallback {
        Mode::FallbackOnly
    } else {
        Mode::Auto
    };
    let ran = launch(
        &dev,
        kernel,
        &params,
        &mut args_in_list_order(kernel, &mut tensors),
        mode,
    )?;
    match &ran.path {
        Path::Port { backend, wave } => eprintln!(
            "ran {} {} on the {backend} port (wave {wave})",
            kernel.name(),
            dtype.name()
        ),
        Path::Fallback(why) => eprintln!(
            "ran {} {} on the fallback ({why:?})",
            kernel.name(),
            dtype.name()
        ),
    }

    let outputs: Vec<(String, Vec<u8>, Vec<usize>, DType)> = kernel
        .buffers()
        .iter()
        .zip(&tensors)
        .filter(|(d, _)| d.access.writes())
        .map(|(d, t)| {
            Ok((
                d.name.to_string(),
                t.to_bytes()?,
                t.shape().to_vec(),
                t.dtype(),
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    let views = outputs
        .iter()
        .map(|(n, b, s, d)| Ok((n.clone(), TensorView::new(to_st(*d), s.clone(), b)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    safetensors::serialize_to_file(views, &None, &a.out)
        .with_context(|| format!("writing {}", a.out.display()))?;
    Ok(())
}
