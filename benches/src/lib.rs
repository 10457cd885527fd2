//! Benchmark drivers shared by the criterion benches and `kiln bench`.

pub mod paged;
