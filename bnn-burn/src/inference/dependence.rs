//! How far from mean-field a set of posterior draws is (Farquhar 2022 eqs. 3.2–3.3): a
//! Gaussian `q̂_full` fitted to the draws, its diagonal-precision counterpart `q̂_diag` (same
//! mean, `var_i = 1/Λ_ii`), `E_KL = KL(q̂_full ‖ q̂_diag)` and
//! `E_W = W₂(p, q̂_diag) − W₂(p, q̂_full)`, the `W₂` between sample sets by exact optimal
//! transport (an assignment, as the draws and the Gaussians' samples are equally many).

use crate::host::HostNormals;
use crate::linalg::dense::{cholesky, cholesky_log_det, inverse_from_cholesky};

/// The two errors of one block of weights, and their values on the same draws with each
/// weight's draws shuffled independently (the same margins, no dependence): the floor that
/// finite draws alone give.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Dependence {
    /// `KL(q̂_full ‖ q̂_diag)` in nats.
    pub e_kl: f64,
    /// `W₂(p, q̂_diag) − W₂(p, q̂_full)`.
    pub e_w: f64,
    /// `E_KL` of the shuffled draws.
    pub e_kl_null: f64,
    /// `E_W` of the shuffled draws.
    pub e_w_null: f64,
}

/// Why a block could not be analysed.
#[derive(Debug, PartialEq)]
pub enum DependenceError {
    /// Fewer draws than the block has weights plus one: the covariance is singular.
    TooFewDraws {
        /// Draws.
        draws: usize,
        /// Weights in the block.
        weights: usize,
    },
    /// The sample covariance is not positive definite (a weight that never moved).
    Singular(usize),
}

impl std::fmt::Display for DependenceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooFewDraws { draws, weights } => write!(
                f,
                "{draws} draws cannot fit a covariance of {weights} weights (need more than \
                 {weights})"
            ),
            Self::Singular(i) => write!(
                f,
                "the draws' covariance is singular at weight {i} of the block"
            ),
        }
    }
}

impl std::error::Error for DependenceError {}

/// `E_KL` and `E_W` of the draws' entries `block` (each draw a full weight vector), the
/// Gaussians' samples from `rng`.
///
/// # Errors
/// Too few draws for the block, or a singular covariance.
pub fn dependence(
    draws: &[Vec<f64>],
    block: &[usize],
    rng: &mut HostNormals,
) -> Result<Dependence, DependenceError> {
    let (n, m) = (draws.len(), block.len());
    if n <= m {
        return Err(DependenceError::TooFewDraws {
            draws: n,
            weights: m,
        });
    }
    let x: Vec<Vec<f64>> = draws
        .iter()
        .map(|d| block.iter().map(|&i| d[i]).collect())
        .collect();
    let (e_kl, e_w) = errors(&x, rng)?;
    let mut columns: Vec<Vec<f64>> = (0..m).map(|j| x.iter().map(|r| r[j]).collect()).collect();
    for column in &mut columns {
        for i in (1..n).rev() {
            column.swap(i, ((rng.uniform() * (i + 1) as f64) as usize).min(i));
        }
    }
    let shuffled: Vec<Vec<f64>> = (0..n)
        .map(|i| columns.iter().map(|c| c[i]).collect())
        .collect();
    let (e_kl_null, e_w_null) = errors(&shuffled, rng)?;
    Ok(Dependence {
        e_kl,
        e_w,
        e_kl_null,
        e_w_null,
    })
}

