//! Running a kernel body that is not in the kernel list on the host backends — the sim as the
//! kernel author's debugger. Write the body against `Block` and views, wrap it in a [`Body`],
//! and run it on `Device::sim(w)` at several waves before adding it to the list:
//!
//! ```
//! use kiln::debug::{run_body, Body, Views};
//! use kiln::math::{Block, Dst, Src};
//! use kiln::{Device, Tensor};
//!
//! struct Double;
//! impl Body for Double {
//!     fn run<B: Block>(&self, b: &B, v: &Views) {
//!         let (x, y): (Src<f32>, Dst<f32>) = (v.get(0), v.get(1));
//!         let i = (b.block_x() * b.size() + b.thread()) as usize;
//!         if i < x.len() {
//!             y.set(i, 2.0 * x.get(i));
//!         }
//!     }
//! }
//!
//! let dev = Device::sim(8).unwrap();
//! let x = Tensor::from_slice(&dev, &[64], &[1.0f32; 64]).unwrap();
//! let mut y = Tensor::zeros(&dev, kiln::DType::F32, &[64]).unwrap();
//! run_body(&dev, "double", &Double, [4, 1, 1], 16, 0, &mut [("x", &mut { x }), ("y", &mut y)]).unwrap();
//! assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0; 64]);
//! ```

use crate::cpu::CpuViews;
use crate::host::{HostBuf, HostLaunch, ViewSource};
use crate::sim::SimViews;
use crate::{DeviceError, DeviceKind, PortError, Tensor};
use kiln_math::{shared_bytes_total, Block, DType, View};

/// A kernel body runnable by [`run_body`].
pub trait Body: Sync {
    /// The body of one thread of block `b`; `views` holds the buffers in the order given.
    fn run<B: Block>(&self, b: &B, views: &Views<'_>);
}

enum Source<'a> {
    Cpu(&'a CpuViews<'a>),
    Sim(&'a SimViews<'a>),
}

/// The launch's buffers, in the order given to [`run_body`].
pub struct Views<'a> {
    source: Source<'a>,
    dtypes: &'a [DType],
}

impl Views<'_> {
    /// Buffer `k` as a view; traps (a `KernelFault`) if the view's element type is not the
    /// tensor's dtype.
    pub fn get<V: View>(&self, k: usize) -> V {
        assert!(
            self.dtypes.get(k) == Some(&V::DTYPE),
            "kiln: buffer {k} viewed as {} but the tensor is {:?}",
            V::DTYPE.name(),
            self.dtypes.get(k)
        );
        match self.source {
            Source::Cpu(s) => s.view(k),
            Source::Sim(s) => s.view(k),
        }
    }
}

/// Runs `body` over `grid` blocks of `block` threads (the cpu backend always runs blocks of one
/// thread) with `shared` bytes of kernel shared memory, on a host device.
pub fn run_body<K: Body>(
    dev: &crate::Device,
    name: &'static str,
    body: &K,
    grid: [u32; 3],
    block: u32,
    shared: usize,
    buffers: &mut [(&'static str, &mut Tensor)],
) -> Result<(), PortError> {
    let refuse = |detail: String| {
        PortError::Device(DeviceError::Launch {
            kernel: name,
            detail,
        })
    };
    if grid.contains(&0) {
        return Err(refuse(format!("empty grid {grid:?}")));
    }
    let names: Vec<&'static str> = buffers.iter().map(|(n, _)| *n).collect();
    let dtypes: Vec<DType> = buffers.iter().map(|(_, t)| t.dtype()).collect();
    let mut bufs = Vec::with_capacity(buffers.len());
    for (n, t) in buffers.iter() {
        let ptr = t
            .host_ptr()
            .ok_or_else(|| refuse(format!("`{n}` is not in host memory")))?;
        bufs.push(HostBuf {
            ptr,
            len: t.numel(),
        });
    }
    let wave = dev.wave();
    let (block, sim) = match dev.kind() {
        DeviceKind::Cpu => (1, None),
        DeviceKind::Sim(cfg) => (block, Some(cfg)),
        DeviceKind::Gpu(_) => {
            return Err(refuse("run_body runs on the cpu and sim backends".into()))
        }
    };
    let l = HostLaunch {
        kernel: name,
        buffer_names: &names,
        params: &[],
        bufs: &bufs,
        grid,
        block,
        wave,
        shared: shared_bytes_total(block, wave, shared),
        sim,
    };
    let dtypes = &dtypes;
    macro_rules! at_wave {
        (; $($w:literal),*) => {
            match (sim, wave) {
                (None, _) => crate::cpu::run(&l, |b, s| body.run(b, &Views { source: Source::Cpu(s), dtypes })),
                $((Some(_), $w) => crate::sim::run::<$w, _>(&l, |b, s| {
                    body.run(b, &Views { source: Source::Sim(s), dtypes })
                }),)*
                (Some(_), w) => Err(DeviceError::Launch { kernel: name, detail: format!("the sim has no wave {w}") }),
            }
        };
    }
    kiln_math::for_each_wave!(at_wave)?;
    Ok(())
}
