//! Gaussian-process regression with an RBF kernel by random Fourier features (Rahimi & Recht
//! 2007): `f(x) = Σ_m w_m cos(ω_mᵀx + b_m)`, `ω_m ~ N(0, diag(ℓ)⁻²)`, `b_m ~ U(0, 2π)`, whose
//! covariance under `w ~ N(0, α⁻¹I)` tends to `(M/2α)·exp(−½‖(x − x')/ℓ‖²)`. The posterior of
//! `w` is Bayesian linear regression's, with `α` and the noise precision `β` of each output at
//! their evidence maximum (MacKay's fixed point, Bishop 2006 eqs. 3.87–3.95) and the lengthscales
//! by the evidence on a grid, one input at a time. The fit is a [`Regressor`] (a fixed cosine
//! layer and a full-rank output layer), so prediction, metrics and roll-outs
//! ([`crate::rollout::Dynamics`]) take it as they take a BNN: Depeweg 2019 Table 7.1's GP.

use crate::error::{Check, ConfigError};
use crate::host::{HostNormals, matrix, to_vec};
use crate::layers::{Activation, BayesianLinearConfig, Bias, WeightConfig};
use crate::likelihood::{GaussianLikelihoodConfig, NoiseFit};
use crate::linalg::dense;
use crate::nets::{Bnn, MlpBody, Regressor};
use crate::posterior::{AnyPosterior, PosteriorConfig};
use burn::config::Config;
use burn::module::Param;
use burn::tensor::Tensor;

/// Configuration of a [`RandomFeatureGp`] fit.
#[derive(Config, Debug)]
pub struct RandomFeatureGpConfig {
    /// Random features `M`.
    #[config(default = 300)]
    pub features: usize,
    /// One lengthscale per input (automatic relevance determination); else one for all.
    #[config(default = true)]
    pub ard: bool,
    /// The candidate lengthscales, for standardised inputs.
    #[config(
        default = "vec![0.1, 0.15, 0.25, 0.4, 0.6, 1.0, 1.5, 2.5, 4.0, 6.0, 10.0, 16.0, 25.0]"
    )]
    pub lengthscales: Vec<f64>,
    /// Sweeps over the inputs (ARD).
    #[config(default = 2)]
    pub sweeps: usize,
    /// Seed of the features `ω`, `b`.
    #[config(default = 0)]
    pub seed: u64,
}

/// A fitted random-feature GP: the network and its hyperparameters.
#[derive(Debug)]
pub struct RandomFeatureGp {
    /// `cos(x Ω + b)` then a full-rank Gaussian output layer and each output's noise.
    pub model: Regressor,
    /// `ℓ` per input.
    pub lengthscales: Vec<f64>,
    /// The prior's `√Var f(x) = √(M/2α)` per output.
    pub signal_std: Vec<f64>,
    /// `β^{−1/2}` per output.
    pub noise_std: Vec<f64>,
    /// `ln p(y)` summed over the outputs, at the fit.
    pub log_evidence: f64,
}

/// The features' random draws: `ε [d, M]` (`ω = ε/ℓ`) and the phases `b [M]`.
struct Draws {
    eps: Vec<f64>,
    phase: Vec<f64>,
    m: usize,
}

impl Draws {
    fn new(d: usize, m: usize, seed: u64) -> Self {
        let mut rng = HostNormals::new(seed);
        let eps = (0..d * m).map(|_| rng.next()).collect();
        let phase = (0..m)
            .map(|_| std::f64::consts::TAU * rng.uniform())
            .collect();
        Self { eps, phase, m }
    }

    /// `Ω = ε/ℓ` row by row, `[d, M]`.
    fn omega(&self, lengthscales: &[f64]) -> Vec<f64> {
        let m = self.m;
        (0..self.eps.len())
            .map(|i| self.eps[i] / lengthscales[i / m])
            .collect()
    }

