//! Regression predictions: per-draw Gaussians or propagated moments, the law-of-total-variance
//! split `Var[y] = E[σ²] (aleatoric) + Var[μ] (epistemic)`, the predictive log-likelihood and
//! test scores in the targets' original units.

use crate::dist::gaussian_log_density;
use crate::metrics::{
    conformal_pit_coverage, log_likelihood_in_original_units, pit_coverage, rmse,
};
use crate::reduce::{mean_dim, sum_dim};
use crate::special::{log_mean_exp, normal_cdf};
use burn::tensor::Tensor;

/// Per-draw Gaussian predictions `N(mean_s, var_s)`.
#[derive(Debug, Clone)]
pub struct GaussianSamples {
    /// Means `μ_s(x_b)`, `[S, B, D]`.
    pub mean: Tensor<3>,
    /// Noise variances `σ²_s(x_b)`, `[S, B, D]`.
    pub var: Tensor<3>,
}

/// A Gaussian predictive with its variance already split.
#[derive(Debug, Clone)]
pub struct GaussianMoments {
    /// Predictive mean, `[B, D]`.
    pub mean: Tensor<2>,
    /// Aleatoric variance (the noise), `[B, D]`.
    pub aleatoric_var: Tensor<2>,
    /// Epistemic variance (of the mean over the posterior), `[B, D]`.
    pub epistemic_var: Tensor<2>,
}

/// A regression prediction.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum GaussianPrediction {
    /// Per-draw Gaussians.
    Samples(GaussianSamples),
    /// Moments.
    Moments(GaussianMoments),
}

/// Test scores of a regression prediction in the targets' original units.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RegressionScores {
    /// Mean predictive log-likelihood per point.
    pub log_likelihood: f64,
    /// Root-mean-square error of the predictive mean.
    pub rmse: f64,
    /// The fraction of targets inside their central 90 % predictive interval (per dimension;
    /// nominal 0.9), from the predictive CDF at each target ([`GaussianPrediction::pit`]).
    pub coverage_90: f64,
    /// The same after split-conformal calibration by the PIT, calibrated on the even-numbered
    /// rows and measured on the odd-numbered ones ([`crate::metrics::conformal_pit_coverage`]);
    /// `None` with fewer than two rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conformal_coverage_90: Option<f64>,
}

/// The nominal level of [`RegressionScores::coverage_90`].
pub const INTERVAL_LEVEL: f64 = 0.9;

impl GaussianPrediction {
    /// Predictive mean `E[y]`, `[B, D]`.
    pub fn mean(&self) -> Tensor<2> {
        match self {
            Self::Samples(s) => mean_dim(s.mean.clone(), 0).squeeze_dim(0),
            Self::Moments(m) => m.mean.clone(),
        }
    }

    /// Aleatoric variance `E_w[σ²(x, w)]`, `[B, D]`.
    pub fn aleatoric_variance(&self) -> Tensor<2> {
        match self {
            Self::Samples(s) => mean_dim(s.var.clone(), 0).squeeze_dim(0),
            Self::Moments(m) => m.aleatoric_var.clone(),
        }
    }

    /// Epistemic variance `Var_w[μ(x, w)]` (population form over draws), `[B, D]`.
    pub fn epistemic_variance(&self) -> Tensor<2> {
        match self {
            Self::Samples(s) => {
                let m = mean_dim(s.mean.clone(), 0);
                mean_dim((s.mean.clone() - m).square(), 0).squeeze_dim(0)
            }
            Self::Moments(m) => m.epistemic_var.clone(),
        }
    }

    /// Total predictive variance, aleatoric plus epistemic, `[B, D]`.
    pub fn variance(&self) -> Tensor<2> {
        self.aleatoric_variance() + self.epistemic_variance()
    }

    /// `ln p(y_b | x_b)` of targets `[B, D]`, summed over dimensions, `[B]`: the equal-weight
    /// mixture `log_mean_exp_s Σ_d ln N(y; μ_s, σ²_s)` for draws, `ln N(y; mean, variance)` for
    /// moments.
    pub fn log_prob(&self, y: Tensor<2>) -> Tensor<1> {
        let b = y.dims()[0];
        match self {
            Self::Samples(s) => {
                let per_draw =
                    gaussian_log_density(y.unsqueeze::<3>(), s.mean.clone(), s.var.clone())
                        .sum_dim(2);
                log_mean_exp(per_draw, 0).reshape([b])
            }
            Self::Moments(_) => gaussian_log_density(y, self.mean(), self.variance())
                .sum_dim(1)
                .reshape([b]),
        }
    }

