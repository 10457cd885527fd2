//! `kiln bench compare --before a.csv --after b.csv`: decode CSV rows paired by model, with
//! the seeds' compare semantics (spec §16.2): the last row per model in each file; pairs
//! dropped when their prompt lengths differ by more than the tolerance, when their commits
//! differ (unless allowed), or when a row has no decode rate; then the median ratio
//! after/before of `decode_tok_s`, its quartiles and range, and the rows that moved more than
//! the threshold.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The knobs of a comparison.
#[derive(Clone, Copy, Debug)]
pub struct CompareOptions {
    /// Largest relative difference of `prompt_tokens` a pair may have.
    pub prompt_tolerance: f64,
    /// A ratio further than this from 1 is a moved row.
    pub moved_threshold: f64,
    /// Pair rows of different commits.
    pub allow_commit_change: bool,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            prompt_tolerance: 0.10,
            moved_threshold: 0.10,
            allow_commit_change: false,
        }
    }
}

/// Why a comparison could not be made at all.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// A file has no header, or its header lacks a column the comparison reads.
    #[error("{file}: {why}")]
    BadFile {
        /// Which file (`before` or `after`).
        file: &'static str,
        /// What is wrong.
        why: String,
    },
}

/// One model's pair.
#[derive(Clone, Debug, PartialEq)]
pub struct Pair {
    pub model: String,
    pub before: f64,
    pub after: f64,
    /// after / before.
    pub ratio: f64,
}

/// What the comparison found.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub pairs: Vec<Pair>,
    /// Models left out, with the reason.
    pub dropped: Vec<(String, String)>,
    pub median: Option<f64>,
    /// First and third quartiles of the ratios.
    pub quartiles: Option<(f64, f64)>,
    /// Smallest and largest ratio.
    pub range: Option<(f64, f64)>,
    /// Pairs whose ratio moved past the threshold.
    pub moved: Vec<Pair>,
}

/// Splits one CSV line, honouring double quotes (`""` inside quotes is one quote).
fn fields(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// A row's fields by column name.
type Row = BTreeMap<String, String>;

/// The last row per model of a CSV text (lines starting with `#` are comments).
fn last_rows(file: &'static str, text: &str) -> Result<BTreeMap<String, Row>, CompareError> {
    let mut lines = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    let header = fields(lines.next().ok_or_else(|| CompareError::BadFile {
        file,
        why: "no header line".into(),
    })?);
    for need in ["model", "prompt_tokens", "decode_tok_s"] {
        if !header.iter().any(|h| h == need) {
            return Err(CompareError::BadFile {
                file,
                why: format!("no `{need}` column"),
            });
        }
    }
    let mut rows = BTreeMap::new();
    for line in lines {
        let row: Row = header.iter().cloned().zip(fields(line)).collect();
        if let Some(model) = row.get("model").cloned() {
            rows.insert(model, row);
        }
    }
    Ok(rows)
}

/// The `q` quantile (0..=1) of sorted values, linearly interpolated.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let at = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64)
}

/// Compares two decode CSV texts.
pub fn compare(before: &str, after: &str, o: CompareOptions) -> Result<Comparison, CompareError> {
    let (b, a) = (last_rows("before", before)?, last_rows("after", after)?);
    let mut pairs = Vec::new();
    let mut dropped = Vec::new();
    let num = |r: &Row, k: &str| r.get(k).and_then(|v| v.trim().parse::<f64>().ok());
    for (model, rb) in &b {
        let Some(ra) = a.get(model) else {
            dropped.push((model.clone(), "only in before".into()));
            continue;
        };
        let (Some(tb), Some(ta)) = (num(rb, "decode_tok_s"), num(ra, "decode_tok_s")) else {
            dropped.push((
                model.clone(),
                "no decode_tok_s (failed or skipped row)".into(),
            ));
            continue;
        };
        if tb <= 0.0 || ta <= 0.0 {
            dropped.push((model.clone(), "decode_tok_s is not positive".into()));
            continue;
        }
        match (num(rb, "prompt_tokens"), num(ra, "prompt_tokens")) {
            (Some(pb), Some(pa)) if (pa - pb).abs() <= o.prompt_tolerance * pb => {}
            (pb, pa) => {
                dropped.push((
                    model.clone(),
                    format!("prompt_tokens differ ({pb:?} before, {pa:?} after)"),
                ));
                continue;
            }
        }
        let (cb, ca) = (rb.get("kiln_commit"), ra.get("kiln_commit"));
        if !o.allow_commit_change && cb != ca {
            dropped.push((
                model.clone(),
                format!("commits differ ({cb:?} before, {ca:?} after; --allow-commit-change pairs them)"),
            ));
            continue;
        }
        pairs.push(Pair {
            model: model.clone(),
            before: tb,
            after: ta,
            ratio: ta / tb,
        });
    }
    for model in a.keys().filter(|m| !b.contains_key(*m)) {
        dropped.push((model.clone(), "only in after".into()));
    }
    let mut ratios: Vec<f64> = pairs.iter().map(|p| p.ratio).collect();
    ratios.sort_by(f64::total_cmp);
    let some = !ratios.is_empty();
    let moved = pairs
        .iter()
        .filter(|p| (p.ratio - 1.0).abs() > o.moved_threshold)
        .cloned()
        .collect();
    Ok(Comparison {
        median: some.then(|| quantile(&ratios, 0.5)),
        quartiles: some.then(|| (quantile(&ratios, 0.25), quantile(&ratios, 0.75))),
        range: some.then(|| (ratios[0], ratios[ratios.len() - 1])),
        pairs,
        dropped,
        moved,
    })
}

