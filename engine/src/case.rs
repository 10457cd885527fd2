//! Parity case data: how a kernel's inputs are drawn and what its outputs must meet. Each
//! kernel's reference module declares its cases with these; the parity harness runs them.

use crate::Backend;

/// How a buffer's input values are drawn.
#[derive(Clone, Debug, PartialEq)]
pub enum Fill {
    /// Normal with this mean and standard deviation, rounded to the dtype.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// Uniform on `[lo, hi)`, rounded to the dtype.
    Uniform {
        /// Lower bound (inclusive).
        lo: f64,
        /// Upper bound (exclusive).
        hi: f64,
    },
    /// Exactly these values, in order (page tables, index lists, special values).
    Values(Vec<f64>),
    /// Values of the float `dtype` drawn as `of` says, packed little-endian into the buffer's
    /// u32 words (16-bit values two per word): an input a kernel reads in a dtype named by a
    /// param. Every word is filled; a half past the kernel's values is never read.
    Packed {
        /// The values' dtype.
        dtype: kiln_math::DType,
        /// How they are drawn.
        of: Box<Fill>,
    },
    /// Ternary weights packed as bitlinear reads them (spec §2): every 2-bit code of the
    /// buffer's u32 words drawn uniformly from 0, 1 and 2 (weights −1, 0 and +1), 16 per word.
    Ternary,
    /// Write-only output: poisoned, not filled.
    Output,
}

impl Fill {
    /// [`Fill::Normal`] with `mean` and `std`.
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
    Ulp {
        /// Largest fraction of elements allowed one ulp off.
        max_frac: f64,
    },
    /// Normalized RMS and max deviation (spec §0.2) strictly below these bounds.
    Tolerance {
        /// Bound on the normalized RMS deviation.
        nrms: f64,
        /// Bound on the normalized max deviation.
        nmax: f64,
    },
    /// Bit-identical on the `exact_on` backends (where the port and the reference share
    /// rounding points and reduction order), `Tolerance { nrms, nmax }` on every other.
    ExactOn {
        /// The backends that must match bit for bit.
        exact_on: &'static [Backend],
        /// Bound on the normalized RMS deviation elsewhere.
        nrms: f64,
        /// Bound on the normalized max deviation elsewhere.
        nmax: f64,
    },
    /// `max_rel` (spec §0.2) strictly below `bound`; elements equal to the reference (infinities
    /// included) count as no deviation, any other non-finite value fails.
    MaxRel {
        /// Bound on `max_rel`.
        bound: f64,
    },
    /// Bit-identical on the `exact_on` backends; elsewhere at least `min_frac` of the elements
    /// identical (sampled tokens: another summation order moves the rare draw that lands within
    /// rounding of a boundary).
    Agree {
        /// The backends that must match bit for bit.
        exact_on: &'static [Backend],
        /// Smallest fraction of elements identical elsewhere.
        min_frac: f64,
    },
    /// At least `min_frac` of the elements bit-identical.
    MostlyExact {
        /// Smallest fraction of elements identical.
        min_frac: f64,
    },
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
    /// Names the case in reports (shapes and what it exercises).
    pub label: String,
    /// Per buffer, in list order.
    pub shapes: Vec<Vec<usize>>,
    /// User params as `kiln run --param` would set them.
    pub params: Vec<(&'static str, String)>,
    /// Per buffer, in list order: how its inputs are drawn.
    pub fill: Vec<Fill>,
    /// Per buffer, in list order: what it must meet after the launch.
    pub checks: Vec<Check>,
    /// Whether the sim runs it too. False for a model-sized case the sim (one OS thread per
    /// lane) would take minutes on: its kernel's small cases cover every wave and block there.
    pub on_sim: bool,
}

impl Case {
    /// Whether the case runs on a device of `backend`: every case but the model-sized ones on
    /// the sim (see [`Case::on_sim`]).
    pub fn runs_on(&self, backend: Backend) -> bool {
        self.on_sim || backend != Backend::Sim
    }
}