    /// The predictive CDF at the targets `[B, D]` (the probability integral transform, per
    /// dimension): `F(y) = (1/S) Σ_s Φ((y − μ_s)/σ_s)` for draws, `Φ((y − mean)/√variance)` for
    /// moments. Uniform on (0, 1) for a calibrated predictive.
    pub fn pit(&self, y: Tensor<2>) -> Tensor<2> {
        match self {
            Self::Samples(s) => {
                let z = (y.unsqueeze::<3>() - s.mean.clone()) / s.var.clone().sqrt();
                mean_dim(normal_cdf(z), 0).squeeze_dim(0)
            }
            Self::Moments(_) => normal_cdf((y - self.mean()) / self.variance().sqrt()),
        }
    }

    /// Test log-likelihood and RMSE in original units, for a model trained on standardised
    /// targets `y' = (y − m)/s`: `ln p(y) = ln p(y') − Σ_d ln s_d`, RMSE scaled by `s`.
    /// `y_standardised` is `[B, D]`, `target_std` holds `s_d`.
    ///
    /// # Panics
    /// If `target_std` does not have one entry per target dimension.
    pub fn scores(&self, y_standardised: Tensor<2>, target_std: &[f64]) -> RegressionScores {
        let d = y_standardised.dims()[1];
        assert_eq!(
            target_std.len(),
            d,
            "GaussianPrediction::scores: {} target scales for {d} target dimensions",
            target_std.len()
        );
        let ll = crate::host::to_vec(self.log_prob(y_standardised.clone()).mean())[0];
        let pit = crate::host::to_vec(self.pit(y_standardised.clone()));
        let (pred, y) = (
            crate::host::to_vec(self.mean()),
            crate::host::to_vec(y_standardised),
        );
        RegressionScores {
            log_likelihood: log_likelihood_in_original_units(ll, target_std),
            rmse: rmse(&pred, &y, target_std),
            coverage_90: pit_coverage(&pit, INTERVAL_LEVEL),
            conformal_coverage_90: conformal_pit_coverage(&pit, INTERVAL_LEVEL),
        }
    }
}

/// The equal-weight mixture predictive over draws that arrive in chunks, so that `T` draws need
/// not be held at once (Gal 2016's `T = 10 000` MC-dropout passes): per test point the running
/// `logsumexp_t Σ_d ln N(y; μ_t, σ²_t)` and `Σ_t μ_t`, on the host in `f64`.
///
/// `ln p(y) = logsumexp_t(·) − ln T`, the same as [`GaussianPrediction::log_prob`] over all `T`
/// draws at once; the CDF at the targets is the running `Σ_t Φ((y − μ_t)/σ_t)`.
#[derive(Debug, Clone)]
pub struct MixtureAccumulator {
    y: Tensor<2>,
    targets: Vec<f64>,
    dims: usize,
    log_sum: Vec<f64>,
    mean_sum: Vec<f64>,
    cdf_sum: Vec<f64>,
    draws: usize,
}

impl MixtureAccumulator {
    /// For targets `[B, D]` (standardised units, as the model predicts them).
    pub fn new(y_standardised: Tensor<2>) -> Self {
        let [b, d] = y_standardised.dims();
        Self {
            targets: crate::host::to_vec(y_standardised.clone()),
            y: y_standardised,
            dims: d,
            log_sum: vec![f64::NEG_INFINITY; b],
            mean_sum: vec![0.0; b * d],
            cdf_sum: vec![0.0; b * d],
            draws: 0,
        }
    }

