//! The block-level single-query attention sweep shared by the paged decode kernels (spec §9).
//!
//! One block serves a group of consecutive query heads that share one KV head, so every K/V
//! element it loads is used for all of them. Waves stripe the block's tokens; within a wave the
//! lanes split the head dimension (lane `l` owns dims `l, l + WAVE, …`) and the q·k dot is a
//! wave sum. Each wave keeps a base-2 online softmax `(m, l, acc)`; the waves' states are merged
//! through shared memory at the end. Correct for any wave and block size: nothing below assumes
//! a lane count.

use crate::{Block, Dst, Element, Src};

/// The most query heads one block serves (the per-lane score registers are sized by it).
pub const MAX_GROUP_HEADS: usize = 8;

/// Query heads per block for `q_per_kv` query heads per KV head: its largest divisor that is
/// at most [`MAX_GROUP_HEADS`].
pub const fn group_heads(q_per_kv: u32) -> u32 {
    let mut g = if q_per_kv < MAX_GROUP_HEADS as u32 {
        q_per_kv
    } else {
        MAX_GROUP_HEADS as u32
    };
    while g > 1 && !q_per_kv.is_multiple_of(g) {
        g -= 1;
    }
    if g == 0 {
        1
    } else {
        g
    }
}

/// f32 words of shared memory the sweep needs: the group's queries, then per wave its
/// accumulators, running maxima and denominators.
pub const fn shared_words(group: u32, head_dim: u32, waves: u32) -> usize {
    let (g, d, w) = (group as usize, head_dim as usize, waves as usize);
    g * d + w * g * d + 2 * w * g
}

/// The pool's geometry (layout A: `[num_blocks, block_size, heads_kv, head_dim]`).
#[derive(Clone, Copy)]
pub struct PoolShape {
    pub block_size: usize,
    pub heads_kv: usize,
    pub head_dim: usize,
}

/// Which of a sequence's tokens one block attends to, and where they live.
#[derive(Clone, Copy)]
pub struct TokenSpan {
    /// Index in the page table of the sequence's first page.
    pub table_base: usize,
    /// Position of visible token 0 inside the sequence's first page (a sliding window's start).
    pub start: usize,
    /// Visible tokens `[begin, end)` this block covers.
    pub begin: usize,
    pub end: usize,
}

/// The query-head group a block serves: `heads` consecutive query heads of KV head `kv_head`.
#[derive(Clone, Copy)]
pub struct HeadGroup {
    pub kv_head: usize,
    pub heads: usize,
    /// Element offset of the group's first query (its `heads · head_dim` queries are contiguous).
    pub q_base: usize,
    /// Element offset of the group's first output row (also contiguous).
    pub out_base: usize,
    /// Index of the group's first log-sum-exp output, when the caller wants them.
    pub lse_base: usize,
}

