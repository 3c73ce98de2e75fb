//! How a layer models its weights, shared by the dense and the convolutional layer: the
//! posterior family, the prior, the gradient estimator, the initialiser of the means, and
//! whether there is a bias.

use super::Estimator;
use crate::dist::{Prior, WeightPrior};
use crate::error::{Check, ConfigError};
use crate::posterior::{PosteriorConfig, PosteriorFamily, TensorSpec};
use burn::config::Config;
use burn::module::Initializer;
use burn::tensor::{Device, Tensor};

/// A layer's bias.
#[derive(Config, Debug, PartialEq, Eq, Copy)]
pub enum Bias {
    /// No bias.
    None,
    /// A posterior of the weights' family ([`PosteriorConfig::for_bias`]) under the weights'
    /// prior.
    Posterior,
    /// A point estimate without a prior (no noise, no term in the KL: fitted by maximum
    /// likelihood), as in Haußmann 2021's VBP code. Needs a family that can express a point
    /// ([`PosteriorFamily::point_estimate`]; any run-time [`PosteriorConfig`] can).
    Point,
}

/// How a layer's means start.
#[derive(Config, Debug, PartialEq)]
pub enum MeanInit {
    /// burn's initialiser for the weights; bias means start at 0.
    Burn(Initializer),
    /// The initialiser of Sensoy et al. (2018)'s EDL code (TensorFlow), for weight and bias
    /// means: a normal truncated at two standard deviations, `std = gain/√a` with `a` the
    /// tensor's first axis in TensorFlow's layout (the kernel height of a convolution, the
    /// input width of a dense weight, the length of a bias); his code has `gain = √2`.
    TfTruncatedNormal {
        /// `g` (> 0).
        gain: f64,
    },
}

impl From<Initializer> for MeanInit {
    fn from(init: Initializer) -> Self {
        MeanInit::Burn(init)
    }
}

/// The weight model of a layer.
#[derive(Config, Debug, PartialEq)]
pub struct WeightConfig {
    /// Posterior family of the weights (the bias uses [`PosteriorConfig::for_bias`]).
    #[config(default = "PosteriorConfig::mean_field()")]
    pub posterior: PosteriorConfig,
    /// Prior over weights and bias, and with it the layer's term of the objective: the KL
    /// (clamped inside for [`Prior::ClampedGaussian`]) or a hyperprior's density
    /// ([`Prior::Hyper`]).
    #[config(default = "Prior::Gaussian { mean: 0.0, std: 1.0 }")]
    pub prior: Prior,
    /// Gradient estimator of the expected log-likelihood.
    #[config(default = "Estimator::Reparameterization")]
    pub estimator: Estimator,
    /// Initialiser of the means (He normal by default).
    #[config(
        default = "MeanInit::Burn(Initializer::KaimingNormal { gain: std::f64::consts::SQRT_2, fan_out_only: false })"
    )]
    pub initializer: MeanInit,
    /// Posterior draws per Monte Carlo estimate of a prior cross-entropy without closed form.
    #[config(default = 1)]
    pub kl_samples: usize,
    /// The layers' biases.
    #[config(default = "Bias::Posterior")]
    pub bias: Bias,
}

/// `shape` drawn from `N(0, std²)` truncated to `±2 std`: out-of-range entries are drawn again
/// until none is left (each round keeps 95.4 % of them).
pub fn truncated_normal<const D: usize>(shape: [usize; D], std: f64, device: &Device) -> Tensor<D> {
    use burn::tensor::Distribution;
    crate::device::uses_generator();
    let mut z = Tensor::<D>::random(shape, Distribution::Normal(0.0, 1.0), device);
    loop {
        let out = z.clone().abs().greater_elem(2.0);
        if crate::host::to_vec(out.clone().any().float())[0] == 0.0 {
            break;
        }
        let fresh = Tensor::<D>::random(shape, Distribution::Normal(0.0, 1.0), device);
        z = z.mask_where(out, fresh);
    }
    z * std
}

impl WeightConfig {
    /// Weights of the given family, everything else default.
    pub fn of(posterior: PosteriorConfig) -> Self {
        Self::new().with_posterior(posterior)
    }

    /// Checks every field; `config` names the layer configuration holding this one.
    pub fn validate(&self, config: &'static str) -> Result<(), ConfigError> {
        self.validate_with(&self.posterior, config)
    }

