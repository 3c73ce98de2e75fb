//! Likelihoods `p(y | f(x; w))`: what turns the network's outputs of `S` posterior draws,
//! `[S, B, k]`, into per-draw log-likelihoods `[S, B]` and into a prediction type.

use crate::batch::Batch;
use crate::dist::{Moments, gaussian_log_density};
use crate::error::{Check, ConfigError};
use crate::posterior::Unsupported;
use crate::predict::{
    ClassPrediction, ClassSamples, GaussianMoments, GaussianPrediction, GaussianSamples,
};
use crate::special::{
    HALF_LN_2PI, logsumexp, normal_cdf, normal_log_cdf, normal_log_pdf, softplus,
};
use burn::config::Config;
use burn::module::{Module, ModuleDisplay, Param};
use burn::tensor::Distribution;
use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::{Device, Int, Tensor};

mod evidential;

pub use evidential::{
    DirichletRegulariser, EdlLoss, Evidence, Evidential, EvidentialConfig, SENSOY_WEIGHT_DECAY,
};

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

    /// The KL of a latent the likelihood places on each example, `KL(q(λ_b) ‖ p(λ_b))` averaged
    /// over the draws, `[B]`, or `None` (the default: no such latent). The step reports it as
    /// the row's local KL (an evidential head's Dirichlet regulariser).
    fn local_kl(&self, _out: &Tensor<3>, _target: &Self::Target) -> Option<Tensor<1>> {
        None
    }

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

    /// [`Likelihood::local_kl`] under output moments (a training step by moment propagation),
    /// as `logits` treats the outputs; `Ok(None)` by default.
    ///
    /// # Errors
    /// When the likelihood's local KL has no form under this rule.
    fn expected_local_kl(
        &self,
        _out: Moments<2>,
        _target: &Self::Target,
        _logits: LogitRule,
    ) -> Result<Option<Tensor<1>>, Unsupported> {
        Ok(None)
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
    /// `samples` draws of the logits, trained by the log of their average likelihood,
    /// `ln (1/S) Σ_s p(y | f_s)` (the marginal `ln E[p]` of BEDL, Haußmann 2021 eq. 5.8, rather
    /// than `Sampled`'s `E[ln p]`); predicts as `Sampled`.
    SampledMarginal {
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
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum NoiseModel {
    /// One `σ²` per target dimension, a parameter of the likelihood.
    Homoscedastic,
    /// Per example: the network outputs `[μ, ℓ]` per target dimension (means first, then
    /// log-variances) and `y ~ N(μ, e^ℓ)`. Under Gaussian output moments the expected
    /// log-likelihood is closed-form, `E[e^{−ℓ}] = e^{−E ℓ + Var ℓ/2}` (Wu et al. 2019, the
    /// diagonal DVI), which is what the softplus head of [`HeteroscedasticGaussian`] lacks.
    LogVarianceHead,
    /// BEDL's evidential regressor (Haußmann 2021 §5.4): the network outputs `[f₁, f₂]` per
    /// target dimension, a latent mean `λ ~ N(f₁, e^{f₂})` per example, and
    /// `y | λ ~ N(λ, σ²)` with the likelihood's `σ² = β⁻¹` (the thesis: β = 100, fixed). Per
    /// draw `p(y | f) = N(y | f₁, σ² + e^{f₂})`; under output moments the final moment match
    /// gives the marginal `ln N(y | m₁, σ² + s₁² + e^{m₂ + s₂²/2})` (BEDL's `ln E[p]`, not
    /// `E[ln p]`). The row's local KL is `KL(N(λ | m₁, v) ‖ N(0, α⁻¹))`,
    /// `v = s₁² + e^{m₂ + s₂²/2}`, the PAC-Bayes regulariser of BEDL-PAC.
    Evidential {
        /// `α` of the latent's prior `N(0, α⁻¹)` (in the units of the standardised targets;
        /// the thesis gives none, 1 matches standardised targets).
        prior_precision: f64,
    },
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
        if let NoiseModel::Evidential { prior_precision } = self.noise {
            check.positive("noise.prior_precision", prior_precision)?;
        }
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

    /// Whether the network outputs the noise ([`NoiseModel::LogVarianceHead`],
    /// [`NoiseModel::Evidential`]).
    pub fn has_variance_head(&self) -> bool {
        self.noise != NoiseModel::Homoscedastic
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
            NoiseModel::LogVarianceHead | NoiseModel::Evidential { .. } => 2,
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
    /// the epistemic one the mean unit's variance. The evidential regressor splits by the law
    /// of total variance over `f` as the evidential classifier does: `Var_f E[y | f] = s₁²`
    /// (epistemic), `E_f Var(y | f) = σ² + e^{m₂ + s₂²/2}` (aleatoric).
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
                GaussianMoments {
                    aleatoric_var: expected_exp(log_var),
                    mean: mean.mean,
                    epistemic_var: mean.var,
                }
            }
            NoiseModel::Evidential { .. } => {
                let (mean, log_var) = Self::head_moments(out);
                GaussianMoments {
                    aleatoric_var: expected_exp(log_var) + self.variance().squeeze_dim::<2>(0),
                    mean: mean.mean,
                    epistemic_var: mean.var,
                }
            }
        }))
    }

    /// Homoscedastic: `−½ ln 2πσ² − ((y − E f)² + Var f)/(2σ²)` (Haußmann 2021 eq. 3.5 with
    /// `β = 1/σ²`). Log-variance head, mean unit `f` and log-variance `ℓ ~ N(m, v)` independent
    /// (diagonal): `−½ ln 2π − ½ m − ½ e^{−m + v/2} ((y − E f)² + Var f)` (Wu et al. 2019).
    /// Both exact, summed over dimensions. The evidential regressor
    /// ([`NoiseModel::Evidential`]): the moment-matched marginal
    /// `ln N(y | m₁, σ² + s₁² + e^{m₂ + s₂²/2})` (Haußmann 2021 §5.4).
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
            NoiseModel::Evidential { .. } => {
                let (mean, log_var) = Self::head_moments(out);
                let var = self.variance().squeeze_dim::<2>(0) + mean.var + expected_exp(log_var);
                gaussian_log_density(y, mean.mean, var)
            }
        };
        Ok(ll.sum_dim(1).reshape([b]))
    }

    /// The evidential regressor's `KL(N(λ | f₁, e^{f₂}) ‖ N(0, α⁻¹))` per draw, averaged over the
    /// draws; `None` for the other noise models.
    fn local_kl(&self, out: &Tensor<3>, _y: &Tensor<2>) -> Option<Tensor<1>> {
        let NoiseModel::Evidential { prior_precision } = self.noise else {
            return None;
        };
        let [s, b, k] = out.dims();
        let (mean, log_var) = Self::split_head(out.clone());
        let (lo, hi) = LOG_VAR_RANGE;
        let kl = crate::dist::gaussian::kl_to_centred(
            mean.reshape([s * b, k / 2]),
            log_var.clamp(lo, hi).exp().reshape([s * b, k / 2]),
            1.0 / prior_precision,
        );
        Some(crate::reduce::mean_dim(kl.reshape([s, b]), 0).reshape([b]))
    }

    /// The evidential regressor's local KL under output moments, of the moment-matched latent
    /// `N(λ | m₁, s₁² + e^{m₂ + s₂²/2})` (Haußmann 2021 §5.4); `None` for the other noise models.
    fn expected_local_kl(
        &self,
        out: Moments<2>,
        _y: &Tensor<2>,
        _logits: LogitRule,
    ) -> Result<Option<Tensor<1>>, Unsupported> {
        let NoiseModel::Evidential { prior_precision } = self.noise else {
            return Ok(None);
        };
        let (mean, log_var) = Self::head_moments(out);
        let var = mean.var + expected_exp(log_var);
        Ok(Some(crate::dist::gaussian::kl_to_centred(
            mean.mean,
            var,
            1.0 / prior_precision,
        )))
    }
}

