//! The rocm port tables and kernarg ABI on stand-in devices (no AMD GPU is needed). Above the
//! backends: it selects ports through the table.

use crate::gpu::{DeviceMemory, GpuDevice, GpuLaunch};
use crate::port::{Port, PortLaunch};
use crate::ports::{ports, select_port};
use crate::rocm::artifacts::{base_arch, kernarg_bytes};
use crate::rocm::{kernarg_layout, Artifact, ARTIFACTS};
use crate::Backend;
use crate::{Device, DeviceError, PortError};
use kiln_math::{DType, KernelId};
use std::any::Any;
use std::sync::Arc;

/// A device that reports an arch and a wavefront width and runs nothing.
#[derive(Debug)]
struct StandIn {
    arch: Option<&'static str>,
    wave: u32,
}

impl GpuDevice for StandIn {
    fn backend(&self) -> Backend {
        Backend::Rocm
    }
    fn name(&self) -> String {
        format!("stand-in {:?} wave{}", self.arch, self.wave)
    }
    fn wave(&self) -> u32 {
        self.wave
    }
    fn target(&self) -> Option<String> {
        self.arch.map(str::to_string)
    }
    fn ordinal(&self) -> usize {
        0
    }
    fn alloc(&self, _: usize) -> Result<Box<dyn DeviceMemory>, DeviceError> {
        Err(DeviceError::Other("stand-in".into()))
    }
    fn launch(&self, _: &Port, _: &GpuLaunch) -> Result<(), DeviceError> {
        Err(DeviceError::Other("stand-in".into()))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn device(arch: Option<&'static str>, wave: u32) -> Device {
    Device::from_gpu(Arc::new(StandIn { arch, wave }))
}

#[test]
fn the_device_arch_picks_its_code_object() {
    for a in ARTIFACTS {
        let dev = device(Some(a.arch), a.wave);
        for &kernel in KernelId::ALL {
            for &dtype in kernel.dtypes() {
                let p = select_port(ports(kernel), &dev, dtype).expect("a port");
                assert_eq!(p.target, Some(a.arch));
                assert_eq!(p.wave, Some(a.wave));
                assert_eq!(p.dtype, dtype);
                assert!(
                    matches!(&p.launch, PortLaunch::Artifact { symbol } if Some(*symbol) == kernel.symbol(dtype))
                );
                assert!(p.artifact.as_deref().unwrap().contains(a.arch));
            }
        }
    }
}

#[test]
fn a_device_of_another_width_is_refused_with_wave_mismatch() {
    // gfx1151 built wave32; the same chip in wave64 mode must not run it.
    let dev = device(Some("gfx1151"), 64);
    let e = select_port(ports(KernelId::ALL[0]), &dev, DType::F32).unwrap_err();
    assert_eq!(
        e,
        PortError::WaveMismatch {
            kernel: KernelId::ALL[0].name(),
            built: 32,
            device: 64
        }
    );
    assert!(e.is_fallback());
}

#[test]
fn an_arch_without_a_code_object_has_no_port() {
    let dev = device(Some("gfx1100"), 32);
    match select_port(ports(KernelId::ALL[0]), &dev, DType::F32) {
        Err(PortError::NoPort { reason, .. }) => {
            assert!(
                reason.contains("gfx1100") && reason.contains("gfx1151"),
                "{reason}"
            )
        }
        other => panic!("expected NoPort, got {other:?}"),
    }
}

#[test]
fn a_device_of_unknown_arch_gets_the_artifact_of_its_width() {
    for a in ARTIFACTS {
        let p = select_port(ports(KernelId::ALL[0]), &device(None, a.wave), DType::F32).unwrap();
        assert_eq!(p.wave, Some(a.wave));
    }
    let e = select_port(ports(KernelId::ALL[0]), &device(None, 16), DType::F32).unwrap_err();
    assert!(
        matches!(e, PortError::WaveMismatch { device: 16, .. }),
        "{e}"
    );
}

#[test]
fn kernarg_bytes_follow_the_layout() {
    let kernel = KernelId::ALL[0];
    let l = kernarg_layout(kernel);
    let words: Vec<u32> = (0..kernel.params().len() as u32)
        .map(|k| 0xA0 + k)
        .collect();
    let bufs: Vec<(u64, u64)> = (0..kernel.buffers().len() as u64)
        .map(|k| (0x1000_0000 + k * 0x100, 7 + k))
        .collect();
    let bytes = kernarg_bytes(kernel, &words, &bufs);
    assert_eq!(bytes.len(), l.size);
    for (k, w) in words.iter().enumerate() {
        assert_eq!(&bytes[4 * k..4 * k + 4], &w.to_le_bytes());
    }
    for (&(p, n), &(po, no)) in bufs.iter().zip(&l.buffers) {
        assert_eq!(po % 8, 0);
        assert_eq!(no, po + 8);
        assert!(po >= l.params_bytes);
        assert_eq!(&bytes[po..po + 8], &p.to_le_bytes());
        assert_eq!(&bytes[no..no + 8], &n.to_le_bytes());
    }
}

#[test]
fn gcn_arch_names_lose_their_feature_suffixes() {
    assert_eq!(base_arch("gfx90a:sramecc+:xnack-"), "gfx90a");
    assert_eq!(base_arch("gfx1151"), "gfx1151");
}

#[test]
fn an_entry_missing_from_the_code_objects_gives_no_port() {
    for a in ARTIFACTS {
        let kernel = KernelId::ALL[0];
        let c = a.code_object(kernel).expect("a code object per kernel");
        let real = kernel.symbol(kernel.dtypes()[0]).unwrap();
        assert!(crate::rocm::has_entry(c, real), "{} lacks {real}", a.arch);
        // A prefix of a real symbol is not an entry of its own.
        assert!(!crate::rocm::has_entry(c, &real[..real.len() - 1]));
        assert!(!crate::rocm::has_entry(c, "no_such_kernel_f32"));
        // Another kernel's code object does not hold this kernel's entries.
        let other = a
            .code_object(KernelId::ALL[1])
            .expect("a code object per kernel");
        assert!(!crate::rocm::has_entry(other, real), "{}", a.arch);
    }
}

#[test]
fn a_code_object_without_an_entry_makes_the_kernel_absent_with_the_reason() {
    let kernel = KernelId::ALL[0];
    let real = kernel.symbol(kernel.dtypes()[0]).unwrap();
    // gfx942's code object of another kernel stands in for a stale one lacking `real`.
    let stale = |a: &Artifact| {
        let k = if a.arch == "gfx942" {
            KernelId::ALL[1]
        } else {
            kernel
        };
        a.code_object(k)
    };
    let missing = crate::rocm::missing_entries_in(kernel, ARTIFACTS, stale);
    assert!(
        missing.contains(&format!("the gfx942 code object has no entry {real}")),
        "{missing:?}"
    );
    assert!(
        missing.iter().all(|m| !m.contains("gfx1151")),
        "{missing:?}"
    );
    let absent = |why: &str| crate::port::Slot::Absent(why.into());
    let table = crate::ports::KernelPorts {
        kernel,
        cpu: absent("test"),
        sim: absent("test"),
        cuda: absent("test"),
        rocm: crate::rocm::slot_from(kernel, missing),
        wgpu: absent("test"),
    };
    match select_port(&table, &device(Some("gfx942"), 64), kernel.dtypes()[0]) {
        Err(PortError::NoPort { reason, .. }) => assert!(
            reason.contains(&format!("the gfx942 code object has no entry {real}")),
            "{reason}"
        ),
        other => panic!("expected NoPort, got {other:?}"),
    }
    // The same kernel with every entry present has its ports.
    let missing = crate::rocm::missing_entries_in(kernel, ARTIFACTS, |a| a.code_object(kernel));
    assert!(missing.is_empty(), "{missing:?}");
    assert!(matches!(
        crate::rocm::slot_from(kernel, missing),
        crate::port::Slot::Present(_)
    ));
}
