//! The rocm backend where there is no AMD GPU: `kiln devices` reports the runtime's absence (or
//! a runtime without a device) in one clean line, and the runtime search covers the documented
//! places in order.

use kiln::rocm::hip::{runtime_candidates, SONAMES};
use kiln::{Backend, Device};

#[test]
fn rocm_absence_is_reported_cleanly_and_the_search_covers_every_place() {
    let report = kiln::devices()
        .into_iter()
        .find(|d| d.backend == Backend::Rocm)
        .expect("devices() lists rocm");
    eprintln!("rocm: available {} — {}", report.available, report.detail);
    if report.available {
        // A real AMD GPU: its width is the one the runtime reports.
        assert!(matches!(report.wave, Some(32 | 64)), "{report:?}");
    } else {
        let no_runtime = format!("no HIP runtime (tried {} paths", runtime_candidates().len());
        assert!(
            report.detail.starts_with(&no_runtime) || report.detail.contains("but no AMD GPU"),
            "unexpected rocm detail: {}",
            report.detail
        );
        assert!(report.wave.is_none());
        // Opening it is a typed error, not a panic; launches then take the fallback.
        let e = Device::open(Backend::Rocm).unwrap_err();
        assert!(e.to_string().contains(&report.detail), "{e}");
    }

    // The search order: $HIP_PATH/lib, $ROCM_PATH/lib, /opt/rocm/lib, then the bare sonames.
    std::env::set_var("HIP_PATH", "/hip-path");
    std::env::set_var("ROCM_PATH", "/rocm-path");
    let want: Vec<String> = ["/hip-path/lib/", "/rocm-path/lib/", "/opt/rocm/lib/", ""]
        .iter()
        .flat_map(|dir| SONAMES.iter().map(move |n| format!("{dir}{n}")))
        .collect();
    assert_eq!(runtime_candidates(), want);
    assert_eq!(
        SONAMES,
        [
            "libamdhip64.so",
            "libamdhip64.so.7",
            "libamdhip64.so.6",
            "libamdhip64.so.5"
        ]
    );
}

/// With a HIP runtime but no AMD GPU (`KILN_TEST_HIP_PATH` names a ROCm install, e.g. Debian's
/// ROCm 5.2 packages extracted as docs/rocm.md shows): the report says the runtime was found and
/// that there is no GPU. Runs in a child process, since the runtime is loaded once per process.
#[test]
fn a_runtime_without_a_gpu_is_reported_as_such() {
    let Some(hip_path) = std::env::var_os("KILN_TEST_HIP_PATH") else {
        eprintln!("skipped: KILN_TEST_HIP_PATH is not set (no HIP runtime to load)");
        return;
    };
    let lib = std::path::Path::new(&hip_path).join("lib");
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "rocm_report_in_this_process",
            "--ignored",
            "--nocapture",
        ])
        .env("HIP_PATH", &hip_path)
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .expect("run the child test");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("rocm report: "))
        .unwrap_or_else(|| panic!("no report in:\n{text}"));
    eprintln!("{line}");
    assert!(
        line.contains("HIP runtime ") && line.contains(" found, but no AMD GPU"),
        "{line}"
    );
}

/// The child of the test above: prints this process's rocm report.
#[test]
#[ignore = "run by a_runtime_without_a_gpu_is_reported_as_such in a child process"]
fn rocm_report_in_this_process() {
    let r = kiln::devices()
        .into_iter()
        .find(|d| d.backend == Backend::Rocm)
        .expect("devices() lists rocm");
    println!("rocm report: available {} {}", r.available, r.detail);
}

/// What `kiln ports` lists for rocm: every kernel × dtype once per embedded code object, with
/// the object's arch and wavefront width.
#[test]
fn rocm_ports_cover_every_kernel_dtype_and_arch() {
    for &kernel in kiln::KernelId::ALL {
        let kiln::Slot::Present(ports) = &kiln::ports::ports(kernel).rocm else {
            panic!("{}: no rocm slot", kernel.name());
        };
        let mut want = Vec::new();
        for a in kiln::rocm::ARTIFACTS {
            for &d in kernel.dtypes() {
                want.push((
                    d,
                    Some(a.arch),
                    Some(a.wave),
                    format!(
                        "{} code object V{} (wave{})",
                        a.arch, a.code_object_version, a.wave
                    ),
                ));
            }
        }
        let got: Vec<_> = ports
            .iter()
            .map(|p| {
                (
                    p.dtype,
                    p.target,
                    p.wave,
                    p.artifact.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(got, want, "{}", kernel.name());
    }
}
