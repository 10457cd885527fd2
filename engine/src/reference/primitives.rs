//! Simple host ops the reference chains compose.

use kiln_math::Element;

/// `out[i] = rnd_T(a[i] + b[i])`.
pub fn add<T: Element>(a: &[T], b: &[T]) -> Vec<T> {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| T::from_f32((x.to_f32() as f64 + y.to_f32() as f64) as f32))
        .collect()
}

/// The gain an RMSNorm applies: `w`, or `rnd_T(bias + w)` folded in the weight's own dtype.
pub fn norm_gain<T: Element>(weight: &[T], bias: f32) -> Vec<f64> {
    weight
        .iter()
        .map(|&w| {
            if bias == 0.0 {
                w.to_f32() as f64
            } else {
                T::from_f32(bias + w.to_f32()).to_f32() as f64
            }
        })
        .collect()
}

/// `1 / sqrt(sum_sq / n + eps)`, NaN when the sum of squares is not finite in f32 (the row then
/// normalizes to NaN, docs/non-finite.md).
pub fn inverse_rms(sum_sq: f64, n: usize, eps: f32) -> f64 {
    if (sum_sq as f32).is_finite() {
        1.0 / (sum_sq / n as f64 + eps as f64).sqrt()
    } else {
        f64::NAN
    }
}

/// RMSNorm over rows of `gain.len()`: `rnd_T(gain · rnd_T(x / sqrt(mean(x²) + eps)))`; a row
/// whose sum of squares is not finite is NaN.
pub fn rms_norm<T: Element>(x: &[T], gain: &[f64], eps: f32, out: &mut [T]) {
    let dim = gain.len();
    assert!(dim > 0 && x.len().is_multiple_of(dim) && out.len() == x.len());
    for (row, orow) in x.chunks(dim).zip(out.chunks_mut(dim)) {
        let inv = inverse_rms(
            row.iter().map(|v| (v.to_f32() as f64).powi(2)).sum(),
            dim,
            eps,
        );
        for ((o, &v), &g) in orow.iter_mut().zip(row).zip(gain) {
            let scaled = T::from_f32((v.to_f32() as f64 * inv) as f32).to_f32() as f64;
            *o = T::from_f32((g * scaled) as f32);
        }
    }
}

/// One unfused elementwise op: `out[i] = rnd_T(f(a[i]))`, `f` evaluated in f64.
pub fn map<T: Element>(a: &[T], f: impl Fn(f64) -> f64) -> Vec<T> {
    a.iter()
        .map(|&x| T::from_f32(f(x.to_f32() as f64) as f32))
        .collect()
}

/// One unfused binary elementwise op: `out[i] = rnd_T(f(a[i], b[i]))`, `f` evaluated in f64.
pub fn zip<T: Element>(a: &[T], b: &[T], f: impl Fn(f64, f64) -> f64) -> Vec<T> {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| T::from_f32(f(x.to_f32() as f64, y.to_f32() as f64) as f32))
        .collect()
}

/// A scalar materialised in the array dtype, as the graph does with a Python float.
pub fn scalar<T: Element>(v: f32) -> f64 {
    T::from_f32(v).to_f32() as f64
}

/// The pool geometry of layout A `[num_blocks, block_size, heads_kv, head_dim]` (spec §9.1).
#[derive(Clone, Copy, Debug)]
pub struct KvPoolShape {
    /// Pool rows (pages).
    pub num_blocks: usize,
    /// Tokens per page.
    pub block_size: usize,
    /// KV heads per token.
    pub heads_kv: usize,
    /// Elements per head.
    pub head_dim: usize,
}

/// Gathers `len` visible tokens of one sequence, starting `start` entries into the first page
/// of `pages` (its pool rows in order), as `[len, heads_kv, head_dim]` f64. `None` when a page
/// index is missing or a row lies outside the pool.
pub fn gather_visible<T: Element>(
    pool: &[T],
    shape: KvPoolShape,
    pages: &[i32],
    start: usize,
    len: usize,
) -> Option<Vec<f64>> {
    let token = shape.heads_kv * shape.head_dim;
    let mut out = Vec::with_capacity(len * token);
    for t in 0..len {
        let pos = start + t;
        let row = usize::try_from(*pages.get(pos / shape.block_size)?).ok()?;
        if row >= shape.num_blocks {
            return None;
        }
        let at = (row * shape.block_size + pos % shape.block_size) * token;
        out.extend(pool.get(at..at + token)?.iter().map(|v| v.to_f32() as f64));
    }
    Some(out)
}

