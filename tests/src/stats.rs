//! Statistics the distribution tests share: chi-square goodness of fit and normalised laws.

/// Upper 1e-6 quantile of the standard normal.
const Z_1E6: f64 = 4.753_424;

/// Chi-square goodness of fit of `counts` against `probs` (exact, summing to 1), bins with
/// expected count below 5 pooled; zero-probability bins must be empty. Returns
/// (statistic, degrees of freedom, critical value at p = 1e-6 by Wilson–Hilferty).
pub fn chi_square(counts: &[u64], probs: &[f64]) -> (f64, usize, f64) {
    let n: u64 = counts.iter().sum();
    let mut stat = 0.0;
    let mut bins = 0usize;
    let (mut pooled_obs, mut pooled_exp) = (0.0, 0.0);
    for (i, (&c, &p)) in counts.iter().zip(probs).enumerate() {
        if p == 0.0 {
            assert_eq!(c, 0, "token {i} has probability 0 and was drawn {c} times");
            continue;
        }
        let e = p * n as f64;
        if e < 5.0 {
            pooled_obs += c as f64;
            pooled_exp += e;
        } else {
            stat += (c as f64 - e).powi(2) / e;
            bins += 1;
        }
    }
    if pooled_exp > 0.0 {
        stat += (pooled_obs - pooled_exp).powi(2) / pooled_exp.max(1e-300);
        bins += 1;
    }
    let df = bins.saturating_sub(1).max(1);
    let k = df as f64;
    let a = 2.0 / (9.0 * k);
    let crit = k * (1.0 - a + Z_1E6 * a.sqrt()).powi(3);
    (stat, df, crit)
}

/// `v` scaled to sum to 1, as f32.
pub fn normalise(v: &[f64]) -> Vec<f32> {
    let s: f64 = v.iter().sum();
    v.iter().map(|x| (x / s) as f32).collect()
}
