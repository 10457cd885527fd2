//! A decode bench run as text (the summary, the ranked kernel profile, memory) and as a CSV
//! row with the seeds' columns (spec §16.1) followed by kiln's own.

use super::{ActDtype, DecodeBenchReport};
use std::fmt::Write as _;

/// What a row says beyond the run itself: where and with what it ran.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    /// The commit the binary was built from (`unknown` when not found).
    pub commit: String,
    /// Copy bandwidth measured in the same process, GB/s (read + write bytes), when measured.
    pub copy_gbps: Option<f64>,
    /// The seed of the weights and prompt.
    pub seed: u64,
}

/// The CSV header: spec §16.1's columns (`kiln_version` and `kiln_commit` where the seeds
/// name their engine), then kiln's.
pub const CSV_HEADER: &str = "model,model_path,prompt_tokens,generated_tokens,prefill_ms,\
prefill_tok_s,decode_ms,decode_tok_s,date,hardware,kiln_version,build_type,max_tokens,prompt,\
prompt_target_len,kiln_commit,backend,decode_path,layers,batch,gpu_ms_per_step,\
host_gap_ms_per_step,eager_decode_tok_s,eager_host_gap_ms_per_step,graph_record_ms,\
peak_bytes,weights_bytes,kv_bytes,workspace_bytes,memory_bound_bytes,bytes_per_step,\
roofline_pct";

/// Today's date in UTC as `YYYY-MM-DD`.
pub fn utc_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date((secs / 86_400) as i64)
}

/// The proleptic Gregorian date `days` after 1970-01-01.
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

impl DecodeBenchReport {
    /// The model column: the shape's name, with the layer count when fewer layers ran, the
    /// batch when above 1 and the activation dtype when not f32 (so a compare, which pairs rows
    /// by model, never pairs a cut-down, batched or bf16 run with a whole batch-1 f32 one, and
    /// rows written before the activation dtype existed, all f32, keep their labels).
    pub fn model_label(&self, full_layers: usize) -> String {
        let mut label = self.model.to_string();
        if self.layers != full_layers {
            label += &format!("-{}L", self.layers);
        }
        if self.batch > 1 {
            label += &format!("-b{}", self.batch);
        }
        if self.act != ActDtype::F32 {
            label += &format!("-{}", self.act);
        }
        label
    }

    /// Decode tokens per second of the fastest loop (of every sequence together).
    pub fn decode_tok_s(&self) -> f64 {
        let l = self.best();
        l.tokens.len() as f64 / l.seconds
    }

    /// Percent of the weight-read roofline: bytes a step must read ÷ copy bandwidth, over the
    /// measured time per step.
    pub fn roofline_pct(&self, copy_gbps: f64) -> f64 {
        let floor = self.bytes_per_step as f64 / (copy_gbps * 1e9);
        100.0 * floor / self.seconds_per_step(self.best())
    }

    /// One CSV row under [`CSV_HEADER`] (no newline).
    pub fn csv_row(&self, full_layers: usize, info: &RunInfo) -> String {
        let best = self.best();
        let ms = |s: f64| format!("{:.3}", s * 1e3);
        let prefill_ms = self.prefill_seconds * 1e3;
        let eager_tok_s = self.eager.tokens.len() as f64 / self.eager.seconds;
        [
            self.model_label(full_layers),
            self.source.clone(),
            self.prompt_tokens.to_string(),
            self.generated_tokens().to_string(),
            format!("{prefill_ms:.3}"),
            format!("{:.2}", self.prompt_tokens as f64 / prefill_ms * 1e3),
            ms(best.seconds),
            format!("{:.2}", self.decode_tok_s()),
            info.date.clone(),
            format!("\"{}\"", self.device.replace('"', "'")),
            env!("CARGO_PKG_VERSION").to_string(),
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .to_string(),
            self.generated_tokens().to_string(),
            "synthetic".to_string(),
            self.prompt_tokens.to_string(),
            info.commit.clone(),
            self.backend.clone(),
            best.path.to_string(),
            self.layers.to_string(),
            self.batch.to_string(),
            ms(self.gpu_seconds_per_step),
            ms(self.host_gap(best)),
            format!("{eager_tok_s:.2}"),
            ms(self.host_gap(&self.eager)),
            self.record_seconds.map_or(String::new(), ms),
            self.memory.peak.to_string(),
            self.memory.weights.to_string(),
            self.memory.kv.to_string(),
            self.memory.workspace.to_string(),
            self.memory.bound().to_string(),
            self.bytes_per_step.to_string(),
            info.copy_gbps
                .map_or(String::new(), |g| format!("{:.1}", self.roofline_pct(g))),
        ]
        .join(",")
    }

