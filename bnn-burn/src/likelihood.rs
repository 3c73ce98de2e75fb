//! Likelihoods `p(y | f(x; w))`: what turns the network's outputs of `S` posterior draws,
//! `[S, B, k]`, into per-draw log-likelihoods `[S, B]` and into a prediction type.

use crate::dist::{Moments, gaussian_log_density};
use crate::error::{Check, ConfigError};
use crate::posterior::Unsupported;
use crate::predict::{ClassPrediction, GaussianMoments, GaussianPrediction, GaussianSamples};
use crate::special::{HALF_LN_2PI, logsumexp, softplus};
use crate::train::Batch;
use burn::config::Config;
use burn::module::{Module, ModuleDisplay, Param};
use burn::tensor::Distribution;
use burn::tensor::activation::{log_softmax, softmax};
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

    /// The prediction from the moments of the outputs, `[B, k]` each (moment propagation);
    /// `logits` says how a classifier treats Gaussian logits.
    ///
    /// # Errors
    /// When the likelihood has no moment form (the default).
    fn predict_moments(
        &self,
        _out: Moments<2>,
        _logits: LogitRule,
    ) -> Result<Self::Prediction, Unsupported> {
        Err(Unsupported {
            family: std::any::type_name::<Self>(),
            what: "this likelihood has no prediction from output moments; predict with \
                   PredictMode::Samples(n)",
        })
    }

    /// `E_{f ~ N(out)}[ln p(y_b | f)]` per example, `[B]`: in closed form where there is one,
    /// else as `logits` approximates it (a training step by moment propagation).
    ///
    /// # Errors
    /// When the likelihood has no moment form (the default).
    fn expected_log_likelihood(
        &self,
        _out: Moments<2>,
        _target: Self::Target,
        _logits: LogitRule,
    ) -> Result<Tensor<1>, Unsupported> {
        Err(Unsupported {
            family: std::any::type_name::<Self>(),
            what: "this likelihood has no expected log-likelihood under output moments; train \
                   it by sampling (MomentConfig::train = false)",
        })
    }
}

/// How a classifier treats Gaussian logits `f ~ N(μ, diag v)` from moment propagation
/// (Haußmann 2021 §2.4, §3.1).
#[derive(Config, Debug, PartialEq, Copy)]
pub enum LogitRule {
    /// MacKay's probit approximation `E[softmax f] ≈ softmax(μ/√(1 + πv/8))`; training plugs it
    /// in as the likelihood (as the CLT reference code does with its probit predictive).
    Probit,
    /// The second-order Taylor (delta-method) expansion
    /// `E[ln softmax(f)_y] ≈ μ_y − lse(μ) − ½Σ_c v_c ζ_c(1 − ζ_c)`, `ζ = softmax(μ)` (Wu et al.
    /// 2019); its prediction is `softmax(μ)` (the correction is the same for every class).
    Taylor,
    /// `samples` draws of the logits only, `f_s = μ + √v ⊙ ε_s`: the prediction is their
    /// softmax samples (so it keeps an epistemic part), training averages `ln softmax(f_s)_y`.
    Sampled {
        /// Draws of the logits (≥ 1).
        samples: usize,
    },
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
    /// Where the noise comes from: the learned `σ` above, or a log-variance output of the
    /// network per example (DVI's heteroscedastic head; `noise_std` and `fit` are then unused).
    #[config(default = "NoiseModel::Homoscedastic")]
    pub noise: NoiseModel,
}

