//! Tensors: a shape, a dtype and bytes on a device.

use crate::gpu::{DeviceMemory, GpuBuf};
use crate::{Device, DeviceError, DeviceKind, PortError};
use kiln_math::{DType, Element, Scalar};

/// A dense row-major tensor on a device.
///
/// A tensor may sit inside a larger allocation (`Tensor::guarded`): the bytes before and after
/// it are guard regions a harness can check after a launch.
#[derive(Debug)]
pub struct Tensor {
    dev: Device,
    dtype: DType,
    shape: Vec<usize>,
    mem: Mem,
    /// Byte offset of element 0 inside `mem`.
    offset: usize,
    /// Bytes of the whole allocation (guards included).
    total: usize,
}

#[derive(Debug)]
enum Mem {
    /// Host memory (cpu, sim), 8-byte aligned.
    Host(Vec<u64>),
    Gpu(Box<dyn DeviceMemory>),
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Bytes of the staging buffer that fills device memory.
const FILL_CHUNK: usize = 64 << 20;

/// `len` zeroed words from the allocator's zeroed path: the pages of a large allocation come
/// from the OS untouched and cost memory only once written. A refusal is an error, not an
/// abort, so a caller can skip what does not fit.
fn zeroed_words(len: usize) -> Result<Vec<u64>, PortError> {
    let layout = std::alloc::Layout::array::<u64>(len)
        .map_err(|_| other(format!("{len} words do not fit an allocation")))?;
    // SAFETY: the layout is non-zero (len ≥ 1) and valid.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut u64;
    if ptr.is_null() {
        return Err(other(format!(
            "host allocation of {} bytes refused",
            layout.size()
        )));
    }
    // SAFETY: allocated above by the global allocator with the layout of `len` u64s, all
    // initialised (zeroed); the Vec frees it with that same layout.
    Ok(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

fn other(msg: String) -> PortError {
    PortError::Device(DeviceError::Other(msg))
}

impl Tensor {
    /// A zero-filled tensor.
    pub fn zeros(dev: &Device, dtype: DType, shape: &[usize]) -> Result<Tensor, PortError> {
        Tensor::guarded(dev, dtype, shape, 0, 0, 0)
    }

    /// A tensor with `guard` elements of `guard_fill` bytes before and after it, its own bytes
    /// all `body_fill`. The parity harness uses it for sentinels and poison.
    pub fn guarded(
        dev: &Device,
        dtype: DType,
        shape: &[usize],
        guard: usize,
        guard_fill: u8,
        body_fill: u8,
    ) -> Result<Tensor, PortError> {
        let n = numel(shape)
            .checked_add(2 * guard)
            .and_then(|n| n.checked_mul(dtype.size()))
            .ok_or_else(|| other(format!("tensor of shape {shape:?} is too large")))?;
        let offset = guard * dtype.size();
        // The fill as ranges; zero ranges need no writes (fresh host memory is zeroed and its
        // untouched pages stay unallocated, so a huge zero tensor costs only what is written).
        let fills = [
            (0, offset, guard_fill),
            (offset, n - offset, body_fill),
            (n - offset, n, guard_fill),
        ];
        let mem = match dev.kind() {
            DeviceKind::Cpu | DeviceKind::Sim(_) => {
                let mut words = zeroed_words(n.div_ceil(8).max(1))?;
                // SAFETY: the u64 storage holds at least n bytes.
                let all =
                    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, n) };
                for &(lo, hi, fill) in &fills {
                    if fill != 0 {
                        all[lo..hi].fill(fill);
                    }
                }
                Mem::Host(words)
            }
            DeviceKind::Gpu(g) => {
                let m = g.alloc(n.max(1))?;
                // Device memory starts undefined: write every range, a staging chunk at a time.
                let chunk = n.clamp(1, FILL_CHUNK);
                let mut staged = (0u8, Vec::new());
                for &(lo, hi, fill) in &fills {
                    if staged.1.is_empty() || staged.0 != fill {
                        staged = (fill, vec![fill; chunk]);
                    }
                    let mut at = lo;
                    while at < hi {
                        let len = (hi - at).min(chunk);
                        m.write(at, &staged.1[..len])?;
                        at += len;
                    }
                }
                Mem::Gpu(m)
            }
        };
        Ok(Tensor {
            dev: dev.clone(),
            dtype,
            shape: shape.to_vec(),
            mem,
            offset,
            total: n,
        })
    }

    /// A tensor holding `data` (its element type decides the dtype).
    pub fn from_slice<T: Scalar>(
        dev: &Device,
        shape: &[usize],
        data: &[T],
    ) -> Result<Tensor, PortError> {
        let mut t = Tensor::zeros(dev, T::DTYPE, shape)?;
        t.write(data)?;
        Ok(t)
    }

    /// A tensor of `dtype` from f32 values, rounded to nearest even.
    pub fn from_f32(
        dev: &Device,
        dtype: DType,
        shape: &[usize],
        data: &[f32],
    ) -> Result<Tensor, PortError> {
        let mut t = Tensor::zeros(dev, dtype, shape)?;
        t.write_f32(data)?;
        Ok(t)
    }

    /// A tensor from raw little-endian bytes.
    pub fn from_bytes(
        dev: &Device,
        dtype: DType,
        shape: &[usize],
        bytes: &[u8],
    ) -> Result<Tensor, PortError> {
        let mut t = Tensor::zeros(dev, dtype, shape)?;
        t.write_bytes(bytes)?;
        Ok(t)
    }

    pub fn device(&self) -> &Device {
        &self.dev
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }
    pub fn byte_len(&self) -> usize {
        self.numel() * self.dtype.size()
    }

    fn read_range(&self, offset: usize, len: usize) -> Result<Vec<u8>, PortError> {
        match &self.mem {
            Mem::Host(words) => {
                // SAFETY: u64 storage viewed as bytes; offset + len <= total <= words.len() * 8.
                let all =
                    unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, self.total) };
                Ok(all[offset..offset + len].to_vec())
            }
            Mem::Gpu(m) => {
                let mut out = vec![0u8; len];
                m.read(offset, &mut out)?;
                Ok(out)
            }
        }
    }

    /// The tensor's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, PortError> {
        self.read_range(self.offset, self.byte_len())
    }

    /// The bytes of elements `first .. first + count`.
    pub(crate) fn element_bytes(&self, first: usize, count: usize) -> Result<Vec<u8>, PortError> {
        let s = self.dtype.size();
        if first
            .checked_add(count)
            .is_none_or(|end| end > self.numel())
        {
            return Err(other(format!(
                "elements {first}..{} of a tensor of {}",
                first.saturating_add(count),
                self.numel()
            )));
        }
        self.read_range(self.offset + first * s, count * s)
    }

    /// The whole allocation's bytes, guards included.
    pub fn to_bytes_with_guards(&self) -> Result<Vec<u8>, PortError> {
        self.read_range(0, self.total)
    }

    /// Bytes of the guard before the tensor.
    pub fn guard_bytes(&self) -> usize {
        self.offset
    }

    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), PortError> {
        if bytes.len() != self.byte_len() {
            return Err(other(format!(
                "{} bytes written into a tensor of {} bytes",
                bytes.len(),
                self.byte_len()
            )));
        }
        self.write_bytes_at(0, bytes)
    }

    /// Writes `bytes` at byte `at` of the tensor's elements, leaving the rest as it is.
    pub fn write_bytes_at(&mut self, at: usize, bytes: &[u8]) -> Result<(), PortError> {
        if at
            .checked_add(bytes.len())
            .is_none_or(|end| end > self.byte_len())
        {
            return Err(other(format!(
                "{} bytes written at byte {at} of a tensor of {} bytes",
                bytes.len(),
                self.byte_len()
            )));
        }
        match &mut self.mem {
            Mem::Host(words) => {
                // SAFETY: as in read_range.
                let all = unsafe {
                    std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, self.total)
                };
                all[self.offset + at..self.offset + at + bytes.len()].copy_from_slice(bytes);
                Ok(())
            }
            Mem::Gpu(m) => Ok(m.write(self.offset + at, bytes)?),
        }
    }

    pub fn write<T: Scalar>(&mut self, data: &[T]) -> Result<(), PortError> {
        self.check_dtype(T::DTYPE)?;
        // SAFETY: Scalar types are plain data.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data))
        };
        self.write_bytes(bytes)
    }

    pub fn write_f32(&mut self, data: &[f32]) -> Result<(), PortError> {
        match self.dtype {
            DType::F32 => self.write(data),
            DType::F16 => self.write(
                &data
                    .iter()
                    .map(|&v| kiln_math::F16::from_f32(v))
                    .collect::<Vec<_>>(),
            ),
            DType::Bf16 => self.write(
                &data
                    .iter()
                    .map(|&v| kiln_math::Bf16::from_f32(v))
                    .collect::<Vec<_>>(),
            ),
            d => Err(other(format!("write_f32 into a {} tensor", d.name()))),
        }
    }

    pub fn to_vec<T: Scalar>(&self) -> Result<Vec<T>, PortError> {
        self.check_dtype(T::DTYPE)?;
        let bytes = self.to_bytes()?;
        let mut out = Vec::<T>::with_capacity(self.numel());
        // SAFETY: exactly numel * size_of::<T>() bytes of plain data.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr() as *mut u8, bytes.len());
            out.set_len(self.numel());
        }
        Ok(out)
    }

    /// Values widened to f32 (float dtypes only).
    pub fn to_f32_vec(&self) -> Result<Vec<f32>, PortError> {
        Ok(match self.dtype {
            DType::F32 => self.to_vec::<f32>()?,
            DType::F16 => self
                .to_vec::<kiln_math::F16>()?
                .into_iter()
                .map(Element::to_f32)
                .collect(),
            DType::Bf16 => self
                .to_vec::<kiln_math::Bf16>()?
                .into_iter()
                .map(Element::to_f32)
                .collect(),
            d => return Err(other(format!("to_f32_vec of a {} tensor", d.name()))),
        })
    }

    fn check_dtype(&self, want: DType) -> Result<(), PortError> {
        if self.dtype == want {
            Ok(())
        } else {
            Err(other(format!(
                "tensor is {}, accessed as {}",
                self.dtype.name(),
                want.name()
            )))
        }
    }

    /// Pointer to element 0 for a host-memory launch (`None` for device memory). Host
    /// launches only write through buffers the caller passed as outputs (`Arg::Out`).
    pub(crate) fn host_ptr(&self) -> Option<*mut u8> {
        match &self.mem {
            // SAFETY: offset is inside the allocation.
            Mem::Host(w) => Some(unsafe { (w.as_ptr() as *mut u8).add(self.offset) }),
            Mem::Gpu(_) => None,
        }
    }

    /// The buffer of a GPU launch (`None` for host memory).
    pub(crate) fn gpu_buf(&self) -> Option<GpuBuf<'_>> {
        match &self.mem {
            Mem::Gpu(m) => Some(GpuBuf {
                mem: m.as_ref(),
                offset: self.offset,
                len: self.numel(),
                dtype: self.dtype,
            }),
            Mem::Host(_) => None,
        }
    }
}
