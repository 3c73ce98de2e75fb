//! Pareto-smoothed importance sampling (Vehtari et al. 2024, "Pareto smoothed importance
//! sampling", JMLR): a generalised Pareto fit to the largest importance ratios `p̃(θ)/q(θ)` of
//! draws from `q`, its shape `k̂` (the diagnostic of Yao et al. 2018) and the smoothed weights.

/// The reliability bands of `k̂` (Vehtari et al. 2024 §3; Brack 2022 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KHatBand {
    /// `k̂ < 0.5`: the importance-weighted estimates converge quickly; `q` is close to `p`.
    Good,
    /// `0.5 ≤ k̂ < 0.7`: usable, with slower convergence.
    Acceptable,
    /// `k̂ ≥ 0.7`: the ratios' variance is effectively infinite; `q` is unreliable.
    Unreliable,
}

impl KHatBand {
    /// The band of `k`.
    pub fn of(k: f64) -> Self {
        if k < 0.5 {
            Self::Good
        } else if k < 0.7 {
            Self::Acceptable
        } else {
            Self::Unreliable
        }
    }

    /// The band's name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Good => "good",
            Self::Acceptable => "ok",
            Self::Unreliable => "bad",
        }
    }
}

/// Why PSIS cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PsisError {
    /// Too few draws for a tail fit.
    #[error("PSIS needs at least {min} log ratios, got {got}")]
    TooFew {
        /// The minimum.
        min: usize,
        /// The count given.
        got: usize,
    },
    /// A log ratio is NaN or +∞ (−∞, a zero weight, is allowed).
    #[error("log ratio {index} is {value}: PSIS needs finite log ratios (or −∞ for zero weight)")]
    NotFinite {
        /// Its index.
        index: usize,
        /// Its value.
        value: f64,
    },
}

/// The result of [`psis`].
#[derive(Debug, Clone, PartialEq)]
pub struct Psis {
    /// The Pareto shape `k̂` of the ratios' tail, with the weakly informative prior of Vehtari
    /// et al. (2024, eq. 3.2); `−∞` when the tail has no spread (every ratio equal: `q ∝ p`).
    pub k_hat: f64,
    /// The number `M` of tail ratios fitted: `⌈min(S/5, 3√S)⌉`.
    pub tail_len: usize,
    /// The smoothed log weights, normalised (`Σ exp = 1`), in the input's order.
    pub log_weights: Vec<f64>,
}

impl Psis {
    /// The band of `k̂`.
    pub fn band(&self) -> KHatBand {
        KHatBand::of(self.k_hat)
    }
}

/// PSIS of `log_ratios` (`ln p̃(θ_s) − ln q(θ_s)`, draws `θ_s ~ q`).
///
/// # Errors
/// Fewer than 10 ratios; a NaN or `+∞` ratio.
pub fn psis(log_ratios: &[f64]) -> Result<Psis, PsisError> {
    let s = log_ratios.len();
    if s < 10 {
        return Err(PsisError::TooFew { min: 10, got: s });
    }
    if let Some((index, &value)) = log_ratios
        .iter()
        .enumerate()
        .find(|(_, r)| r.is_nan() || **r == f64::INFINITY)
    {
        return Err(PsisError::NotFinite { index, value });
    }
    let max = log_ratios.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let shifted: Vec<f64> = log_ratios.iter().map(|r| r - max).collect();
    let tail_len = ((0.2 * s as f64).min(3.0 * (s as f64).sqrt())).ceil() as usize;
    let mut order: Vec<usize> = (0..s).collect();
    order.sort_by(|&a, &b| shifted[a].total_cmp(&shifted[b]));
    let tail = &order[s - tail_len..];
    let cutoff = shifted[order[s - tail_len - 1]];
    let exceed: Vec<f64> = tail
        .iter()
        .map(|&i| shifted[i].exp() - cutoff.exp())
        .collect();
    let mut log_weights = shifted.clone();
    let k_hat = if exceed.iter().all(|&e| e <= 0.0) {
        // No spread above the cut-off: every tail ratio equals it, nothing to smooth.
        f64::NEG_INFINITY
    } else {
        let (k, sigma) = gpd_fit(&exceed);
        // The tail replaced by the fitted quantiles at (z − ½)/M, capped at the largest raw
        // weight (exp(0) = 1 after the shift).
        for (z, &i) in tail.iter().enumerate() {
            let p = (z as f64 + 0.5) / tail_len as f64;
            let q = cutoff.exp() + gpd_quantile(p, k, sigma);
            log_weights[i] = q.min(1.0).ln();
        }
        k
    };
    let lmax = log_weights
        .iter()
        .cloned()
        .fold(f64::NEG_INFINITY, f64::max);
    let lse = lmax
        + log_weights
            .iter()
            .map(|w| (w - lmax).exp())
            .sum::<f64>()
            .ln();
    for w in &mut log_weights {
        *w -= lse;
    }
    Ok(Psis {
        k_hat,
        tail_len,
        log_weights,
    })
}