/// Attends the group's queries over the span's tokens and writes `out` (normalised) and, when
/// `lse` is given, the base-2 log-sum-exp of the scaled scores (`-inf` for an empty span).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn attend_span<T: Element, B: Block>(
    b: &B,
    pool: PoolShape,
    group: HeadGroup,
    span: TokenSpan,
    scale_log2: f32,
    q: &Src<f32>,
    k_pool: &Src<T>,
    v_pool: &Src<T>,
    table: &Src<i32>,
    out: &Dst<f32>,
    lse: Option<&Dst<f32>>,
) {
    let d_len = pool.head_dim;
    let g_len = group.heads;
    let waves = b.waves() as usize;
    let wave = b.wave_id() as usize;
    let lane = b.lane() as usize;
    let step = b.size() as usize;

    let acc_at = g_len * d_len;
    let m_at = acc_at + waves * g_len * d_len;
    let l_at = m_at + waves * g_len;
    let shm = b.shared::<f32>(0, l_at + waves * g_len);

    let mut i = b.thread() as usize;
    while i < g_len * d_len {
        shm.set(i, q.get(group.q_base + i));
        i += step;
    }
    // Each lane clears only the accumulators it will own, so no one else touches them.
    let my_acc = acc_at + wave * g_len * d_len;
    let mut d = lane;
    while d < d_len {
        let mut g = 0;
        while g < g_len {
            shm.set(my_acc + g * d_len + d, 0.0);
            g += 1;
        }
        d += B::WAVE as usize;
    }
    b.barrier();

    let mut m = [f32::NEG_INFINITY; MAX_GROUP_HEADS];
    let mut l = [0.0f32; MAX_GROUP_HEADS];
    let mut t = span.begin + wave;
    while t < span.end {
        let pos = span.start + t;
        let row = table.get(span.table_base + pos / pool.block_size) as u32 as usize;
        let slot = pos % pool.block_size;
        // Pool offsets are usize: a pool may exceed 2^32 elements.
        let base = ((row * pool.block_size + slot) * pool.heads_kv + group.kv_head) * d_len;

        let mut dot = [0.0f32; MAX_GROUP_HEADS];
        let mut d = lane;
        while d < d_len {
            let k = k_pool.get(base + d).to_f32();
            let mut g = 0;
            while g < g_len {
                dot[g] += shm.get(g * d_len + d) * k;
                g += 1;
            }
            d += B::WAVE as usize;
        }
        let mut corr = [0.0f32; MAX_GROUP_HEADS];
        let mut weight = [0.0f32; MAX_GROUP_HEADS];
        let mut g = 0;
        while g < g_len {
            let s = b.wave_sum(dot[g]) * scale_log2;
            let m_new = if s > m[g] { s } else { m[g] };
            corr[g] = libm::exp2f(m[g] - m_new);
            weight[g] = libm::exp2f(s - m_new);
            l[g] = l[g] * corr[g] + weight[g];
            m[g] = m_new;
            g += 1;
        }
        let mut d = lane;
        while d < d_len {
            let v = v_pool.get(base + d).to_f32();
            let mut g = 0;
            while g < g_len {
                let at = my_acc + g * d_len + d;
                shm.set(at, shm.get(at) * corr[g] + weight[g] * v);
                g += 1;
            }
            d += B::WAVE as usize;
        }
        t += waves;
    }
    if lane == 0 {
        let mut g = 0;
        while g < g_len {
            shm.set(m_at + wave * g_len + g, m[g]);
            shm.set(l_at + wave * g_len + g, l[g]);
            g += 1;
        }
    }
    b.barrier();

    // Merge the waves: rescale each to the largest maximum; waves that saw no token weigh 0.
    let mut i = b.thread() as usize;
    while i < g_len * d_len {
        let g = i / d_len;
        let d = i % d_len;
        let (m_all, l_all) = merged_max_sum(&shm, m_at + g, l_at + g, g_len, waves);
        let mut acc = 0.0f32;
        if m_all != f32::NEG_INFINITY {
            let mut w = 0;
            while w < waves {
                let m_w = shm.get(m_at + w * g_len + g);
                if m_w != f32::NEG_INFINITY {
                    acc += shm.get(acc_at + (w * g_len + g) * d_len + d) * libm::exp2f(m_w - m_all);
                }
                w += 1;
            }
        }
        let o = if l_all > 0.0 { acc / l_all } else { 0.0 };
        out.set(group.out_base + i, o);
        i += step;
    }
    if let Some(lse) = lse {
        let mut g = b.thread() as usize;
        while g < g_len {
            let (m_all, l_all) = merged_max_sum(&shm, m_at + g, l_at + g, g_len, waves);
            let v = if l_all > 0.0 {
                m_all + libm::log2f(l_all)
            } else {
                f32::NEG_INFINITY
            };
            lse.set(group.lse_base + g, v);
            g += step;
        }
    }
}

/// The largest of the waves' maxima and the denominators rescaled to it (`(-inf, 0)` when no
/// wave saw a token). Reads wave `w`'s values at `m_at + w·stride`, `l_at + w·stride`.
#[inline(always)]
fn merged_max_sum(
    shm: &crate::Rw<f32>,
    m_at: usize,
    l_at: usize,
    stride: usize,
    waves: usize,
) -> (f32, f32) {
    let mut m_all = f32::NEG_INFINITY;
    let mut w = 0;
    while w < waves {
        let m_w = shm.get(m_at + w * stride);
        if m_w > m_all {
            m_all = m_w;
        }
        w += 1;
    }
    let mut l_all = 0.0f32;
    if m_all != f32::NEG_INFINITY {
        let mut w = 0;
        while w < waves {
            let m_w = shm.get(m_at + w * stride);
            if m_w != f32::NEG_INFINITY {
                l_all += shm.get(l_at + w * stride) * libm::exp2f(m_w - m_all);
            }
            w += 1;
        }
    }
    (m_all, l_all)
}
