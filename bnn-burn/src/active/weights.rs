//! The per-row weights that make the risk of actively chosen rows unbiased (Farquhar 2022
//! eqs. 5.7–5.8).

use crate::error::ConfigError;

/// Checks `q` (one pick probability per acquired row, in pick order) against a pool of `n`.
fn check(n: usize, q: &[f64]) -> Result<(), ConfigError> {
    if q.is_empty() || q.len() > n {
        return Err(ConfigError {
            config: "active risk weights",
            field: "q",
            value: format!("{} picks from a pool of {n}", q.len()),
            expected: "between 1 and the pool's size picks",
        });
    }
    if let Some((m, v)) = q
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v > 0.0 && **v <= 1.0))
    {
        return Err(ConfigError {
            config: "active risk weights",
            field: "q",
            value: format!("q[{m}] = {v}"),
            expected: "probabilities in (0, 1]",
        });
    }
    Ok(())
}

/// PURE's weights: row `m` (1-based) carries `1/(N q_m) + (M − m)/N`, so that
/// `R_PURE = (1/M) Σ_m w_m L_m` (Farquhar 2022 eq. 5.7).
///
/// # Errors
/// No picks, more picks than the pool, or a `q` outside `(0, 1]`.
pub fn pure_weights(n: usize, q: &[f64]) -> Result<Vec<f64>, ConfigError> {
    check(n, q)?;
    let (n, big_m) = (n as f64, q.len());
    Ok(q.iter()
        .enumerate()
        .map(|(i, q)| 1.0 / (n * q) + (big_m - (i + 1)) as f64 / n)
        .collect())
}

/// LURE's weights: `v_m = 1 + (N − M)/(N − m) · (1/((N − m + 1) q_m) − 1)`, all 1 when the
/// whole pool is picked (Farquhar 2022 eq. 5.8); lower variance than PURE's.
///
/// # Errors
/// As [`pure_weights`].
pub fn lure_weights(n: usize, q: &[f64]) -> Result<Vec<f64>, ConfigError> {
    check(n, q)?;
    let big_m = q.len();
    if big_m == n {
        return Ok(vec![1.0; n]);
    }
    Ok(q.iter()
        .enumerate()
        .map(|(i, q)| {
            let m = i + 1;
            let left = (n - m + 1) as f64;
            1.0 + (n - big_m) as f64 / (n - m) as f64 * (1.0 / (left * q) - 1.0)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every ordered pick of `m` rows from `scores.len()`, each row chosen with probability
    /// proportional to its score among those left, with its probability and its `q`s.
    fn sequences(scores: &[f64], m: usize) -> Vec<(Vec<usize>, f64, Vec<f64>)> {
        let mut out = Vec::new();
        let mut stack = vec![(Vec::new(), 1.0, Vec::new())];
        while let Some((picked, p, qs)) = stack.pop() {
            if picked.len() == m {
                out.push((picked, p, qs));
                continue;
            }
            let left: Vec<usize> = (0..scores.len()).filter(|i| !picked.contains(i)).collect();
            let total: f64 = left.iter().map(|&i| scores[i]).sum();
            for &i in &left {
                let q = scores[i] / total;
                let mut next = picked.clone();
                next.push(i);
                let mut next_q = qs.clone();
                next_q.push(q);
                stack.push((next, p * q, next_q));
            }
        }
        out
    }

    /// The exact expectation, over every pick sequence, of each estimator: PURE and LURE equal
    /// the pool's mean loss, the plain mean does not (the acquisition favours the high losses).
    #[test]
    fn pure_and_lure_are_unbiased_and_the_plain_mean_is_not() {
        let losses = [0.1, 0.4, 2.0, 0.3, 1.5, 0.05];
        let n = losses.len();
        let truth = losses.iter().sum::<f64>() / n as f64;
        // The acquisition prefers high losses (score = loss + 0.1).
        let scores: Vec<f64> = losses.iter().map(|l| l + 0.1).collect();
        for m in 1..=n {
            let (mut plain, mut pure, mut lure, mut total) = (0.0, 0.0, 0.0, 0.0);
            for (picked, p, qs) in sequences(&scores, m) {
                let l: Vec<f64> = picked.iter().map(|&i| losses[i]).collect();
                let risk = |w: &[f64]| w.iter().zip(&l).map(|(w, l)| w * l).sum::<f64>() / m as f64;
                plain += p * l.iter().sum::<f64>() / m as f64;
                pure += p * risk(&pure_weights(n, &qs).unwrap());
                lure += p * risk(&lure_weights(n, &qs).unwrap());
                total += p;
            }
            assert!((total - 1.0).abs() < 1e-12, "{total}");
            assert!(
                (pure - truth).abs() < 1e-12,
                "M = {m}: PURE {pure} vs {truth}"
            );
            assert!(
                (lure - truth).abs() < 1e-12,
                "M = {m}: LURE {lure} vs {truth}"
            );
            if m < n {
                assert!(
                    plain > truth + 1e-3,
                    "M = {m}: the plain mean {plain} vs {truth}"
                );
            }
        }
    }

    /// Picks follow `q`: each row's frequency within five binomial standard deviations, the
    /// returned `q` the row's probability; `T = 0` is uniform, a large `T` the arg max.
    #[test]
    fn uniform_picks_weigh_every_row_one_and_bad_input_is_named() {
        // Uniform picks: q_m = 1/(N − m + 1) makes every LURE weight 1.
        let n = 8;
        let q: Vec<f64> = (1..=5).map(|m| 1.0 / (n - m + 1) as f64).collect();
        for w in lure_weights(n, &q).unwrap() {
            assert!((w - 1.0).abs() < 1e-12, "{w}");
        }
        assert_eq!(lure_weights(2, &[0.5, 1.0]).unwrap(), vec![1.0, 1.0]);
        for (n, q) in [
            (3, vec![]),
            (1, vec![0.5, 0.5]),
            (4, vec![0.0]),
            (4, vec![f64::NAN]),
        ] {
            assert_eq!(pure_weights(n, &q).unwrap_err().field, "q");
            assert_eq!(lure_weights(n, &q).unwrap_err().field, "q");
        }
    }
}
