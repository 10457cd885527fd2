//! Paged decode attention on the host (spec §9): the page tables and their validation, the v2
//! plan, and the decode dispatch that picks v1, v2 or the gather fallback for a batch.
//!
//! Page tables stay on the host (the plan needs them there); the typed ops and the dispatch
//! check every index against the pool before anything is uploaded or launched, so a malformed
//! table is `PortError::InvalidShape`, never an out-of-bounds read on a device.

pub(crate) mod check;
pub mod dispatch;
pub mod launch;
pub mod plan;
pub mod resident;
pub mod resident_plan;
pub(crate) mod table;

pub use dispatch::{
    choose_arm, paged_decode, paged_decode_with, DecodeArm, DecodeChoice, DecodePolicy, DecodeRun,
    ARM_ENV,
};
pub use launch::{mma_param, MMA_ENV};
pub use plan::{check_chunks, plan_decode, DecodePlan, PlanConfig, PlanError, MAX_CHUNKS};
pub use resident::{paged_attention_decode_resident, DeviceBlockTable};
pub use resident_plan::{paged_decode_planned, planned_scratch_bytes, DeviceDecodePlan};
pub use table::{BlockTable, KvGeometry, PageTable, RequestSpan, TableError};
