//! Likelihoods `p(y | f(x; w))` for regression and classification.
//!
//! Each turns the network output of `S` posterior samples, `[S, B, ·]`, into per-sample
//! negative log-likelihoods `[S, B]` (summed over output dimensions) and into the
//! [`crate::uncertainty`] prediction types.

use crate::error::{Check, ConfigError};
use crate::special::HALF_LN_2PI;
use crate::special::softplus;
use crate::uncertainty::{ClassPrediction, GaussianPrediction};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor};

/// Smallest predicted variance of the heteroscedastic head.
const MIN_VARIANCE: f64 = 1e-6;

/// `−ln N(y; μ, σ²)` elementwise.
fn gaussian_nll<const D: usize>(y: Tensor<D>, mean: Tensor<D>, var: Tensor<D>) -> Tensor<D> {
    (y - mean).square() / (var.clone() * 2.0) + var.log() * 0.5 + HALF_LN_2PI
}

/// Configuration of [`GaussianLikelihood`].
#[derive(Config, Debug)]
pub struct GaussianLikelihoodConfig {
    /// Output dimensions (one noise scale each).
    #[config(default = 1)]
    pub d_output: usize,
    /// Initial noise standard deviation σ (in the units of the (standardised) targets).
    #[config(default = 1.0)]
    pub noise_std: f64,
    /// Learn σ by gradient (type-II maximum likelihood) or keep it fixed.
    #[config(default = true)]
    pub learned: bool,
}

/// Homoscedastic Gaussian likelihood `y ~ N(f(x), σ²)`, σ fixed or learned (`σ = exp(log_std)`).
#[derive(Module, Debug)]
pub struct GaussianLikelihood {
    /// `ln σ` per output dimension, `[D]`.
    pub log_std: Param<Tensor<1>>,
    /// Whether `log_std` receives gradients.
    pub learned: bool,
}

impl GaussianLikelihoodConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("GaussianLikelihoodConfig");
        check.at_least_one("d_output", self.d_output)?;
        check.positive("noise_std", self.noise_std)
    }

    /// The likelihood module.
    pub fn init(&self, device: &Device) -> Result<GaussianLikelihood, ConfigError> {
        self.validate()?;
        let log_std = Tensor::full([self.d_output], self.noise_std.ln(), device);
        Ok(GaussianLikelihood {
            log_std: Param::from_tensor(log_std),
            learned: self.learned,
        })
    }
}

impl GaussianLikelihood {
    fn variance(&self) -> Tensor<1> {
        let log_std = if self.learned {
            self.log_std.val()
        } else {
            self.log_std.val().detach()
        };
        (log_std * 2.0).exp()
    }

    /// Noise standard deviations σ, `[D]`.
    pub fn noise_std(&self) -> Tensor<1> {
        self.variance().sqrt()
    }

    /// Per-sample NLL `[S, B]` of targets `y [B, D]` given means `[S, B, D]`.
    pub fn nll(&self, mean: Tensor<3>, y: Tensor<2>) -> Tensor<2> {
        let var = self.variance().unsqueeze::<3>();
        let [s, b, _] = mean.dims();
        gaussian_nll(y.unsqueeze::<3>(), mean, var)
            .sum_dim(2)
            .reshape([s, b])
    }

    /// Per-sample predictive Gaussians with the learned noise.
    pub fn predict(&self, mean: Tensor<3>) -> GaussianPrediction {
        let var = self.variance().unsqueeze::<3>().expand(mean.dims());
        GaussianPrediction { mean, var }
    }
}

/// Heteroscedastic Gaussian: the network outputs `[μ, v]` (`2D` units) and
/// `y ~ N(μ, softplus(v) + 1e-6)` (Nix & Weigend 1994; Depeweg 2019 eq. 2.53).
#[derive(Module, Debug, Default)]
pub struct HeteroscedasticGaussian;

