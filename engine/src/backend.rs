//! The backends kiln knows.

use std::fmt;

/// A kind of device kiln launches on; each has its own port slot per kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// The kernel body on the host, one thread per block, blocks spread over cores.
    Cpu,
    /// The kernel body under the SIMT emulator: one OS thread per lane, any wave size.
    Sim,
    /// NVIDIA GPUs through the CUDA driver API, running the committed PTX.
    Cuda,
    /// AMD GPUs through HIP, running the committed code objects.
    Rocm,
    /// Vulkan, Metal or DX12 through wgpu, running WGSL translated from kiln-math.
    Wgpu,
}

impl Backend {
    /// Every backend, in slot order.
    pub const ALL: [Backend; 5] = [
        Backend::Cpu,
        Backend::Sim,
        Backend::Cuda,
        Backend::Rocm,
        Backend::Wgpu,
    ];

    /// The lowercase name used by the CLI and reports (`"cuda"`).
    pub const fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Sim => "sim",
            Backend::Cuda => "cuda",
            Backend::Rocm => "rocm",
            Backend::Wgpu => "wgpu",
        }
    }

    /// The backend of a [`name`](Backend::name); `None` for any other string.
    pub fn parse(s: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == s)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
