//! The `cuda` backend: the embedded PTX loaded through the CUDA driver API (cudarc, loaded
//! dynamically, so kiln builds and runs where no CUDA exists and says why it is absent).
//!
//! One device per process (ordinal 0), opened once behind a `OnceLock`; its module is loaded
//! then. A kernel that traps (an out-of-bounds view access) leaves the CUDA context unusable:
//! the launch reports `DeviceError::KernelFault` and every later call says the context is lost.

mod artifacts;

pub(crate) use artifacts::slot;

use crate::gpu::{DeviceMemory, GpuDevice, GpuLaunch};
use crate::port::{Port, PortLaunch};
use crate::{Backend, DeviceError};
use cudarc::driver::{result, sys, DriverError};
use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex, OnceLock};

/// The CUDA name of a driver error (`CUDA_ERROR_…`), with its description.
fn error_name(e: &DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}

fn other(what: &str, e: DriverError) -> DeviceError {
    DeviceError::Other(format!("cuda: {what}: {}", error_name(&e)))
}

/// Errors after which the context cannot be used again (the kernel faulted).
fn is_sticky(e: &DriverError) -> bool {
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

/// The opened device: its primary context, the loaded module and resolved functions.
pub(crate) struct CudaGpu {
    ctx: sys::CUcontext,
    module: sys::CUmodule,
    name: String,
    warp: u32,
    max_block: u32,
    max_shared: usize,
    l2_bytes: usize,
    multiprocessors: usize,
    functions: Mutex<HashMap<String, usize>>,
    /// Set once a kernel faulted: the context is then unusable for the rest of the process.
    fault: Mutex<Option<String>>,
}

// SAFETY: the handles are driver objects usable from any thread once the context is made
// current there (every method does so first); the mutable state is behind mutexes.
unsafe impl Send for CudaGpu {}
unsafe impl Sync for CudaGpu {}

impl std::fmt::Debug for CudaGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaGpu({}, warp {})", self.name, self.warp)
    }
}

/// Opens CUDA device 0 (once per process) or says why it cannot.
pub(crate) fn open() -> Result<Arc<dyn GpuDevice>, String> {
    static GPU: OnceLock<Result<Arc<CudaGpu>, String>> = OnceLock::new();
    GPU.get_or_init(|| CudaGpu::open().map(Arc::new))
        .clone()
        .map(|g| g as Arc<dyn GpuDevice>)
}

