//! The bytes behind tensors: host memory (kiln's own or a caller's) or a device allocation
//! (kiln's own or a caller's), shared by every view over it.

use crate::gpu::DeviceMemory;
use crate::{DeviceError, PortError};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes of kiln's own allocations on one device: live now, and the most live at once since
/// the last reset (a decode bench's peak device memory).
#[derive(Debug, Default)]
pub(crate) struct MemoryMeter {
    live: AtomicUsize,
    peak: AtomicUsize,
}

impl MemoryMeter {
    /// Counts `bytes` as live until the returned guard drops.
    pub(crate) fn take(self: &Arc<Self>, bytes: usize) -> Counted {
        let now = self.live.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Counted {
            meter: self.clone(),
            bytes,
        }
    }

    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    pub(crate) fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Starts a new peak from what is live now.
    pub(crate) fn reset_peak(&self) {
        self.peak.store(self.live(), Ordering::Relaxed);
    }
}

/// One allocation's bytes on its device's meter, given back when the allocation drops.
#[derive(Debug)]
pub(crate) struct Counted {
    meter: Arc<MemoryMeter>,
    bytes: usize,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.meter.live.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// A device allocation kiln made, counted on the meter while it lives; everything else is
/// the allocation's own (`as_any` too, so backends still find their type).
#[derive(Debug)]
pub(crate) struct CountedMemory {
    pub(crate) mem: Box<dyn DeviceMemory>,
    pub(crate) _counted: Counted,
}

impl DeviceMemory for CountedMemory {
    fn len(&self) -> usize {
        self.mem.len()
    }
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), DeviceError> {
        self.mem.read(offset, out)
    }
    fn write(&self, offset: usize, data: &[u8]) -> Result<(), DeviceError> {
        self.mem.write(offset, data)
    }
    fn write_enqueued(&self, offset: usize, data: &[u8]) -> Result<(), DeviceError> {
        self.mem.write_enqueued(offset, data)
    }
    fn as_any(&self) -> &dyn Any {
        self.mem.as_any()
    }
}

/// Host bytes: kiln's zeroed allocation or a caller's region.
pub(crate) struct HostStore {
    ptr: *mut u8,
    len: usize,
    /// The allocation when kiln owns it (8-byte aligned); `None` for a caller's region.
    _owned: Option<Vec<u64>>,
    /// Its bytes on the device's meter, when kiln owns it.
    _counted: Option<Counted>,
}

// SAFETY: the bytes are plain data reached through raw pointers only; launches and copies that
// write them are ordered by the caller (outputs are exclusive borrows, aliasing is refused at
// launch), and a borrowed region's owner promised it outlives every view (`Tensor::from_host_ptr`).
unsafe impl Send for HostStore {}
unsafe impl Sync for HostStore {}

/// The memory of one allocation, with every view over it holding an `Arc` of it.
pub(crate) enum Storage {
    Host(HostStore),
    Gpu(Box<dyn DeviceMemory>),
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Storage::Host(h) => write!(f, "host({} bytes)", h.len),
            Storage::Gpu(m) => write!(f, "{m:?}"),
        }
    }
}

fn other(msg: String) -> PortError {
    PortError::Device(DeviceError::Other(msg))
}