    /// The design `Ψ = cos(XΩ + b)`, `[n, M]`.
    fn design(&self, x: &[f64], d: usize, lengthscales: &[f64]) -> Vec<f64> {
        let (m, omega) = (self.m, self.omega(lengthscales));
        let mut psi = Vec::with_capacity(x.len() / d * m);
        for row in x.chunks(d) {
            for k in 0..m {
                let z: f64 = (0..d).map(|j| row[j] * omega[j * m + k]).sum();
                psi.push((z + self.phase[k]).cos());
            }
        }
        psi
    }
}

/// One output's Bayesian linear regression on the eigenbasis of `ΨᵀΨ`.
struct Output {
    alpha: f64,
    beta: f64,
    /// The posterior mean in the eigenbasis, `m̃ = β r̃/(βλ + α)`.
    mean: Vec<f64>,
    log_evidence: f64,
}

/// `α`, `β` at the evidence's fixed point (Bishop eqs. 3.91–3.95) for eigenvalues `lambda` of
/// `ΨᵀΨ`, `r̃ = Vᵀ Ψᵀy`, `yy = yᵀy` and `n` rows, and the log evidence there (eq. 3.86).
fn regress(lambda: &[f64], r: &[f64], yy: f64, n: usize) -> Output {
    let m = lambda.len() as f64;
    let (mut alpha, mut beta) = (1.0, n as f64 / yy.max(1e-12));
    let fit = |alpha: f64, beta: f64| {
        let mean: Vec<f64> = lambda
            .iter()
            .zip(r)
            .map(|(l, r)| beta * r / (beta * l + alpha))
            .collect();
        let gamma: f64 = lambda.iter().map(|l| beta * l / (beta * l + alpha)).sum();
        let mm: f64 = mean.iter().map(|v| v * v).sum();
        let err = yy - 2.0 * mean.iter().zip(r).map(|(a, b)| a * b).sum::<f64>()
            + lambda
                .iter()
                .zip(&mean)
                .map(|(l, v)| l * v * v)
                .sum::<f64>();
        (mean, gamma, mm, err.max(1e-12 * yy.max(1e-12)))
    };
    for _ in 0..200 {
        let (_, gamma, mm, err) = fit(alpha, beta);
        let next_alpha = (gamma / mm.max(1e-300)).clamp(1e-10, 1e10);
        let next_beta = ((n as f64 - gamma).max(1e-6) / err).clamp(1e-10, 1e10);
        let settled =
            (next_alpha / alpha - 1.0).abs() < 1e-9 && (next_beta / beta - 1.0).abs() < 1e-9;
        (alpha, beta) = (next_alpha, next_beta);
        if settled {
            break;
        }
    }
    let (mean, _, mm, err) = fit(alpha, beta);
    let log_det: f64 = lambda.iter().map(|l| (beta * l + alpha).ln()).sum();
    let log_evidence = 0.5 * m * alpha.ln() + 0.5 * n as f64 * beta.ln()
        - 0.5 * beta * err
        - 0.5 * alpha * mm
        - 0.5 * log_det
        - 0.5 * n as f64 * (std::f64::consts::TAU).ln();
    Output {
        alpha,
        beta,
        mean,
        log_evidence,
    }
}

/// Every output's regression on the features of `lengthscales`, with the eigenbasis
/// `(λ, V)` of `ΨᵀΨ`.
struct Fit {
    outputs: Vec<Output>,
    lambda: Vec<f64>,
    vectors: Vec<f64>,
    log_evidence: f64,
}

