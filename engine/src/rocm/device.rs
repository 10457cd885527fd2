//! A HIP device: enumeration, the code objects for its arch (one per kernel, all loaded on first
//! use, once per process), memory, launches and event timing.

use super::artifacts::{
    base_arch, has_entry, kernarg_bytes, Artifact, CodeObject, ARTIFACTS, CODE_OBJECTS,
};
use super::hip::{self, Hip, HipDevicePtr, HipEvent, HipFunction, HipModule, HipStream};
use crate::gpu::{DeviceMemory, GpuDevice, GpuLaunch};
use crate::port::{Port, PortLaunch};
use crate::{Backend, DeviceError};
use std::any::Any;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The first HIP device, opened once per process, or why there is none.
pub(crate) fn open() -> Result<Arc<dyn GpuDevice>, String> {
    static DEVICE: OnceLock<Result<Arc<RocmDevice>, String>> = OnceLock::new();
    DEVICE
        .get_or_init(|| RocmDevice::open(0).map(Arc::new))
        .clone()
        .map(|d| d as Arc<dyn GpuDevice>)
}

/// The arch's code objects, loaded, and the functions looked up in them so far.
struct Modules {
    handles: Vec<(&'static CodeObject, HipModule)>,
    functions: Mutex<HashMap<String, usize>>,
}

pub struct RocmDevice {
    hip: &'static Hip,
    ordinal: c_int,
    name: String,
    /// The device's arch (`gfx1151`), without feature suffixes.
    arch: String,
    wave: u32,
    max_block: u32,
    modules: OnceLock<Result<Modules, String>>,
    /// The stream launches are enqueued on (null: the default stream).
    stream: HipStream,
    /// The last kernel enqueued: a fault seen by a later synchronisation is reported for it.
    last_kernel: Mutex<&'static str>,
    /// Set once a kernel faulted: the device is unusable for the rest of the process.
    fault: Mutex<Option<String>>,
    /// Events around the last launch, read when its time is asked for.
    last_events: Mutex<Option<Events>>,
    /// Milliseconds of the last launch whose events were read (f32 bits).
    last_launch_ms: AtomicU32,
}

// SAFETY: the HIP handles are process-wide runtime objects usable from any thread; the function
// cache is behind a mutex.
unsafe impl Send for RocmDevice {}
unsafe impl Sync for RocmDevice {}

impl std::fmt::Debug for RocmDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RocmDevice({} {} wave{})",
            self.name, self.arch, self.wave
        )
    }
}

impl RocmDevice {
    fn open(ordinal: c_int) -> Result<RocmDevice, String> {
        RocmDevice::on_stream(ordinal, std::ptr::null_mut())
    }

