//! What every kiln device on one CUDA context shares: the loaded PTX modules (one per kernel),
//! their resolved functions, the device's limits, and whether a kernel fault has lost the context.

use super::artifacts;
use crate::{Backend, DeviceError};
use cudarc::driver::{result, sys, CudaContext, DriverError};
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

/// The CUDA name of a driver error (`CUDA_ERROR_…`), with its description.
pub(super) fn error_name(e: &DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}

pub(super) fn other(what: &str, e: DriverError) -> DeviceError {
    DeviceError::Other(format!("cuda: {what}: {}", error_name(&e)))
}

/// Errors after which the context cannot be used again (the kernel faulted).
pub(super) fn is_sticky(e: &DriverError) -> bool {
    use sys::cudaError_enum as E;
    matches!(
        e.0,
        E::CUDA_ERROR_LAUNCH_FAILED
            | E::CUDA_ERROR_ILLEGAL_ADDRESS
            | E::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | E::CUDA_ERROR_MISALIGNED_ADDRESS
            | E::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | E::CUDA_ERROR_INVALID_PC
            | E::CUDA_ERROR_HARDWARE_STACK_ERROR
            | E::CUDA_ERROR_ASSERT
            | E::CUDA_ERROR_LAUNCH_TIMEOUT
    )
}

/// One kernel's module loaded into a context, with its text to find its entries by.
struct KernelModule {
    handle: sys::CUmodule,
    text: &'static str,
    /// Its entries may be launched while the stream's previous kernel still runs.
    overlaps: bool,
}

/// A resolved entry: the function and whether it is launched with programmatic stream
/// serialization (its module waits for the previous grid, and the device runs such launches).
#[derive(Clone, Copy)]
pub(super) struct Function {
    pub(super) handle: sys::CUfunction,
    pub(super) overlaps: bool,
}

/// A context with kiln's modules loaded into it.
pub(crate) struct Loaded {
    pub(super) ctx: Arc<CudaContext>,
    modules: Vec<KernelModule>,
    pub(super) name: String,
    pub(super) warp: u32,
    pub(super) max_block: u32,
    pub(super) max_shared: usize,
    pub(super) l2_bytes: usize,
    pub(super) multiprocessors: usize,
    functions: Mutex<HashMap<String, (usize, bool)>>,
    /// Set once a kernel faulted: the context is then unusable for the rest of the process.
    fault: Mutex<Option<String>>,
}

// SAFETY: the module and functions are driver handles usable from any thread once the context
// is bound there (every use binds it first); the mutable state is behind mutexes.
unsafe impl Send for Loaded {}
unsafe impl Sync for Loaded {}

/// The context `ctx` with kiln's modules: every kernel's module of the device's target, loaded
/// once per context for the process (a PTX JIT costs tens of milliseconds; loading them all at
/// open keeps module loads out of a later graph capture), shared by every device opened on it.
pub(crate) fn loaded(ctx: &Arc<CudaContext>) -> Result<Arc<Loaded>, String> {
    static LOADED: Mutex<Vec<Arc<Loaded>>> = Mutex::new(Vec::new());
    let mut all = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(l) = all.iter().find(|l| l.ctx.cu_ctx() == ctx.cu_ctx()) {
        return Ok(l.clone());
    }
    let l = Arc::new(Loaded::load(ctx.clone())?);
    all.push(l.clone());
    Ok(l)
}

