//! Dispatch: validate, bind, pick a port or the fallback, launch, report the path taken.

use crate::catalog::entry;
use crate::gpu::{GpuBuf, GpuDevice, GpuLaunch};
use crate::host::{HostBuf, HostData, HostLaunch};
use crate::port::PortLaunch;
use crate::ports::{ports, select_port};
use crate::{Backend, Device, DeviceError, DeviceKind, LaunchTime, PortError, Tensor};
use kiln_math::{shared_bytes_total, Access, DType, Elem, KernelId};

/// One argument of a launch, in list order: inputs by shared reference, outputs (`Dst`, `Rw`)
/// by exclusive reference.
pub enum Arg<'a> {
    /// A buffer the kernel only reads.
    In(&'a Tensor),
    /// A buffer the kernel writes (`Dst`) or reads and writes (`Rw`).
    Out(&'a mut Tensor),
}

impl Arg<'_> {
    fn tensor(&self) -> &Tensor {
        match self {
            Arg::In(t) => t,
            Arg::Out(t) => t,
        }
    }
}

/// Arguments for `tensors` given in list order: read-only buffers as inputs, the rest as outputs.
pub fn args_in_list_order(kernel: KernelId, tensors: &mut [Tensor]) -> Vec<Arg<'_>> {
    kernel
        .buffers()
        .iter()
        .zip(tensors.iter_mut())
        .map(|(d, t)| {
            if d.access == Access::Read {
                Arg::In(t)
            } else {
                Arg::Out(t)
            }
        })
        .collect()
}

/// Which paths a launch may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The port when there is one, else (on `NoPort`/`WaveMismatch`) the fallback.
    Auto,
    /// The port or an error (the parity harness tests ports this way).
    PortOnly,
    /// The unfused reference chain on the host.
    FallbackOnly,
}

/// Why the fallback ran.
#[derive(Clone, Debug, PartialEq)]
pub enum FallbackReason {
    /// `KILN_FORCE_FALLBACK` named the kernel (or `all`).
    Forced,
    /// The caller asked for it (`Mode::FallbackOnly`).
    Requested,
    /// No usable port: the refusal that sent the launch to the fallback.
    Refused(PortError),
}

/// Which path ran.
#[derive(Clone, Debug, PartialEq)]
pub enum Path {
    /// The backend's port.
    Port {
        /// The backend.
        backend: Backend,
        /// The wave it ran at.
        wave: u32,
    },
    /// The unfused reference chain on the host, and why.
    Fallback(FallbackReason),
}

/// What a launch did.
#[derive(Clone, Debug, PartialEq)]
pub struct Ran {
    /// The kernel.
    pub kernel: KernelId,
    /// Its element type.
    pub dtype: DType,
    /// The path that ran.
    pub path: Path,
}

impl Ran {
    /// Whether the fallback ran.
    pub fn is_fallback(&self) -> bool {
        matches!(self.path, Path::Fallback(_))
    }
}

/// Kernels `KILN_FORCE_FALLBACK` (comma-separated names, or `all`) sends to the fallback.
pub fn forced_fallback(kernel: KernelId) -> bool {
    std::env::var("KILN_FORCE_FALLBACK")
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .any(|k| k == "all" || k == kernel.name())
        })
        .unwrap_or(false)
}

/// The default params of a kernel as words (user fields at their defaults, shapes unbound).
pub fn default_params(kernel: KernelId) -> Vec<u32> {
    (entry(kernel).default_params)()
}

/// Sets a user param by name (`kiln run --param`).
pub fn set_param(
    kernel: KernelId,
    words: &mut [u32],
    name: &str,
    value: &str,
) -> Result<(), PortError> {
    (entry(kernel).set_param)(words, name, value)
        .map_err(|e| PortError::invalid(kernel, format!("parameter `{name}` = `{value}`: {e}")))
}

/// Reads a param by name.
pub fn get_param(kernel: KernelId, words: &[u32], name: &str) -> Option<kiln_math::ParamValue> {
    (entry(kernel).get_param)(words, name)
}

