//! The `cuda` backend: the embedded PTX loaded through the CUDA driver API (cudarc, loaded
//! dynamically, so kiln builds and runs where no CUDA exists and says why it is absent).
//!
//! A device is a CUDA context plus a stream: [`Device::open`](crate::Device::open) takes the
//! primary context of ordinal 0 and a stream kiln creates; [`Device::cuda_on_stream`] takes the
//! caller's. Launches and uploads are enqueued on that stream and never synchronise the
//! context; reads and [`Device::sync`](crate::Device::sync) wait for the stream. A kernel that
//! traps leaves its context unusable: the synchronisation that sees it reports
//! `DeviceError::KernelFault` (state `Lost`), and later calls `DeviceUnavailable`.

mod artifacts;
mod context;
mod graph;
mod memory;
mod stream;

pub(crate) use artifacts::slot;

use context::{loaded, other, Function, Loaded};
use memory::CudaMem;
use stream::Stream;

use crate::gpu::{DeviceMemory, GpuDevice, GpuLaunch, GpuRecording};
use crate::port::{Port, PortLaunch};
use crate::{Backend, Device, DeviceError, PortError};
use cudarc::driver::{result, sys, CudaContext, CudaStream};
use std::any::Any;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

/// An opened device: a loaded context and the stream kiln enqueues on.
pub(crate) struct CudaGpu {
    stream: Arc<Stream>,
}

impl std::fmt::Debug for CudaGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaGpu({}, stream {:?})",
            self.stream.shared.name,
            self.stream.raw()
        )
    }
}

/// Opens the process's default CUDA device (once): ordinal 0's primary context and a
/// non-blocking stream of kiln's own, or says why it cannot.
pub(crate) fn open() -> Result<Arc<dyn GpuDevice>, String> {
    static GPU: OnceLock<Result<Arc<CudaGpu>, String>> = OnceLock::new();
    GPU.get_or_init(|| {
        driver_present()?;
        let ctx = CudaContext::new(0).map_err(|e| {
            format!(
                "cuInit/cuDevicePrimaryCtxRetain: {}",
                context::error_name(&e)
            )
        })?;
        let shared = loaded(&ctx)?;
        let stream = ctx
            .new_stream()
            .map_err(|e| format!("cuStreamCreate: {}", context::error_name(&e)))?;
        Ok(Arc::new(CudaGpu::on(shared, stream)))
    })
    .clone()
    .map(|g| g as Arc<dyn GpuDevice>)
}

fn driver_present() -> Result<(), String> {
    // SAFETY: only probes whether the driver library can be loaded.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err("no CUDA driver on this machine (libcuda.so not found)".into())
    }
}

/// Launches `f` allowed to start while the stream's previous kernel still runs (programmatic
/// stream serialization): its blocks may become resident during that kernel's last blocks and
/// wait at their entry (`griddepcontrol.wait`) until it has finished and its writes are visible,
/// so the launch latency and block scheduling of the two overlap.
///
/// # Safety
/// As `cuLaunchKernel`: `args` match `f`'s signature and point at live values; `f`'s module
/// waits for the previous grid in every entry (`artifacts::waits_for_prior_grid`).
unsafe fn launch_overlapping(
    f: sys::CUfunction,
    l: &GpuLaunch,
    stream: sys::CUstream,
    args: &mut [*mut c_void],
) -> Result<(), cudarc::driver::DriverError> {
    // SAFETY: a plain C union of which one member is set; zero is a valid bit pattern for all.
    let mut value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    value.programmaticStreamSerializationAllowed = 1;
    let mut attr = sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        pad: [0; 4],
        value,
    };
    let config = sys::CUlaunchConfig {
        gridDimX: l.grid[0],
        gridDimY: l.grid[1],
        gridDimZ: l.grid[2],
        blockDimX: l.block,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: l.shared as u32,
        hStream: stream,
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: the caller's contract; `config` and `attr` outlive the call.
    unsafe { sys::cuLaunchKernelEx(&config, f, args.as_mut_ptr(), std::ptr::null_mut()) }.result()
}

impl CudaGpu {
    fn on(shared: Arc<Loaded>, stream: Arc<CudaStream>) -> CudaGpu {
        CudaGpu {
            stream: Arc::new(Stream {
                shared,
                stream,
                last_kernel: Mutex::new("(none)"),
            }),
        }
    }

    fn shared(&self) -> &Loaded {
        &self.stream.shared
    }