/// Single-query attention in f64 over gathered `[len, heads_kv, head_dim]` keys and values for
/// query head `head` (KV head `head / (heads_q / heads_kv)`): returns the output row and the
/// natural-log sum of exponentials of the scaled scores (`-inf` with zeros when `len = 0`). A
/// score that is not finite makes the row and the sum NaN (docs/non-finite.md).
pub fn attend(
    q: &[f32],
    keys: &[f64],
    values: &[f64],
    heads_kv: usize,
    kv_head: usize,
    scale: f64,
) -> (Vec<f64>, f64) {
    let d = q.len();
    let len = keys.len() / (heads_kv * d);
    let at = |t: usize| (t * heads_kv + kv_head) * d;
    let scores: Vec<f64> = (0..len)
        .map(|t| {
            let k = &keys[at(t)..at(t) + d];
            scale * q.iter().zip(k).map(|(&a, &b)| a as f64 * b).sum::<f64>()
        })
        .collect();
    let mut out = vec![0.0; d];
    if scores.iter().any(|s| !s.is_finite()) {
        return (vec![f64::NAN; d], f64::NAN);
    }
    let Some(max) = scores.iter().copied().reduce(f64::max) else {
        return (out, f64::NEG_INFINITY);
    };
    let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    for (t, w) in weights.iter().enumerate() {
        for (o, v) in out.iter_mut().zip(&values[at(t)..at(t) + d]) {
            *o += w / total * v;
        }
    }
    (out, max + total.ln())
}

/// [`attend`] for every query head of one request: `q` and `out` are its `[Hq, D]` rows (query
/// head `h` uses KV head `h / (Hq / heads_kv)`); returns each head's natural-log LSE. An output
/// element that is not finite (a value was not) is NaN.
pub fn attend_heads(
    q: &[f32],
    keys: &[f64],
    values: &[f64],
    heads_kv: usize,
    head_dim: usize,
    scale: f64,
    out: &mut [f32],
) -> Vec<f64> {
    let hq = q.len() / head_dim;
    (0..hq)
        .map(|h| {
            let row = h * head_dim..(h + 1) * head_dim;
            let (o, lse) = attend(
                &q[row.clone()],
                keys,
                values,
                heads_kv,
                h / (hq / heads_kv),
                scale,
            );
            for (dst, v) in out[row].iter_mut().zip(o) {
                *dst = kiln_math::nan_unless_finite(v as f32);
            }
            lse
        })
        .collect()
}

/// LayerNorm over rows of `weight.len()`, in f32 as the unfused graph computes it: `mean` and
/// the centred sum of squares summed in index order, `inv = 1 / sqrt(var + eps)`, then
/// `rnd_T(w · ((x − mean) · inv) + bias)`; `bias` has one value per column or one in all.
pub fn layer_norm_f32<T: Element>(x: &[T], weight: &[T], bias: &[T], eps: f32, out: &mut [T]) {
    let dim = weight.len();
    assert!(dim > 0 && x.len().is_multiple_of(dim) && out.len() == x.len());
    assert!(bias.len() == dim || bias.len() == 1);
    for (row, orow) in x.chunks(dim).zip(out.chunks_mut(dim)) {
        let mut sum = 0.0f32;
        for v in row {
            sum += v.to_f32();
        }
        let mean = sum / dim as f32;
        let mut sq = 0.0f32;
        for v in row {
            let c = v.to_f32() - mean;
            sq += c * c;
        }
        let inv = 1.0 / (sq / dim as f32 + eps).sqrt();
        for (j, (o, v)) in orow.iter_mut().zip(row).enumerate() {
            let b = bias[if bias.len() == 1 { 0 } else { j }].to_f32();
            *o = T::from_f32(weight[j].to_f32() * ((v.to_f32() - mean) * inv) + b);
        }
    }
}
