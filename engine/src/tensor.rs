//! Tensors: a dtype, a shape and a byte offset over memory on a device — kiln's own allocation
//! or a caller's (an engine's KV pool, weights, activations) — shared by every view over it.

use crate::gpu::GpuBuf;
use crate::storage::Storage;
use crate::{Device, DeviceError, DeviceKind, PortError};
use kiln_math::{DType, Element, Scalar};
use std::sync::Arc;

/// A dense row-major view: `shape` elements of `dtype` starting `offset` bytes into memory on a
/// device.
///
/// Views made by [`Tensor::view`], [`Tensor::reshape`] and [`Tensor::view_bytes`] share the
/// memory (like a strided view in torch, without strides): a write through one is seen by the
/// others. A launch refuses an output that overlaps another of its buffers.
///
/// A tensor may sit inside a larger allocation (`Tensor::guarded`): the bytes before and after
/// it are guard regions a harness can check after a launch.
#[derive(Debug)]
pub struct Tensor {
    dev: Device,
    dtype: DType,
    shape: Vec<usize>,
    mem: Arc<Storage>,
    /// Byte offset of element 0 inside `mem`.
    offset: usize,
}

/// Elements of `shape`, or `None` when the product overflows (a wrapped product would make a
/// huge shape look small).
fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

fn other(msg: String) -> PortError {
    PortError::Device(DeviceError::Other(msg))
}