    fn enter(&self) -> Result<(), DeviceError> {
        self.shared().enter()
    }
    /// Enqueues one launch on the device's stream (no synchronisation).
    fn enqueue(&self, port: &Port, l: &GpuLaunch) -> Result<(), DeviceError> {
        let kernel = l.kernel.name();
        let PortLaunch::Artifact { symbol } = &port.launch else {
            return Err(DeviceError::Launch {
                kernel,
                detail: "not a cuda port".into(),
            });
        };
        let Function {
            handle: f,
            overlaps,
        } = self.shared().function(symbol)?;
        if l.shared > self.shared().max_shared {
            return Err(DeviceError::Launch {
                kernel,
                detail: format!(
                    "{} bytes of shared memory requested, the device allows {}",
                    l.shared,
                    self.shared().max_shared
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
            .map_err(|e| self.shared().launch_error(kernel, "cuFuncSetAttribute", e))?;
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
        // The arguments match the entry's signature (generated from the same list); the
        // buffers are live allocations at least as long as their views (checked above).
        let (launched, call) = if overlaps {
            // SAFETY: as above, and `overlaps` says every entry of `f`'s module waits for the
            // previous grid.
            let r = unsafe { launch_overlapping(f, l, self.stream.raw(), &mut args) };
            (r, "cuLaunchKernelEx")
        } else {
            // SAFETY: as above.
            let r = unsafe {
                result::launch_kernel(
                    f,
                    (l.grid[0], l.grid[1], l.grid[2]),
                    (l.block, 1, 1),
                    l.shared as u32,
                    self.stream.raw(),
                    &mut args,
                )
            };
            (r, "cuLaunchKernel")
        };
        launched.map_err(|e| self.shared().launch_error(kernel, call, e))?;
        *self
            .stream
            .last_kernel
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = kernel;
        Ok(())
    }

    /// Times `runs` passes of `enqueue_pass` with events on the device's stream, after one
    /// untimed pass; seconds per launch (`launches` launches a pass).
    fn time_passes(
        &self,
        kernel: &'static str,
        runs: usize,
        launches: usize,
        mut enqueue_pass: impl FnMut() -> Result<(), DeviceError>,
    ) -> Result<Vec<f64>, DeviceError> {
        self.with_events(|start, stop| {
            crate::gpu::warm_then_timed(runs, launches, || {
                self.time_between(kernel, start, stop, &mut enqueue_pass)
            })
            .and_then(|t| self.stream.sync().map(|_| t))
        })
    }

    /// Runs `timed` with two fresh events, destroyed after it.
    fn with_events<T>(
        &self,
        timed: impl FnOnce(sys::CUevent, sys::CUevent) -> Result<T, DeviceError>,
    ) -> Result<T, DeviceError> {
        self.enter()?;
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
        let start = result::event::create(flags).map_err(|e| other("cuEventCreate", e))?;
        let stop = result::event::create(flags).map_err(|e| other("cuEventCreate", e))?;
        let out = timed(start, stop);
        // SAFETY: events created above and no longer used.
        unsafe {
            let _ = result::event::destroy(start);
            let _ = result::event::destroy(stop);
        }
        out
    }

    /// Seconds of what `enqueue` puts on the stream, between `start` and `stop`.
    fn time_between(
        &self,
        kernel: &'static str,
        start: sys::CUevent,
        stop: sys::CUevent,
        enqueue: &mut impl FnMut() -> Result<(), DeviceError>,
    ) -> Result<f64, DeviceError> {
        // SAFETY: events created by `with_events`, recorded on the device's stream.
        unsafe { result::event::record(start, self.stream.raw()) }
            .map_err(|e| other("cuEventRecord", e))?;
        enqueue()?;
        unsafe { result::event::record(stop, self.stream.raw()) }
            .map_err(|e| other("cuEventRecord", e))?;
        unsafe { result::event::synchronize(stop) }
            .map_err(|e| self.shared().launch_error(kernel, "cuEventSynchronize", e))?;
        let ms = unsafe { result::event::elapsed(start, stop) }
            .map_err(|e| other("cuEventElapsedTime", e))?;
        Ok(ms as f64 * 1e-3)
    }
}

impl GpuDevice for CudaGpu {
    fn backend(&self) -> Backend {
        Backend::Cuda
    }
    fn name(&self) -> String {
        self.shared().name.clone()
    }
    fn wave(&self) -> u32 {
        self.shared().warp
    }
    fn ordinal(&self) -> usize {
        self.shared().ctx.ordinal()
    }
    fn max_block(&self) -> u32 {
        self.shared().max_block
    }
    fn max_block_for(&self, port: &Port) -> u32 {
        let PortLaunch::Artifact { symbol } = &port.launch else {
            return self.max_block();
        };
        let limit = self
            .enter()
            .and_then(|()| self.shared().function(symbol))
            .and_then(|Function { handle: f, .. }| {
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
        let max = self.max_block();
        limit.map_or(max, |n| (n as u32).min(max))
    }
    fn l2_bytes(&self) -> Option<usize> {
        Some(self.shared().l2_bytes)
    }

    fn resident_blocks(&self, port: &Port, block: u32, shared: usize) -> Option<usize> {
        let PortLaunch::Artifact { symbol } = &port.launch else {
            return None;
        };
        self.enter().ok()?;
        let f = self.shared().function(symbol).ok()?.handle;
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
        Some(per_sm.max(0) as usize * self.shared().multiprocessors)
    }

    fn alloc(&self, bytes: usize) -> Result<Box<dyn DeviceMemory>, DeviceError> {
        self.enter()?;
        if self.stream.capturing() {
            return Err(DeviceError::Other(format!(
                "cuda: an allocation of {bytes} bytes while the stream captures a graph (warm \
                 the step up eagerly first, or reserve the scratch before the capture)"
            )));
        }
        // SAFETY: the context is bound; the allocation is freed by CudaMem's drop.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }.map_err(|e| {
            if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
                DeviceError::OutOfMemory {
                    backend: Backend::Cuda,
                    requested: bytes,
                    available: result::mem_get_info().ok().map(|(free, _)| free),
                }
            } else {
                other(&format!("cuMemAlloc({bytes} bytes)"), e)
            }
        })?;
        Ok(Box::new(CudaMem {
            stream: self.stream.clone(),
            ptr,
            len: bytes,
            owned: true,
        }))
    }

    unsafe fn borrow_raw(
        &self,
        ptr: u64,
        bytes: usize,
    ) -> Result<Box<dyn DeviceMemory>, DeviceError> {
        Ok(Box::new(CudaMem {
            stream: self.stream.clone(),
            ptr,
            len: bytes,
            owned: false,
        }))
    }

    fn launch(&self, port: &Port, l: &GpuLaunch) -> Result<(), DeviceError> {
        self.enter()?;
        self.enqueue(port, l)
    }

    fn sync(&self) -> Result<(), DeviceError> {
        self.stream.sync()
    }

    fn is_capturing(&self) -> bool {
        self.stream.capturing()
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

    fn records(&self) -> bool {
        true
    }

    fn record(
        &self,
        pass: &mut dyn FnMut() -> Result<(), PortError>,
    ) -> Option<Result<Box<dyn GpuRecording>, PortError>> {
        Some(CudaGpu::record(self, pass).map(|r| Box::new(r) as Box<dyn GpuRecording>))
    }

    fn time_launch(&self, port: &Port, l: &GpuLaunch) -> Result<f64, DeviceError> {
        // One launch between two events, no warm-up: a profiled step runs every kernel once,
        // as the step does (a second run would change in-place buffers such as the residual).
        self.with_events(|start, stop| {
            self.time_between(l.kernel.name(), start, stop, &mut || self.enqueue(port, l))
        })
    }

    fn time_replays(
        &self,
        runs: usize,
        per_pass: usize,
        pass: &mut dyn FnMut() -> Result<(), PortError>,
    ) -> Option<Result<Vec<f64>, PortError>> {
        let timed = self.record(pass).and_then(|r| {
            self.time_passes("(recorded pass)", runs, per_pass, || r.replay())
                .map_err(PortError::from)
        });
        Some(timed)
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
            unsafe { result::memcpy_dtod_async(d, s, bytes, self.stream.raw()) }
                .map_err(|e| other("cuMemcpyDtoDAsync", e))
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Device {
    /// A device that enqueues every launch and copy on the caller's CUDA stream (and its
    /// context): kiln never synchronises the context, only this stream, and only when the
    /// caller reads back or calls [`Device::sync`]. The stream may be capturing a graph while
    /// kiln ops are called, once their scratch is sized (see [`Device::scratch_bytes`]).
    pub fn cuda_on_stream(stream: Arc<CudaStream>) -> Result<Device, PortError> {
        let unavailable = |reason: String| {
            PortError::Device(DeviceError::DeviceUnavailable {
                backend: Backend::Cuda,
                reason,
            })
        };
        driver_present().map_err(unavailable)?;
        let shared = loaded(stream.context()).map_err(unavailable)?;
        Ok(Device::from_gpu(Arc::new(CudaGpu::on(shared, stream))))
    }
}
