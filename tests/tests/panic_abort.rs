//! Kernel faults without unwinding: `tests/panic-abort` is built with `panic = "abort"` (the
//! workspace's `panic-abort` profile) and run; every planted bug on the cpu and sim must come
//! back as its typed error, one line per launch, with no panic message (a panic would abort it).

use std::path::Path;
use std::process::Command;

#[test]
fn faults_races_and_divergence_are_typed_errors_when_panics_abort() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // Its own target dir: the outer cargo may hold the lock of the one running this test.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("panic-abort");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let built = Command::new(cargo)
        .current_dir(root)
        .args([
            "build",
            "--profile",
            "panic-abort",
            "-p",
            "kiln-panic-abort",
        ])
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(built.success(), "building tests/panic-abort failed");
    let exe = target
        .join("panic-abort")
        .join(format!("kiln-panic-abort{}", std::env::consts::EXE_SUFFIX));
    let ran = Command::new(&exe).output().expect("the check runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr),
    );
    eprintln!("{stdout}{stderr}");
    assert!(ran.status.success(), "{}: {}", exe.display(), ran.status);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 11, "one line per check");
    assert!(lines.iter().all(|l| l.starts_with("ok ")), "{stdout}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for (check, says) in [
        ("sim out of bounds", "out of bounds (len 64) of buffer `x`"),
        (
            "cpu out of bounds",
            "view index 64 out of bounds (len 64) of buffer `x`",
        ),
        ("sim read race", "shared memory byte"),
    ] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("ok {check}:")));
        assert!(line.is_some_and(|l| l.contains(says)), "{check}: {stdout}");
    }
}