impl CudaGpu {
    fn open() -> Result<CudaGpu, String> {
        // SAFETY: only probes whether the driver library can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err("no CUDA driver on this machine (libcuda.so not found)".into());
        }
        fn e(what: &str) -> impl Fn(DriverError) -> String + '_ {
            move |err| format!("{what}: {}", error_name(&err))
        }
        result::init().map_err(e("cuInit"))?;
        let count = result::device::get_count().map_err(e("cuDeviceGetCount"))?;
        if count == 0 {
            return Err("the CUDA driver reports no device".into());
        }
        let device = result::device::get(0).map_err(e("cuDeviceGet"))?;
        let attr = |a: sys::CUdevice_attribute| {
            // SAFETY: `device` came from cuDeviceGet.
            unsafe { result::device::get_attribute(device, a) }.map_err(e("cuDeviceGetAttribute"))
        };
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
        let dev_name = result::device::get_name(device).map_err(e("cuDeviceGetName"))?;
        let ptx = artifacts::PTX
            .iter()
            .find(|p| cc >= p.min_cc)
            .ok_or_else(|| {
                format!(
                    "{dev_name} has compute capability {}.{}; the embedded PTX needs 8.0 or newer",
                    cc.0, cc.1
                )
            })?;
        let ptx = match std::env::var_os(artifacts::PTX_OVERRIDE_ENV) {
            Some(path) => artifacts::ptx_from_file(&path)?,
            None => ptx,
        };
        // SAFETY: `device` came from cuDeviceGet; the context is retained for the process.
        let ctx = unsafe { result::primary_ctx::retain(device) }
            .map_err(e("cuDevicePrimaryCtxRetain"))?;
        // SAFETY: a retained primary context.
        unsafe { result::ctx::set_current(ctx) }.map_err(e("cuCtxSetCurrent"))?;
        // SAFETY: the image is NUL-terminated PTX text that lives for the process.
        let module = unsafe { result::module::load_data(ptx.text.as_ptr() as *const c_void) }
            .map_err(|err| format!("cuModuleLoadData({}): {}", ptx.name, error_name(&err)))?;
        Ok(CudaGpu {
            ctx,
            module,
            name: format!(
                "{dev_name} (sm_{}{}, {}, warp {warp})",
                cc.0, cc.1, ptx.name
            ),
            warp,
            max_block,
            max_shared,
            l2_bytes,
            multiprocessors,
            functions: Mutex::new(HashMap::new()),
            fault: Mutex::new(None),
        })
    }

    /// Makes the context current on this thread, unless an earlier fault lost it.
    fn enter(&self) -> Result<(), DeviceError> {
        if let Some(f) = self
            .fault
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            return Err(DeviceError::Other(format!(
                "cuda: the context is unusable after an earlier kernel fault ({f}); restart the process"
            )));
        }
        // SAFETY: the primary context is retained for the process.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(|e| other("cuCtxSetCurrent", e))
    }

    fn function(&self, symbol: &str) -> Result<sys::CUfunction, DeviceError> {
        let mut fns = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&f) = fns.get(symbol) {
            return Ok(f as sys::CUfunction);
        }
        let name = CString::new(symbol).expect("entry symbols have no NUL");
        // SAFETY: the module is loaded for the process.
        let f = unsafe { result::module::get_function(self.module, name) }
            .map_err(|e| other(&format!("cuModuleGetFunction({symbol})"), e))?;
        fns.insert(symbol.to_string(), f as usize);
        Ok(f)
    }

    /// Turns an error of a launch (or of the synchronisation after it) into a DeviceError,
    /// remembering faults that lose the context.
    fn launch_error(&self, kernel: &'static str, what: &str, e: DriverError) -> DeviceError {
        let name = error_name(&e);
        if is_sticky(&e) {
            *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = Some(name.clone());
            DeviceError::KernelFault {
                kernel,
                // The driver does not say which block trapped.
                block: [u32::MAX; 3],
                message: format!(
                    "{what}: {name} (an out-of-bounds view access or a panic in the body traps the \
                     kernel; the CUDA context is now unusable)"
                ),
            }
        } else {
            DeviceError::Launch {
                kernel,
                detail: format!("{what}: {name}"),
            }
        }
    }

    /// Enqueues one launch on the default stream (no synchronisation).
    fn enqueue(&self, port: &Port, l: &GpuLaunch) -> Result<(), DeviceError> {
        let kernel = l.kernel.name();
        let PortLaunch::Artifact { symbol } = &port.launch else {
            return Err(DeviceError::Launch {
                kernel,
                detail: "not a cuda port".into(),
            });
        };
        let f = self.function(symbol)?;
        if l.shared > self.max_shared {
            return Err(DeviceError::Launch {
                kernel,
                detail: format!(
                    "{} bytes of shared memory requested, the device allows {}",
                    l.shared, self.max_shared
                ),
            });
        }
        if l.shared > 48 * 1024 {
            // SAFETY: `f` is a function of the loaded module.
            unsafe {
                result::function::set_function_attribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    l.shared as i32,
                )
            }
            .map_err(|e| self.launch_error(kernel, "cuFuncSetAttribute", e))?;
        }
        // The ABI: params by value, then (pointer, element count) per buffer.
        let mut params: Vec<u32> = l.params.to_vec();
        let mut words: Vec<u64> = Vec::with_capacity(2 * l.bufs.len());
        for b in l.bufs {
            let mem =
                b.mem
                    .as_any()
                    .downcast_ref::<CudaMem>()
                    .ok_or_else(|| DeviceError::Launch {
                        kernel,
                        detail: "a buffer is not cuda memory".into(),
                    })?;
            if b.offset + b.len * b.dtype.size() > mem.len {
                return Err(DeviceError::Launch {
                    kernel,
                    detail: "a buffer view runs past its allocation".into(),
                });
            }
            words.push(mem.ptr + b.offset as u64);
            words.push(b.len as u64);
        }
        let mut args: Vec<*mut c_void> = Vec::with_capacity(1 + words.len());
        args.push(params.as_mut_ptr() as *mut c_void);
        for w in words.iter_mut() {
            args.push(w as *mut u64 as *mut c_void);
        }
        // SAFETY: the arguments match the entry's signature (generated from the same list);
        // the buffers are live allocations at least as long as their views (checked above).
        unsafe {
            result::launch_kernel(
                f,
                (l.grid[0], l.grid[1], l.grid[2]),
                (l.block, 1, 1),
                l.shared as u32,
                std::ptr::null_mut(),
                &mut args,
            )
        }
        .map_err(|e| self.launch_error(kernel, "cuLaunchKernel", e))
    }

    fn synchronize(&self, kernel: &'static str) -> Result<(), DeviceError> {
        result::ctx::synchronize().map_err(|e| self.launch_error(kernel, "cuCtxSynchronize", e))
    }

    /// Times `runs` passes of `enqueue_pass` with events on the default stream, after one
    /// untimed pass; seconds per launch (`launches` launches a pass).
    fn time_passes(
        &self,
        kernel: &'static str,
        runs: usize,
        launches: usize,
        mut enqueue_pass: impl FnMut() -> Result<(), DeviceError>,
    ) -> Result<Vec<f64>, DeviceError> {
        self.enter()?;
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
        let start = result::event::create(flags).map_err(|e| other("cuEventCreate", e))?;
        let stop = result::event::create(flags).map_err(|e| other("cuEventCreate", e))?;
        let timed = crate::gpu::warm_then_timed(runs, launches, || {
            // SAFETY: events created above, recorded on the default stream.
            unsafe { result::event::record(start, std::ptr::null_mut()) }
                .map_err(|e| other("cuEventRecord", e))?;
            enqueue_pass()?;
            unsafe { result::event::record(stop, std::ptr::null_mut()) }
                .map_err(|e| other("cuEventRecord", e))?;
            unsafe { result::event::synchronize(stop) }
                .map_err(|e| self.launch_error(kernel, "cuEventSynchronize", e))?;
            let ms = unsafe { result::event::elapsed(start, stop) }
                .map_err(|e| other("cuEventElapsedTime", e))?;
            Ok(ms as f64 * 1e-3)
        })
        .and_then(|t| self.synchronize(kernel).map(|_| t));
        // SAFETY: events created above and no longer used.
        unsafe {
            let _ = result::event::destroy(start);
            let _ = result::event::destroy(stop);
        }
        timed
    }
}

