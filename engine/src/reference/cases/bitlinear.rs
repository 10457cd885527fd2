//! The parity cases of `bitlinear` and the shapes `kiln bench` times it at.
//!
//! Ternary weights with every code drawn from 0, 1 and 2 (spec §2's packing; code 3 is never
//! produced), `x` unit-normal, the scale uniform on `[0.5, 2)` and both scale conventions.

use super::linear_tolerance;
use crate::case::{Case, Check, Fill};
use kiln_math::DType;

/// `x [lead.., in] · Wᵀ` for `W [out, in]`, `s` multiplied or divided by.
fn case(lead: &[usize], k: usize, n: usize, invert: bool, checks: Vec<Check>) -> Case {
    let mut x = lead.to_vec();
    x.push(k);
    let mut y = lead.to_vec();
    y.push(n);
    Case {
        label: format!(
            "{lead:?}x{k}->{n} {}",
            if invert { "acc/s" } else { "acc*s" }
        ),
        shapes: vec![x, vec![n / 4, k / 4], vec![1], y],
        params: vec![(
            "invert_weight_scales",
            if invert { "1" } else { "0" }.into(),
        )],
        fill: vec![
            Fill::normal(0.0, 1.0),
            Fill::Ternary,
            Fill::Uniform { lo: 0.5, hi: 2.0 },
            Fill::Output,
        ],
        checks,
        on_sim: true,
    }
}

/// The parity cases at `dtype`: batch 1, 2, 3, 5 and 8 (the 1-, 2-, 4- and 8-row instances,
/// padded ones included), 9, 17 and 6 as `[2, 3]` (several tiles, a last tile of one row,
/// leading dims flattened); `in` 4 and 36 (rows read word by word: a multiple of 4 but not of
/// 16), 16 to 1040 (units: 65 units leave the lanes of a wave with different trip counts) and
/// 2560 (BitNet-2B's hidden size, on the f32 budget over a long row); `out` 8 to 64, several
/// blocks; both scale conventions. Every output holds eight elements or more (`nrms`
/// normalizes by its RMS).
pub fn cases(dtype: DType) -> Vec<Case> {
    let shapes: [(&[usize], usize, usize, bool); 12] = [
        (&[2], 4, 8, false),
        (&[1], 16, 8, true),
        (&[1], 64, 16, false),
        (&[3], 256, 8, true),
        (&[2], 36, 12, false),
        (&[5], 1040, 8, true),
        (&[8], 128, 20, false),
        (&[9], 128, 8, true),
        (&[17], 48, 4, false),
        (&[2, 3], 96, 16, true),
        (&[1], 2560, 16, true),
        (&[11], 36, 8, true),
    ];
    shapes
        .iter()
        .map(|&(lead, k, n, invert)| {
            let checks = vec![Check::None, Check::None, Check::None, linear_tolerance(dtype)];
            case(lead, k, n, invert, checks)
        })
        .collect()
}

/// BitNet-b1.58-2B's projections at batch 1 and 8: the MLP's up and gate (2560→6912) and down
/// (6912→2560).
pub fn bench_cases(_dtype: DType) -> Vec<Case> {
    let mut cases = Vec::new();
    for m in [1, 8] {
        for (k, n) in [(2560, 6912), (6912, 2560)] {
            cases.push(case(&[m], k, n, true, vec![Check::None; 4]));
        }
    }
    cases
}
