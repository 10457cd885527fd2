//! The backends kiln knows.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// The kernel body on the host, one thread per block, blocks spread over cores.
    Cpu,
    /// The kernel body under the SIMT emulator: one OS thread per lane, any wave size.
    Sim,
    Cuda,
    Rocm,
    Wgpu,
}

impl Backend {
    pub const ALL: [Backend; 5] = [
        Backend::Cpu,
        Backend::Sim,
        Backend::Cuda,
        Backend::Rocm,
        Backend::Wgpu,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Sim => "sim",
            Backend::Cuda => "cuda",
            Backend::Rocm => "rocm",
            Backend::Wgpu => "wgpu",
        }
    }

    pub fn parse(s: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == s)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