impl HeteroscedasticGaussian {
    fn split(out: Tensor<3>) -> (Tensor<3>, Tensor<3>) {
        let [s, b, two_d] = out.dims();
        assert!(
            two_d.is_multiple_of(2),
            "HeteroscedasticGaussian: network output [S, B, {two_d}] must have 2·D units \
             (means, then variances)"
        );
        let d = two_d / 2;
        let mean = out.clone().slice([0..s, 0..b, 0..d]);
        let var = softplus(out.slice([0..s, 0..b, d..two_d])) + MIN_VARIANCE;
        (mean, var)
    }

    /// Per-sample NLL `[S, B]` of `y [B, D]` given outputs `[S, B, 2D]`.
    pub fn nll(&self, out: Tensor<3>, y: Tensor<2>) -> Tensor<2> {
        let [s, b, _] = out.dims();
        let (mean, var) = Self::split(out);
        gaussian_nll(y.unsqueeze::<3>(), mean, var)
            .sum_dim(2)
            .reshape([s, b])
    }

    /// Per-sample predictive Gaussians.
    pub fn predict(&self, out: Tensor<3>) -> GaussianPrediction {
        let (mean, var) = Self::split(out);
        GaussianPrediction { mean, var }
    }
}

/// Categorical likelihood `y ~ Cat(softmax(f(x)))`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Categorical;

impl Categorical {
    /// Per-sample NLL `[S, B]` of labels `[B]` given logits `[S, B, C]`.
    pub fn nll(&self, logits: Tensor<3>, labels: Tensor<1, Int>) -> Tensor<2> {
        let [s, b, c] = logits.dims();
        let n_labels = labels.dims()[0];
        assert!(
            n_labels == b,
            "Categorical: {n_labels} labels for logits of shape [{s}, {b}, {c}]"
        );
        let idx = labels.reshape([1, b, 1]).repeat_dim(0, s);
        log_softmax(logits, 2).gather(2, idx).reshape([s, b]).neg()
    }

    /// Class probabilities of every sample.
    pub fn predict(&self, logits: Tensor<3>) -> ClassPrediction {
        ClassPrediction::from_logits(logits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{test_device, to_vec};

    #[test]
    fn gaussian_nll_is_the_negative_log_density() {
        let device = test_device();
        let lik = GaussianLikelihoodConfig::new()
            .with_noise_std(0.5)
            .init(&device)
            .unwrap();
        let mean = Tensor::<3>::from_floats([[[1.0], [0.0]]], &device);
        let y = Tensor::<2>::from_floats([[2.0], [0.0]], &device);
        let nll = to_vec(lik.nll(mean, y));
        let expect = |r: f64| r * r / (2.0 * 0.25) + 0.5f64.ln() + HALF_LN_2PI;
        assert!((nll[0] - expect(1.0)).abs() < 1e-5 && (nll[1] - expect(0.0)).abs() < 1e-5);
    }

    #[test]
    fn categorical_nll_matches_log_softmax() {
        let device = test_device();
        let logits = Tensor::<3>::from_floats([[[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]]], &device);
        let labels = Tensor::<1, Int>::from_ints([0, 2], &device);
        let nll = to_vec(Categorical.nll(logits, labels));
        let z = (2f64.exp() + 1.0 + (-1f64).exp()).ln();
        assert!((nll[0] - (z - 2.0)).abs() < 1e-5);
        assert!((nll[1] - 3f64.ln()).abs() < 1e-5);
    }

    #[test]
    fn heteroscedastic_head_splits_means_and_variances() {
        let device = test_device();
        let out = Tensor::<3>::from_floats([[[0.5, 0.0]]], &device);
        let p = HeteroscedasticGaussian.predict(out);
        assert!((to_vec(p.var)[0] - (2f64.ln() + MIN_VARIANCE)).abs() < 1e-6);
        assert!((to_vec(p.mean)[0] - 0.5).abs() < 1e-7);
    }

    #[test]
    fn fixed_noise_receives_no_gradient() {
        let device = test_device().autodiff();
        let lik = GaussianLikelihoodConfig::new()
            .with_learned(false)
            .init(&device)
            .unwrap();
        let mean = Tensor::<3>::zeros([1, 2, 1], &device).require_grad();
        let y = Tensor::<2>::ones([2, 1], &device);
        let grads = lik.nll(mean, y).sum().backward();
        assert!(lik.log_std.grad(&grads).is_none());
    }
}