impl Loaded {
    fn load(ctx: Arc<CudaContext>) -> Result<Loaded, String> {
        fn e(what: &str) -> impl Fn(DriverError) -> String + '_ {
            move |err| format!("{what}: {}", error_name(&err))
        }
        ctx.bind_to_thread().map_err(e("cuCtxSetCurrent"))?;
        let attr = |a: sys::CUdevice_attribute| ctx.attribute(a).map_err(e("cuDeviceGetAttribute"));
        use sys::CUdevice_attribute as A;
        let warp = attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)? as u32;
        let cc = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        );
        let max_block = attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32;
        let max_shared = attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as usize;
        let l2_bytes = attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize;
        let multiprocessors = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as usize;
        let dev_name = ctx.name().map_err(e("cuDeviceGetName"))?;
        let (target, _) = artifacts::PTX_TARGETS
            .iter()
            .find(|(_, min_cc)| cc >= *min_cc)
            .ok_or_else(|| {
                format!(
                    "{dev_name} has compute capability {}.{}; the embedded PTX needs 8.0 or newer",
                    cc.0, cc.1
                )
            })?;
        let replacement = match std::env::var_os(artifacts::PTX_OVERRIDE_ENV) {
            Some(path) => Some(artifacts::ptx_from_file(&path)?),
            None => None,
        };
        // Programmatic dependent launch needs sm_90 (the entries' wait is built for it alone);
        // on unless `artifacts::PDL_ENV` is 0.
        let overlaps =
            cc >= (9, 0) && !std::env::var(artifacts::PDL_ENV).is_ok_and(|v| v.trim() == "0");
        let mut modules = Vec::new();
        let mut replaced = false;
        for &kernel in kiln_math::KernelId::ALL {
            let Some(embedded) = artifacts::module(kernel, target) else {
                continue;
            };
            // The replacement stands in for the module of the kernel whose entries it defines.
            let text = match replacement {
                Some(r)
                    if kernel
                        .dtypes()
                        .iter()
                        .filter_map(|&d| kernel.symbol(d))
                        .all(|s| artifacts::has_entry(r, s)) =>
                {
                    replaced = true;
                    r
                }
                _ => embedded.text,
            };
            // SAFETY: the image is NUL-terminated PTX text that lives for the process; the
            // context is bound (above).
            let handle = unsafe { result::module::load_data(text.as_ptr() as *const c_void) }
                .map_err(|err| {
                    format!(
                        "cuModuleLoadData({target}/{}.ptx): {}",
                        kernel.name(),
                        error_name(&err)
                    )
                })?;
            modules.push(KernelModule {
                handle,
                text,
                overlaps: overlaps && artifacts::waits_for_prior_grid(text),
            });
        }
        if replacement.is_some() && !replaced {
            return Err(format!(
                "{}: defines the entries of no kernel in the list",
                artifacts::PTX_OVERRIDE_ENV
            ));
        }
        Ok(Loaded {
            name: format!(
                "{dev_name} (sm_{}{}, PTX {target}{}, warp {warp})",
                cc.0,
                cc.1,
                if replaced { " + replacement" } else { "" }
            ),
            ctx,
            modules,
            warp,
            max_block,
            max_shared,
            l2_bytes,
            multiprocessors,
            functions: Mutex::new(HashMap::new()),
            fault: Mutex::new(None),
        })
    }

    /// Binds the context to this thread, unless an earlier fault lost it.
    pub(super) fn enter(&self) -> Result<(), DeviceError> {
        if let Some(f) = self
            .fault
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            return Err(DeviceError::DeviceUnavailable {
                backend: Backend::Cuda,
                reason: format!(
                    "the context is unusable after an earlier kernel fault ({f}); open a new \
                     context or restart the process"
                ),
            });
        }
        self.ctx
            .bind_to_thread()
            .map_err(|e| other("cuCtxSetCurrent", e))
    }

    pub(super) fn function(&self, symbol: &str) -> Result<Function, DeviceError> {
        let mut fns = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&(f, overlaps)) = fns.get(symbol) {
            return Ok(Function {
                handle: f as sys::CUfunction,
                overlaps,
            });
        }
        let module = self
            .modules
            .iter()
            .find(|m| artifacts::has_entry(m.text, symbol))
            .ok_or_else(|| {
                DeviceError::Other(format!("cuda: no loaded PTX module defines {symbol}"))
            })?;
        let name = CString::new(symbol).expect("entry symbols have no NUL");
        // SAFETY: the module is loaded for the process.
        let f = unsafe { result::module::get_function(module.handle, name) }
            .map_err(|e| other(&format!("cuModuleGetFunction({symbol})"), e))?;
        fns.insert(symbol.to_string(), (f as usize, module.overlaps));
        Ok(Function {
            handle: f,
            overlaps: module.overlaps,
        })
    }

    /// Turns an error of a launch, or of a synchronisation after `kernel` was enqueued, into a
    /// DeviceError, remembering faults that lose the context.
    pub(super) fn launch_error(
        &self,
        kernel: &'static str,
        what: &str,
        e: DriverError,
    ) -> DeviceError {
        let name = error_name(&e);
        if is_sticky(&e) {
            *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = Some(name.clone());
            DeviceError::KernelFault {
                kernel,
                backend: Backend::Cuda,
                // The driver does not say which block trapped.
                block: None,
                detail: format!(
                    "{what}: {name} (an out-of-bounds view access or a panic in the body traps the \
                     kernel; the CUDA context is now unusable)"
                ),
                state: crate::DeviceState::Lost,
            }
        } else {
            DeviceError::Launch {
                kernel,
                detail: format!("{what}: {name}"),
            }
        }
    }
}
