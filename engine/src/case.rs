//! Parity case data: how a kernel's inputs are drawn and what its outputs must meet. Each
//! kernel's reference module declares its cases with these; the parity harness runs them.

use crate::Backend;

/// How a buffer's input values are drawn.
#[derive(Clone, Debug, PartialEq)]
pub enum Fill {
    Normal {
        mean: f64,
        std: f64,
    },
    Uniform {
        lo: f64,
        hi: f64,
    },
    /// Exactly these values, in order (page tables, index lists, special values).
    Values(Vec<f64>),
    /// Write-only output: poisoned, not filled.
    Output,
}

impl Fill {
    pub const fn normal(mean: f64, std: f64) -> Fill {
        Fill::Normal { mean, std }
    }
}

/// What a buffer is checked against after the launch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    /// Not an output.
    None,
    /// Bit-identical to the reference.
    Exact,
    /// Exact, except at most `max_frac` of elements may be one ulp off (none further).
    Ulp { max_frac: f64 },
    /// Normalized RMS and max deviation (spec §0.2) strictly below these bounds.
    Tolerance { nrms: f64, nmax: f64 },
    /// Bit-identical on the `exact_on` backends (where the port and the reference share
    /// rounding points and reduction order), `Tolerance { nrms, nmax }` on every other.
    ExactOn {
        exact_on: &'static [Backend],
        nrms: f64,
        nmax: f64,
    },
    /// `max_rel` (spec §0.2) strictly below `bound`; elements equal to the reference (infinities
    /// included) count as no deviation, any other non-finite value fails.
    MaxRel { bound: f64 },
    /// Bit-identical on the `exact_on` backends; elsewhere at least `min_frac` of the elements
    /// identical (sampled tokens: another summation order moves the rare draw that lands within
    /// rounding of a boundary).
    Agree {
        exact_on: &'static [Backend],
        min_frac: f64,
    },
    /// At least `min_frac` of the elements bit-identical.
    MostlyExact { min_frac: f64 },
}

impl Check {
    /// The check that applies on `backend`.
    pub fn on(self, backend: Backend) -> Check {
        match self {
            Check::ExactOn {
                exact_on,
                nrms,
                nmax,
            } => {
                if exact_on.contains(&backend) {
                    Check::Exact
                } else {
                    Check::Tolerance { nrms, nmax }
                }
            }
            Check::Agree { exact_on, min_frac } => {
                if exact_on.contains(&backend) {
                    Check::Exact
                } else {
                    Check::MostlyExact { min_frac }
                }
            }
            c => c,
        }
    }
}

/// One parity case of a kernel: shapes and params, how inputs are drawn, what outputs must meet.
#[derive(Clone, Debug)]
pub struct Case {
    pub label: String,
    /// Per buffer, in list order.
    pub shapes: Vec<Vec<usize>>,
    /// User params as `kiln run --param` would set them.
    pub params: Vec<(&'static str, String)>,
    pub fill: Vec<Fill>,
    pub checks: Vec<Check>,
}