fn fit_at(draws: &Draws, x: &[f64], y: &[f64], [d, o]: [usize; 2], ls: &[f64]) -> Fit {
    let (m, n) = (draws.m, x.len() / d);
    let psi = draws.design(x, d, ls);
    let mut gram = vec![0.0; m * m];
    for row in psi.chunks(m) {
        for a in 0..m {
            let ra = row[a];
            for b in a..m {
                gram[a * m + b] += ra * row[b];
            }
        }
    }
    for a in 0..m {
        for b in 0..a {
            gram[a * m + b] = gram[b * m + a];
        }
    }
    let (lambda, vectors) = dense::symmetric_eigen(gram, m);
    let lambda: Vec<f64> = lambda.into_iter().map(|l| l.max(0.0)).collect();
    let outputs: Vec<Output> = (0..o)
        .map(|j| {
            // Ψᵀy, then its coordinates in the eigenbasis.
            let mut psi_y = vec![0.0; m];
            for (row, targets) in psi.chunks(m).zip(y.chunks(o)) {
                for k in 0..m {
                    psi_y[k] += row[k] * targets[j];
                }
            }
            let r: Vec<f64> = (0..m)
                .map(|c| (0..m).map(|k| vectors[k * m + c] * psi_y[k]).sum())
                .collect();
            let yy: f64 = y.chunks(o).map(|t| t[j] * t[j]).sum();
            regress(&lambda, &r, yy, n)
        })
        .collect();
    let log_evidence = outputs.iter().map(|out| out.log_evidence).sum();
    Fit {
        outputs,
        lambda,
        vectors,
        log_evidence,
    }
}

impl RandomFeatureGpConfig {
    /// The GP of inputs `x [N, d]` and targets `y [N, o]` (standardise both first): lengthscales
    /// by the evidence on [`Self::lengthscales`], then each output's `α`, `β` and posterior.
    ///
    /// # Errors
    /// No features, no or a non-positive candidate lengthscale, fewer than two rows, rows of
    /// `x` and `y` that differ, or a value that is not finite.
    pub fn fit(&self, x: Tensor<2>, y: Tensor<2>) -> Result<RandomFeatureGp, ConfigError> {
        let check = Check("RandomFeatureGpConfig");
        check.at_least_one("features", self.features)?;
        if self.lengthscales.is_empty()
            || self
                .lengthscales
                .iter()
                .any(|l| !l.is_finite() || *l <= 0.0)
        {
            return Err(ConfigError {
                config: "RandomFeatureGpConfig",
                field: "lengthscales",
                value: format!("{:?}", self.lengthscales),
                expected: "one or more positive, finite candidates",
            });
        }
        let ([n, d], [n_y, o]) = (x.dims(), y.dims());
        let device = x.device();
        let (x, y) = (to_vec(x), to_vec(y));
        if n < 2 || n != n_y || x.iter().chain(&y).any(|v| !v.is_finite()) {
            return Err(ConfigError {
                config: "RandomFeatureGpConfig",
                field: "data",
                value: format!("x of {n} rows, y of {n_y}"),
                expected: "at least two rows, as many targets as inputs, finite values",
            });
        }
        let draws = Draws::new(d, self.features, self.seed);
        let evidence = |ls: &[f64]| fit_at(&draws, &x, &y, [d, o], ls).log_evidence;
        // One lengthscale for all, then (ARD) each input in turn.
        let pick = |candidates: &mut dyn Iterator<Item = (f64, Vec<f64>)>| {
            candidates
                .map(|(l, ls)| (evidence(&ls), l))
                .fold(
                    (f64::NEG_INFINITY, 1.0),
                    |a, b| if b.0 > a.0 { b } else { a },
                )
                .1
        };
        let shared = pick(&mut self.lengthscales.iter().map(|&l| (l, vec![l; d])));
        let mut ls = vec![shared; d];
        if self.ard && d > 1 {
            for _ in 0..self.sweeps {
                for j in 0..d {
                    let base = ls.clone();
                    ls[j] = pick(&mut self.lengthscales.iter().map(|&l| {
                        let mut t = base.clone();
                        t[j] = l;
                        (l, t)
                    }));
                }
            }
        }
        let fit = fit_at(&draws, &x, &y, [d, o], &ls);
        let model = network(&draws, &fit, &ls, [d, o], &device)?;
        let m = self.features as f64;
        Ok(RandomFeatureGp {
            model,
            signal_std: fit
                .outputs
                .iter()
                .map(|out| (m / (2.0 * out.alpha)).sqrt())
                .collect(),
            noise_std: fit.outputs.iter().map(|out| out.beta.powf(-0.5)).collect(),
            log_evidence: fit.log_evidence,
            lengthscales: ls,
        })
    }
}