/// `len` zeroed words from the allocator's zeroed path: the pages of a large allocation come
/// from the OS untouched and cost memory only once written. A refusal is an error, not an
/// abort, so a caller can skip what does not fit.
fn zeroed_words(len: usize) -> Result<Vec<u64>, PortError> {
    let layout = std::alloc::Layout::array::<u64>(len)
        .map_err(|_| other(format!("{len} words do not fit an allocation")))?;
    // SAFETY: the layout is non-zero (len ≥ 1) and valid.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut u64;
    if ptr.is_null() {
        return Err(PortError::Device(DeviceError::OutOfMemory {
            backend: crate::Backend::Cpu,
            requested: layout.size(),
            available: None,
        }));
    }
    // SAFETY: allocated above by the global allocator with the layout of `len` u64s, all
    // initialised (zeroed); the Vec frees it with that same layout.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

impl Storage {
    /// `bytes` of zeroed host memory, counted on `counted`'s meter while it lives.
    pub(crate) fn host_zeroed(bytes: usize, counted: Counted) -> Result<Storage, PortError> {
        let mut words = zeroed_words(bytes.div_ceil(8).max(1))?;
        Ok(Storage::Host(HostStore {
            ptr: words.as_mut_ptr() as *mut u8,
            len: bytes,
            _owned: Some(words),
            _counted: Some(counted),
        }))
    }

    /// A caller's host region.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` bytes for as long as the storage lives.
    pub(crate) unsafe fn host_borrowed(ptr: *mut u8, len: usize) -> Storage {
        Storage::Host(HostStore {
            ptr,
            len,
            _owned: None,
            _counted: None,
        })
    }

    /// Bytes of the whole region.
    pub(crate) fn len(&self) -> usize {
        match self {
            Storage::Host(h) => h.len,
            Storage::Gpu(m) => m.len(),
        }
    }

    fn range(&self, offset: usize, len: usize) -> Result<(), PortError> {
        if offset.checked_add(len).is_some_and(|end| end <= self.len()) {
            Ok(())
        } else {
            Err(other(format!(
                "{len} bytes at byte {offset} of a {}-byte region",
                self.len()
            )))
        }
    }

    /// Copies `out.len()` bytes at `offset` to the host, after the work queued before it.
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), PortError> {
        self.range(offset, out.len())?;
        match self {
            // SAFETY: inside the region (checked above).
            Storage::Host(h) => unsafe {
                std::ptr::copy_nonoverlapping(h.ptr.add(offset), out.as_mut_ptr(), out.len())
            },
            Storage::Gpu(m) => m.read(offset, out)?,
        }
        Ok(())
    }

    /// Copies `data` to `offset`; returns once the device holds it (or holds a copy it will
    /// write in order with the work queued before it, when `enqueued`).
    pub(crate) fn write(
        &self,
        offset: usize,
        data: &[u8],
        enqueued: bool,
    ) -> Result<(), PortError> {
        self.range(offset, data.len())?;
        match self {
            // SAFETY: inside the region (checked above); `data` is the caller's own slice.
            Storage::Host(h) => unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), h.ptr.add(offset), data.len())
            },
            Storage::Gpu(m) if enqueued => m.write_enqueued(offset, data)?,
            Storage::Gpu(m) => m.write(offset, data)?,
        }
        Ok(())
    }

    /// Fills `lo..hi` with `byte`.
    pub(crate) fn fill(&self, lo: usize, hi: usize, byte: u8) -> Result<(), PortError> {
        self.range(lo, hi.saturating_sub(lo))?;
        match self {
            // SAFETY: inside the region (checked above).
            Storage::Host(h) => unsafe { std::ptr::write_bytes(h.ptr.add(lo), byte, hi - lo) },
            Storage::Gpu(m) => {
                // A staging chunk at a time: device memory has no host mapping.
                let chunk = (hi - lo).clamp(1, FILL_CHUNK);
                let staged = vec![byte; chunk];
                let mut at = lo;
                while at < hi {
                    let n = (hi - at).min(chunk);
                    m.write(at, &staged[..n])?;
                    at += n;
                }
            }
        }
        Ok(())
    }

    /// The host address of byte `offset` (host storage only).
    pub(crate) fn host_ptr(&self, offset: usize) -> Option<*mut u8> {
        match self {
            // SAFETY: callers pass offsets inside the region.
            Storage::Host(h) => Some(unsafe { h.ptr.add(offset) }),
            Storage::Gpu(_) => None,
        }
    }

    /// The device allocation (GPU storage only).
    pub(crate) fn gpu(&self) -> Option<&dyn DeviceMemory> {
        match self {
            Storage::Gpu(m) => Some(m.as_ref()),
            Storage::Host(_) => None,
        }
    }

    /// Whether the two regions are one.
    pub(crate) fn same(&self, other: &Storage) -> bool {
        std::ptr::eq(self, other)
            || match (self, other) {
                (Storage::Host(a), Storage::Host(b)) => a.ptr == b.ptr,
                _ => false,
            }
    }
}

/// Bytes of the staging buffer that fills device memory.
const FILL_CHUNK: usize = 64 << 20;