/// The storage a tensor of `bytes` needs on `dev`, zeroed on the host and undefined on a GPU.
pub(crate) fn allocate(dev: &Device, bytes: usize) -> Result<Storage, PortError> {
    dev.count_allocation();
    match dev.kind() {
        DeviceKind::Cpu | DeviceKind::Sim(_) => {
            Storage::host_zeroed(bytes, dev.meter().take(bytes))
        }
        DeviceKind::Gpu(g) => {
            let mem = g.alloc(bytes.max(1))?;
            let counted = dev.meter().take(mem.len());
            Ok(Storage::Gpu(Box::new(crate::storage::CountedMemory {
                mem,
                _counted: counted,
            })))
        }
    }
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
        let n = checked_numel(shape)
            .and_then(|n| n.checked_add(guard.checked_mul(2)?))
            .and_then(|n| n.checked_mul(dtype.size()))
            .ok_or_else(|| other(format!("tensor of shape {shape:?} is too large")))?;
        let offset = guard
            .checked_mul(dtype.size())
            .ok_or_else(|| other(format!("a guard of {guard} elements is too large")))?;
        let mem = allocate(dev, n)?;
        // Fresh host memory is zeroed (and its untouched pages stay unallocated, so a huge zero
        // tensor costs only what is written); device memory starts undefined.
        let host = mem.host_ptr(0).is_some();
        for (lo, hi, fill) in [
            (0, offset, guard_fill),
            (offset, n - offset, body_fill),
            (n - offset, n, guard_fill),
        ] {
            if lo < hi && (fill != 0 || !host) {
                mem.fill(lo, hi, fill)?;
            }
        }
        Ok(Tensor {
            dev: dev.clone(),
            dtype,
            shape: shape.to_vec(),
            mem: Arc::new(mem),
            offset,
        })
    }

    /// A view over a caller's host memory on a host device (`cpu`, `sim`): `shape` elements of
    /// `dtype` at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `numel(shape) · dtype.size()` bytes, aligned
    /// to the dtype, and stay so until this tensor and every view made from it are dropped;
    /// nothing else may write those bytes while a launch that uses them runs.
    pub unsafe fn from_host_ptr(
        dev: &Device,
        ptr: *mut u8,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor, PortError> {
        if !matches!(dev.kind(), DeviceKind::Cpu | DeviceKind::Sim(_)) {
            return Err(other(format!(
                "{}: host memory can only back tensors of a host device (cpu, sim)",
                dev.name()
            )));
        }
        if ptr.is_null() || !(ptr as usize).is_multiple_of(dtype.size()) {
            return Err(other(format!(
                "host pointer {ptr:?} is null or not aligned to {}",
                dtype.name()
            )));
        }
        let bytes = checked_bytes(dtype, shape)?;
        // SAFETY: the caller's contract above.
        let mem = unsafe { Storage::host_borrowed(ptr, bytes) };
        Ok(Tensor::over(dev, mem, dtype, shape))
    }

    /// A view over device memory a caller allocated on a CUDA or HIP device: `shape` elements
    /// of `dtype` at device address `ptr` (a `CUdeviceptr` / `hipDeviceptr_t`). kiln never frees
    /// it.
    ///
    /// # Safety
    /// `ptr` must be an allocation (or part of one) of `dev`'s context, valid for
    /// `numel(shape) · dtype.size()` bytes, aligned to the dtype, and stay allocated until this
    /// tensor and every view made from it are dropped and the work that uses them has finished.
    pub unsafe fn from_device_ptr(
        dev: &Device,
        ptr: u64,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor, PortError> {
        let DeviceKind::Gpu(g) = dev.kind() else {
            return Err(other(format!("{} has no device memory", dev.name())));
        };
        if ptr == 0 || !ptr.is_multiple_of(dtype.size() as u64) {
            return Err(other(format!(
                "device pointer {ptr:#x} is null or not aligned to {}",
                dtype.name()
            )));
        }
        let bytes = checked_bytes(dtype, shape)?;
        // SAFETY: the caller's contract above.
        let mem = unsafe { g.borrow_raw(ptr, bytes)? };
        Ok(Tensor::over(dev, Storage::Gpu(mem), dtype, shape))
    }

    /// A tensor over the whole of `mem`.
    pub(crate) fn over(dev: &Device, mem: Storage, dtype: DType, shape: &[usize]) -> Tensor {
        Tensor {
            dev: dev.clone(),
            dtype,
            shape: shape.to_vec(),
            mem: Arc::new(mem),
            offset: 0,
        }
    }

    /// A tensor of `shape` elements of `dtype` at byte `offset` of a region others share.
    pub(crate) fn over_shared(
        dev: &Device,
        mem: Arc<Storage>,
        offset: usize,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor, PortError> {
        let len = mem.len();
        Tensor {
            dev: dev.clone(),
            dtype: DType::U8,
            shape: vec![len],
            mem,
            offset: 0,
        }
        .view_bytes(offset, dtype, shape)
    }

    /// A tensor of `shape` elements of `dtype` starting `offset` bytes into `mem`.
    #[cfg(feature = "wgpu")]
    pub(crate) fn over_at(
        dev: &Device,
        mem: Storage,
        offset: usize,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor, PortError> {
        Tensor::over_shared(dev, Arc::new(mem), offset, dtype, shape)
    }

    /// A view of `count = numel(shape)` elements starting at element `first` of this tensor,
    /// in the same dtype: a row range, a page of a pool, one layer of a stacked weight.
    pub fn view(&self, first: usize, shape: &[usize]) -> Result<Tensor, PortError> {
        let s = self.dtype.size();
        let at = first
            .checked_mul(s)
            .ok_or_else(|| other(format!("element {first} is out of range")))?;
        self.view_bytes(at, self.dtype, shape)
    }

    /// The same elements under another shape of the same element count.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor, PortError> {
        if checked_numel(shape) != Some(self.numel()) {
            return Err(PortError::ShapeMismatch {
                kernel: "Tensor::reshape",
                buffer: "shape",
                expected: self.shape.clone(),
                got: shape.to_vec(),
            });
        }
        self.view(0, shape)
    }

    /// A view of `shape` elements of `dtype` starting `byte_offset` bytes into this tensor's
    /// elements (aligned to `dtype`): reinterprets bytes, e.g. a packed quantized block as u32.
    pub fn view_bytes(
        &self,
        byte_offset: usize,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor, PortError> {
        let bytes = checked_bytes(dtype, shape)?;
        if !byte_offset.is_multiple_of(dtype.size())
            || byte_offset
                .checked_add(bytes)
                .is_none_or(|end| end > self.byte_len())
        {
            return Err(other(format!(
                "a view of {bytes} bytes of {} at byte {byte_offset} of a {}-byte tensor",
                dtype.name(),
                self.byte_len()
            )));
        }
        Ok(Tensor {
            dev: self.dev.clone(),
            dtype,
            shape: shape.to_vec(),
            mem: self.mem.clone(),
            offset: self.offset + byte_offset,
        })
    }

    /// Whether this tensor's bytes overlap `other`'s (views of one allocation, or one region).
    pub fn overlaps(&self, other: &Tensor) -> bool {
        let (a, b) = (self.offset, self.offset + self.byte_len());
        let (c, d) = (other.offset, other.offset + other.byte_len());
        self.mem.same(&other.mem) && a < d && c < b && a < b && c < d
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

    /// The device it lives on.
    pub fn device(&self) -> &Device {
        &self.dev
    }
    /// Its element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Its shape, row-major.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// Elements: the product of the shape.
    pub fn numel(&self) -> usize {
        // Every constructor checked that the shape's bytes fit a usize, so this cannot wrap.
        self.shape.iter().product()
    }
    /// Byte offset of element 0 inside the allocation or region the tensor views.
    pub fn byte_offset(&self) -> usize {
        self.offset
    }
    /// Bytes of its elements.
    pub fn byte_len(&self) -> usize {
        self.numel() * self.dtype.size()
    }

    fn read_range(&self, offset: usize, len: usize) -> Result<Vec<u8>, PortError> {
        let mut out = vec![0u8; len];
        self.mem.read(offset, &mut out)?;
        Ok(out)
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
        self.read_range(0, self.mem.len())
    }

    /// Bytes of the guard before the tensor.
    pub fn guard_bytes(&self) -> usize {
        self.offset
    }

    /// Writes the tensor's bytes (exactly [`Tensor::byte_len`] of them); returns once the
    /// device holds them, after the work queued before.
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
        self.write_at(at, bytes, false)
    }

    /// Writes `bytes` at byte `at` ordered after the work queued on the device, without waiting
    /// for it: the device keeps its own copy of `bytes` (kiln's uploads of host tables).
    pub(crate) fn enqueue_write_at(&self, at: usize, bytes: &[u8]) -> Result<(), PortError> {
        self.write_at(at, bytes, true)
    }

    fn write_at(&self, at: usize, bytes: &[u8], enqueued: bool) -> Result<(), PortError> {
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
        self.mem.write(self.offset + at, bytes, enqueued)
    }

    /// Writes `data` (exactly [`Tensor::numel`] elements of the tensor's dtype).
    pub fn write<T: Scalar>(&mut self, data: &[T]) -> Result<(), PortError> {
        self.check_dtype(T::DTYPE)?;
        // SAFETY: Scalar types are plain data.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data))
        };
        self.write_bytes(bytes)
    }

    /// Writes f32 values rounded to nearest even into a float tensor.
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

    /// The elements, after the work queued before the read (`T` must be the dtype).
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
            Err(PortError::DtypeMismatch {
                kernel: "Tensor",
                buffer: "elements",
                expected: self.dtype,
                got: want,
            })
        }
    }

    /// Pointer to element 0 for a host-memory launch (`None` for device memory). Host
    /// launches only write through buffers the caller passed as outputs (`Arg::Out`).
    pub(crate) fn host_ptr(&self) -> Option<*mut u8> {
        self.mem.host_ptr(self.offset)
    }

    /// The buffer of a GPU launch (`None` for host memory).
    pub(crate) fn gpu_buf(&self) -> Option<GpuBuf<'_>> {
        self.mem.gpu().map(|mem| GpuBuf {
            mem,
            offset: self.offset,
            len: self.numel(),
            dtype: self.dtype,
        })
    }
}

/// Bytes of `shape` elements of `dtype`, or an error when that overflows.
fn checked_bytes(dtype: DType, shape: &[usize]) -> Result<usize, PortError> {
    shape
        .iter()
        .try_fold(dtype.size(), |n, &d| n.checked_mul(d))
        .ok_or_else(|| other(format!("tensor of shape {shape:?} is too large")))
}
