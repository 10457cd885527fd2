//! xIELU activation (spec §10), elementwise.
//!
//! `y = α_p·x² + β·x` for `x > 0`, `y = α_n·(expm1(min(x, ε)) − x) + β·x` otherwise, with every
//! intermediate rounded to `T` where the unfused elementwise graph stores a tensor:
//! `x²`, `α_p·x²`, `min(x, ε)`, `expm1(·)`, `· − x`, `· α_n`, `x·β` and the final add. The
//! scalars arrive as f32 and are rounded to `T` once. f32 arithmetic followed by one rounding
//! to `T` is the correctly rounded `T` operation (f32 has more than twice the bits of f16/bf16),
//! so the bits match a graph that computes in `T`.

use crate::kernel::shape;
use crate::{is_16bit, Block, Dst, Element, KernelDef, Launch, ShapeError, Src};

crate::params! {
    /// Params of `fused_xielu`. `alpha_p` and `alpha_n` are the effective (post-softplus) values.
    pub struct XieluParams {
        /// Elements of `x`.
        pub n: u32,
        /// Effective positive-branch scale, `softplus(alpha_p_raw)`.
        pub alpha_p: f32 = 0.8,
        /// Effective negative-branch scale, `beta + softplus(alpha_n_raw)`.
        pub alpha_n: f32 = 0.8,
        /// Linear term.
        pub beta: f32 = 0.5,
        /// Clamp of the negative branch's `expm1` argument (checkpoint default −1e-6).
        pub eps: f32 = -1e-6,
    }
}

/// Elements per block: a contiguous tile, `CHUNK` elements per thread on a GPU block of 256;
/// other blocks (the serial cpu block) stride through the same tile.
const TILE: u32 = 2048;

/// Contiguous elements a thread loads and stores at once where the views allow (16 bytes of a
/// 16-bit type): the per-thread setup is paid once per eight elements.
const CHUNK: usize = 8;

/// Descriptor of `fused_xielu`.
pub struct FusedXielu;

impl KernelDef for FusedXielu {
    type Params = XieluParams;
    const NAME: &'static str = "fused_xielu";

    /// Buffers: `x` (any shape), `out` (the shape of `x`).
    fn bind(p: &mut XieluParams, shapes: &[&[usize]]) -> Result<(), ShapeError> {
        let [x, out] = shapes else {
            return Err(ShapeError::BufferCount {
                got: shapes.len(),
                want: 2,
            });
        };
        if out != x {
            return Err(ShapeError::Invalid("out must have the shape of x"));
        }
        let n = shape::numel(x);
        shape::nonzero("elements of x", n)?;
        for (what, v) in [
            ("alpha_p", p.alpha_p),
            ("alpha_n", p.alpha_n),
            ("beta", p.beta),
            ("eps", p.eps),
        ] {
            if !v.is_finite() {
                return Err(ShapeError::Range {
                    what,
                    got: v as f64,
                    lo: f32::MIN as f64,
                    hi: f32::MAX as f64,
                });
            }
        }
        p.n = shape::to_u32("elements of x", n)?;
        Ok(())
    }

    fn launch(p: &XieluParams) -> Launch {
        Launch {
            grid: [p.n.div_ceil(TILE), 1, 1],
            block: TILE / CHUNK as u32,
        }
    }
}

/// One xIELU element with the graph's rounding points (the products that meet an add kept
/// unfused: [`Block::unfused`]).
#[inline(always)]
pub fn xielu_element<T: Element, B: Block>(
    b: &B,
    x: T,
    alpha_p: T,
    alpha_n: T,
    beta: T,
    eps: T,
) -> T {
    let r = |v: f32| T::from_f32(v).to_f32();
    let xf = x.to_f32();
    let positive = r(b.unfused(alpha_p.to_f32() * r(xf * xf)));
    // `min(x, ε)` is x or ε, both values of T already: its rounding is the identity.
    let em1 = r(crate::expm1f_nonpositive(clamp(xf, eps.to_f32())));
    let negative = r(b.unfused(r(em1 - xf) * alpha_n.to_f32()));
    let branch = if xf > 0.0 { positive } else { negative };
    T::from_f32(branch + r(b.unfused(xf * beta.to_f32())))
}

/// `min(x, ε)` propagating NaN, as the graph's minimum does.
#[inline(always)]
fn clamp(x: f32, eps: f32) -> f32 {
    if x.is_nan() || x < eps {
        x
    } else {
        eps
    }
}

/// Two elements of a 16-bit `T` through [`xielu_element`]'s chain, every op but `expm1` one
/// packed operation of `T` for both ([`Element::mul_pair`]: the same bits as the f32 op
/// rounded, and no rounding left to fuse across); `s` is `[α_p, α_n, β, ε]` in `T`.
#[inline(always)]
pub fn xielu_pair<T: Element>(x: [T; 2], s: [T; 4]) -> [T; 2] {
    let positive = T::mul_pair([s[0]; 2], T::mul_pair(x, x));
    let xf = [x[0].widen(), x[1].widen()];
    let e = s[3].widen();
    let em1 = crate::expm1_rounded_pair::<T>([clamp(xf[0], e), clamp(xf[1], e)]);
    let negative = T::mul_pair(T::sub_pair(em1, x), [s[1]; 2]);
    let linear = T::mul_pair(x, [s[2]; 2]);
    let branch = [
        if xf[0] > 0.0 { positive[0] } else { negative[0] },
        if xf[1] > 0.0 { positive[1] } else { negative[1] },
    ];
    T::add_pair(branch, linear)
}

/// The body: block `k` handles the tile `[k·TILE, (k+1)·TILE)`; thread `t` takes chunks
/// `t, t + size, …` of a whole, aligned tile, else elements `t, t + size, …`.
pub fn fused_xielu<T: Element, B: Block>(b: &B, p: &XieluParams, x: Src<T>, out: Dst<T>) {
    let (alpha_p, alpha_n) = (T::from_f32(p.alpha_p), T::from_f32(p.alpha_n));
    let (beta, eps) = (T::from_f32(p.beta), T::from_f32(p.eps));
    let start = b.block_x() as usize * TILE as usize;
    let end = (start + TILE as usize).min(p.n as usize);
    let wide = end - start == TILE as usize
        && x.chunk_aligned::<CHUNK>(start)
        && out.chunk_aligned::<CHUNK>(start);
    if wide {
        let mut at = start + b.thread() as usize * CHUNK;
        while at < end {
            let xs = x.get_chunk::<CHUNK>(at);
            let mut ys = xs;
            let mut j = 0;
            while j < CHUNK {
                if is_16bit::<T>() {
                    let y = xielu_pair([xs[j], xs[j + 1]], [alpha_p, alpha_n, beta, eps]);
                    ys[j] = y[0];
                    ys[j + 1] = y[1];
                } else {
                    ys[j] = xielu_element(b, xs[j], alpha_p, alpha_n, beta, eps);
                    ys[j + 1] = xielu_element(b, xs[j + 1], alpha_p, alpha_n, beta, eps);
                }
                j += 2;
            }
            out.set_chunk(at, ys);
            at += b.size() as usize * CHUNK;
        }
    } else {
        let mut i = start + b.thread() as usize;
        while i < end {
            out.set(i, xielu_element(b, x.get(i), alpha_p, alpha_n, beta, eps));
            i += b.size() as usize;
        }
    }
}