    /// The human-readable report: timings, host gap, memory, then every kernel by share.
    pub fn summary(&self, full_layers: usize, info: &RunInfo) -> String {
        let mut s = String::new();
        let us = |x: f64| x * 1e6;
        let _ = writeln!(
            s,
            "# {} ({} of {} layers) on {} [{}]: batch {}, {} activations and KV pool, prompt {} tokens, {} greedy decode steps",
            self.model,
            self.layers,
            full_layers,
            self.device,
            self.backend,
            self.batch,
            self.act,
            self.prompt_tokens,
            self.steps()
        );
        let _ = writeln!(
            s,
            "# prefill (token by token): {:.1} ms ({:.1} tok/s)",
            self.prefill_seconds * 1e3,
            self.prompt_tokens as f64 / self.prefill_seconds
        );
        let _ = writeln!(
            s,
            "# device (GPU) time per step: {:.1} us ({}); the profiled step below, every launch timed alone: {:.1} us",
            us(self.gpu_seconds_per_step),
            self.gpu_time_source,
            us(self.profile_seconds_per_step)
        );
        for l in std::iter::once(&self.eager).chain(&self.graph) {
            let _ = writeln!(
                s,
                "# {:<5} decode: {:.2} tok/s, {:.1} us/step wall, host gap {:.1} us/step ({:.1}% of GPU time)",
                l.path,
                l.tokens.len() as f64 / l.seconds,
                us(self.seconds_per_step(l)),
                us(self.host_gap(l)),
                100.0 * self.host_gap(l) / self.gpu_seconds_per_step
            );
        }
        if let Some(r) = self.record_seconds {
            let _ = writeln!(
                s,
                "# graph: one recording per position ({:.1} ms to record all, untimed); replayed tokens equal the eager ones",
                r * 1e3
            );
        }
        if let Some(g) = info.copy_gbps {
            let _ = writeln!(
                s,
                "# roofline: {} bytes per step at {:.1} GB/s copy = {:.1} us; measured {:.1}% of it",
                self.bytes_per_step,
                g,
                self.bytes_per_step as f64 / (g * 1e3),
                self.roofline_pct(g)
            );
        }
        let m = &self.memory;
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        let _ = writeln!(
            s,
            "# peak device memory {:.1} MiB = weights {:.1} + KV pool {:.1} + workspace {:.1} (activations, sampler rows, block table, scratch) + {:.1} other; bound (weights + KV + 5% + workspace) {:.1} MiB: {}",
            mib(m.peak),
            mib(m.weights),
            mib(m.kv),
            mib(m.workspace),
            mib(m.peak.saturating_sub(m.weights + m.kv + m.workspace)),
            mib(m.bound()),
            if m.within_bound() { "within" } else { "EXCEEDED" }
        );
        let _ = writeln!(
            s,
            "# kiln allocations during the timed decode: {}",
            self.steady_allocations
        );
        let _ = writeln!(
            s,
            "# {:<28} {:<5} {:>8} {:>11} {:>7}",
            "kernel", "dtype", "launches", "us/step", "share"
        );
        for k in &self.profile {
            let _ = writeln!(
                s,
                "# {:<28} {:<5} {:>8} {:>11.1} {:>6.1}%",
                k.kernel,
                k.dtype,
                k.launches,
                us(k.seconds),
                100.0 * k.share
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_come_from_the_day_count() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(19_723), "2024-01-01");
        assert_eq!(civil_date(19_782), "2024-02-29");
        assert_eq!(civil_date(20_792), "2026-12-05");
    }
}
