//! What a GPU backend (cuda, rocm, wgpu) implements. Each backend lives in its own module and
//! plugs in through these two traits, its port slot and its `open` function; the dispatch,
//! tensors, fallback and parity harness are shared.

use crate::port::Port;
use crate::{Backend, DeviceError, PortError};
use kiln_math::{DType, KernelId};
use std::any::Any;
use std::fmt::Debug;

/// One device allocation.
pub trait DeviceMemory: Send + Sync + Debug {
    /// Size in bytes.
    fn len(&self) -> usize;
    /// Whether it holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `out.len()` bytes starting at `offset` to the host.
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), DeviceError>;
    /// Copies `data` to `offset`, ordered after the work queued before it; returns once the
    /// device holds the bytes.
    fn write(&self, offset: usize, data: &[u8]) -> Result<(), DeviceError>;
    /// Copies `data` to `offset` in order with the device's queue without waiting for it; the
    /// backend keeps its own copy of `data` (staged by the driver), so the caller may drop it.
    fn write_enqueued(&self, offset: usize, data: &[u8]) -> Result<(), DeviceError> {
        self.write(offset, data)
    }
    /// The backend downcasts to its own allocation type.
    fn as_any(&self) -> &dyn Any;
}

/// One buffer of a GPU launch: an allocation, the byte offset of element 0, the element count.
pub struct GpuBuf<'a> {
    /// The allocation.
    pub mem: &'a dyn DeviceMemory,
    /// Byte offset of element 0.
    pub offset: usize,
    /// Elements the kernel may index.
    pub len: usize,
    /// The element type.
    pub dtype: DType,
}

/// A launch on a GPU: bound params, buffers in list order, geometry.
pub struct GpuLaunch<'a> {
    /// The kernel.
    pub kernel: KernelId,
    /// Its element type.
    pub dtype: DType,
    /// The params struct as words (the by-value argument).
    pub params: &'a [u32],
    /// The buffers, in list order.
    pub bufs: &'a [GpuBuf<'a>],
    /// Blocks along x, y, z.
    pub grid: [u32; 3],
    /// Threads per block (a multiple of the device's wave).
    pub block: u32,
    /// Launch-sized shared memory in bytes, collective scratch included.
    pub shared: usize,
}

/// A recorded unit of launches (an instantiated CUDA graph) that replays as one.
pub trait GpuRecording: Send + Sync + Debug {
    /// Enqueues one replay on the device's stream.
    fn replay(&self) -> Result<(), DeviceError>;
}