/// Checks arguments against the list, binds shapes and (unless `tables` says the caller did)
/// checks the paged kernels' index tables; returns the kernel dtype, bound params and
/// geometry. Nothing is launched; reading tables that live on a GPU waits for its queue.
pub(crate) fn prepare(
    dev: &Device,
    kernel: KernelId,
    params: &[u32],
    args: &[Arg],
    tables: Tables,
) -> Result<(DType, Vec<u32>, kiln_math::Launch), PortError> {
    let bad = |msg: String| PortError::invalid(kernel, msg);
    let desc = kernel.buffers();
    if args.len() != desc.len() {
        return Err(bad(format!(
            "{} tensors given, the kernel takes {}",
            args.len(),
            desc.len()
        )));
    }
    let want_words = default_params(kernel).len();
    if params.len() != want_words {
        return Err(bad(format!(
            "{} param words given, the params struct has {want_words}",
            params.len()
        )));
    }
    let dtype = desc
        .iter()
        .zip(args)
        .find(|(d, _)| d.elem == Elem::Kernel)
        .map(|(_, a)| a.tensor().dtype())
        .ok_or_else(|| bad("the kernel has no buffer of its element type".into()))?;
    if !kernel.dtypes().contains(&dtype) {
        return Err(PortError::UnsupportedDtype {
            kernel: kernel.name(),
            got: dtype,
            supported: kernel.dtypes(),
        });
    }
    for (k, (d, a)) in desc.iter().zip(args).enumerate() {
        let t = a.tensor();
        let want = d.elem.resolve(dtype);
        if t.dtype() != want {
            return Err(PortError::DtypeMismatch {
                kernel: kernel.name(),
                buffer: d.name,
                expected: want,
                got: t.dtype(),
            });
        }
        if matches!(a, Arg::In(_)) && d.access != Access::Read {
            return Err(bad(format!(
                "`{}` is written by the kernel and must be passed as an output",
                d.name
            )));
        }
        if t.device().memory_space() != dev.memory_space() {
            return Err(bad(format!(
                "`{}` lives on {}, the launch is on {}",
                d.name,
                t.device().name(),
                dev.name()
            )));
        }
        // An output may not share bytes with another buffer: threads would read what others
        // write in an order no backend defines (and host launches would alias a `&mut`).
        if matches!(a, Arg::Out(_)) {
            if let Some((o, _)) = desc
                .iter()
                .zip(args)
                .enumerate()
                .find(|&(j, (_, b))| j != k && t.overlaps(b.tensor()))
            {
                return Err(bad(format!(
                    "`{}` overlaps `{}`: an output must not share bytes with another buffer",
                    d.name, desc[o].name
                )));
            }
        }
    }
    let shapes: Vec<&[usize]> = args.iter().map(|a| a.tensor().shape()).collect();
    let mut words = params.to_vec();
    let launch = (entry(kernel).bind)(&mut words, &shapes).map_err(|error| PortError::Shape {
        kernel: kernel.name(),
        error,
    })?;
    if launch.grid.contains(&0) {
        return Err(bad(format!("empty grid {:?}", launch.grid)));
    }
    if tables == Tables::Read {
        let read = |k: usize| args[k].tensor().to_vec::<i32>();
        crate::paged::check::index_tables(kernel, &words, &shapes, &read)?;
    }
    Ok((dtype, words, launch))
}

/// Launches `kernel` on `dev` with `params` (words from `default_params`/`set_param`; shape
/// fields are bound here) and `args` in list order.
///
/// Every path (port or fallback) is validated first: dtypes, shapes, params, and the index
/// tables of the paged kernels (block and page tables, the v2 chunk list, the merge's
/// `o_indptr`), which are read to the host for the check — on a GPU that read waits for the
/// work queued before; the typed ops in `kiln::paged` check host tables instead and do not.
pub fn launch(
    dev: &Device,
    kernel: KernelId,
    params: &[u32],
    args: &mut [Arg],
    mode: Mode,
) -> Result<Ran, PortError> {
    launch_views(dev, kernel, params, args, mode, None, Tables::Read)
}

/// [`launch`] for a caller that checked the host copies of the index tables it uploaded (the
/// paged ops, the resident block table, a timing loop after its first check): the tables are
/// not read back.
pub(crate) fn launch_checked_tables(
    dev: &Device,
    kernel: KernelId,
    params: &[u32],
    args: &mut [Arg],
    mode: Mode,
) -> Result<Ran, PortError> {
    launch_views(dev, kernel, params, args, mode, None, Tables::Checked)
}

/// Where a launch's index tables were checked.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tables {
    /// Not yet: read them from the buffers and check them.
    Read,
    /// On the host by the caller, before the upload.
    Checked,
}

