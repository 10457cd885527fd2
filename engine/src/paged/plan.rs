//! The v2 host plan (spec §9.5): how many pages each chunk covers, which chunk each partial
//! block serves, and how partial rows merge back into requests.

use kiln_math::kernels::decode_attention::group_heads;
use kiln_math::kernels::paged_attention_decode::MAX_GRID_DIM;

/// The most chunks a plan may have: the chunk axis is a grid dimension, and 65535 is the
/// smallest such limit among the backends (CUDA/HIP y and z, WebGPU every axis).
pub const MAX_CHUNKS: usize = MAX_GRID_DIM as usize;

/// What the planner aims for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanConfig {
    /// Partial blocks the device runs at once (one round of the grid).
    pub target_blocks: usize,
    /// Pages per chunk, pinned (an override for A/B runs and tests); `None` lets the planner
    /// choose.
    pub pages_per_chunk: Option<usize>,
}

/// A v2 plan for one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodePlan {
    /// Pages each chunk covers (a request's last chunk may cover fewer).
    pub pages_per_chunk: usize,
    /// Request of each chunk.
    pub request_indices: Vec<i32>,
    /// Index of each chunk within its request.
    pub kv_tile_indices: Vec<i32>,
    /// Partial rows of request `r`: `o_indptr[r] .. o_indptr[r+1]` (the merge's row table).
    pub o_indptr: Vec<i32>,
    /// Blocks of the partial launch: chunks × KV heads × query-head groups.
    pub blocks: usize,
    /// Every request has one chunk, in request order: the partials are the answer, no merge.
    pub merge_free: bool,
}

impl DecodePlan {
    /// Chunks of the plan (rows of the partial outputs).
    pub fn chunks(&self) -> usize {
        self.request_indices.len()
    }
}

/// Why no v2 plan exists for a batch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The batch has no request.
    #[error("the batch is empty")]
    NoRequests,
    /// `pages_per_chunk` is 0 (pinned by the config, or in a plan being checked).
    #[error("pages per chunk is 0")]
    ZeroPagesPerChunk,
    /// The query heads do not split evenly over the KV heads.
    #[error("Hq = {heads_q} is not a multiple of Hkv = {heads_kv}")]
    HeadsNotDivisible {
        /// Query heads.
        heads_q: usize,
        /// KV heads.
        heads_kv: usize,
    },
    /// More chunks than a grid dimension holds.
    #[error("{chunks} chunks, at most {MAX_CHUNKS} fit a grid dimension")]
    TooManyChunks {
        /// Chunks the plan would have.
        chunks: usize,
    },
    /// More blocks per chunk (KV heads × query-head groups) than a grid dimension holds.
    #[error("{blocks} blocks per chunk, at most {MAX_CHUNKS} fit a grid dimension")]
    TooManyHeadGroups {
        /// Blocks per chunk.
        blocks: usize,
    },
    /// The partial outputs would need more than u32 indexing.
    #[error("partial workspace of {elements} elements exceeds u32 indexing of the merge")]
    WorkspaceTooLarge {
        /// Elements of the partial outputs.
        elements: u64,
    },
    /// A plan being checked disagrees with the batch.
    #[error("chunk {chunk}: {detail}")]
    Inconsistent {
        /// The first chunk that disagrees.
        chunk: usize,
        /// How, in words.
        detail: String,
    },
}

fn chunk_count(pages: &[usize], ppc: usize) -> usize {
    pages.iter().map(|&p| p.div_ceil(ppc).max(1)).sum()
}

/// A block's fixed cost (staging the queries, merging its parts, writing its partial) in pages
/// of sweep: the planner's model charges each block `pages_per_chunk + BLOCK_OVERHEAD_PAGES`.
pub const BLOCK_OVERHEAD_PAGES: usize = 2;

