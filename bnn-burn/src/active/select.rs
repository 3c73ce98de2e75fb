//! How a round's rows are chosen from the pool: the top scores, a thinned ranking, uniformly,
//! or by the Boltzmann proposal, each pick with the probability `q` it had among the rows left.

use crate::error::ConfigError;
use crate::host::HostNormals;

/// How a round's rows are chosen from the pool, given one score per pool row.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Selection {
    /// Uniformly at random among the rows left (no scores needed).
    Random,
    /// The highest scores (ties to the earlier pool row): deterministic, every `q = 1`.
    Top,
    /// The `from` highest scores, every `every`-th of them (ranks 0, `every`, 2·`every`, …),
    /// then uniformly at random among those (Haußmann 2021 Table 4.2's thinned max-entropy:
    /// `from = 1000`, `every = 20`).
    Thinned {
        /// Keep every `every`-th row of the ranking (≥ 1).
        every: usize,
        /// Rank only the `from` highest scores (≥ 1).
        from: usize,
    },
    /// `q(i) ∝ exp(T s_i)` among the rows left, one row at a time (Farquhar 2022 ch. 5's
    /// stochastic acquisition, whose `q` the unbiased risks need).
    Boltzmann {
        /// `T ≥ 0` (0: uniform; large: the arg max).
        temperature: f64,
    },
    /// `q(i) ∝ s_i + floor` among the rows left, one row at a time, for scores `s ≥ 0` (active
    /// testing's proposal: the expected loss, Kossen et al. 2021). A positive `floor` keeps
    /// every row possible, which an unbiased estimate needs.
    Proportional {
        /// Added to every score (≥ 0; all rows at zero mass: uniform).
        floor: f64,
    },
}

impl Selection {
    /// Whether the selection reads scores.
    pub fn needs_scores(&self) -> bool {
        !matches!(self, Self::Random)
    }
}

/// One acquired row: its index in the data, the probability it had among the rows left when
/// it was picked, and its score (none for random picks).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pick {
    /// The row of the data.
    pub row: usize,
    /// `q(row)` at its pick, in `(0, 1]`.
    pub q: f64,
    /// Its acquisition score.
    pub score: Option<f64>,
}

fn bad(field: &'static str, value: String, expected: &'static str) -> ConfigError {
    ConfigError {
        config: "active selection",
        field,
        value,
        expected,
    }
}