/// `E[e^ℓ] = e^{m + v/2}` of `ℓ ~ N(m, v)`, the exponent clamped to [`LOG_VAR_RANGE`].
fn expected_exp(log_var: Moments<2>) -> Tensor<2> {
    let (lo, hi) = LOG_VAR_RANGE;
    (log_var.mean + log_var.var * 0.5).clamp(lo, hi).exp()
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
            // The latent mean integrated out: y | f ~ N(f₁, σ² + e^{f₂}).
            NoiseModel::Evidential { .. } => {
                let (mean, log_var) = Self::split_head(out);
                let (lo, hi) = LOG_VAR_RANGE;
                GaussianSamples {
                    mean,
                    var: log_var.clamp(lo, hi).exp() + self.variance(),
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
        check_label_count("Categorical", [s, b, c], labels.dims()[0]);
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
            LogitRule::Sampled { samples } | LogitRule::SampledMarginal { samples } => {
                sample_logits(out, samples)
            }
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
                sampled_log_likelihood(self, out, labels, samples, false)
            }
            LogitRule::SampledMarginal { samples } => {
                sampled_log_likelihood(self, out, labels, samples, true)
            }
        })
    }
}

/// Task heads side by side (multi-head continual learning, Farquhar 2022 §5.1): the outputs
/// are consecutive groups of `group` classes, one head per task, and a label's likelihood is the
/// softmax over its own group, `ln p(y | f) = f_y − ln Σ_{c ∈ g(y)} e^{f_c}`. Only the head of a
/// row's task learns from it. The prediction is the softmax over all outputs; a head's
/// prediction is its columns renormalised per draw. `group` = the class count is
/// [`Categorical`].
#[derive(Module, Debug)]
pub struct TaskHeads {
    /// Classes per head.
    pub group: usize,
}

