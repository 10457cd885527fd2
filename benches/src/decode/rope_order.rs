//! The two row orders of a q or k projection. Hugging Face and MLX store each head's rows so
//! that RoPE rotates dims `i` and `i + D/2` together (`rotate_half`); llama.cpp's converter
//! interleaves each head's halves so that ggml rotates dims `2i` and `2i + 1`. Moving rows (and
//! a per-head gain) between the orders is exact, and attention's output is unchanged when q and
//! k move alike: the MLX loader puts rows in the order the config's RoPE runs, and the exporter
//! puts a GGUF's rows back in Hugging Face's.

use super::weights::HostMatrix;
use super::DecodeError;
use kiln::quant::AffineTensor;

/// For each row of `heads` heads of `head_dim` in adjacent-pair order, the half-split row it
/// holds: row `h·D + 2i + j` is row `h·D + j·D/2 + i`.
pub fn adjacent_from_half_split(heads: usize, head_dim: usize) -> Vec<usize> {
    let half = head_dim / 2;
    (0..heads * head_dim)
        .map(|r| {
            let (h, d) = (r / head_dim, r % head_dim);
            h * head_dim + (d % 2) * half + d / 2
        })
        .collect()
}

/// For each row in half-split order, the adjacent-pair row it holds (the inverse order).
pub fn half_split_from_adjacent(heads: usize, head_dim: usize) -> Vec<usize> {
    let forward = adjacent_from_half_split(heads, head_dim);
    let mut inverse = vec![0; forward.len()];
    for (to, &from) in forward.iter().enumerate() {
        inverse[from] = to;
    }
    inverse
}

/// `order` applied to `values` taken in runs of `span`: run `p` of the result is run
/// `order[p]` of `values`.
fn gather<T: Copy>(values: &[T], span: usize, order: &[usize]) -> Vec<T> {
    order
        .iter()
        .flat_map(|&r| &values[r * span..(r + 1) * span])
        .copied()
        .collect()
}

/// `m` with row `p` taken from row `order[p]` (`order` a permutation of its rows, checked;
/// `name` names the tensor in the error).
pub fn permute_rows(m: HostMatrix, order: &[usize], name: &str) -> Result<HostMatrix, DecodeError> {
    let bad = |why: String| DecodeError::BadTensor {
        tensor: name.to_string(),
        why,
    };
    let rows = m.rows();
    if order.len() != rows || order.iter().any(|&r| r >= rows) {
        return Err(bad(format!(
            "a row order of {} entries for {rows} rows",
            order.len()
        )));
    }
    Ok(match m {
        HostMatrix::Dense { rows, cols, values } => HostMatrix::Dense {
            rows,
            cols,
            values: gather(&values, cols, order),
        },
        HostMatrix::Affine(t) => {
            let (format, rows, cols, w_q, scales, biases) = t.into_parts();
            let (words, span) = (w_q.len() / rows, scales.len() / rows);
            let w_q = gather(&w_q, words, order);
            let (scales, biases) = (gather(&scales, span, order), gather(&biases, span, order));
            let t = AffineTensor::from_parts(format, rows, cols, w_q, scales, biases)
                .map_err(|e| bad(e.to_string()))?;
            HostMatrix::Affine(t)
        }
    })
}

/// A per-head gain `[head_dim]` in `order` (one head's worth of a row order).
pub fn permute_gain(gain: &[f32], order: &[usize]) -> Vec<f32> {
    gather(gain, 1, &order[..gain.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_orders_are_inverse_permutations() {
        let (heads, d) = (3, 8);
        let fwd = adjacent_from_half_split(heads, d);
        // Head 1's adjacent rows 0..4 are its half-split rows 0, 4, 1, 5.
        assert_eq!(&fwd[8..12], &[8, 12, 9, 13]);
        let inv = half_split_from_adjacent(heads, d);
        for (r, &f) in fwd.iter().enumerate() {
            assert_eq!(inv[f], r);
        }
        let m = HostMatrix::Dense {
            rows: heads * d,
            cols: 2,
            values: (0..heads * d * 2).map(|v| v as f32).collect(),
        };
        let there = permute_rows(m, &fwd, "m").unwrap();
        let HostMatrix::Dense { values, .. } = permute_rows(there, &inv, "m").unwrap() else {
            panic!("a dense matrix stays dense")
        };
        assert!(values.iter().enumerate().all(|(i, &v)| v == i as f32));
        let short = HostMatrix::Dense {
            rows: 2,
            cols: 1,
            values: vec![0.0; 2],
        };
        assert!(permute_rows(short, &fwd, "short").is_err());
    }
}
