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

/// Checks that the chunks `(request_indices[c], kv_tile_indices[c])` list every tile of every
/// request exactly once, in range, each request's chunks contiguous and in request order — the
/// layout the merge's `o_indptr` rows and a merge-free output assume. A plan cached from an
/// earlier step whose requests have since grown or shrunk fails here.
pub fn check_chunks(
    request_indices: &[i32],
    kv_tile_indices: &[i32],
    pages_per_chunk: usize,
    pages: &[usize],
) -> Result<(), PlanError> {
    if pages_per_chunk == 0 {
        return Err(PlanError::ZeroPagesPerChunk);
    }
    let bad = |chunk, detail: String| Err(PlanError::Inconsistent { chunk, detail });
    if kv_tile_indices.len() != request_indices.len() {
        return bad(
            0,
            format!(
                "{} request indices but {} tile indices",
                request_indices.len(),
                kv_tile_indices.len()
            ),
        );
    }
    // Each request's tiles start at `first_tile[r]` of one flat "seen" list.
    let tiles: Vec<usize> = pages
        .iter()
        .map(|&p| p.div_ceil(pages_per_chunk).max(1))
        .collect();
    let mut first_tile = Vec::with_capacity(tiles.len());
    let mut total = 0usize;
    for &t in &tiles {
        first_tile.push(total);
        total += t;
    }
    if request_indices.len() != total {
        return bad(
            0,
            format!(
                "{} chunks, the batch's pages need {total} (every request's tiles exactly once)",
                request_indices.len()
            ),
        );
    }
    let mut seen = vec![false; total];
    let mut previous = 0usize;
    for (c, (&r, &t)) in request_indices.iter().zip(kv_tile_indices).enumerate() {
        let Some(r) = usize::try_from(r).ok().filter(|&r| r < pages.len()) else {
            return bad(c, format!("request {r} is not in the batch"));
        };
        if r < previous {
            return bad(
                c,
                format!("request {r} after request {previous}: chunks must be in request order"),
            );
        }
        previous = r;
        let Some(t) = usize::try_from(t).ok().filter(|&t| t < tiles[r]) else {
            return bad(c, format!("tile {t} of a request with {} chunks", tiles[r]));
        };
        let slot = &mut seen[first_tile[r] + t];
        if *slot {
            return bad(c, format!("tile {t} of request {r} is listed twice"));
        }
        *slot = true;
    }
    Ok(())
}

/// Checks a plan against the requests' page counts and the launch limits: its chunks cover
/// every request's tiles exactly once ([`check_chunks`]) and `o_indptr` gives each request its
/// chunks.
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
    check_chunks(
        &plan.request_indices,
        &plan.kv_tile_indices,
        plan.pages_per_chunk,
        pages,
    )?;
    let bad = |chunk, detail: String| Err(PlanError::Inconsistent { chunk, detail });
    // Chunks are grouped by request in order, so request r's rows start where r's chunks do.
    let mut want = vec![0i32];
    for (c, &r) in plan.request_indices.iter().enumerate() {
        while want.len() <= r as usize {
            want.push(c as i32);
        }
    }
    while want.len() <= pages.len() {
        want.push(chunks as i32);
    }
    if plan.o_indptr != want {
        return bad(
            0,
            format!(
                "o_indptr {:?} does not give each request its chunks (want {want:?})",
                plan.o_indptr
            ),
        );
    }
    if plan.merge_free && chunks != pages.len() {
        return bad(
            0,
            "a merge-free plan needs one chunk per request, in order".into(),
        );
    }
    Ok(())
}