/// Test hook: launches through the port with the views shortened to `view_lens` elements
/// (each at most its tensor's length), so a kernel reads past a view's end the way a body bug
/// would. The trap must come back as `DeviceError::KernelFault`, never a crash or a hang.
#[doc(hidden)]
pub fn launch_with_short_views(
    dev: &Device,
    kernel: KernelId,
    params: &[u32],
    args: &mut [Arg],
    view_lens: &[usize],
) -> Result<Ran, PortError> {
    if view_lens.len() != args.len()
        || view_lens
            .iter()
            .zip(args.iter())
            .any(|(&n, a)| n > a.tensor().numel())
    {
        return Err(PortError::invalid(
            kernel,
            "one view length per tensor, each at most its length",
        ));
    }
    let ran = launch_views(
        dev,
        kernel,
        params,
        args,
        Mode::PortOnly,
        Some(view_lens),
        Tables::Read,
    )?;
    // The trap is the point: wait for it here rather than at some later read.
    dev.sync()?;
    Ok(ran)
}

fn launch_views(
    dev: &Device,
    kernel: KernelId,
    params: &[u32],
    args: &mut [Arg],
    mode: Mode,
    view_lens: Option<&[usize]>,
    tables: Tables,
) -> Result<Ran, PortError> {
    let (dtype, words, geometry) = prepare(dev, kernel, params, args, tables)?;
    let profiling = dev.is_profiling();
    let fallback = |reason: FallbackReason, args: &mut [Arg]| -> Result<Ran, PortError> {
        let t = std::time::Instant::now();
        run_fallback(kernel, dtype, &words, args)?;
        if profiling {
            // The fallback reads back and writes on the host: its time is the host's.
            dev.record_launch(LaunchTime {
                kernel,
                dtype,
                seconds: t.elapsed().as_secs_f64(),
            });
        }
        Ok(Ran {
            kernel,
            dtype,
            path: Path::Fallback(reason),
        })
    };
    if mode == Mode::FallbackOnly {
        return fallback(FallbackReason::Requested, args);
    }
    if mode == Mode::Auto && forced_fallback(kernel) {
        return fallback(FallbackReason::Forced, args);
    }
    let port = match select_port(ports(kernel), dev, dtype) {
        Ok(p) => p,
        Err(e) if e.is_fallback() && mode == Mode::Auto => {
            return fallback(FallbackReason::Refused(e), args)
        }
        Err(e) => return Err(e),
    };
    let wave = dev.wave();
    let kernel_shared = |block: u32| {
        shared_bytes_total(
            block,
            wave,
            (entry(kernel).shared_bytes)(&words, block, wave),
        )
    };
    let refused = |detail: String| {
        PortError::Device(DeviceError::Launch {
            kernel: kernel.name(),
            detail,
        })
    };
    match (dev.kind(), &port.launch) {
        (DeviceKind::Cpu | DeviceKind::Sim(_), PortLaunch::Host(f)) => {
            let (block, sim) = match dev.kind() {
                DeviceKind::Sim(cfg) => {
                    let b = cfg
                        .block
                        .unwrap_or_else(|| cfg.preferred_block(geometry.block));
                    (b, Some(cfg))
                }
                _ => (1, None),
            };
            let bufs: Vec<HostBuf> = args
                .iter()
                .enumerate()
                .map(|(k, a)| HostBuf {
                    ptr: a.tensor().host_ptr().expect("host device, host memory"),
                    len: view_lens.map_or(a.tensor().numel(), |v| v[k]),
                })
                .collect();
            let names: Vec<&'static str> = kernel.buffers().iter().map(|d| d.name).collect();
            let l = HostLaunch {
                kernel: kernel.name(),
                buffer_names: &names,
                params: &words,
                bufs: &bufs,
                grid: geometry.grid,
                block,
                wave,
                shared: kernel_shared(block),
                sim,
            };
            let t = std::time::Instant::now();
            f(&l)?;
            if profiling {
                let seconds = t.elapsed().as_secs_f64();
                dev.record_launch(LaunchTime {
                    kernel,
                    dtype,
                    seconds,
                });
            }
        }
        (DeviceKind::Gpu(g), PortLaunch::Artifact { .. }) => {
            let mut bufs = gpu_bufs(args);
            if let Some(v) = view_lens {
                bufs.iter_mut().zip(v).for_each(|(b, &n)| b.len = n);
            }
            let l = gpu_launch(g.as_ref(), port, &words, &geometry, &bufs);
            if profiling {
                let seconds = g.time_launch(port, &l)?;
                dev.record_launch(LaunchTime {
                    kernel,
                    dtype,
                    seconds,
                });
            } else {
                g.launch(port, &l)?;
            }
        }
        _ => {
            return Err(refused(format!(
                "a {} port cannot launch on {}",
                port.backend,
                dev.name()
            )))
        }
    }
    Ok(Ran {
        kernel,
        dtype,
        path: Path::Port {
            backend: dev.backend(),
            wave: dev.wave(),
        },
    })
}