impl GpuDevice for CudaGpu {
    fn backend(&self) -> Backend {
        Backend::Cuda
    }
    fn name(&self) -> String {
        self.name.clone()
    }
    fn wave(&self) -> u32 {
        self.warp
    }
    fn ordinal(&self) -> usize {
        0
    }
    fn max_block(&self) -> u32 {
        self.max_block
    }
    fn max_block_for(&self, port: &Port) -> u32 {
        let PortLaunch::Artifact { symbol } = &port.launch else {
            return self.max_block;
        };
        let limit = self
            .enter()
            .and_then(|()| self.function(symbol))
            .and_then(|f| {
                // SAFETY: `f` was resolved from the loaded module.
                unsafe {
                    result::function::get_function_attribute(
                        f,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                    )
                }
                .map_err(|e| other("cuFuncGetAttribute", e))
            });
        // Unknown → the device's limit; the launch then reports the driver's refusal.
        limit.map_or(self.max_block, |n| (n as u32).min(self.max_block))
    }
    fn l2_bytes(&self) -> Option<usize> {
        Some(self.l2_bytes)
    }

    fn resident_blocks(&self, port: &Port, block: u32, shared: usize) -> Option<usize> {
        let PortLaunch::Artifact { symbol } = &port.launch else {
            return None;
        };
        self.enter().ok()?;
        let f = self.function(symbol).ok()?;
        if shared > 48 * 1024 {
            // Occupancy counts the dynamic shared memory the launch will opt into.
            // SAFETY: `f` is a function of the loaded module.
            unsafe {
                result::function::set_function_attribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared as i32,
                )
            }
            .ok()?;
        }
        // SAFETY: `f` is a function of the loaded module.
        let per_sm = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(f, block as i32, shared)
        }
        .ok()?;
        Some(per_sm.max(0) as usize * self.multiprocessors)
    }

    fn alloc(&self, bytes: usize) -> Result<Box<dyn DeviceMemory>, DeviceError> {
        self.enter()?;
        // SAFETY: the context is current; the allocation is freed by CudaMem's drop.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }
            .map_err(|e| other(&format!("cuMemAlloc({bytes} bytes)"), e))?;
        Ok(Box::new(CudaMem {
            gpu: self as *const CudaGpu,
            ptr,
            len: bytes,
        }))
    }

    fn launch(&self, port: &Port, l: &GpuLaunch) -> Result<(), DeviceError> {
        self.enter()?;
        self.enqueue(port, l)?;
        self.synchronize(l.kernel.name())
    }

    fn time_launches(
        &self,
        port: &Port,
        launches: &[GpuLaunch],
        runs: usize,
    ) -> Result<Vec<f64>, DeviceError> {
        let Some(first) = launches.first() else {
            return Ok(Vec::new());
        };
        self.time_passes(first.kernel.name(), runs, launches.len(), || {
            launches.iter().try_for_each(|l| self.enqueue(port, l))
        })
    }

    fn time_copy(
        &self,
        dst: &dyn DeviceMemory,
        src: &dyn DeviceMemory,
        bytes: usize,
        runs: usize,
    ) -> Result<Vec<f64>, DeviceError> {
        let ptr = |m: &dyn DeviceMemory| {
            m.as_any()
                .downcast_ref::<CudaMem>()
                .filter(|m| m.len >= bytes)
                .map(|m| m.ptr)
                .ok_or_else(|| DeviceError::Other("cuda: copy buffers too small".into()))
        };
        let (d, s) = (ptr(dst)?, ptr(src)?);
        self.time_passes("memcpy", runs, 1, || {
            // SAFETY: both allocations hold at least `bytes` (checked above).
            unsafe { result::memcpy_dtod_async(d, s, bytes, std::ptr::null_mut()) }
                .map_err(|e| other("cuMemcpyDtoDAsync", e))
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One device allocation.
pub(crate) struct CudaMem {
    /// The process-wide device (it lives in a static `OnceLock`, never dropped).
    gpu: *const CudaGpu,
    ptr: sys::CUdeviceptr,
    len: usize,
}

// SAFETY: a device pointer; access goes through the driver with the context made current.
unsafe impl Send for CudaMem {}
unsafe impl Sync for CudaMem {}

impl std::fmt::Debug for CudaMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaMem({:#x}, {} bytes)", self.ptr, self.len)
    }
}

impl CudaMem {
    fn gpu(&self) -> &CudaGpu {
        // SAFETY: the device is in a static and outlives every allocation.
        unsafe { &*self.gpu }
    }
    fn range(&self, offset: usize, len: usize) -> Result<(), DeviceError> {
        if offset.checked_add(len).is_some_and(|end| end <= self.len) {
            Ok(())
        } else {
            Err(DeviceError::Other(format!(
                "cuda: {len} bytes at {offset} outside an allocation of {}",
                self.len
            )))
        }
    }
}

impl DeviceMemory for CudaMem {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), DeviceError> {
        self.range(offset, out.len())?;
        self.gpu().enter()?;
        // SAFETY: the range lies inside the allocation (checked above).
        unsafe { result::memcpy_dtoh_sync(out, self.ptr + offset as u64) }
            .map_err(|e| other("cuMemcpyDtoH", e))
    }
    fn write(&self, offset: usize, data: &[u8]) -> Result<(), DeviceError> {
        self.range(offset, data.len())?;
        self.gpu().enter()?;
        // SAFETY: as above.
        unsafe { result::memcpy_htod_sync(self.ptr + offset as u64, data) }
            .map_err(|e| other("cuMemcpyHtoD", e))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for CudaMem {
    fn drop(&mut self) {
        // After a fault the context is lost and its memory with it: nothing to free.
        if self.gpu().enter().is_ok() {
            // SAFETY: allocated by cuMemAlloc and freed once.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}