/// Where a [`GaussianLikelihood`]'s noise variance comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NoiseModel {
    /// One `σ²` per target dimension, a parameter of the likelihood.
    Homoscedastic,
    /// Per example: the network outputs `[μ, ℓ]` per target dimension (means first, then
    /// log-variances) and `y ~ N(μ, e^ℓ)`. Under Gaussian output moments the expected
    /// log-likelihood is closed-form, `E[e^{−ℓ}] = e^{−E ℓ + Var ℓ/2}` (Wu et al. 2019, the
    /// diagonal DVI), which is what the softplus head of [`HeteroscedasticGaussian`] lacks.
    LogVarianceHead,
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
    /// Whether the noise is `log_std` or a log-variance output of the network.
    #[module(skip)]
    pub noise: NoiseModel,
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
            noise: self.noise,
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

    /// Noise standard deviations σ, `[D]` (the homoscedastic σ; unused under
    /// [`NoiseModel::LogVarianceHead`]).
    pub fn noise_std(&self) -> Tensor<1> {
        self.log_std.val().exp()
    }

    /// Whether the network outputs the noise ([`NoiseModel::LogVarianceHead`]).
    pub fn has_variance_head(&self) -> bool {
        self.noise == NoiseModel::LogVarianceHead
    }

    /// The `[.., 2D]` outputs of a log-variance head split into means and clamped
    /// log-variances, `[.., D]` each.
    fn split_head<const N: usize>(out: Tensor<N>) -> (Tensor<N>, Tensor<N>) {
        let k = out.dims()[N - 1];
        assert!(
            k.is_multiple_of(2),
            "GaussianLikelihood (log-variance head): network output [.., {k}] must have 2·D units \
             (means, then log-variances)"
        );
        let [mean, log_var] = out.split(k / 2, N - 1).try_into().unwrap();
        (mean, log_var)
    }
}

/// Bounds of a log-variance head's `ℓ = ln σ²` (σ² from 10⁻⁶ to e²⁰): beyond them the
/// exponentials of the likelihood leave `f32`'s range; the gradient stops there.
const LOG_VAR_RANGE: (f64, f64) = (-13.8, 20.0);

impl Likelihood for GaussianLikelihood {
    type Target = Tensor<2>;
    type Prediction = GaussianPrediction;

    fn outputs_per_target(&self) -> usize {
        match self.noise {
            NoiseModel::Homoscedastic => 1,
            NoiseModel::LogVarianceHead => 2,
        }
    }

    fn log_likelihood(&self, out: Tensor<3>, y: Tensor<2>) -> Tensor<2> {
        let [s, b, _] = out.dims();
        let GaussianSamples { mean, var } = self.samples(out);
        gaussian_log_density(y.unsqueeze::<3>(), mean, var)
            .sum_dim(2)
            .reshape([s, b])
    }

    fn predict(&self, out: Tensor<3>) -> GaussianPrediction {
        GaussianPrediction::Samples(self.samples(out))
    }

    /// `N(E f, Var f + σ²)`: `Var f` is the epistemic part, `σ²` the aleatoric one. Under a
    /// log-variance head `ℓ ~ N(m, v)`, the aleatoric variance is `E[e^ℓ] = e^{m + v/2}` and
    /// the epistemic one the mean unit's variance.
    fn predict_moments(
        &self,
        out: Moments<2>,
        _logits: LogitRule,
    ) -> Result<GaussianPrediction, Unsupported> {
        Ok(GaussianPrediction::Moments(match self.noise {
            NoiseModel::Homoscedastic => GaussianMoments {
                aleatoric_var: self.variance().squeeze_dim::<2>(0).expand(out.dims()),
                mean: out.mean,
                epistemic_var: out.var,
            },
            NoiseModel::LogVarianceHead => {
                let (mean, log_var) = Self::head_moments(out);
                let (lo, hi) = LOG_VAR_RANGE;
                GaussianMoments {
                    aleatoric_var: (log_var.mean + log_var.var * 0.5).clamp(lo, hi).exp(),
                    mean: mean.mean,
                    epistemic_var: mean.var,
                }
            }
        }))
    }