/// The buffers of a GPU launch, in list order.
pub(crate) fn gpu_bufs<'a>(args: &'a [Arg]) -> Vec<GpuBuf<'a>> {
    args.iter()
        .map(|a| a.tensor().gpu_buf().expect("GPU device, GPU memory"))
        .collect()
}

/// A GPU launch of `port` with bound `words`: the preferred block clamped to the device and
/// rounded to its wave, with the shared memory that block needs.
pub(crate) fn gpu_launch<'a>(
    g: &dyn GpuDevice,
    port: &crate::port::Port,
    words: &'a [u32],
    geometry: &kiln_math::Launch,
    bufs: &'a [GpuBuf<'a>],
) -> GpuLaunch<'a> {
    let (block, shared) = gpu_block(g, port, words, geometry.block);
    GpuLaunch {
        kernel: port.kernel,
        dtype: port.dtype,
        params: words,
        bufs,
        grid: geometry.grid,
        block,
        shared,
    }
}

/// The block a GPU launch of `port` with bound `words` runs with (the kernel's `preferred`
/// block, or `KILN_GPU_BLOCK`, clamped to what the device runs the port's entry with and
/// rounded to its wave) and the launch-sized shared memory that block needs.
fn gpu_block(
    g: &dyn GpuDevice,
    port: &crate::port::Port,
    words: &[u32],
    preferred: u32,
) -> (u32, usize) {
    let wave = g.wave();
    // `KILN_GPU_BLOCK` overrides the kernel's preferred block (tuning experiments).
    let preferred = std::env::var("KILN_GPU_BLOCK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(preferred);
    let mut block = preferred
        .clamp(wave, g.max_block_for(port).max(wave))
        .div_ceil(wave)
        * wave;
    let shared = |block: u32| {
        shared_bytes_total(
            block,
            wave,
            (entry(port.kernel).shared_bytes)(words, block, wave),
        )
    };
    // Kernels keep per-wave state in shared memory: narrow waves (lavapipe's 8) may need fewer
    // of them to fit the device. Any multiple of the wave is correct.
    while block > wave && shared(block) > g.max_shared_bytes() {
        block -= wave;
    }
    (block, shared(block))
}

/// How many blocks of `kernel` launched with bound `words` (preferred block `preferred`) a GPU
/// holds at once, when its backend can say; `None` on host devices.
pub fn resident_blocks(
    dev: &Device,
    kernel: KernelId,
    dtype: DType,
    words: &[u32],
    preferred: u32,
) -> Option<usize> {
    let DeviceKind::Gpu(g) = dev.kind() else {
        return None;
    };
    let port = select_port(ports(kernel), dev, dtype).ok()?;
    let (block, shared) = gpu_block(g.as_ref(), port, words, preferred);
    g.resident_blocks(port, block, shared)
}

/// Runs the reference chain on host copies of the tensors and writes the outputs back.
fn run_fallback(
    kernel: KernelId,
    dtype: DType,
    words: &[u32],
    args: &mut [Arg],
) -> Result<(), PortError> {
    let inst = entry(kernel)
        .instances
        .iter()
        .find(|i| i.dtype == dtype)
        .expect("prepare checked the dtype against the list");
    let mut data = Vec::with_capacity(args.len());
    for a in args.iter() {
        let t = a.tensor();
        let bytes = t.to_bytes()?;
        let mut words = vec![0u64; bytes.len().div_ceil(8).max(1)];
        // SAFETY: the u64 storage holds at least bytes.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                words.as_mut_ptr() as *mut u8,
                bytes.len(),
            )
        };
        data.push(HostData {
            words,
            len: t.numel(),
        });
    }
    (inst.reference)(words, &mut data);
    for (a, d) in args.iter_mut().zip(&data) {
        if let Arg::Out(t) = a {
            let n = t.byte_len();
            // SAFETY: as above.
            let bytes = unsafe { std::slice::from_raw_parts(d.words.as_ptr() as *const u8, n) };
            t.write_bytes(bytes)?;
        }
    }
    Ok(())
}