/// `(E_KL, E_W)` of draws `x` (`n × m`).
fn errors(x: &[Vec<f64>], rng: &mut HostNormals) -> Result<(f64, f64), DependenceError> {
    let (n, m) = (x.len(), x[0].len());
    let mean: Vec<f64> = (0..m)
        .map(|j| x.iter().map(|r| r[j]).sum::<f64>() / n as f64)
        .collect();
    let mut cov = vec![0.0; m * m];
    for r in x {
        for i in 0..m {
            let a = r[i] - mean[i];
            for j in 0..=i {
                cov[i * m + j] += a * (r[j] - mean[j]);
            }
        }
    }
    for i in 0..m {
        for j in 0..=i {
            cov[i * m + j] /= (n - 1) as f64;
            cov[j * m + i] = cov[i * m + j];
        }
    }
    let mut l = cov.clone();
    cholesky(&mut l, m).map_err(DependenceError::Singular)?;
    let precision = inverse_from_cholesky(&l, m);
    let lambda: Vec<f64> = (0..m).map(|i| precision[i * m + i]).collect();
    // KL(N(μ, Σ) ‖ N(μ, D)), D = diag(1/Λ_ii): ½[Σ Λ_ii Σ_ii − m − Σ ln Λ_ii − ln det Σ].
    let e_kl = 0.5
        * ((0..m).map(|i| lambda[i] * cov[i * m + i]).sum::<f64>()
            - m as f64
            - lambda.iter().map(|v| v.ln()).sum::<f64>()
            - cholesky_log_det(&l, m));
    let full: Vec<Vec<f64>> = (0..n)
        .map(|_| {
            let e: Vec<f64> = (0..m).map(|_| rng.next()).collect();
            (0..m)
                .map(|i| mean[i] + (0..=i).map(|j| l[i * m + j] * e[j]).sum::<f64>())
                .collect()
        })
        .collect();
    let diag: Vec<Vec<f64>> = (0..n)
        .map(|_| {
            (0..m)
                .map(|i| mean[i] + rng.next() / lambda[i].sqrt())
                .collect()
        })
        .collect();
    let e_w = w2(x, &diag) - w2(x, &full);
    Ok((e_kl, e_w))
}

/// The 2-Wasserstein distance between two equally large sets of points with uniform weights:
/// `√(min_π (1/n) Σ_i ‖a_i − b_π(i)‖²)` over permutations `π`.
///
/// # Panics
/// When the sets differ in size.
pub fn w2(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    assert_eq!(a.len(), b.len(), "W₂ between sets of equal size");
    let n = a.len();
    let cost: Vec<f64> = a
        .iter()
        .flat_map(|p| {
            b.iter()
                .map(|q| p.iter().zip(q).map(|(x, y)| (x - y).powi(2)).sum::<f64>())
        })
        .collect();
    let assignment = assign(&cost, n);
    let total: f64 = (0..n).map(|i| cost[i * n + assignment[i]]).sum();
    (total / n as f64).sqrt()
}

/// The minimum-cost perfect assignment of an `n × n` cost matrix (row-major): the column of
/// each row. Shortest augmenting paths with dual potentials (Kuhn–Munkres in the
/// Jonker–Volgenant form), `O(n³)`.
pub fn assign(cost: &[f64], n: usize) -> Vec<usize> {
    // Potentials u (rows) and v (columns), 1-based with a virtual column 0; col_row[j] is the
    // row matched to column j.
    let mut u = vec![0.0; n + 1];
    let mut v = vec![0.0; n + 1];
    let mut col_row = vec![0usize; n + 1];
    let mut way = vec![0usize; n + 1];
    for row in 1..=n {
        col_row[0] = row;
        let mut j0 = 0;
        let mut min_to = vec![f64::INFINITY; n + 1];
        let mut used = vec![false; n + 1];
        loop {
            used[j0] = true;
            let i0 = col_row[j0];
            let mut delta = f64::INFINITY;
            let mut j1 = 0;
            for j in 1..=n {
                if !used[j] {
                    let reduced = cost[(i0 - 1) * n + (j - 1)] - u[i0] - v[j];
                    if reduced < min_to[j] {
                        min_to[j] = reduced;
                        way[j] = j0;
                    }
                    if min_to[j] < delta {
                        delta = min_to[j];
                        j1 = j;
                    }
                }
            }
            for j in 0..=n {
                if used[j] {
                    u[col_row[j]] += delta;
                    v[j] -= delta;
                } else {
                    min_to[j] -= delta;
                }
            }
            j0 = j1;
            if col_row[j0] == 0 {
                break;
            }
        }
        loop {
            let j1 = way[j0];
            col_row[j0] = col_row[j1];
            j0 = j1;
            if j0 == 0 {
                break;
            }
        }
    }
    let mut row_col = vec![0; n];
    for j in 1..=n {
        row_col[col_row[j] - 1] = j - 1;
    }
    row_col
}