/// The fit as a [`Regressor`]: `cos(xΩ + b)` with point weights, then the output layer with the
/// posterior `N(V m̃, V diag(1/(βλ + α)) Vᵀ)` of each output (independent across outputs), and
/// each output's noise `β^{−1/2}`, held fixed.
fn network(
    draws: &Draws,
    fit: &Fit,
    ls: &[f64],
    [d, o]: [usize; 2],
    device: &burn::tensor::Device,
) -> Result<Regressor, ConfigError> {
    let m = draws.m;
    let point = WeightConfig::new()
        .with_posterior(PosteriorConfig::point())
        .with_bias(Bias::Point);
    let mut body = MlpBody::new(d, &[m], &point, Activation::Cos, device)?;
    let layer = &mut body.layers[0].params;
    if let AnyPosterior::Point(p) = &mut layer.weight {
        p.weight = Param::from_tensor(matrix(&draws.omega(ls), m, device));
    }
    if let Some(AnyPosterior::Point(p)) = &mut layer.bias {
        p.weight = Param::from_tensor(Tensor::from_floats(draws.phase.as_slice(), device));
    }
    let full_rank = WeightConfig::new()
        .with_posterior(PosteriorConfig::full_rank())
        .with_bias(Bias::None);
    let mut head = BayesianLinearConfig::new(m, o)
        .with_weights(full_rank)
        .init(device)?;
    // Weight (k, j) is entry k·o + j: each output's block keeps its order, so the interleaved
    // Cholesky factors stay lower-triangular.
    let n = m * o;
    let (mut mean, mut tril) = (vec![0.0; n], vec![0.0; n * n]);
    let v = &fit.vectors;
    for (j, out) in fit.outputs.iter().enumerate() {
        let mut cov = vec![0.0; m * m];
        for a in 0..m {
            mean[a * o + j] = (0..m).map(|c| v[a * m + c] * out.mean[c]).sum();
            for b in 0..=a {
                let s: f64 = (0..m)
                    .map(|c| v[a * m + c] * v[b * m + c] / (out.beta * fit.lambda[c] + out.alpha))
                    .sum();
                (cov[a * m + b], cov[b * m + a]) = (s, s);
            }
        }
        dense::cholesky(&mut cov, m).map_err(|_| ConfigError {
            config: "RandomFeatureGpConfig",
            field: "features",
            value: format!("{m}"),
            expected: "a posterior covariance that is positive definite (fewer features)",
        })?;
        for a in 0..m {
            for b in 0..=a {
                tril[(a * o + j) * n + b * o + j] = cov[a * m + b];
            }
        }
    }
    if let AnyPosterior::FullRank(q) = &mut head.params.weight {
        for i in 0..n {
            tril[i * n + i] = q.param.rho_of(tril[i * n + i]);
        }
        q.mu = Param::from_tensor(matrix(&mean, o, device));
        q.scale_tril = Param::from_tensor(matrix(&tril, n, device));
    }
    let mut likelihood = GaussianLikelihoodConfig::new()
        .with_d_output(o)
        .with_fit(NoiseFit::Fixed)
        .init(device)?;
    let log_std: Vec<f64> = fit.outputs.iter().map(|out| -0.5 * out.beta.ln()).collect();
    likelihood.log_std = Param::from_tensor(Tensor::from_floats(log_std.as_slice(), device));
    Ok(Bnn::new(body, head, likelihood))
}

#[cfg(test)]
#[path = "gp_tests.rs"]
mod tests;