    fn on_stream(ordinal: c_int, stream: HipStream) -> Result<RocmDevice, String> {
        let hip = Hip::get()?;
        let mut version = 0;
        // SAFETY: out-pointer to a live local, per the HIP API.
        let _ = unsafe { (hip.hipRuntimeGetVersion)(&mut version) };
        let found = format!("HIP runtime {} (version {version}) found, but", hip.path);
        let no_gpu = |call: &str, e| {
            let why = hip.check(call, e).err().unwrap_or_default();
            format!("{found} no AMD GPU ({why})")
        };
        // SAFETY: plain call with flags 0.
        let e = unsafe { (hip.hipInit)(0) };
        // Without a GPU (no /dev/kfd) the runtime answers NoDevice or InvalidDevice.
        if e == hip::HIP_ERROR_NO_DEVICE || e == hip::HIP_ERROR_INVALID_DEVICE {
            return Err(no_gpu("hipInit", e));
        }
        hip.check("hipInit", e)
            .map_err(|why| format!("{found} {why}"))?;
        let mut count = 0;
        // SAFETY: out-pointer to a live local.
        let e = unsafe { (hip.hipGetDeviceCount)(&mut count) };
        if e == hip::HIP_ERROR_NO_DEVICE || e == hip::HIP_ERROR_INVALID_DEVICE {
            return Err(no_gpu("hipGetDeviceCount", e));
        }
        if e == hip::HIP_SUCCESS && count == 0 {
            return Err(format!("{found} no AMD GPU (hipGetDeviceCount: 0 devices)"));
        }
        hip.check("hipGetDeviceCount", e)?;
        // SAFETY: as above; `ordinal` < count.
        unsafe { hip.check("hipSetDevice", (hip.hipSetDevice)(ordinal))? };
        let mut name = [0 as c_char; 256];
        // SAFETY: the buffer holds 256 chars, as passed.
        unsafe {
            hip.check(
                "hipDeviceGetName",
                (hip.hipDeviceGetName)(name.as_mut_ptr(), name.len() as c_int, ordinal),
            )?
        };
        // SAFETY: hipDeviceGetName NUL-terminates within the buffer.
        let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let attribute = |a: c_int, what: &str| -> Result<u32, String> {
            let mut v = 0;
            // SAFETY: out-pointer to a live local.
            hip.check(what, unsafe {
                (hip.hipDeviceGetAttribute)(&mut v, a, ordinal)
            })?;
            Ok(v.max(0) as u32)
        };
        let wave = attribute(hip::ATTRIBUTE_WARP_SIZE, "hipDeviceGetAttribute(WarpSize)")?;
        let max_block = attribute(
            hip::ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            "hipDeviceGetAttribute(MaxThreadsPerBlock)",
        )?;
        let arch = device_arch(hip, ordinal)?;
        Ok(RocmDevice {
            hip,
            ordinal,
            name: format!("{name} ({arch}, HIP runtime {version})"),
            arch,
            wave,
            max_block: max_block.max(wave),
            modules: OnceLock::new(),
            stream,
            last_kernel: Mutex::new("(none)"),
            fault: Mutex::new(None),
            last_events: Mutex::new(None),
            last_launch_ms: AtomicU32::new(f32::NAN.to_bits()),
        })
    }

    /// Milliseconds the last launch took on the device (HIP events around it; waits for it).
    pub fn last_launch_ms(&self) -> Option<f32> {
        let events = self
            .last_events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(ms) = events.and_then(|e| e.elapsed_ms()) {
            self.last_launch_ms.store(ms.to_bits(), Ordering::Relaxed);
        }
        let ms = f32::from_bits(self.last_launch_ms.load(Ordering::Relaxed));
        (!ms.is_nan()).then_some(ms)
    }

