//! Regression predictions: per-draw Gaussians or propagated moments, the law-of-total-variance
//! split `Var[y] = E[σ²] (aleatoric) + Var[μ] (epistemic)`, the predictive log-likelihood and
//! test scores in the targets' original units.

use crate::dist::gaussian_log_density;
use crate::metrics::{log_likelihood_in_original_units, rmse};
use crate::special::log_mean_exp;
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
}

impl GaussianPrediction {
    /// Predictive mean `E[y]`, `[B, D]`.
    pub fn mean(&self) -> Tensor<2> {
        match self {
            Self::Samples(s) => s.mean.clone().mean_dim(0).squeeze_dim(0),
            Self::Moments(m) => m.mean.clone(),
        }
    }

    /// Aleatoric variance `E_w[σ²(x, w)]`, `[B, D]`.
    pub fn aleatoric_variance(&self) -> Tensor<2> {
        match self {
            Self::Samples(s) => s.var.clone().mean_dim(0).squeeze_dim(0),
            Self::Moments(m) => m.aleatoric_var.clone(),
        }
    }

    /// Epistemic variance `Var_w[μ(x, w)]` (population form over draws), `[B, D]`.
    pub fn epistemic_variance(&self) -> Tensor<2> {
        match self {
            Self::Samples(s) => {
                let m = s.mean.clone().mean_dim(0);
                (s.mean.clone() - m).square().mean_dim(0).squeeze_dim(0)
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
        let (pred, y) = (
            crate::host::to_vec(self.mean()),
            crate::host::to_vec(y_standardised),
        );
        RegressionScores {
            log_likelihood: log_likelihood_in_original_units(ll, target_std),
            rmse: rmse(&pred, &y, target_std),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};

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
