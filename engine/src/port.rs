//! Port data: one compiled (or host-instantiated) kernel × dtype of a backend, and a backend's
//! slot of a kernel (its ports, or why it has none). Backends build these; the table above
//! them collects them.

use crate::host::HostEntry;
use crate::Backend;
use kiln_math::{DType, KernelId};

/// One compiled (or host-instantiated) kernel × dtype for one backend.
#[derive(Debug)]
pub struct Port {
    /// The kernel it runs.
    pub kernel: KernelId,
    /// The instantiation's element type `T`.
    pub dtype: DType,
    /// The backend it belongs to.
    pub backend: Backend,
    /// The wave width the port was built for; `None` when it runs at the device's width.
    pub wave: Option<u32>,
    /// The device target the artifact was built for (an AMD arch such as `gfx1151`); `None`
    /// when any device of the backend runs it.
    pub target: Option<&'static str>,
    /// What the port runs, for `kiln ports` (e.g. `gfx1151 code object V5 (wave32)`); `None` for
    /// host instantiations.
    pub artifact: Option<String>,
    pub(crate) launch: PortLaunch,
}

#[derive(Debug)]
#[allow(dead_code)] // `Artifact` is constructed by the GPU backends' slots
pub(crate) enum PortLaunch {
    /// A host instantiation of the body (cpu, sim).
    Host(HostEntry),
    /// An entry of a compiled artifact (PTX, code object, WGSL module), by symbol.
    Artifact { symbol: &'static str },
}

/// A backend's ports of one kernel, or why it has none.
#[derive(Debug)]
pub enum Slot {
    /// The backend's ports of the kernel, one per dtype (several per dtype where artifacts
    /// differ by wave or target).
    Present(Vec<Port>),
    /// Why the backend has no ports of the kernel (not built, no artifact, feature off).
    Absent(String),
}
