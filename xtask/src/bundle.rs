//! `cargo xtask device-bundle`: placeholder, filled in below.

pub fn device_bundle() -> Result<(), String> {
    Err("not implemented".into())
}
