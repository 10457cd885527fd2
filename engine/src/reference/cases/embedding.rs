//! The parity cases of `embedding` and the shapes `kiln bench` times it at.

use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// Ids in `[0, v)`, drawn with the harness's seed (a batch longer than the vocabulary repeats
/// one).
pub(super) fn drawn_ids(v: usize) -> Fill {
    Fill::Uniform {
        lo: 0.0,
        hi: v as f64,
    }
}

/// Exactly these ids.
pub(super) fn fixed_ids(ids: &[u32]) -> Fill {
    Fill::Values(ids.iter().map(|&i| i as f64).collect())
}

/// `b` rows gathered from a `[v, d]` table of unit normals, the ids drawn as `ids` says.
fn case(label: &str, ids: Fill, b: usize, v: usize, d: usize, checks: Vec<Check>) -> Case {
    Case {
        label: format!("{b} of {v}x{d}{label}"),
        shapes: vec![vec![b], vec![v, d], vec![b, d]],
        params: vec![],
        fill: vec![ids, Fill::normal(0.0, 1.0), Fill::Output],
        checks,
        on_sim: true,
    }
}

/// The parity cases at `dtype`: B 1 to 5 over tables of 1 to 19 rows (B > V repeats an id),
/// D 1, odd (row starts misaligned in turn: the element path) and whole chunks; fixed ids with
/// repeats, and ids past the table (V itself and `u32::MAX`: zero rows).
pub fn cases(_dtype: DType) -> Vec<Case> {
    // Exact: a gather copies the stored bits, so every port gives the reference's bits.
    let exact = || vec![Check::None, Check::None, Check::Exact];
    let mut cases: Vec<Case> = [
        (1, 1, 1),
        (5, 3, 7),
        (2, 19, 77),
        (4, 2, 64),
        (3, 11, 129),
        (5, 6, 1031),
        (1, 17, 256),
    ]
    .iter()
    .map(|&(b, v, d)| case("", drawn_ids(v), b, v, d, exact()))
    .collect();
    let past = [8, 0, 8, 9, u32::MAX];
    cases.push(case(" ids past V", fixed_ids(&past), 5, 9, 33, exact()));
    let repeats = [3, 3, 1, 3];
    cases.push(case(" repeated ids", fixed_ids(&repeats), 4, 4, 40, exact()));
    cases
}

/// Token embeddings at decode (1 and 8 ids) and prefill (512) over SmolLM2-135M's table
/// (49152 × 576) and Llama-2-7B's (32000 × 4096). `kiln bench` counts the whole table as
/// moved, so its percentage overstates a gather; compare the times.
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    let mut cases = Vec::new();
    for (v, d) in [(49152, 576), (32000, 4096)] {
        for b in [1, 8, 512] {
            cases.push(case("", drawn_ids(v), b, v, d, vec![Check::None; 3]));
        }
    }
    cases
}
