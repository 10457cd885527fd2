//! Parsers for the list-valued flags the subcommands share.

use kiln::Backend;

/// Parses `cpu,sim,cuda`.
pub(crate) fn parse_backends(s: &str) -> anyhow::Result<Vec<Backend>> {
    s.split(',')
        .map(|b| {
            Backend::parse(b.trim()).ok_or_else(|| {
                anyhow::anyhow!("unknown backend `{b}` (cpu, sim, cuda, rocm, wgpu)")
            })
        })
        .collect()
}

/// Comma-separated kernel names; `None` means every kernel.
pub(crate) fn parse_kernels(s: Option<&str>) -> anyhow::Result<Vec<kiln::KernelId>> {
    let Some(s) = s else {
        return Ok(kiln::KernelId::ALL.to_vec());
    };
    s.split(',')
        .map(|k| {
            kiln::KernelId::from_name(k.trim())
                .ok_or_else(|| anyhow::anyhow!("unknown kernel `{k}`"))
        })
        .collect()
}