/// Picks `k` distinct rows of `pool` (rows of the data) by `selection`, reading `scores` (one
/// per pool row, in its order) where it needs them.
///
/// # Errors
/// `k` of 0 or above the pool's size, scores missing or of another length or not finite, or
/// the selection's own parameters out of range.
pub fn select(
    selection: Selection,
    pool: &[usize],
    scores: Option<&[f64]>,
    k: usize,
    rng: &mut HostNormals,
) -> Result<Vec<Pick>, ConfigError> {
    if k == 0 || k > pool.len() {
        return Err(bad(
            "k",
            format!("{k} picks from a pool of {}", pool.len()),
            "between 1 and the pool's size",
        ));
    }
    if selection.needs_scores() && scores.is_none() {
        return Err(bad("scores", "none".into(), "one score per pool row"));
    }
    if let Some(s) = scores {
        if s.len() != pool.len() {
            return Err(bad(
                "scores",
                format!("{} scores for {} pool rows", s.len(), pool.len()),
                "one score per pool row",
            ));
        }
        if let Some((i, v)) = s.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(bad("scores", format!("scores[{i}] = {v}"), "finite scores"));
        }
    }
    let score = |i: usize| scores.map(|s| s[i]);
    let pick = |i: usize, q: f64| Pick {
        row: pool[i],
        q,
        score: score(i),
    };
    Ok(match selection {
        Selection::Random => uniform(&(0..pool.len()).collect::<Vec<_>>(), k, rng)
            .into_iter()
            .map(|(i, q)| pick(i, q))
            .collect(),
        Selection::Top => ranking(scores.expect("checked"))
            .into_iter()
            .take(k)
            .map(|i| pick(i, 1.0))
            .collect(),
        Selection::Thinned { every, from } => {
            if every == 0 || from == 0 {
                return Err(bad(
                    "every, from",
                    format!("{every}, {from}"),
                    "both at least 1",
                ));
            }
            let candidates: Vec<usize> = ranking(scores.expect("checked"))
                .into_iter()
                .take(from)
                .step_by(every)
                .collect();
            if candidates.len() < k {
                return Err(bad(
                    "k",
                    format!(
                        "{k} picks from {} rows thinned (every {every} of the top {from})",
                        candidates.len()
                    ),
                    "at most the thinned ranking's rows",
                ));
            }
            uniform(&candidates, k, rng)
                .into_iter()
                .map(|(i, q)| pick(i, q))
                .collect()
        }
        Selection::Boltzmann { temperature } => {
            let s = scores.expect("checked");
            let mut left: Vec<usize> = (0..pool.len()).collect();
            let mut out = Vec::with_capacity(k);
            for _ in 0..k {
                let sub: Vec<f64> = left.iter().map(|&i| s[i]).collect();
                let (j, q) = boltzmann_pick(&sub, temperature, rng)?;
                out.push(pick(left.remove(j), q));
            }
            out
        }
        Selection::Proportional { floor } => {
            let s = scores.expect("checked");
            if !(floor.is_finite() && floor >= 0.0) {
                return Err(bad("floor", floor.to_string(), "a finite number ≥ 0"));
            }
            if let Some((i, v)) = s.iter().enumerate().find(|(_, v)| **v < 0.0) {
                return Err(bad(
                    "scores",
                    format!("scores[{i}] = {v}"),
                    "scores ≥ 0 for a proportional proposal",
                ));
            }
            let mut left: Vec<usize> = (0..pool.len()).collect();
            let mut out = Vec::with_capacity(k);
            for _ in 0..k {
                let mass: Vec<f64> = left.iter().map(|&i| s[i] + floor).collect();
                let (j, q) = proportional_pick(&mass, rng);
                out.push(pick(left.remove(j), q));
            }
            out
        }
    })
}

/// One position of `mass` (≥ 0) drawn with probability `mass_i / Σ mass` (uniform when all
/// are 0), with that probability.
fn proportional_pick(mass: &[f64], rng: &mut HostNormals) -> (usize, f64) {
    let total: f64 = mass.iter().sum();
    if total <= 0.0 {
        let j = rng.choose_distinct(mass.len(), 1)[0];
        return (j, 1.0 / mass.len() as f64);
    }
    let q: Vec<f64> = mass.iter().map(|m| m / total).collect();
    draw(&q, rng.uniform())
}

/// The position whose cumulative probability first passes `u ∈ [0, 1)`, with its
/// probability; rounding that leaves the sum just below `u` gives the last row with mass.
fn draw(q: &[f64], u: f64) -> (usize, f64) {
    let mut cumulative = 0.0;
    for (i, p) in q.iter().enumerate() {
        cumulative += p;
        if u < cumulative {
            return (i, *p);
        }
    }
    let last = q.iter().rposition(|p| *p > 0.0).expect("a row with mass");
    (last, q[last])
}

/// Positions `0..scores.len()` by score, highest first, ties in order.
fn ranking(scores: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
    order
}

/// `k` of `candidates` uniformly without replacement, each with `q = 1/(candidates left)`.
fn uniform(candidates: &[usize], k: usize, rng: &mut HostNormals) -> Vec<(usize, f64)> {
    rng.choose_distinct(candidates.len(), k)
        .into_iter()
        .enumerate()
        .map(|(m, j)| (candidates[j], 1.0 / (candidates.len() - m) as f64))
        .collect()
}