/// The generalised Pareto quantile at probability `p` (shape `k`, scale `σ`, location 0).
fn gpd_quantile(p: f64, k: f64, sigma: f64) -> f64 {
    if k.abs() < 1e-12 {
        -sigma * (-p).ln_1p()
    } else {
        sigma * ((-p).ln_1p() * -k).exp_m1() / k
    }
}

/// The shape `k` and scale `σ` of a generalised Pareto fitted to exceedances `x ≥ 0` (any
/// order) by Zhang & Stephens (2009)'s posterior-mean estimator, with Vehtari et al. (2024)'s
/// prior `k ← (M k + 5)/(M + 10)` (a weight of 10 pseudo-draws at `k = 0.5`).
///
/// Under the parameterisation `θ = −k/σ`, the profile log likelihood is
/// `ℓ(θ) = M(ln(−θ/k(θ)) − k(θ) − 1)` with `k(θ) = mean ln(1 − θ x)`; `θ̂` averages a grid
/// of `30 + ⌊√M⌋` values weighted by `exp ℓ`.
pub fn gpd_fit(x: &[f64]) -> (f64, f64) {
    let mut x = x.to_vec();
    x.sort_by(f64::total_cmp);
    let n = x.len();
    let m = 30 + (n as f64).sqrt() as usize;
    let quartile = x[((n as f64 / 4.0 + 0.5) as usize).max(1) - 1];
    let largest = x[n - 1];
    let k_of = |theta: f64| x.iter().map(|&v| (-theta * v).ln_1p()).sum::<f64>() / n as f64;
    let grid: Vec<f64> = (1..=m)
        .map(|j| 1.0 / largest + (1.0 - (m as f64 / (j as f64 - 0.5)).sqrt()) / (3.0 * quartile))
        .collect();
    let profile: Vec<f64> = grid
        .iter()
        .map(|&theta| {
            let k = k_of(theta);
            n as f64 * ((-theta / k).ln() - k - 1.0)
        })
        .collect();
    // w_j = 1 / Σ_i exp(ℓ_i − ℓ_j), the profile likelihood normalised over the grid.
    let weights: Vec<f64> = profile
        .iter()
        .map(|lj| {
            let total: f64 = profile
                .iter()
                .filter(|li| li.is_finite())
                .map(|li| (li - lj).exp())
                .sum();
            if lj.is_finite() { 1.0 / total } else { 0.0 }
        })
        .collect();
    let kept: f64 = weights.iter().filter(|&&w| w >= 10.0 * f64::EPSILON).sum();
    let theta: f64 = grid
        .iter()
        .zip(&weights)
        .filter(|(_, w)| **w >= 10.0 * f64::EPSILON)
        .map(|(t, w)| t * w / kept)
        .sum();
    let k = k_of(theta);
    let sigma = -k / theta;
    let k = (n as f64 * k + 10.0 * 0.5) / (n as f64 + 10.0);
    (k, sigma)
}
