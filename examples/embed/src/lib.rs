//! An engine's decode step over kiln, the way an engine embeds it: the engine allocates one
//! arena on the device and hands kiln views of it (weights, a paged KV pool, activations), opens
//! kiln on its own stream or queue, writes its block table into device memory, and calls kiln's
//! ops for one transformer layer and the sampler. On CUDA the step is captured into a graph and
//! replayed; every replay must give the eager step's logits and tokens bit for bit.

pub mod arena;
pub mod model;
pub mod run;

pub use run::{run, Report};