impl TaskHeads {
    /// Heads of `group` classes each.
    ///
    /// # Panics
    /// If `group` is 0.
    pub fn new(group: usize) -> Self {
        assert!(group > 0, "TaskHeads: a head of at least one class");
        Self { group }
    }
}

impl Likelihood for TaskHeads {
    type Target = Tensor<1, Int>;
    type Prediction = ClassPrediction;

    fn outputs_per_target(&self) -> usize {
        1
    }

    /// # Panics
    /// If the class count is not a multiple of the head size.
    fn log_likelihood(&self, logits: Tensor<3>, labels: Tensor<1, Int>) -> Tensor<2> {
        let [s, b, c] = logits.dims();
        check_label_count("TaskHeads", [s, b, c], labels.dims()[0]);
        let k = self.group;
        assert!(
            c % k == 0,
            "TaskHeads: {c} outputs are not whole heads of {k} classes"
        );
        // A log-softmax within each head, then the label's entry.
        let within = log_softmax(logits.reshape([s, b, c / k, k]), 3).reshape([s, b, c]);
        let idx = labels.reshape([1, b, 1]).repeat_dim(0, s);
        within.gather(2, idx).reshape([s, b])
    }

    fn predict(&self, logits: Tensor<3>) -> ClassPrediction {
        ClassPrediction::from_logits(logits)
    }
}

/// The CLT-BNN's multi-label probit likelihood (Haußmann 2021 ch. 4, eq. 4.4), used for
/// multiclass labels too: `y | f ~ Π_c Ber(y_c | Φ(f_c))` with `y` the one-hot label, so
/// `ln p(y | f) = Σ_c ln Φ((2y_c − 1) f_c)`. Under Gaussian logits `f_c ~ N(g_c, h_c)` each
/// class's marginal is exact, `p(y_c = 1) = Φ(g_c / √(1 + h_c))`. A prediction's class
/// probabilities are these marginals normalised over classes (the ranking, and so the
/// predicted class, is the marginals').
#[derive(Module, Debug, Default)]
pub struct MultiLabelProbit;

impl MultiLabelProbit {
    /// `2y − 1` of the one-hot labels, `[B, C]`.
    fn signs(labels: Tensor<1, Int>, classes: usize) -> Tensor<2> {
        let b = labels.dims()[0];
        let device = labels.device();
        let classes = Tensor::<1, Int>::arange(0..classes as i64, &device).reshape([1, classes]);
        classes.equal(labels.reshape([b, 1])).float() * 2.0 - 1.0
    }

    /// Per-class marginals `Φ(f)` normalised over the last axis.
    fn class_probs(marginals: Tensor<3>) -> ClassPrediction {
        let total = marginals.clone().sum_dim(2).clamp_min(f64::MIN_POSITIVE);
        ClassPrediction::Samples(ClassSamples {
            probs: marginals / total,
        })
    }

    /// `g / √(1 + h)`: the argument of each class's exact marginal.
    fn probit_scaled(out: Moments<2>) -> Tensor<2> {
        out.mean / (out.var.clamp_min(0.0) + 1.0).sqrt()
    }
}

