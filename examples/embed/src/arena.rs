//! The engine's own memory: one allocation per run, carved into its weights, KV pool and
//! activations. kiln sees views over it and never allocates or frees it.

use kiln::{DType, Device, PortError, Tensor};

/// One engine-owned allocation on the device's memory.
pub enum Arena {
    /// Host memory for the cpu and sim backends.
    Host(Vec<u64>),
    /// A CUDA allocation the engine made with the driver, on the stream kiln enqueues on.
    #[cfg(feature = "cuda")]
    Cuda {
        /// The device address.
        ptr: u64,
        /// The engine's stream (copies of its own go there too).
        stream: std::sync::Arc<kiln::cuda_api::CudaStream>,
    },
    /// A wgpu buffer of the engine's device, and its queue.
    #[cfg(feature = "wgpu")]
    Wgpu {
        /// The buffer.
        buffer: kiln::wgpu::api::Buffer,
        /// The engine's device, for its own copies.
        device: kiln::wgpu::api::Device,
        /// The engine's queue.
        queue: kiln::wgpu::api::Queue,
    },
}

/// The arena wrapped once as bytes; every buffer of the engine is a view of it.
pub struct ArenaView {
    /// The engine's allocation (kept alive for the views).
    pub arena: Arena,
    /// The whole arena as a u8 tensor.
    pub bytes: Tensor,
    cursor: usize,
}

impl ArenaView {
    /// Wraps `arena` of `len` bytes for `dev`.
    pub fn new(dev: &Device, arena: Arena, len: usize) -> Result<ArenaView, PortError> {
        let bytes = match &arena {
            // SAFETY: the Vec lives in the returned ArenaView, as long as every view of it.
            Arena::Host(words) => unsafe {
                Tensor::from_host_ptr(dev, words.as_ptr() as *mut u8, DType::U8, &[len])?
            },
            // SAFETY: the engine's allocation of `len` bytes, freed only when the view is dropped.
            #[cfg(feature = "cuda")]
            Arena::Cuda { ptr, .. } => unsafe {
                Tensor::from_device_ptr(dev, *ptr, DType::U8, &[len])?
            },
            #[cfg(feature = "wgpu")]
            Arena::Wgpu { buffer, .. } => {
                Tensor::from_wgpu_buffer(dev, buffer.clone(), 0, DType::U8, &[len])?
            }
        };
        Ok(ArenaView {
            arena,
            bytes,
            cursor: 0,
        })
    }

    /// The next buffer: `shape` elements of `dtype`, 256-byte aligned.
    pub fn take(&mut self, dtype: DType, shape: &[usize]) -> Result<Tensor, PortError> {
        let at = self.cursor.next_multiple_of(256);
        let t = self.bytes.view_bytes(at, dtype, shape)?;
        self.cursor = at + t.byte_len();
        Ok(t)
    }

    /// Where `t` (a view of this arena) starts in it, in bytes.
    fn offset_of(&self, t: &Tensor) -> usize {
        t.byte_offset() - self.bytes.byte_offset()
    }
}

/// Copies `src` (a view of arena `from`) into `dst` (a view of another arena `to`, same byte
/// length) with the engine's own means, in order with kiln's launches: on CUDA a device copy on
/// the stream (captured into a graph with them), on wgpu a copy on the engine's queue.
pub fn copy(from: &ArenaView, src: &Tensor, to: &ArenaView, dst: &Tensor) -> Result<(), String> {
    let (s, d, n) = (from.offset_of(src), to.offset_of(dst), src.byte_len());
    match (&from.arena, &to.arena) {
        (Arena::Host(a), Arena::Host(b)) => {
            // SAFETY: both ranges lie inside their arenas (they are views of them).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (a.as_ptr() as *const u8).add(s),
                    (b.as_ptr() as *mut u8).add(d),
                    n,
                )
            };
            Ok(())
        }
        #[cfg(feature = "cuda")]
        (Arena::Cuda { ptr: a, stream }, Arena::Cuda { ptr: b, .. }) => {
            use kiln::cuda_api::result;
            // SAFETY: both ranges lie inside the engine's allocations.
            unsafe { result::memcpy_dtod_async(b + d as u64, a + s as u64, n, stream.cu_stream()) }
                .map_err(|e| format!("cuMemcpyDtoDAsync: {e:?}"))
        }
        #[cfg(feature = "wgpu")]
        (
            Arena::Wgpu {
                buffer: a,
                device,
                queue,
            },
            Arena::Wgpu { buffer: b, .. },
        ) => {
            let mut enc = device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(a, s as u64, b, d as u64, n as u64);
            queue.submit([enc.finish()]);
            Ok(())
        }
        #[allow(unreachable_patterns)]
        _ => Err("the arenas live on different backends".into()),
    }
}
