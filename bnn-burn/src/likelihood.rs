//! Likelihoods `p(y | f(x; w))`: what turns the network's outputs of `S` posterior draws,
//! `[S, B, k]`, into per-draw log-likelihoods `[S, B]` and into a prediction type.

use crate::dist::gaussian_log_density;
use crate::error::{Check, ConfigError};
use crate::predict::{ClassPrediction, GaussianPrediction, GaussianSamples};
use crate::special::softplus;
use crate::train::Batch;
use burn::config::Config;
use burn::module::{Module, ModuleDisplay, Param};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor};

/// Smallest predicted variance of the heteroscedastic head.
const MIN_VARIANCE: f64 = 1e-6;

/// The observation model of a network.
pub trait Likelihood: Module + ModuleDisplay + 'static {
    /// Targets, first axis examples.
    type Target: Batch;
    /// The predictive distribution.
    type Prediction;

    /// Network outputs per target dimension (or per class).
    fn outputs_per_target(&self) -> usize;

    /// `ln p(y_b | f_s(x_b))` summed over target dimensions, `[S, B]`.
    fn log_likelihood(&self, out: Tensor<3>, target: Self::Target) -> Tensor<2>;

    /// The prediction from the outputs of `S` draws.
    fn predict(&self, out: Tensor<3>) -> Self::Prediction;
}

/// Configuration of [`GaussianLikelihood`].
#[derive(Config, Debug)]
pub struct GaussianLikelihoodConfig {
    /// Target dimensions (one noise scale each).
    #[config(default = 1)]
    pub d_output: usize,
    /// Initial noise standard deviation σ (in the units of the (standardised) targets).
    #[config(default = 1.0)]
    pub noise_std: f64,
    /// Learn σ by gradient (type-II maximum likelihood) or keep it at `noise_std`.
    #[config(default = "NoiseFit::Learned")]
    pub fit: NoiseFit,
}

/// Whether a likelihood's noise scale is fitted with the weights or held at its initial value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NoiseFit {
    /// Fitted by gradient with the weights (type-II maximum likelihood).
    Learned,
    /// Held fixed (e.g. Gal's τ: noise variance `1/τ` chosen by grid search).
    Fixed,
}

/// Homoscedastic Gaussian `y ~ N(f(x), σ²)`, σ fixed or learned (`σ = exp(log_std)`).
#[derive(Module, Debug)]
pub struct GaussianLikelihood {
    /// `ln σ` per target dimension, `[D]`.
    pub log_std: Param<Tensor<1>>,
    /// Whether `log_std` receives gradients.
    #[module(skip)]
    pub fit: NoiseFit,
}

impl GaussianLikelihoodConfig {
    /// The likelihood module.
    pub fn init(&self, device: &Device) -> Result<GaussianLikelihood, ConfigError> {
        let check = Check("GaussianLikelihoodConfig");
        check.at_least_one("d_output", self.d_output)?;
        check.positive("noise_std", self.noise_std)?;
        let log_std = Tensor::full([self.d_output], self.noise_std.ln(), device);
        Ok(GaussianLikelihood {
            log_std: Param::from_tensor(log_std),
            fit: self.fit,
        })
    }
}

impl GaussianLikelihood {
    /// Noise variances `σ²`, `[1, 1, D]`.
    fn variance(&self) -> Tensor<3> {
        let log_std = match self.fit {
            NoiseFit::Learned => self.log_std.val(),
            NoiseFit::Fixed => self.log_std.val().detach(),
        };
        (log_std * 2.0).exp().unsqueeze::<3>()
    }

    /// Noise standard deviations σ, `[D]`.
    pub fn noise_std(&self) -> Tensor<1> {
        self.log_std.val().exp()
    }
}

impl Likelihood for GaussianLikelihood {
    type Target = Tensor<2>;
    type Prediction = GaussianPrediction;

    fn outputs_per_target(&self) -> usize {
        1
    }

    fn log_likelihood(&self, out: Tensor<3>, y: Tensor<2>) -> Tensor<2> {
        let [s, b, _] = out.dims();
        gaussian_log_density(y.unsqueeze::<3>(), out, self.variance())
            .sum_dim(2)
            .reshape([s, b])
    }

    fn predict(&self, mean: Tensor<3>) -> GaussianPrediction {
        let var = self.variance().expand(mean.dims());
        GaussianPrediction::Samples(GaussianSamples { mean, var })
    }
}

/// Heteroscedastic Gaussian: the network outputs `[μ, v]` (`2D` units) and
/// `y ~ N(μ, softplus(v) + 10⁻⁶)` (Nix & Weigend 1994; Depeweg 2019 eq. 2.53).
#[derive(Module, Debug, Default)]
pub struct HeteroscedasticGaussian;