    /// [`Self::validate`] with `family` in place of the configured posterior.
    pub fn validate_with<F: PosteriorFamily>(
        &self,
        family: &F,
        config: &'static str,
    ) -> Result<(), ConfigError> {
        let check = Check(config);
        family.validate()?;
        self.prior.validate(config)?;
        check.at_least_one("weights.kl_samples", self.kl_samples)?;
        if let MeanInit::TfTruncatedNormal { gain } = self.initializer {
            check.positive("weights.initializer.gain", gain)?;
        }
        let needs_mean_field = match self.prior {
            Prior::ClampedGaussian { .. } => Some("a clamp of ln σ² inside the KL"),
            Prior::Hyper(_) => Some("a hyperprior over the posterior's parameters"),
            _ => None,
        };
        if let Some(what) = needs_mean_field
            && !family.factorised_gaussian()
        {
            return Err(ConfigError {
                config,
                field: "weights.prior",
                value: format!(
                    "{:?} ({what}) with the {} family",
                    self.prior,
                    family.name()
                ),
                expected: "a Gaussian or scale-mixture prior, or a mean-field family",
            });
        }
        if self.bias == Bias::Point && family.point_estimate().is_none() {
            return Err(ConfigError {
                config,
                field: "weights.bias",
                value: format!("Point with the {} family", family.name()),
                expected: "None or Posterior, or a family with a point estimate (e.g. a \
                           PosteriorConfig)",
            });
        }
        if self.estimator != Estimator::Reparameterization && !family.has_marginal_variance() {
            return Err(ConfigError {
                config,
                field: "weights.estimator",
                value: format!("{:?} with the {} family", self.estimator, family.name()),
                expected: "Reparameterization for a family without a marginal variance",
            });
        }
        Ok(())
    }

    /// The posterior (of `family`) and prior of a weight tensor with the given fans.
    pub(crate) fn weight<F: PosteriorFamily, const D: usize>(
        &self,
        family: &F,
        spec: TensorSpec<D>,
        fans: [usize; 2],
        device: &Device,
    ) -> (F::Posterior<D>, WeightPrior<D>) {
        let mean = match &self.initializer {
            MeanInit::TfTruncatedNormal { gain } => {
                // TensorFlow's layouts: [kH, kW, C_in, C_out] and [d_in, d_out].
                let first = if D == 4 { spec.shape[2] } else { fans[0] };
                truncated_normal(spec.shape, gain / (first as f64).sqrt(), device)
            }
            MeanInit::Burn(init) => {
                if !matches!(
                    init,
                    Initializer::Constant { .. } | Initializer::Ones | Initializer::Zeros
                ) {
                    crate::device::uses_generator();
                }
                init.init_with::<D, _>(spec.shape, Some(fans[0]), Some(fans[1]), device)
                    .val()
            }
        };
        let posterior = family.init(mean, &spec);
        (posterior, self.prior.weight_prior(self.kl_samples, device))
    }

    /// The posterior (of `family`'s bias configuration) and prior of a bias of `n` entries
    /// (means start at 0, or from [`MeanInit::TfTruncatedNormal`]); with [`Bias::Point`], a
    /// point estimate and no prior.
    ///
    /// # Panics
    /// With [`Bias::Point`] and a family without a point estimate, which
    /// [`Self::validate_with`] rejects.
    pub(crate) fn bias<F: PosteriorFamily>(
        &self,
        family: &F,
        n: usize,
        device: &Device,
    ) -> (F::Posterior<1>, Option<WeightPrior<1>>) {
        let spec = TensorSpec {
            shape: [n],
            input_axis: None,
        };
        let mean = match self.initializer {
            MeanInit::TfTruncatedNormal { gain } => {
                truncated_normal([n], gain / (n as f64).sqrt(), device)
            }
            MeanInit::Burn(_) => Tensor::zeros([n], device),
        };
        if self.bias == Bias::Point {
            let point = family
                .point_estimate()
                .expect("validate_with rejects a point bias without a point estimate");
            (point.init(mean, &spec), None)
        } else {
            let posterior = family.for_bias().init(mean, &spec);
            (
                posterior,
                Some(self.prior.weight_prior(self.kl_samples, device)),
            )
        }
    }
}