/// Plans a v2 decode of requests with `pages[r]` pages each (spec §9.5, with a wave-aware
/// choice): `target_blocks` is how many partial blocks the device runs at once, so a grid of
/// `n` blocks takes `ceil(n / target)` rounds, each as long as one chunk. The planner picks the
/// pages per chunk with the shortest modelled time, `rounds × (ppc + BLOCK_OVERHEAD_PAGES)`
/// (ties to the larger chunk: fewer partials to merge), among the chunk sizes that split the
/// longest request evenly; never so small that the chunk count passes [`MAX_CHUNKS`]. Every
/// request gets at least one chunk so an empty request still yields its (zero) row.
pub fn plan_decode(
    pages: &[usize],
    heads_q: usize,
    heads_kv: usize,
    head_dim: usize,
    cfg: PlanConfig,
) -> Result<DecodePlan, PlanError> {
    let batch = pages.len();
    if batch == 0 {
        return Err(PlanError::NoRequests);
    }
    if heads_kv == 0 || heads_q == 0 || !heads_q.is_multiple_of(heads_kv) {
        return Err(PlanError::HeadsNotDivisible { heads_q, heads_kv });
    }
    let per_kv = (heads_q / heads_kv) as u32;
    let blocks_per_chunk = heads_kv * (per_kv / group_heads(per_kv)) as usize;
    if blocks_per_chunk > MAX_CHUNKS {
        return Err(PlanError::TooManyHeadGroups {
            blocks: blocks_per_chunk,
        });
    }
    let total: usize = pages.iter().sum();
    let most = pages.iter().copied().max().unwrap_or(0).max(1);
    let ppc = match cfg.pages_per_chunk {
        Some(0) => return Err(PlanError::ZeroPagesPerChunk),
        Some(p) => p,
        None => {
            // Chunks ≤ total / ppc + batch, so this floor keeps the count within the limit.
            let floor = total
                .div_ceil(MAX_CHUNKS.saturating_sub(batch).max(1))
                .max(1);
            let target = cfg.target_blocks.max(1);
            let cost = |p: usize| {
                (chunk_count(pages, p) * blocks_per_chunk).div_ceil(target)
                    * (p + BLOCK_OVERHEAD_PAGES)
            };
            // Splits of the longest request into k even chunks, largest first (so ties keep
            // the larger chunk); more than `target` chunks of it can only add rounds.
            let mut best = most;
            let mut k = 2;
            while k <= most && k <= target {
                let p = most.div_ceil(k);
                if p >= floor && cost(p) < cost(best) {
                    best = p;
                }
                k += 1;
            }
            if floor < most && cost(floor) < cost(best) {
                best = floor;
            }
            best
        }
    };
    let mut plan = DecodePlan {
        pages_per_chunk: ppc,
        request_indices: Vec::new(),
        kv_tile_indices: Vec::new(),
        o_indptr: vec![0],
        blocks: 0,
        merge_free: false,
    };
    for (r, &p) in pages.iter().enumerate() {
        let n = p.div_ceil(ppc).max(1);
        for tile in 0..n {
            plan.request_indices.push(r as i32);
            plan.kv_tile_indices.push(tile as i32);
        }
        plan.o_indptr.push(plan.request_indices.len() as i32);
    }
    plan.blocks = plan.chunks() * blocks_per_chunk;
    plan.merge_free = plan.chunks() == batch;
    validate(&plan, pages, heads_q, head_dim)?;
    Ok(plan)
}

/// Checks a plan against the requests' page counts and the launch limits.
pub fn validate(
    plan: &DecodePlan,
    pages: &[usize],
    heads_q: usize,
    head_dim: usize,
) -> Result<(), PlanError> {
    let chunks = plan.chunks();
    if plan.pages_per_chunk == 0 {
        return Err(PlanError::ZeroPagesPerChunk);
    }
    if chunks > MAX_CHUNKS {
        return Err(PlanError::TooManyChunks { chunks });
    }
    let elements = chunks as u64 * heads_q as u64 * head_dim as u64;
    if elements > u32::MAX as u64 {
        return Err(PlanError::WorkspaceTooLarge { elements });
    }
    let bad = |chunk, detail: String| Err(PlanError::Inconsistent { chunk, detail });
    if plan.kv_tile_indices.len() != chunks || plan.o_indptr.len() != pages.len() + 1 {
        return bad(
            0,
            "table lengths disagree with the chunk and request counts".into(),
        );
    }
    for (c, (&r, &t)) in plan
        .request_indices
        .iter()
        .zip(&plan.kv_tile_indices)
        .enumerate()
    {
        let Some(&p) = usize::try_from(r).ok().and_then(|r| pages.get(r)) else {
            return bad(c, format!("request {r} is not in the batch"));
        };
        let tiles = p.div_ceil(plan.pages_per_chunk).max(1);
        if t < 0 || t as usize >= tiles {
            return bad(c, format!("tile {t} of a request with {tiles} chunks"));
        }
        let r = r as usize;
        if !(plan.o_indptr[r]..plan.o_indptr[r + 1]).contains(&(c as i32)) {
            return bad(c, format!("outside request {r}'s rows of o_indptr"));
        }
    }
    if plan.merge_free
        && !(chunks == pages.len()
            && plan
                .request_indices
                .iter()
                .enumerate()
                .all(|(c, &r)| r as usize == c))
    {
        return bad(
            0,
            "a merge-free plan needs one chunk per request, in order".into(),
        );
    }
    Ok(())
}
