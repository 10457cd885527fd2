//! `kiln ports`.

use kiln::ports::{all_ports, select_port};
use kiln::Slot;
use kiln::{Backend, Device};
use serde_json::json;

pub fn print(as_json: bool) -> anyhow::Result<()> {
    // One device per backend that opens here: reachability is `select_port` on it.
    let devices: Vec<(Backend, Option<Device>)> = Backend::ALL
        .into_iter()
        .map(|b| (b, Device::open(b).ok()))
        .collect();
    let mut rows = Vec::new();
    for t in all_ports() {
        for &dtype in t.kernel.dtypes() {
            for (backend, dev) in &devices {
                let (present, wave, mut reason) = match t.slot(*backend) {
                    Slot::Absent(why) => (false, None, Some(why.clone())),
                    Slot::Present(ports) => match ports.iter().find(|p| p.dtype == dtype) {
                        Some(p) => (true, p.wave, None),
                        None => (false, None, Some(format!("no {} instance", dtype.name()))),
                    },
                };
                let reachable = match dev {
                    Some(d) => match select_port(t, d, dtype) {
                        Ok(_) => true,
                        Err(e) => {
                            if present {
                                reason = Some(e.to_string());
                            }
                            false
                        }
                    },
                    None => {
                        if present {
                            reason = kiln::unavailable_reason(*backend);
                        }
                        false
                    }
                };
                rows.push((
                    t.kernel.name(),
                    dtype.name(),
                    backend.name(),
                    present,
                    reachable,
                    wave,
                    reason,
                ));
            }
        }
    }
    if as_json {
        let v: Vec<_> = rows
            .iter()
            .map(|(k, d, b, present, reachable, wave, reason)| {
                json!({"kernel": k, "dtype": d, "backend": b, "present": present, "reachable": reachable, "wave": wave, "reason": reason})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "{:<24} {:<5} {:<5} {:<8} {:<10} {:<5} reason",
            "kernel", "dtype", "backend", "present", "reachable", "wave"
        );
        for (k, d, b, present, reachable, wave, reason) in rows {
            let wave = wave.map_or("any".to_string(), |w| w.to_string());
            let reason = reason.unwrap_or_default();
            println!("{k:<24} {d:<5} {b:<7} {present:<8} {reachable:<10} {wave:<5} {reason}");
        }
    }
    Ok(())
}