    /// Adds a chunk of draws `[S, B, D]`.
    ///
    /// # Panics
    /// If the chunk's points or dimensions are not the targets'.
    pub fn add(&mut self, chunk: &GaussianSamples) {
        let [s, b, d] = chunk.mean.dims();
        assert!(
            b == self.log_sum.len() && d == self.dims,
            "MixtureAccumulator::add: draws for {b}×{d} targets, expected {}×{}",
            self.log_sum.len(),
            self.dims
        );
        let per_draw = gaussian_log_density(
            self.y.clone().unsqueeze::<3>(),
            chunk.mean.clone(),
            chunk.var.clone(),
        )
        .sum_dim(2);
        let per_draw = crate::host::to_vec(per_draw);
        for (i, acc) in self.log_sum.iter_mut().enumerate() {
            let m = (0..s).map(|t| per_draw[t * b + i]).fold(*acc, f64::max);
            if m == f64::NEG_INFINITY {
                continue;
            }
            let total =
                (*acc - m).exp() + (0..s).map(|t| (per_draw[t * b + i] - m).exp()).sum::<f64>();
            *acc = m + total.ln();
        }
        let means = crate::host::to_vec(sum_dim(chunk.mean.clone(), 0));
        for (acc, m) in self.mean_sum.iter_mut().zip(means) {
            *acc += m;
        }
        let z = (self.y.clone().unsqueeze::<3>() - chunk.mean.clone()) / chunk.var.clone().sqrt();
        let cdf = crate::host::to_vec(sum_dim(normal_cdf(z), 0));
        for (acc, c) in self.cdf_sum.iter_mut().zip(cdf) {
            *acc += c;
        }
        self.draws += s;
    }

    /// Draws added so far.
    pub fn draws(&self) -> usize {
        self.draws
    }