/// An opened GPU.
pub trait GpuDevice: Send + Sync + Debug {
    /// The backend.
    fn backend(&self) -> Backend;
    /// The adapter's name and what kiln runs on it.
    fn name(&self) -> String;
    /// The warp/wavefront/subgroup width the device reports.
    fn wave(&self) -> u32;
    /// The target its artifacts must be built for (an AMD arch such as `gfx1151`), when the
    /// backend builds per target.
    fn target(&self) -> Option<String> {
        None
    }
    /// Identifies the device's memory space among devices of its backend.
    fn ordinal(&self) -> usize;
    /// A new allocation of `bytes` (contents undefined).
    fn alloc(&self, bytes: usize) -> Result<Box<dyn DeviceMemory>, DeviceError>;
    /// Wraps `bytes` of a caller's device allocation at address `ptr`; kiln never frees it.
    ///
    /// # Safety
    /// `ptr` is memory of this device's context, valid for `bytes` while the wrapper lives.
    unsafe fn borrow_raw(
        &self,
        _ptr: u64,
        _bytes: usize,
    ) -> Result<Box<dyn DeviceMemory>, DeviceError> {
        Err(DeviceError::Other(format!(
            "{}: memory is not addressed by raw pointers on this backend",
            self.backend()
        )))
    }
    /// Enqueues `port` (one of this backend's ports) on the device's stream or queue; returns
    /// once enqueued (a fault surfaces at the next [`GpuDevice::sync`] or read).
    fn launch(&self, port: &Port, l: &GpuLaunch) -> Result<(), DeviceError>;
    /// Waits for everything enqueued; reports a fault of the work it waited for.
    fn sync(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    /// Hands work the backend holds back to the device's queue without waiting (wgpu keeps a
    /// step's launches for one submission); nothing to do where launches go out at once.
    fn flush(&self) -> Result<(), DeviceError> {
        Ok(())
    }
    /// Queue submissions made so far, where the backend submits work in batches (wgpu).
    fn queue_submissions(&self) -> Option<u64> {
        None
    }
    /// Whether the device is a software rasteriser on the host (lavapipe, WARP).
    fn is_software(&self) -> bool {
        false
    }
    /// The file name of the compiled module `kernel` × `dtype` runs from on this device, where
    /// the backend picks one of several per device (wgpu's subgroup and f16-storage variants):
    /// two devices naming the same file run the same code.
    fn module_file(&self, _kernel: KernelId, _dtype: DType) -> Option<&'static str> {
        None
    }
    /// Whether the device's stream is capturing a graph.
    fn is_capturing(&self) -> bool {
        false
    }
    /// The largest block the device runs (≥ wave).
    fn max_block(&self) -> u32 {
        1024
    }
    /// The largest block the device runs `port`'s entry with: the entry's registers may allow
    /// fewer threads than `max_block`.
    fn max_block_for(&self, _port: &Port) -> u32 {
        self.max_block()
    }
    /// Bytes of the device's last-level cache, when it reports one (benchmarks rotate inputs
    /// over enough copies to defeat it).
    fn l2_bytes(&self) -> Option<usize> {
        None
    }
    /// Times `runs` passes over `launches` (one pass launches each once, in order) with device
    /// timers, after an untimed warm-up pass; returns seconds per launch for each pass.
    fn time_launches(
        &self,
        _port: &Port,
        _launches: &[GpuLaunch],
        _runs: usize,
    ) -> Result<Vec<f64>, DeviceError> {
        Err(DeviceError::Other(format!(
            "{}: device timing is not implemented",
            self.backend()
        )))
    }
    /// Enqueues `l` alone and returns its seconds once it has run: by default the host clock
    /// from a drained queue to the launch's completion (submit and wait included); a backend
    /// with device timers times the launch between them.
    fn time_launch(&self, port: &Port, l: &GpuLaunch) -> Result<f64, DeviceError> {
        self.sync()?;
        let t = std::time::Instant::now();
        self.launch(port, l)?;
        self.sync()?;
        Ok(t.elapsed().as_secs_f64())
    }
    /// Records what `pass` enqueues as one replayable unit (a CUDA graph); `None` where the
    /// backend records nothing.
    fn record(
        &self,
        _pass: &mut dyn FnMut() -> Result<(), PortError>,
    ) -> Option<Result<Box<dyn GpuRecording>, PortError>> {
        None
    }
    /// Whether [`GpuDevice::time_replays`] records (else it returns `None`).
    fn records(&self) -> bool {
        false
    }
    /// Records what `pass` enqueues as one replayable unit (a CUDA graph), then times `runs`
    /// replays with device timers after an untimed one; seconds per replay ÷ `per_pass`. `None`
    /// where the backend records nothing (the caller times eager passes instead).
    fn time_replays(
        &self,
        _runs: usize,
        _per_pass: usize,
        _pass: &mut dyn FnMut() -> Result<(), PortError>,
    ) -> Option<Result<Vec<f64>, PortError>> {
        None
    }
    /// Times `runs` device-to-device copies of `bytes` from `src` to `dst` with device timers,
    /// after an untimed warm-up copy; returns seconds per copy.
    fn time_copy(
        &self,
        _dst: &dyn DeviceMemory,
        _src: &dyn DeviceMemory,
        _bytes: usize,
        _runs: usize,
    ) -> Result<Vec<f64>, DeviceError> {
        Err(DeviceError::Other(format!(
            "{}: device timing is not implemented",
            self.backend()
        )))
    }
    /// Times `runs` passes of a plain stream kernel (not one of kiln's) over the first `bytes`
    /// of `src` (copying into `dst`) with `groups` workgroups of 256, after a warm-up pass;
    /// `checked` keeps the backend's runtime checks. Seconds per pass; `None` where the
    /// backend has no such kernel (its copy is the yardstick there).
    #[allow(clippy::too_many_arguments)]
    fn time_stream(
        &self,
        _kernel: StreamKernel,
        _src: &dyn DeviceMemory,
        _dst: &dyn DeviceMemory,
        _bytes: usize,
        _groups: u32,
        _checked: bool,
        _runs: usize,
    ) -> Option<Result<Vec<f64>, DeviceError>> {
        None
    }
    /// The most launch-sized shared memory a block may use, in bytes.
    fn max_shared_bytes(&self) -> usize {
        usize::MAX
    }
    /// How many blocks of `port` (`block` threads, `shared` bytes of launch-sized shared memory)
    /// the whole device holds at once: multiprocessors × blocks resident per multiprocessor,
    /// when the backend can say (planners size split work to fill the device in one wave).
    fn resident_blocks(&self, _port: &Port, _block: u32, _shared: usize) -> Option<usize> {
        None
    }
    /// The backend downcasts to its own device type.
    fn as_any(&self) -> &dyn Any;
}