    /// Refuses work after a fault lost the device.
    fn usable(&self) -> Result<(), DeviceError> {
        match self.fault.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(f) => Err(DeviceError::DeviceUnavailable {
                backend: Backend::Rocm,
                reason: format!(
                    "the device is unusable after an earlier kernel fault ({f}); restart the process"
                ),
            }),
            None => Ok(()),
        }
    }

    /// Waits for the stream; an error there is a fault of the work it waited for.
    fn wait(&self) -> Result<(), DeviceError> {
        self.usable()?;
        let h = self.hip;
        // SAFETY: the device's stream (or the default one).
        h.check("hipStreamSynchronize", unsafe {
            (h.hipStreamSynchronize)(self.stream)
        })
        .map_err(|message| {
            *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = Some(message.clone());
            DeviceError::KernelFault {
                kernel: *self.last_kernel.lock().unwrap_or_else(|p| p.into_inner()),
                backend: Backend::Rocm,
                block: None,
                detail: format!("{message} (the faulting block is not reported by HIP)"),
                state: crate::DeviceState::Lost,
            }
        })
    }

    fn artifact(&self) -> Option<&'static Artifact> {
        ARTIFACTS.iter().find(|a| a.arch == self.arch)
    }

    /// The code objects for this device's arch, loaded on first use.
    fn modules(&self) -> Result<&Modules, String> {
        self.modules
            .get_or_init(|| {
                let a = self
                    .artifact()
                    .ok_or_else(|| format!("no code object for {} in this build", self.arch))?;
                let mut handles = Vec::new();
                // SAFETY: the code object bytes live for the whole process.
                unsafe {
                    self.hip
                        .check("hipSetDevice", (self.hip.hipSetDevice)(self.ordinal))?;
                    for c in a.code_objects() {
                        let mut handle: HipModule = std::ptr::null_mut();
                        self.hip.check(
                            &format!("hipModuleLoadData({}/{}.hsaco)", c.arch, c.kernel),
                            (self.hip.hipModuleLoadData)(
                                &mut handle,
                                c.bytes.as_ptr() as *const c_void,
                            ),
                        )?;
                        handles.push((c, handle));
                    }
                }
                Ok(Modules {
                    handles,
                    functions: Mutex::new(HashMap::new()),
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    fn function(&self, symbol: &str) -> Result<HipFunction, String> {
        let m = self.modules()?;
        let mut cache = m.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&f) = cache.get(symbol) {
            return Ok(f as HipFunction);
        }
        let &(_, handle) = m
            .handles
            .iter()
            .find(|(c, _)| has_entry(c, symbol))
            .ok_or_else(|| format!("no {} code object defines {symbol}", self.arch))?;
        let c = CString::new(symbol).map_err(|e| e.to_string())?;
        let mut f: HipFunction = std::ptr::null_mut();
        // SAFETY: a loaded module and a NUL-terminated name.
        self.hip
            .check(&format!("hipModuleGetFunction({symbol})"), unsafe {
                (self.hip.hipModuleGetFunction)(&mut f, handle, c.as_ptr())
            })?;
        cache.insert(symbol.to_string(), f as usize);
        Ok(f)
    }
}

/// The device's `gcnArchName` through `hipGetDevicePropertiesR0600` (ROCm 6+), else the first
/// embedded code object the runtime agrees to load (ROCm 5, whose properties struct differs).
fn device_arch(hip: &Hip, ordinal: c_int) -> Result<String, String> {
    if let Some(props) = hip.hipGetDevicePropertiesR0600 {
        let mut buf = vec![0u8; hip::PROPS_R0600_BYTES];
        // SAFETY: the buffer is larger than the 1472-byte struct the call fills.
        let e = unsafe { props(buf.as_mut_ptr() as *mut c_void, ordinal) };
        if e == hip::HIP_SUCCESS {
            let field = &buf[hip::PROPS_R0600_GCN_ARCH_NAME..hip::PROPS_R0600_GCN_ARCH_NAME + 256];
            let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
            let name = String::from_utf8_lossy(&field[..end]);
            if name.starts_with("gfx") {
                return Ok(base_arch(&name).to_string());
            }
        }
    }
    for a in ARTIFACTS {
        let Some(c) = CODE_OBJECTS.iter().find(|c| c.arch == a.arch) else {
            continue;
        };
        let mut m: HipModule = std::ptr::null_mut();
        // SAFETY: static code object bytes; the probe module is kept (one per process at most).
        if unsafe { (hip.hipModuleLoadData)(&mut m, c.bytes.as_ptr() as *const c_void) }
            == hip::HIP_SUCCESS
        {
            return Ok(a.arch.to_string());
        }
    }
    Err("cannot tell the device's arch, and none of the embedded code objects loads on it".into())
}

impl GpuDevice for RocmDevice {
    fn backend(&self) -> Backend {
        Backend::Rocm
    }
    fn name(&self) -> String {
        self.name.clone()
    }
    fn wave(&self) -> u32 {
        self.wave
    }
    fn target(&self) -> Option<String> {
        Some(self.arch.clone())
    }
    fn ordinal(&self) -> usize {
        self.ordinal as usize
    }
    fn max_block(&self) -> u32 {
        self.max_block
    }

    fn alloc(&self, bytes: usize) -> Result<Box<dyn DeviceMemory>, DeviceError> {
        self.usable()?;
        let mut ptr: HipDevicePtr = std::ptr::null_mut();
        // SAFETY: out-pointer to a live local.
        self.hip
            .check("hipMalloc", unsafe {
                (self.hip.hipMalloc)(&mut ptr, bytes)
            })
            .map_err(DeviceError::Other)?;
        Ok(Box::new(RocmMemory {
            hip: self.hip,
            ptr,
            len: bytes,
            stream: self.stream,
            owned: true,
        }))
    }

    unsafe fn borrow_raw(
        &self,
        ptr: u64,
        bytes: usize,
    ) -> Result<Box<dyn DeviceMemory>, DeviceError> {
        Ok(Box::new(RocmMemory {
            hip: self.hip,
            ptr: ptr as HipDevicePtr,
            len: bytes,
            stream: self.stream,
            owned: false,
        }))
    }

    fn sync(&self) -> Result<(), DeviceError> {
        self.wait()
    }

    fn launch(&self, port: &Port, l: &GpuLaunch) -> Result<(), DeviceError> {
        let kernel = l.kernel.name();
        let refused = |detail: String| DeviceError::Launch { kernel, detail };
        let PortLaunch::Artifact { symbol } = &port.launch else {
            return Err(refused("not a code object port".into()));
        };
        if port.target != Some(self.arch.as_str()) {
            return Err(refused(format!(
                "the port is built for {:?}, the device is {}",
                port.target, self.arch
            )));
        }
        self.usable()?;
        let f = self.function(symbol).map_err(refused)?;
        let mut bufs = Vec::with_capacity(l.bufs.len());
        for b in l.bufs {
            let mem = b
                .mem
                .as_any()
                .downcast_ref::<RocmMemory>()
                .ok_or_else(|| refused("a buffer is not ROCm memory".into()))?;
            bufs.push((mem.ptr as u64 + b.offset as u64, b.len as u64));
        }
        let mut args = kernarg_bytes(l.kernel, l.params, &bufs);
        let mut size = args.len();
        let mut extra = [
            hip::LAUNCH_PARAM_BUFFER_POINTER,
            args.as_mut_ptr() as *mut c_void,
            hip::LAUNCH_PARAM_BUFFER_SIZE,
            &mut size as *mut usize as *mut c_void,
            hip::LAUNCH_PARAM_END,
        ];
        let shared =
            u32::try_from(l.shared).map_err(|_| refused("shared memory too large".into()))?;
        let h = self.hip;
        let events = Events::new(h);
        // SAFETY: the function belongs to the loaded module; `extra` points at kernarg bytes laid
        // out as the code object's metadata says (tests/tests/rocm_code_objects.rs); buffers are
        // live device allocations of the lengths passed.
        unsafe {
            if let Some(ev) = &events {
                let _ = (h.hipEventRecord)(ev.start, self.stream);
            }
            h.check(
                "hipModuleLaunchKernel",
                (h.hipModuleLaunchKernel)(
                    f,
                    l.grid[0],
                    l.grid[1],
                    l.grid[2],
                    l.block,
                    1,
                    1,
                    shared,
                    self.stream,
                    std::ptr::null_mut(),
                    extra.as_mut_ptr(),
                ),
            )
            .map_err(refused)?;
            if let Some(ev) = &events {
                let _ = (h.hipEventRecord)(ev.stop, self.stream);
            }
        }
        *self.last_kernel.lock().unwrap_or_else(|p| p.into_inner()) = kernel;
        // Enqueued: the events are read (and the launch waited for) only when its time is asked.
        *self.last_events.lock().unwrap_or_else(|p| p.into_inner()) = events;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A start/stop event pair, destroyed on drop.
struct Events {
    hip: &'static Hip,
    start: HipEvent,
    stop: HipEvent,
}

impl Events {
    fn new(hip: &'static Hip) -> Option<Events> {
        let (mut start, mut stop): (HipEvent, HipEvent) =
            (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: out-pointers to live locals.
        unsafe {
            if (hip.hipEventCreate)(&mut start) != hip::HIP_SUCCESS {
                return None;
            }
            if (hip.hipEventCreate)(&mut stop) != hip::HIP_SUCCESS {
                let _ = (hip.hipEventDestroy)(start);
                return None;
            }
        }
        Some(Events { hip, start, stop })
    }

    fn elapsed_ms(&self) -> Option<f32> {
        let mut ms = 0f32;
        // SAFETY: both events were recorded on the device's stream before this call.
        unsafe {
            if (self.hip.hipEventSynchronize)(self.stop) != hip::HIP_SUCCESS {
                return None;
            }
            ((self.hip.hipEventElapsedTime)(&mut ms, self.start, self.stop) == hip::HIP_SUCCESS)
                .then_some(ms)
        }
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        // SAFETY: events created by hipEventCreate, destroyed once.
        unsafe {
            let _ = (self.hip.hipEventDestroy)(self.start);
            let _ = (self.hip.hipEventDestroy)(self.stop);
        }
    }
}

/// One `hipMalloc` allocation, freed on drop.
#[derive(Debug)]
struct RocmMemory {
    hip: &'static Hip,
    ptr: HipDevicePtr,
    len: usize,
    /// The stream of the device that made it: copies wait for its work first.
    stream: HipStream,
    /// kiln's allocation (freed on drop) or a caller's (never freed).
    owned: bool,
}

// SAFETY: a device address; copies go through the runtime, which is thread-safe.
unsafe impl Send for RocmMemory {}
unsafe impl Sync for RocmMemory {}

impl std::fmt::Debug for Hip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hip({})", self.path)
    }
}

impl RocmMemory {
    /// Waits for the work queued on the stream (the blocking copies run on the default one).
    fn wait_stream(&self) -> Result<(), DeviceError> {
        // SAFETY: the stream of the device that made this memory.
        self.hip
            .check("hipStreamSynchronize", unsafe {
                (self.hip.hipStreamSynchronize)(self.stream)
            })
            .map_err(DeviceError::Other)
    }

    fn range(&self, offset: usize, n: usize) -> Result<(), DeviceError> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(DeviceError::Other(format!(
                "copy of {n} bytes at {offset} outside a {}-byte allocation",
                self.len
            ))),
        }
    }
}

impl DeviceMemory for RocmMemory {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), DeviceError> {
        self.range(offset, out.len())?;
        self.wait_stream()?;
        // SAFETY: inside the allocation (checked) into a host slice of that length.
        self.hip
            .check("hipMemcpy(device to host)", unsafe {
                (self.hip.hipMemcpy)(
                    out.as_mut_ptr() as *mut c_void,
                    (self.ptr as *const u8).add(offset) as *const c_void,
                    out.len(),
                    hip::MEMCPY_DEVICE_TO_HOST,
                )
            })
            .map_err(DeviceError::Other)
    }
    fn write(&self, offset: usize, data: &[u8]) -> Result<(), DeviceError> {
        self.range(offset, data.len())?;
        self.wait_stream()?;
        // SAFETY: as above, host to device.
        self.hip
            .check("hipMemcpy(host to device)", unsafe {
                (self.hip.hipMemcpy)(
                    (self.ptr as *mut u8).add(offset) as *mut c_void,
                    data.as_ptr() as *const c_void,
                    data.len(),
                    hip::MEMCPY_HOST_TO_DEVICE,
                )
            })
            .map_err(DeviceError::Other)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for RocmMemory {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // SAFETY: allocated by hipMalloc, freed once.
        unsafe {
            let _ = (self.hip.hipFree)(self.ptr);
        }
    }
}

impl crate::Device {
    /// A device on HIP device `ordinal` that enqueues every launch on the caller's stream
    /// (`hipStream_t`); reads and [`Device::sync`](crate::Device::sync) wait for that stream.
    ///
    /// # Safety
    /// `stream` is a live stream of device `ordinal` and stays so while the device (or any
    /// tensor made on it) is used.
    pub unsafe fn rocm_on_stream(
        ordinal: usize,
        stream: *mut c_void,
    ) -> Result<crate::Device, crate::PortError> {
        let ordinal = c_int::try_from(ordinal).unwrap_or(c_int::MAX);
        RocmDevice::on_stream(ordinal, stream)
            .map(|d| crate::Device::from_gpu(Arc::new(d)))
            .map_err(|reason| {
                crate::PortError::Device(DeviceError::DeviceUnavailable {
                    backend: Backend::Rocm,
                    reason,
                })
            })
    }
}