impl Likelihood for MultiLabelProbit {
    type Target = Tensor<1, Int>;
    type Prediction = ClassPrediction;

    fn outputs_per_target(&self) -> usize {
        1
    }

    fn log_likelihood(&self, logits: Tensor<3>, labels: Tensor<1, Int>) -> Tensor<2> {
        let [s, b, c] = logits.dims();
        check_label_count("MultiLabelProbit", [s, b, c], labels.dims()[0]);
        let signs = Self::signs(labels, c).unsqueeze::<3>();
        normal_log_cdf(logits * signs).sum_dim(2).reshape([s, b])
    }

    fn predict(&self, logits: Tensor<3>) -> ClassPrediction {
        Self::class_probs(normal_cdf(logits))
    }

    /// `Probit` and `Taylor` give the exact marginals `Φ(g/√(1 + h))`; `Sampled` the marginals
    /// `Φ(f_s)` of logit draws (which keep an epistemic part).
    fn predict_moments(
        &self,
        out: Moments<2>,
        logits: LogitRule,
    ) -> Result<ClassPrediction, Unsupported> {
        Ok(match logits {
            LogitRule::Probit | LogitRule::Taylor => {
                Self::class_probs(normal_cdf(Self::probit_scaled(out)).unsqueeze::<3>())
            }
            LogitRule::Sampled { samples } | LogitRule::SampledMarginal { samples } => {
                self.predict(sample_logits(out, samples))
            }
        })
    }

    /// `Probit`: the reference code's plug-in `Σ_c ln Φ((2y_c − 1) g_c/√(1 + h_c))`, the log of
    /// each class's exact marginal. `Taylor`: the second-order expansion of `E[ln Φ(s f)]`,
    /// `ln Φ(s g) − ½ h λ(s g)(s g + λ(s g))` with `λ = φ/Φ`. `Sampled`: the average over
    /// logit draws.
    fn expected_log_likelihood(
        &self,
        out: Moments<2>,
        labels: Tensor<1, Int>,
        logits: LogitRule,
    ) -> Result<Tensor<1>, Unsupported> {
        let [b, c] = out.dims();
        Ok(match logits {
            LogitRule::Probit => {
                let signs = Self::signs(labels, c);
                normal_log_cdf(Self::probit_scaled(out) * signs)
                    .sum_dim(1)
                    .reshape([b])
            }
            LogitRule::Taylor => {
                let x = out.mean * Self::signs(labels, c);
                let log_cdf = normal_log_cdf(x.clone());
                let lambda = (normal_log_pdf(x.clone()) - log_cdf.clone()).exp();
                let curvature = lambda.clone() * (x + lambda);
                (log_cdf - out.var.clamp_min(0.0) * curvature * 0.5)
                    .sum_dim(1)
                    .reshape([b])
            }
            LogitRule::Sampled { samples } => {
                sampled_log_likelihood(self, out, labels, samples, false)
            }
            LogitRule::SampledMarginal { samples } => {
                sampled_log_likelihood(self, out, labels, samples, true)
            }
        })
    }
}

/// Panics naming the likelihood when `n_labels` is not the batch of logits of shape `dims`.
fn check_label_count(likelihood: &str, [s, b, c]: [usize; 3], n_labels: usize) {
    assert!(
        n_labels == b,
        "{likelihood}: {n_labels} labels for logits of shape [{s}, {b}, {c}]"
    );
}

/// The log-likelihoods of `samples` draws of Gaussian logits reduced over the draws, `[B]`:
/// their mean `E[ln p]` (`LogitRule::Sampled`), or with `marginal` the log of their mean
/// likelihood `ln E[p]` (`LogitRule::SampledMarginal`, Haußmann 2021 eq. 5.8).
pub(crate) fn sampled_log_likelihood<L: Likelihood<Target = Tensor<1, Int>>>(
    likelihood: &L,
    out: Moments<2>,
    labels: Tensor<1, Int>,
    samples: usize,
    marginal: bool,
) -> Tensor<1> {
    let b = labels.dims()[0];
    let ll = likelihood.log_likelihood(sample_logits(out, samples), labels);
    let reduced = if marginal {
        crate::special::log_mean_exp(ll, 0)
    } else {
        crate::reduce::mean_dim(ll, 0)
    };
    reduced.reshape([b])
}

