//! The one error type: a construct outside the subset, or a translation failure, located in
//! kiln-math's sources.

use proc_macro2::Span;
use std::fmt;

/// A construct the translator does not accept, or a translation failure, located in kiln-math.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// Path relative to the workspace (`shared-kernel-math/src/...`).
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// What was found (`closure`, `macro call \`panic!\``, `method \`sqrt\` on f32`, …).
    pub construct: String,
    /// Why it is refused, or what the translator expected instead.
    pub detail: String,
}

impl Error {
    /// An error at the start of `span` in `file` (columns counted from 1, as editors do).
    pub(crate) fn at(
        file: &str,
        span: Span,
        construct: impl Into<String>,
        detail: impl Into<String>,
    ) -> Error {
        let s = span.start();
        Error {
            file: file.to_string(),
            line: s.line,
            column: s.column + 1,
            construct: construct.into(),
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {} is outside kiln's WGSL subset: {} (see shaders-wgsl/README.md)",
            self.file, self.line, self.column, self.construct, self.detail
        )
    }
}

impl std::error::Error for Error {}

/// What translation steps return; `E` is another error only where a lookup reports candidates.
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;
