//! The scratch region ops take their temporaries from (sampler partials, v2 partials, uploaded
//! host tables): one region per device, grown to the largest request and then reused, so a
//! warm decode step allocates nothing and can be captured into a graph.

use crate::storage::Storage;
use crate::tensor::allocate;
use crate::{Device, PortError, Tensor};
use kiln_math::{DType, Scalar};
use std::sync::{Arc, MutexGuard};

/// Alignment of each piece: wgpu's storage-binding offset alignment, which covers every dtype
/// and the 128-byte lines GPUs load.
pub(crate) const SCRATCH_ALIGN: usize = 256;

/// Bytes of scratch that pieces of these `(dtype, elements)` take, aligned as they are carved.
pub fn scratch_bytes(pieces: &[(DType, usize)]) -> usize {
    pieces
        .iter()
        .map(|&(d, n)| (d.size() * n).max(1).next_multiple_of(SCRATCH_ALIGN))
        .sum()
}

/// The device's scratch region, held for one op: pieces are carved from its start. Holding it
/// keeps another thread's op from reusing the bytes before this op's launches are enqueued;
/// after that, the device's queue order keeps them apart.
pub(crate) struct Scratch<'d> {
    dev: &'d Device,
    _held: MutexGuard<'d, Option<Arc<Storage>>>,
    region: Arc<Storage>,
    cursor: usize,
}

impl Device {
    /// Makes the scratch region at least `bytes` (rounded up to its alignment) before a graph
    /// capture or a latency-critical loop; ops grow it on first use otherwise.
    pub fn reserve_scratch(&self, bytes: usize) -> Result<(), PortError> {
        self.scratch(bytes).map(|_| ())
    }

    /// The scratch region, grown to at least `bytes` (a capture in progress refuses to grow it:
    /// the graph would keep the freed region's address).
    pub(crate) fn scratch(&self, bytes: usize) -> Result<Scratch<'_>, PortError> {
        let mut held = self
            .scratch_slot()
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let fits = held.as_ref().is_some_and(|r| r.len() >= bytes);
        if !fits {
            let grow = bytes
                .max(held.as_ref().map_or(0, |r| 2 * r.len()))
                .next_multiple_of(SCRATCH_ALIGN);
            if self.is_capturing() {
                return Err(PortError::Device(crate::DeviceError::Other(format!(
                    "{}: the scratch region has {} bytes and an op needs {bytes} while a graph \
                     is being captured; call reserve_scratch({bytes}) or run the step once \
                     before capturing",
                    self.name(),
                    held.as_ref().map_or(0, |r| r.len())
                ))));
            }
            // Drop the old region first so its memory is free for the new one.
            *held = None;
            *held = Some(Arc::new(allocate(self, grow)?));
        }
        let region = held.as_ref().expect("sized above").clone();
        Ok(Scratch {
            dev: self,
            _held: held,
            region,
            cursor: 0,
        })
    }
}

impl Scratch<'_> {
    /// The next piece: `shape` elements of `dtype`, contents undefined.
    pub(crate) fn tensor(&mut self, dtype: DType, shape: &[usize]) -> Result<Tensor, PortError> {
        let n: usize = shape.iter().product();
        let take = scratch_bytes(&[(dtype, n)]);
        let t = Tensor::over_shared(self.dev, self.region.clone(), self.cursor, dtype, shape)?;
        self.cursor += take;
        Ok(t)
    }

    /// The next piece holding `data` (a host table), its upload enqueued in order with the
    /// launches that read it.
    pub(crate) fn upload<T: Scalar>(&mut self, data: &[T]) -> Result<Tensor, PortError> {
        let t = self.tensor(T::DTYPE, &[data.len()])?;
        // SAFETY: Scalar types are plain data.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data))
        };
        t.enqueue_write_at(0, bytes)?;
        Ok(t)
    }
}