/// MacKay's probit-scaled logits `μ/√(1 + πv/8)`.
fn probit_logits(out: Moments<2>) -> Tensor<2> {
    out.mean / (out.var * (std::f64::consts::PI / 8.0) + 1.0).sqrt()
}

/// `samples` draws `μ + √(v + 10⁻¹⁶) ⊙ ε` of Gaussian logits, `[S, B, C]`: the floor
/// ([`crate::layers::VAR_FLOOR`]) keeps the gradient `ε/(2√v)` finite where a logit's variance
/// is 0, and leaves any variance above `2⁻²⁸ ≈ 4·10⁻⁹` unchanged in `f32` (half its spacing
/// there exceeds `10⁻¹⁶`).
pub(crate) fn sample_logits(out: Moments<2>, samples: usize) -> Tensor<3> {
    let [b, c] = out.dims();
    let s = samples.max(1);
    crate::device::uses_generator();
    let eps = Tensor::<3>::random(
        [s, b, c],
        Distribution::Normal(0.0, 1.0),
        &out.mean.device(),
    );
    let sd = (out.var.clamp_min(0.0) + crate::layers::VAR_FLOOR).sqrt();
    out.mean.unsqueeze::<3>() + sd.unsqueeze::<3>() * eps
}

#[cfg(test)]
#[path = "likelihood/evidential_regression_tests.rs"]
mod evidential_regression_tests;

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

    #[test]
    fn task_heads_normalise_within_the_labels_head() {
        let device = test_device();
        // Two heads of two classes; label 3 sees only logits 2 and 3.
        let logits =
            Tensor::<3>::from_floats([[[5.0, -2.0, 1.0, 0.0], [0.3, 0.1, 9.0, 9.0]]], &device);
        let labels = Tensor::<1, Int>::from_ints([3, 0], &device);
        let ll = to_vec(TaskHeads::new(2).log_likelihood(logits.clone(), labels.clone()));
        let z3 = (1f64.exp() + 1.0).ln();
        let z0 = (0.3f64.exp() + 0.1f64.exp()).ln();
        assert!((ll[0] - (0.0 - z3)).abs() < 1e-5, "{}", ll[0]);
        assert!((ll[1] - (0.3 - z0)).abs() < 1e-5, "{}", ll[1]);
        // One head over every class is the categorical likelihood.
        let all = to_vec(TaskHeads::new(4).log_likelihood(logits.clone(), labels.clone()));
        let cat = to_vec(Categorical.log_likelihood(logits, labels));
        assert!(all.iter().zip(&cat).all(|(a, b)| (a - b).abs() < 1e-6));
    }

    /// `Σ_c ln Φ((2y_c − 1) f_c)`, by hand: label 1 of logits (0.5, −1, 2) gives
    /// `ln Φ(−0.5) + ln Φ(−1) + ln Φ(−2)`.
    #[test]
    fn probit_log_likelihood_sums_one_binary_probit_per_class() {
        let device = test_device();
        let logits = Tensor::<3>::from_floats([[[0.5, -1.0, 2.0]]], &device);
        let labels = Tensor::<1, Int>::from_ints([1], &device);
        let ll = to_vec(MultiLabelProbit.log_likelihood(logits, labels))[0];
        let want: f64 = [
            0.308_537_538_725_986_9,
            0.158_655_253_931_457_07,
            0.022_750_131_948_179_2,
        ]
        .iter()
        .map(|p: &f64| p.ln())
        .sum();
        assert!((ll - want).abs() < 1e-5, "{ll} vs {want}");
    }

    /// Under `f ~ N(g, h)` each class's marginal `E[Φ(f)] = Φ(g/√(1 + h))` exactly (the
    /// `Probit` rule's log is its log), and the `Taylor` rule is `E[ln Φ(f)]` to second order:
    /// both against 10⁶ host draws pushed through the library's `Φ` and `ln Φ`, to 5 standard
    /// errors (and `h²` for the Taylor remainder).
    #[test]
    fn probit_rules_match_monte_carlo_of_gaussian_logits() {
        use crate::testing::{host_normals, sample_moments};
        let device = test_device();
        let n = 1_000_000;
        let eps = host_normals(n, 41);
        let labels = Tensor::<1, Int>::from_ints([0], &device);
        for (g, h) in [
            (-3.0f64, 0.01f64),
            (-0.5, 1.0),
            (0.0, 9.0),
            (1.2, 0.05),
            (4.0, 2.0),
        ] {
            let out = Moments::new(
                Tensor::<2>::from_floats([[g]], &device),
                Tensor::<2>::from_floats([[h]], &device),
            );
            let ell = |rule| {
                let e = MultiLabelProbit.expected_log_likelihood(out.clone(), labels.clone(), rule);
                to_vec(e.unwrap())[0]
            };
            let draws: Vec<f32> = eps.iter().map(|e| (g + h.sqrt() * e) as f32).collect();
            let f = Tensor::<1>::from_floats(draws.as_slice(), &device);
            let cdf = sample_moments(&to_vec(normal_cdf(f.clone())));
            let probit = ell(LogitRule::Probit).exp();
            assert!(
                (probit - cdf.mean).abs() <= 5.0 * cdf.mean_se + 1e-6,
                "g {g}, h {h}: Φ(g/√(1+h)) = {probit}, Monte Carlo {}",
                cdf.mean
            );
            if h <= 0.05 {
                let log_cdf = sample_moments(&to_vec(normal_log_cdf(f)));
                let taylor = ell(LogitRule::Taylor);
                assert!(
                    (taylor - log_cdf.mean).abs() <= 5.0 * log_cdf.mean_se + h * h,
                    "g {g}, h {h}: Taylor {taylor}, Monte Carlo {}",
                    log_cdf.mean
                );
            }
        }
    }

    /// The prediction's probabilities are the marginals normalised: rows sum to one, and the
    /// order of the classes is the order of `g/√(1 + h)`.
    #[test]
    fn probit_predictions_normalise_the_marginals() {
        let device = test_device();
        let out = Moments::new(
            Tensor::<2>::from_floats([[1.0, 0.5, -2.0], [0.0, 0.2, 0.1]], &device),
            Tensor::<2>::from_floats([[0.1, 0.1, 0.1], [4.0, 0.0, 1.0]], &device),
        );
        let p = MultiLabelProbit
            .predict_moments(out, LogitRule::Probit)
            .unwrap()
            .mean();
        let p = to_vec(p);
        for row in p.chunks(3) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-5, "{row:?}");
        }
        assert!(p[0] > p[1] && p[1] > p[2], "{p:?}");
        // Row 2: 0/√5 = 0 < 0.1/√2 ≈ 0.07 < 0.2: classes 1, 2, 0.
        assert!(p[4] > p[5] && p[5] > p[3], "{p:?}");
    }

    /// A logit whose variance is exactly 0 (every weight feeding it deterministic) keeps both
    /// sampled rules' gradients finite: without the floor, `∂√v/∂v = 1/(2√v)` is infinite there
    /// (the variance's gradient came out ±inf on every logit), which an optimiser step turns into
    /// NaN. Where the variance is 0 the draws are the mean, so both rules equal `ln softmax(μ)_y`.
    #[test]
    fn sampled_rules_keep_finite_gradients_at_zero_logit_variance() {
        let device = test_device().autodiff();
        let _guard = crate::testing::seeded(&device, 41);
        let labels = Tensor::<1, Int>::from_ints([0, 2], &device);
        let logits = [[2.0, 0.0, -1.0], [0.5, 0.0, 1.0]];
        for rule in [
            LogitRule::Sampled { samples: 5 },
            LogitRule::SampledMarginal { samples: 5 },
        ] {
            let mean = Tensor::<2>::from_floats(logits, &device).require_grad();
            let var = Tensor::<2>::zeros([2, 3], &device).require_grad();
            let ll = Categorical
                .expected_log_likelihood(
                    Moments::new(mean.clone(), var.clone()),
                    labels.clone(),
                    rule,
                )
                .unwrap();
            let want = to_vec(Categorical.log_likelihood(
                Tensor::<2>::from_floats(logits, &device).unsqueeze::<3>(),
                labels.clone(),
            ));
            let got = to_vec(ll.clone());
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-5, "{rule:?}: {got:?} vs {want:?}");
            }
            let grads = ll.sum().backward();
            for (what, g) in [
                ("mean", to_vec(mean.grad(&grads).unwrap())),
                ("variance", to_vec(var.grad(&grads).unwrap())),
            ] {
                assert!(g.iter().all(|v| v.is_finite()), "{rule:?}: ∂/∂{what} {g:?}");
            }
        }
    }
}