    /// Homoscedastic: `−½ ln 2πσ² − ((y − E f)² + Var f)/(2σ²)` (Haußmann 2021 eq. 3.5 with
    /// `β = 1/σ²`). Log-variance head, mean unit `f` and log-variance `ℓ ~ N(m, v)` independent
    /// (diagonal): `−½ ln 2π − ½ m − ½ e^{−m + v/2} ((y − E f)² + Var f)` (Wu et al. 2019).
    /// Both exact, summed over dimensions.
    fn expected_log_likelihood(
        &self,
        out: Moments<2>,
        y: Tensor<2>,
        _logits: LogitRule,
    ) -> Result<Tensor<1>, Unsupported> {
        let b = y.dims()[0];
        let ll = match self.noise {
            NoiseModel::Homoscedastic => {
                let var = self.variance().squeeze_dim::<2>(0);
                let fit = out.expected_squared_error(y);
                fit.div(var.clone() * 2.0).neg() - var.log() * 0.5 - HALF_LN_2PI
            }
            NoiseModel::LogVarianceHead => {
                let (mean, log_var) = Self::head_moments(out);
                let (lo, hi) = LOG_VAR_RANGE;
                let m = log_var.mean.clamp(lo, hi);
                let inv_var = (m.clone().neg() + log_var.var.clamp_max(hi) * 0.5).exp();
                (mean.expected_squared_error(y) * inv_var + m) * -0.5 - HALF_LN_2PI
            }
        };
        Ok(ll.sum_dim(1).reshape([b]))
    }
}

impl GaussianLikelihood {
    /// Means and variances of the outputs of `S` draws, `[S, B, D]` each.
    fn samples(&self, out: Tensor<3>) -> GaussianSamples {
        match self.noise {
            NoiseModel::Homoscedastic => GaussianSamples {
                var: self.variance().expand(out.dims()),
                mean: out,
            },
            NoiseModel::LogVarianceHead => {
                let (mean, log_var) = Self::split_head(out);
                let (lo, hi) = LOG_VAR_RANGE;
                GaussianSamples {
                    mean,
                    var: log_var.clamp(lo, hi).exp(),
                }
            }
        }
    }

    /// The output moments of a log-variance head split into the means' and the log-variances'.
    fn head_moments(out: Moments<2>) -> (Moments<2>, Moments<2>) {
        let (mean_m, log_var_m) = Self::split_head(out.mean);
        let (mean_v, log_var_v) = Self::split_head(out.var);
        (
            Moments::new(mean_m, mean_v),
            Moments::new(log_var_m, log_var_v),
        )
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

    fn predict_moments(
        &self,
        out: Moments<2>,
        logits: LogitRule,
    ) -> Result<ClassPrediction, Unsupported> {
        Ok(ClassPrediction::from_logits(match logits {
            LogitRule::Probit => probit_logits(out).unsqueeze::<3>(),
            LogitRule::Taylor => out.mean.unsqueeze::<3>(),
            LogitRule::Sampled { samples } => sample_logits(out, samples),
        }))
    }

    fn expected_log_likelihood(
        &self,
        out: Moments<2>,
        labels: Tensor<1, Int>,
        logits: LogitRule,
    ) -> Result<Tensor<1>, Unsupported> {
        let b = labels.dims()[0];
        let pick = |t: Tensor<2>| t.gather(1, labels.clone().reshape([b, 1])).reshape([b]);
        Ok(match logits {
            LogitRule::Probit => pick(log_softmax(probit_logits(out), 1)),
            LogitRule::Taylor => {
                let zeta = softmax(out.mean.clone(), 1);
                let correction = (out.var * zeta.clone() * (zeta.neg() + 1.0)).sum_dim(1) * 0.5;
                let lse = logsumexp(out.mean.clone(), 1);
                pick(out.mean) - (lse + correction).reshape([b])
            }
            LogitRule::Sampled { samples } => {
                let ll = self.log_likelihood(sample_logits(out, samples), labels);
                crate::reduce::mean_dim(ll, 0).reshape([b])
            }
        })
    }
}

/// MacKay's probit-scaled logits `μ/√(1 + πv/8)`.
fn probit_logits(out: Moments<2>) -> Tensor<2> {
    out.mean / (out.var * (std::f64::consts::PI / 8.0) + 1.0).sqrt()
}

/// `samples` draws `μ + √v ⊙ ε` of Gaussian logits, `[S, B, C]`.
fn sample_logits(out: Moments<2>, samples: usize) -> Tensor<3> {
    let [b, c] = out.dims();
    let s = samples.max(1);
    let eps = Tensor::<3>::random(
        [s, b, c],
        Distribution::Normal(0.0, 1.0),
        &out.mean.device(),
    );
    out.mean.unsqueeze::<3>() + out.var.clamp_min(0.0).sqrt().unsqueeze::<3>() * eps
}

#[cfg(test)]
mod tests {
    use super::*;
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