/// A plain kernel that streams memory, for [`GpuDevice::time_stream`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKernel {
    /// Reads the bytes (16-byte loads, four in flight per thread).
    Read,
    /// Reads and writes the bytes (four 16-byte loads, then their stores, per turn).
    Copy,
    /// Writes the bytes (one 16-byte store per turn).
    Write,
    /// [`Copy`](Self::Copy) in 4-byte accesses: consecutive invocations take consecutive words,
    /// so every store instruction covers whole sectors (does the adapter split 16-byte stores?).
    CopyWords,
    /// [`Write`](Self::Write) in 4-byte stores, consecutive invocations on consecutive words.
    WriteWords,
}

impl StreamKernel {
    /// Every stream kernel, in the order `kiln bench --stream` prints them.
    pub const ALL: [StreamKernel; 5] = [
        StreamKernel::Read,
        StreamKernel::Write,
        StreamKernel::Copy,
        StreamKernel::WriteWords,
        StreamKernel::CopyWords,
    ];

    /// Its name in the bench's rows (and, after `stream_`, its WGSL entry point).
    pub fn name(self) -> &'static str {
        match self {
            StreamKernel::Read => "read",
            StreamKernel::Write => "write",
            StreamKernel::Copy => "copy",
            StreamKernel::WriteWords => "write_words",
            StreamKernel::CopyWords => "copy_words",
        }
    }

    /// Bytes of one access: 16, or 4 for the word kernels.
    pub fn access_bytes(self) -> usize {
        match self {
            StreamKernel::CopyWords | StreamKernel::WriteWords => 4,
            _ => 16,
        }
    }

    /// Whether it reads its source.
    pub fn reads(self) -> bool {
        !matches!(self, StreamKernel::Write | StreamKernel::WriteWords)
    }

    /// Whether it writes its destination.
    pub fn writes(self) -> bool {
        self != StreamKernel::Read
    }

    /// Bytes a pass over `bytes` moves: read plus written.
    pub fn moved(self, bytes: usize) -> usize {
        bytes * (self.reads() as usize + self.writes() as usize)
    }
}

/// The GPU backends' bench timing loop: one untimed warm-up `pass`, then `runs` timed ones;
/// each pass returns its seconds, reported per launch (`launches` launches a pass).
#[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))] // their timing loop
pub(crate) fn warm_then_timed(
    runs: usize,
    launches: usize,
    mut pass: impl FnMut() -> Result<f64, DeviceError>,
) -> Result<Vec<f64>, DeviceError> {
    pass()?;
    let per = launches.max(1) as f64;
    (0..runs).map(|_| pass().map(|s| s / per)).collect()
}