    /// Test log-likelihood and RMSE in original units (see [`GaussianPrediction::scores`]).
    ///
    /// # Panics
    /// If no draw was added, or `target_std` does not have one entry per dimension.
    pub fn scores(&self, target_std: &[f64]) -> RegressionScores {
        assert!(self.draws > 0, "MixtureAccumulator::scores: no draws");
        assert_eq!(
            target_std.len(),
            self.dims,
            "MixtureAccumulator::scores: target scales"
        );
        let ln_t = (self.draws as f64).ln();
        let ll = self.log_sum.iter().map(|l| l - ln_t).sum::<f64>() / self.log_sum.len() as f64;
        let mean: Vec<f64> = self
            .mean_sum
            .iter()
            .map(|m| m / self.draws as f64)
            .collect();
        let pit: Vec<f64> = self.cdf_sum.iter().map(|c| c / self.draws as f64).collect();
        RegressionScores {
            log_likelihood: log_likelihood_in_original_units(ll, target_std),
            rmse: rmse(&mean, &self.targets, target_std),
            coverage_90: pit_coverage(&pit, INTERVAL_LEVEL),
            conformal_coverage_90: conformal_pit_coverage(&pit, INTERVAL_LEVEL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};

    #[test]
    fn chunked_mixture_scores_equal_those_of_all_draws_at_once() {
        let device = test_device();
        let _guard = crate::testing::seeded(&device, 5);
        let (s, b) = (30, 7);
        let mean = Tensor::<3>::random(
            [s, b, 1],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            &device,
        );
        let var = Tensor::<3>::random(
            [s, b, 1],
            burn::tensor::Distribution::Uniform(0.1, 2.0),
            &device,
        );
        let y = Tensor::<2>::random(
            [b, 1],
            burn::tensor::Distribution::Normal(0.0, 1.5),
            &device,
        );
        let all = GaussianPrediction::Samples(GaussianSamples {
            mean: mean.clone(),
            var: var.clone(),
        })
        .scores(y.clone(), &[2.5]);
        let mut acc = MixtureAccumulator::new(y);
        for (a, z) in [(0, 4), (4, 5), (5, 30)] {
            acc.add(&GaussianSamples {
                mean: mean.clone().slice(a..z),
                var: var.clone().slice(a..z),
            });
        }
        assert_eq!(acc.draws(), s);
        let chunked = acc.scores(&[2.5]);
        assert!((chunked.log_likelihood - all.log_likelihood).abs() < 1e-5);
        assert!((chunked.rmse - all.rmse).abs() < 1e-5);
        assert_eq!(chunked.coverage_90, all.coverage_90);
    }

    #[test]
    fn targets_drawn_from_the_predictive_are_covered_at_the_nominal_rate() {
        // y ~ ½N(−1, 0.5²) + ½N(2, 1) per row: the mixture's 90 % interval covers a fraction
        // 0.9 ± 4·√(0.9·0.1/n) of them; a predictive of the first component alone covers
        // fewer (its CDF at the second component's draws is near 1).
        let device = test_device();
        let n = 4000;
        // The component by the sign of a second normal draw.
        let z = crate::testing::host_normals(2 * n, 11);
        let y: Vec<f32> = z
            .chunks(2)
            .map(|p| match p[1] < 0.0 {
                true => -1.0 + 0.5 * p[0],
                false => 2.0 + p[0],
            } as f32)
            .collect();
        let y = Tensor::<1>::from_floats(y.as_slice(), &device).reshape([n, 1]);
        let mean = Tensor::<3>::from_floats([[[-1.0]], [[2.0]]], &device).repeat_dim(1, n);
        let var = Tensor::<3>::from_floats([[[0.25]], [[1.0]]], &device).repeat_dim(1, n);
        let mixture = GaussianPrediction::Samples(GaussianSamples {
            mean: mean.clone(),
            var: var.clone(),
        });
        let band = 4.0 * (0.09 / n as f64).sqrt();
        let got = mixture.scores(y.clone(), &[1.0]).coverage_90;
        assert!((got - 0.9).abs() < band, "{got}");
        let first = GaussianPrediction::Moments(GaussianMoments {
            mean: mean.slice(0..1).reshape([n, 1]),
            aleatoric_var: var.slice(0..1).reshape([n, 1]),
            epistemic_var: Tensor::zeros([n, 1], &device),
        });
        let narrow = first.scores(y.clone(), &[1.0]).coverage_90;
        assert!(narrow < 0.9 - 10.0 * band, "{narrow}");
        // A Gaussian's coverage by its CDF is that of its interval mean ± z σ.
        let (m, sd) = (vec![-1.0; n], vec![0.5; n]);
        let direct = crate::metrics::interval_coverage(&m, &sd, &to_vec(y), 0.9);
        assert!(
            (narrow - direct).abs() <= 1.0 / n as f64,
            "{narrow} vs {direct}"
        );
    }

    #[test]
    fn decomposition_mixture_likelihood_and_original_units() {
        let device = test_device();
        let mean = Tensor::<3>::from_floats([[[1.0]], [[3.0]]], &device);
        let var = Tensor::<3>::from_floats([[[0.5]], [[1.5]]], &device);
        let p = GaussianPrediction::Samples(GaussianSamples { mean, var });
        assert!((to_vec(p.mean())[0] - 2.0).abs() < 1e-6);
        assert!((to_vec(p.aleatoric_variance())[0] - 1.0).abs() < 1e-6);
        assert!((to_vec(p.epistemic_variance())[0] - 1.0).abs() < 1e-6);
        assert!((to_vec(p.variance())[0] - 2.0).abs() < 1e-6);
        let y = 2.5f64;
        let pdf = |m: f64, v: f64| {
            (-(y - m).powi(2) / (2.0 * v)).exp() / (2.0 * std::f64::consts::PI * v).sqrt()
        };
        let expected = (0.5 * pdf(1.0, 0.5) + 0.5 * pdf(3.0, 1.5)).ln();
        let target = Tensor::<2>::from_floats([[y as f32]], &device);
        let got = to_vec(p.log_prob(target.clone()))[0];
        assert!((got - expected).abs() < 1e-5, "{got} vs {expected}");
        // Targets standardised with s = 4: the density of the original targets is 4x smaller,
        // and the RMSE |2.5 − 2| is 4x larger.
        let s = p.scores(target, &[4.0]);
        assert!((s.log_likelihood - (expected - 4f64.ln())).abs() < 1e-5);
        assert!((s.rmse - 2.0).abs() < 1e-5);
        // Moments give the Gaussian with the total variance.
        let m = GaussianPrediction::Moments(GaussianMoments {
            mean: p.mean(),
            aleatoric_var: p.aleatoric_variance(),
            epistemic_var: p.epistemic_variance(),
        });
        let got = to_vec(m.log_prob(Tensor::<2>::from_floats([[y as f32]], &device)))[0];
        assert!((got - pdf(2.0, 2.0).ln()).abs() < 1e-5);
    }
}
