//! Paged-attention test shapes shared by the three paged kernels' parity cases and the tests:
//! requests described by visible length and window start, laid out in a scattered pool.

use crate::case::Check;
use kiln_math::DType;

/// One request: `visible` tokens starting `first_offset` entries into its first page.
#[derive(Clone, Debug)]
pub struct PagedRequest {
    /// Tokens it attends to.
    pub visible: usize,
    /// Entries of its first page before its first visible token (a window's start).
    pub first_offset: usize,
}

/// A batch of requests over one pool geometry.
#[derive(Clone, Debug)]
pub struct PagedCase {
    /// Names the case in reports.
    pub label: String,
    /// Query heads.
    pub heads_q: usize,
    /// KV heads of the pool.
    pub heads_kv: usize,
    /// Elements per head.
    pub head_dim: usize,
    /// Tokens per page.
    pub page_size: usize,
    /// The batch, in order.
    pub requests: Vec<PagedRequest>,
    /// Pages per chunk for the v2 launch.
    pub pages_per_chunk: usize,
    /// Whether the launches may take the tensor-core sweep (the kernels' `mma` param): cases
    /// that turn it off keep the two-pass sweep covered where the sweep fits.
    pub mma: bool,
}

/// CSR page table of a batch (spec §9.3), as i32 values.
#[derive(Clone, Debug, Default)]
pub struct CsrTables {
    /// Pool rows of every request's pages, request after request.
    pub indices: Vec<i32>,
    /// Request `r`'s pages are `indices[indptr[r]..indptr[r + 1]]`.
    pub indptr: Vec<i32>,
    /// Valid entries of each request's last page (0 for an empty request).
    pub last_page_len: Vec<i32>,
    /// Each request's `first_offset` (0 for an empty request).
    pub first_page_offset: Vec<i32>,
    /// Pool rows the tables need (the scattered rows are a permutation of `0..num_blocks`).
    pub num_blocks: usize,
}

impl PagedCase {
    /// The launch params the case sets besides the shapes' (the sweep choice).
    pub fn sweep_params(&self) -> Vec<(&'static str, String)> {
        if self.mma {
            vec![]
        } else {
            vec![("mma", "0".into())]
        }
    }

    /// Pages request `r` spans (0 when it sees no token).
    pub fn pages(&self, r: &PagedRequest) -> usize {
        if r.visible == 0 {
            0
        } else {
            (r.first_offset + r.visible).div_ceil(self.page_size)
        }
    }

    /// The page tables, rows scattered over a pool with a few spare rows so that reading the
    /// wrong row shows.
    pub fn csr(&self) -> CsrTables {
        let total: usize = self.requests.iter().map(|r| self.pages(r)).sum();
        let num_blocks = total + 3;
        // A stride coprime to num_blocks visits every row once, out of order.
        let stride = (2..num_blocks)
            .rev()
            .find(|s| gcd(*s, num_blocks) == 1 && *s != num_blocks - 1)
            .unwrap_or(1);
        let mut t = CsrTables {
            indptr: vec![0],
            num_blocks,
            ..Default::default()
        };
        let mut k = 0usize;
        for r in &self.requests {
            let pages = self.pages(r);
            for _ in 0..pages {
                t.indices.push(((k * stride + 1) % num_blocks) as i32);
                k += 1;
            }
            t.indptr.push(t.indices.len() as i32);
            let last = if pages == 0 {
                0
            } else {
                r.first_offset + r.visible - (pages - 1) * self.page_size
            };
            t.last_page_len.push(last as i32);
            t.first_page_offset
                .push(if pages == 0 { 0 } else { r.first_offset } as i32);
        }
        t
    }

    /// The pool's shape `[num_blocks, page_size, heads_kv, head_dim]`.
    pub fn pool_shape(&self) -> Vec<usize> {
        vec![
            self.csr().num_blocks,
            self.page_size,
            self.heads_kv,
            self.head_dim,
        ]
    }

    /// The v1 tables: rows, row offsets, logical starts and visible lengths (as f64 fills).
    pub fn v1_tables(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let t = self.csr();
        let f = |v: &[i32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();
        let lens: Vec<f64> = self.requests.iter().map(|r| r.visible as f64).collect();
        (f(&t.indices), f(&t.indptr), f(&t.first_page_offset), lens)
    }

    /// Every request's chunks at `pages_per_chunk`, at least one each: (request, tile) pairs.
    pub fn chunks(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (i, r) in self.requests.iter().enumerate() {
            let n = self.pages(r).div_ceil(self.pages_per_chunk).max(1);
            out.extend((0..n).map(|t| (i, t)));
        }
        out
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Spec §9.6 / §15: f32 pools `max_rel < 2e-3`, 16-bit pools `≤ 2e-2` (taken as `< 2e-2`).
pub fn tolerance(dtype: DType) -> Check {
    match dtype {
        DType::F32 => Check::MaxRel { bound: 2e-3 },
        _ => Check::MaxRel { bound: 2e-2 },
    }
}

fn req(visible: usize, first_offset: usize) -> PagedRequest {
    PagedRequest {
        visible,
        first_offset,
    }
}

/// Small shapes for the parity matrix (the sim runs one OS thread per lane): every head dim,
/// GQA 1:1 to 8:1, both page sizes, page-boundary lengths, windows, an empty request.
pub fn sim_cases() -> Vec<PagedCase> {
    let case = |label: &str, hq, hkv, d, ps, requests, ppc| PagedCase {
        label: label.into(),
        heads_q: hq,
        heads_kv: hkv,
        head_dim: d,
        page_size: ps,
        requests,
        pages_per_chunk: ppc,
        mma: true,
    };
    let two_pass = |c: PagedCase| PagedCase {
        label: format!("{} two-pass", c.label),
        mma: false,
        ..c
    };
    // The sims take the cases in turns (case i at wave WAVES[i % 4]), so the order places the
    // tensor-core sweep (16-bit pools at D 128 where the multiply is hardware, waves of 32 and
    // 64) and the two-pass sweep it replaces there on both waves of a multiply.
    vec![
        case(
            "d64 gqa4 ps16 page-boundary b2",
            8,
            2,
            64,
            16,
            vec![req(32, 0), req(17, 0)],
            1,
        ),
        case("d80 gqa1 ps32 window", 2, 2, 80, 32, vec![req(40, 30)], 1),
        two_pass(case(
            "d128 gqa8 ps16 empty-in-batch b3",
            8,
            1,
            128,
            16,
            vec![req(20, 3), req(0, 0), req(33, 0)],
            2,
        )),
        case(
            "d96 gqa4 ps16 one-token-window",
            4,
            1,
            96,
            16,
            vec![req(16, 0), req(1, 15)],
            1,
        ),
        case("d256 gqa2 ps32 window", 4, 2, 256, 32, vec![req(45, 7)], 3),
        case(
            "d128 gqa8 ps16 empty-in-batch b3",
            8,
            1,
            128,
            16,
            vec![req(20, 3), req(0, 0), req(33, 0)],
            2,
        ),
        // Three heads per block and a window.
        case(
            "d128 gqa3 ps32 window",
            6,
            2,
            128,
            32,
            vec![req(100, 20)],
            3,
        ),
        // Tiles past a span, sets with no tile, page crossings inside a tile.
        case(
            "d128 gqa4 ps16 tiles b2",
            8,
            2,
            128,
            16,
            vec![req(75, 5), req(40, 0)],
            2,
        ),
    ]
}