/// A stochastic acquisition's pick: one row of the pool by `q(i) ∝ exp(T s_i)` over its
/// scores `s` (`T = 0`: uniform; large `T`: the arg max), with `q` of the row picked, which
/// [`super::pure_weights`] and [`super::lure_weights`] need (Farquhar 2022 ch. 5).
///
/// # Errors
/// An empty pool, a score that is not finite, or `T` not finite and ≥ 0.
pub fn boltzmann_pick(
    scores: &[f64],
    temperature: f64,
    rng: &mut HostNormals,
) -> Result<(usize, f64), ConfigError> {
    let q = boltzmann_probabilities(scores, temperature)?;
    Ok(draw(&q, rng.uniform()))
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn selections_pick_distinct_pool_rows_with_their_probabilities() {
        let pool = [10, 11, 12, 13, 14, 15, 16, 17];
        let scores = [0.1, 0.9, 0.5, 0.9, 0.2, 0.8, 0.0, 0.7];
        let mut rng = HostNormals::new(3);
        // Top: the ranking, ties to the earlier row.
        let top = select(Selection::Top, &pool, Some(&scores), 3, &mut rng).unwrap();
        let rows: Vec<usize> = top.iter().map(|p| p.row).collect();
        assert_eq!(rows, [11, 13, 15]);
        assert!(top.iter().all(|p| p.q == 1.0) && top[0].score == Some(0.9));
        // Thinned: ranks 0, 3, 6 of the top 8 are rows 11, 17, 10; two of them at random.
        for _ in 0..20 {
            let t = select(
                Selection::Thinned { every: 3, from: 8 },
                &pool,
                Some(&scores),
                2,
                &mut rng,
            )
            .unwrap();
            assert!(t.iter().all(|p| [11, 17, 10].contains(&p.row)), "{t:?}");
            assert_ne!(t[0].row, t[1].row);
            assert_eq!((t[0].q, t[1].q), (1.0 / 3.0, 0.5));
        }
        // Random and Boltzmann: distinct rows of the pool; Boltzmann's q among the rows left.
        let r = select(Selection::Random, &pool, None, 8, &mut rng).unwrap();
        let mut rows: Vec<usize> = r.iter().map(|p| p.row).collect();
        rows.sort_unstable();
        assert_eq!(rows, pool);
        assert_eq!(r[7].q, 1.0);
        assert!((r[0].q - 0.125).abs() < 1e-15 && r[0].score.is_none());
        let b = select(
            Selection::Boltzmann { temperature: 2.0 },
            &pool,
            Some(&scores),
            3,
            &mut rng,
        )
        .unwrap();
        let first = boltzmann_probabilities(&scores, 2.0).unwrap();
        let i0 = pool.iter().position(|r| *r == b[0].row).unwrap();
        assert_eq!(b[0].q, first[i0]);
        let left: Vec<f64> = (0..8).filter(|i| *i != i0).map(|i| scores[i]).collect();
        let second = boltzmann_probabilities(&left, 2.0).unwrap();
        let i1 = pool
            .iter()
            .filter(|r| **r != b[0].row)
            .position(|r| *r == b[1].row)
            .unwrap();
        assert_eq!(b[1].q, second[i1]);
        // Bad input is named.
        for (sel, s, k, field) in [
            (Selection::Top, None, 1, "scores"),
            (Selection::Top, Some(&scores[..3]), 1, "scores"),
            (Selection::Random, None, 0, "k"),
            (Selection::Random, None, 9, "k"),
            (
                Selection::Thinned { every: 0, from: 8 },
                Some(&scores[..]),
                1,
                "every, from",
            ),
            (
                Selection::Thinned { every: 4, from: 8 },
                Some(&scores[..]),
                3,
                "k",
            ),
        ] {
            assert_eq!(select(sel, &pool, s, k, &mut rng).unwrap_err().field, field);
        }
    }
}
