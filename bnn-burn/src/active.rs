//! Active learning's statistics: the per-row weights that make the risk of actively chosen
//! rows unbiased (Farquhar et al. 2021, Farquhar 2022 eqs. 5.7–5.10). Rows picked one at a
//! time from a pool of `N`, row `m` with probability `q_m` among the `N − m + 1` left, have
//! a plain mean `R̃ = (1/M) Σ L_m` that is biased towards what the acquisition favours;
//! `R = (1/M) Σ w_m L_m` with [`pure_weights`] or [`lure_weights`] is unbiased for the pool's
//! mean loss. Training multiplies each row's data term by its weight. [`boltzmann_pick`] is
//! the stochastic acquisition whose `q` they need.

use crate::error::ConfigError;
use crate::host::HostNormals;

/// A stochastic acquisition's pick: one row of the pool by `q(i) ∝ exp(T s_i)` over its
/// scores `s` (`T = 0`: uniform; large `T`: the arg max), with `q` of the row picked, which
/// [`pure_weights`] and [`lure_weights`] need (Farquhar 2022 ch. 5).
///
/// # Errors
/// An empty pool, a score that is not finite, or `T` not finite and ≥ 0.
pub fn boltzmann_pick(
    scores: &[f64],
    temperature: f64,
    rng: &mut HostNormals,
) -> Result<(usize, f64), ConfigError> {
    let q = boltzmann_probabilities(scores, temperature)?;
    let u = rng.uniform();
    let mut cumulative = 0.0;
    for (i, p) in q.iter().enumerate() {
        cumulative += p;
        if u < cumulative {
            return Ok((i, *p));
        }
    }
    // Rounding left the sum just below u: the last row with mass.
    let last = q.iter().rposition(|p| *p > 0.0).expect("a row with mass");
    Ok((last, q[last]))
}

/// `q(i) = exp(T s_i) / Σ_j exp(T s_j)`, computed stably (the largest exponent subtracted).
///
/// # Errors
/// As [`boltzmann_pick`].
pub fn boltzmann_probabilities(scores: &[f64], temperature: f64) -> Result<Vec<f64>, ConfigError> {
    let err = |field, value: String, expected| ConfigError {
        config: "boltzmann_pick",
        field,
        value,
        expected,
    };
    if scores.is_empty() {
        return Err(err("scores", "[]".into(), "at least one row in the pool"));
    }
    if let Some((i, s)) = scores.iter().enumerate().find(|(_, s)| !s.is_finite()) {
        return Err(err("scores", format!("scores[{i}] = {s}"), "finite scores"));
    }
    if !(temperature.is_finite() && temperature >= 0.0) {
        return Err(err(
            "temperature",
            temperature.to_string(),
            "a finite number ≥ 0",
        ));
    }
    let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = scores
        .iter()
        .map(|s| (temperature * (s - top)).exp())
        .collect();
    let total: f64 = e.iter().sum();
    Ok(e.into_iter().map(|v| v / total).collect())
}

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
    fn boltzmann_picks_follow_their_probabilities() {
        let scores = [0.3, 1.2, -0.5, 2.0];
        let q = boltzmann_probabilities(&scores, 1.5).unwrap();
        assert!((q.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let mut rng = HostNormals::new(41);
        let draws = 20_000;
        let mut counts = [0usize; 4];
        for _ in 0..draws {
            let (i, qi) = boltzmann_pick(&scores, 1.5, &mut rng).unwrap();
            assert_eq!(qi, q[i]);
            counts[i] += 1;
        }
        for (c, p) in counts.iter().zip(&q) {
            let sd = (draws as f64 * p * (1.0 - p)).sqrt();
            assert!(
                (*c as f64 - draws as f64 * p).abs() < 5.0 * sd,
                "{counts:?} vs {q:?}"
            );
        }
        assert_eq!(
            boltzmann_probabilities(&scores, 0.0).unwrap(),
            vec![0.25; 4]
        );
        let sharp = boltzmann_probabilities(&[1.0, 900.0, 3.0], 50.0).unwrap();
        assert_eq!(sharp[1], 1.0);
        for (s, t, field) in [
            (&[][..], 1.0, "scores"),
            (&[1.0, f64::NAN][..], 1.0, "scores"),
            (&[1.0][..], -1.0, "temperature"),
        ] {
            assert_eq!(boltzmann_probabilities(s, t).unwrap_err().field, field);
        }
    }

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