impl Comparison {
    /// The report as text.
    pub fn text(&self, o: &CompareOptions) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "pairs: {}", self.pairs.len());
        for p in &self.pairs {
            let _ = writeln!(
                s,
                "  {:<24} {:>10.2} -> {:>10.2} tok/s  x{:.3}",
                p.model, p.before, p.after, p.ratio
            );
        }
        if let (Some(m), Some((q1, q3)), Some((lo, hi))) = (self.median, self.quartiles, self.range)
        {
            let _ = writeln!(s, "median decode ratio (after/before): {m:.3}");
            let _ = writeln!(s, "quartiles: {q1:.3} .. {q3:.3}; range {lo:.3} .. {hi:.3}");
        }
        let _ = writeln!(
            s,
            "moved more than {:.0}%: {}",
            100.0 * o.moved_threshold,
            self.moved.len()
        );
        for p in &self.moved {
            let _ = writeln!(s, "  {:<24} x{:.3}", p.model, p.ratio);
        }
        for (m, why) in &self.dropped {
            let _ = writeln!(s, "dropped {m}: {why}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "model,prompt_tokens,decode_tok_s,kiln_commit,hardware\n";

    #[test]
    fn pairs_by_model_with_the_last_row_and_reports_the_spread() {
        let before = format!(
            "{HEAD}a,512,10,c1,\"gpu, 1\"\na,512,20,c1,x\nb,512,40,c1,x\nc,512,50,c1,x\nd,512,10,c1,x\n"
        );
        let after = format!(
            "{HEAD}# comment\na,512,21,c1,x\nb,512,40,c1,x\nc,512,80,c1,x\nd,300,10,c1,x\ne,512,1,c1,x\n"
        );
        let c = compare(&before, &after, CompareOptions::default()).unwrap();
        let models: Vec<_> = c.pairs.iter().map(|p| p.model.as_str()).collect();
        assert_eq!(models, ["a", "b", "c"]);
        // Ratios 1.05, 1.0, 1.6.
        assert!((c.median.unwrap() - 1.05).abs() < 1e-12);
        assert!((c.quartiles.unwrap().0 - 1.025).abs() < 1e-12);
        assert!((c.quartiles.unwrap().1 - 1.325).abs() < 1e-12);
        assert_eq!(c.range.unwrap(), (1.0, 1.6));
        assert_eq!(c.moved.len(), 1);
        assert_eq!(c.moved[0].model, "c");
        let dropped: Vec<_> = c.dropped.iter().map(|d| d.0.as_str()).collect();
        assert_eq!(dropped, ["d", "e"]);
    }

    #[test]
    fn commits_must_match_unless_allowed_and_bad_files_are_refused() {
        let before = format!("{HEAD}a,512,10,c1,x\n");
        let after = format!("{HEAD}a,512,12,c2,x\n");
        let c = compare(&before, &after, CompareOptions::default()).unwrap();
        assert!(c.pairs.is_empty() && c.median.is_none());
        let allow = CompareOptions {
            allow_commit_change: true,
            ..CompareOptions::default()
        };
        assert_eq!(compare(&before, &after, allow).unwrap().pairs.len(), 1);
        assert!(matches!(
            compare("model,x\n", &after, allow),
            Err(CompareError::BadFile { file: "before", .. })
        ));
    }
}