impl HeteroscedasticGaussian {
    fn split(out: Tensor<3>) -> GaussianSamples {
        let [s, b, two_d] = out.dims();
        assert!(
            two_d.is_multiple_of(2),
            "HeteroscedasticGaussian: network output [S, B, {two_d}] must have 2·D units \
             (means, then variances)"
        );
        let d = two_d / 2;
        let mean = out.clone().slice([0..s, 0..b, 0..d]);
        let var = softplus(out.slice([0..s, 0..b, d..two_d])) + MIN_VARIANCE;
        GaussianSamples { mean, var }
    }
}

impl Likelihood for HeteroscedasticGaussian {
    type Target = Tensor<2>;
    type Prediction = GaussianPrediction;

    fn outputs_per_target(&self) -> usize {
        2
    }

    fn log_likelihood(&self, out: Tensor<3>, y: Tensor<2>) -> Tensor<2> {
        let [s, b, _] = out.dims();
        let g = Self::split(out);
        gaussian_log_density(y.unsqueeze::<3>(), g.mean, g.var)
            .sum_dim(2)
            .reshape([s, b])
    }

    fn predict(&self, out: Tensor<3>) -> GaussianPrediction {
        GaussianPrediction::Samples(Self::split(out))
    }
}

/// Categorical likelihood `y ~ Cat(softmax(f(x)))`: the network outputs logits.
#[derive(Module, Debug, Default)]
pub struct Categorical;

impl Likelihood for Categorical {
    type Target = Tensor<1, Int>;
    type Prediction = ClassPrediction;

    fn outputs_per_target(&self) -> usize {
        1
    }

    fn log_likelihood(&self, logits: Tensor<3>, labels: Tensor<1, Int>) -> Tensor<2> {
        let [s, b, c] = logits.dims();
        let n_labels = labels.dims()[0];
        assert!(
            n_labels == b,
            "Categorical: {n_labels} labels for logits of shape [{s}, {b}, {c}]"
        );
        let idx = labels.reshape([1, b, 1]).repeat_dim(0, s);
        log_softmax(logits, 2).gather(2, idx).reshape([s, b])
    }

    fn predict(&self, logits: Tensor<3>) -> ClassPrediction {
        ClassPrediction::from_logits(logits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::special::HALF_LN_2PI;
    use crate::testing::{test_device, to_vec};

    #[test]
    fn gaussian_log_likelihood_is_the_log_density() {
        let device = test_device();
        let lik = GaussianLikelihoodConfig::new()
            .with_noise_std(0.5)
            .init(&device)
            .unwrap();
        let mean = Tensor::<3>::from_floats([[[1.0], [0.0]]], &device);
        let y = Tensor::<2>::from_floats([[2.0], [0.0]], &device);
        let ll = to_vec(lik.log_likelihood(mean, y));
        let expect = |r: f64| -(r * r / (2.0 * 0.25) + 0.5f64.ln() + HALF_LN_2PI);
        assert!((ll[0] - expect(1.0)).abs() < 1e-5 && (ll[1] - expect(0.0)).abs() < 1e-5);
    }

    #[test]
    fn categorical_log_likelihood_matches_log_softmax() {
        let device = test_device();
        let logits = Tensor::<3>::from_floats([[[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]]], &device);
        let labels = Tensor::<1, Int>::from_ints([0, 2], &device);
        let ll = to_vec(Categorical.log_likelihood(logits, labels));
        let z = (2f64.exp() + 1.0 + (-1f64).exp()).ln();
        assert!((ll[0] + (z - 2.0)).abs() < 1e-5);
        assert!((ll[1] + 3f64.ln()).abs() < 1e-5);
    }

    #[test]
    fn heteroscedastic_head_splits_means_and_variances() {
        let device = test_device();
        let out = Tensor::<3>::from_floats([[[0.5, 0.0]]], &device);
        let p = HeteroscedasticGaussian.predict(out);
        assert!((to_vec(p.aleatoric_variance())[0] - (2f64.ln() + MIN_VARIANCE)).abs() < 1e-6);
        assert!((to_vec(p.mean())[0] - 0.5).abs() < 1e-7);
    }

    #[test]
    fn fixed_noise_receives_no_gradient() {
        let device = test_device().autodiff();
        let lik = GaussianLikelihoodConfig::new()
            .with_fit(NoiseFit::Fixed)
            .init(&device)
            .unwrap();
        let mean = Tensor::<3>::zeros([1, 2, 1], &device).require_grad();
        let y = Tensor::<2>::ones([2, 1], &device);
        let grads = lik.log_likelihood(mean, y).sum().backward();
        assert!(lik.log_std.grad(&grads).is_none());
    }
}
