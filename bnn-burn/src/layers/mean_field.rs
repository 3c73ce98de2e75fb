//! Mean-field Gaussian layers (Bayes by Backprop, Blundell et al. 2015): every weight has an
//! independent posterior `q(w) = N(μ, σ²)`, `σ = softplus(ρ)`.
//!
//! Three gradient estimators of the expected log-likelihood, chosen by [`Estimator`]:
//! * **reparameterisation**: one weight draw `W = μ + σ ⊙ ε` per forward, shared by the batch;
//! * **local reparameterisation** (Kingma et al. 2015): pre-activations are drawn directly,
//!   `y ~ N(x μ, x² σ²)`, independently per example;
//! * **Flipout** (Wen et al. 2018): one perturbation `ΔW = σ ⊙ ε` decorrelated across examples
//!   by random signs, `y = x μ + ((x ⊙ s) ΔW) ⊙ r`.

use super::ops::{
    Conv2dGeometry, check_channels, check_last_dim, conv2d_per_sample, linear_per_sample,
    random_signs, std_normal_like,
};
use super::param::{Posterior, PosteriorParam};
use crate::error::{Check, ConfigError};
use crate::prior::{KlDivergence, Prior};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::module::{conv2d, linear};
use burn::tensor::{Device, Tensor};

/// Added to sampled variances before the square root so that its gradient stays finite.
const VAR_FLOOR: f64 = 1e-16;

pub use super::estimator::Estimator;

/// Configuration of a [`MeanFieldLinear`] layer.
#[derive(Config, Debug)]
pub struct MeanFieldLinearConfig {
    /// Input width.
    pub d_input: usize,
    /// Output width.
    pub d_output: usize,
    /// Whether the layer has a (stochastic) bias.
    #[config(default = true)]
    pub bias: bool,
    /// Prior over weights and biases.
    #[config(default = "Prior::Gaussian { mean: 0.0, std: 1.0 }")]
    pub prior: Prior,
    /// Mean of the initial `ρ` (σ = softplus(ρ); −5 gives σ ≈ 0.0067).
    #[config(default = -5.0)]
    pub rho_init: f64,
    /// Standard deviation of the jitter on the initial `ρ` (0 for a constant).
    #[config(default = 0.1)]
    pub rho_init_std: f64,
    /// Gradient estimator.
    #[config(default = "Estimator::Reparameterization")]
    pub estimator: Estimator,
    /// Monte Carlo samples for the KL when the prior has no closed form.
    #[config(default = 1)]
    pub kl_samples: usize,
}

/// A linear layer with a mean-field Gaussian posterior over weights and bias.
///
/// `y = x W + b`, `W_ij ~ N(μ_ij, softplus(ρ_ij)²)`. Create it with [`MeanFieldLinearConfig`].
#[derive(Module, Debug)]
pub struct MeanFieldLinear {
    /// Posterior over the `[d_input, d_output]` weight matrix.
    pub weight: PosteriorParam<2>,
    /// Posterior over the `[d_output]` bias.
    pub bias: Option<PosteriorParam<1>>,
    /// Prior over weights and bias.
    #[module(skip)]
    pub prior: Prior,
    /// Gradient estimator.
    #[module(skip)]
    pub estimator: Estimator,
    /// Monte Carlo samples for a KL without closed form.
    #[module(skip)]
    pub kl_samples: usize,
}

impl MeanFieldLinearConfig {
    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("MeanFieldLinearConfig");
        check.at_least_one("d_input", self.d_input)?;
        check.at_least_one("d_output", self.d_output)?;
        check.finite("rho_init", self.rho_init)?;
        check.finite("rho_init_std", self.rho_init_std.abs())?;
        check.at_least_one("kl_samples", self.kl_samples)?;
        self.prior.validate("MeanFieldLinearConfig")
    }

    /// A layer with He-initialised means `μ ~ N(0, 2/d_input)` and `ρ ~ N(rho_init, rho_init_std²)`.
    pub fn init(&self, device: &Device) -> Result<MeanFieldLinear, ConfigError> {
        self.validate()?;
        let he = (2.0 / self.d_input as f64).sqrt();
        let weight = PosteriorParam::init(
            [self.d_input, self.d_output],
            he,
            self.rho_init,
            self.rho_init_std,
            device,
        );
        let bias = self.bias.then(|| {
            PosteriorParam::init(
                [self.d_output],
                0.0,
                self.rho_init,
                self.rho_init_std,
                device,
            )
        });
        Ok(MeanFieldLinear {
            weight,
            bias,
            prior: self.prior,
            estimator: self.estimator,
            kl_samples: self.kl_samples,
        })
    }
}

impl MeanFieldLinear {
    /// Input width.
    pub fn d_input(&self) -> usize {
        self.weight.dims()[0]
    }

    /// Stochastic forward pass on `[..., d_input]`, returning `[..., d_output]`.
    ///
    /// With [`Estimator::Reparameterization`] all rows share one weight draw; the other
    /// estimators give every row its own noise.
    ///
    /// # Panics
    /// If the last axis of `input` is not `d_input` (both shapes are named).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        check_last_dim("MeanFieldLinear", &input, self.d_input());
        let (w, b) = self.posteriors();
        self.forward_with(input, &w, b.as_ref())
    }

    /// `S` posterior samples in one call: `[S, B, d_input]` → `[S, B, d_output]`, with an
    /// independent weight draw for every sample `s` (per-example noise for the local estimator).
    pub fn forward_samples(&self, input: Tensor<3>) -> Tensor<3> {
        let (w, b) = self.posteriors();
        self.forward_samples_with(input, &w, b.as_ref())
    }

    /// [`Self::forward_samples`] and [`KlDivergence::kl`] from one evaluation of `σ = softplus(ρ)`
    /// (what a training step needs; cheaper than the two calls).
    pub fn forward_samples_kl(&self, input: Tensor<3>) -> (Tensor<3>, Tensor<1>) {
        let (w, b) = self.posteriors();
        let out = self.forward_samples_with(input, &w, b.as_ref());
        (out, self.kl_with(&w, b.as_ref()))
    }

    fn posteriors(&self) -> (Posterior<2>, Option<Posterior<1>>) {
        (
            self.weight.posterior(),
            self.bias.as_ref().map(|b| b.posterior()),
        )
    }

    fn forward_with<const D: usize>(
        &self,
        input: Tensor<D>,
        w: &Posterior<2>,
        b: Option<&Posterior<1>>,
    ) -> Tensor<D> {
        match self.estimator {
            Estimator::Reparameterization => {
                linear(input, w.sample_gaussian(), b.map(|b| b.sample_gaussian()))
            }
            Estimator::LocalReparameterization => {
                let mean = linear(input.clone(), w.mu.clone(), b.map(|b| b.mu.clone()));
                let var = linear(
                    input.square(),
                    w.sigma.clone().square(),
                    b.map(|b| b.sigma.clone().square()),
                );
                let eps = std_normal_like(&mean);
                mean + (var + VAR_FLOOR).sqrt() * eps
            }
            Estimator::Flipout => {
                let mean = linear(input.clone(), w.mu.clone(), b.map(|b| b.mu.clone()));
                let delta = w.sigma.clone() * std_normal_like(&w.mu);
                let delta_b = b.map(|b| b.sigma.clone() * std_normal_like(&b.mu));
                let signs_in = random_signs(&input);
                let perturbation = linear(input * signs_in, delta, delta_b);
                let signs_out = random_signs(&perturbation);
                mean + perturbation * signs_out
            }
        }
    }

    fn forward_samples_with(
        &self,
        input: Tensor<3>,
        w: &Posterior<2>,
        b: Option<&Posterior<1>>,
    ) -> Tensor<3> {
        check_last_dim("MeanFieldLinear", &input, self.d_input());
        let s = input.dims()[0];
        match self.estimator {
            Estimator::LocalReparameterization => self.forward_with(input, w, b),
            Estimator::Reparameterization => linear_per_sample(
                input,
                w.sample_gaussian_n::<3>(s),
                b.map(|b| b.sample_gaussian_n::<2>(s)),
            ),
            Estimator::Flipout => {
                let mean = linear(input.clone(), w.mu.clone(), b.map(|b| b.mu.clone()));
                let delta = w.sample_gaussian_n::<3>(s) - w.mu.clone().unsqueeze();
                let delta_b = b.map(|b| b.sample_gaussian_n::<2>(s) - b.mu.clone().unsqueeze());
                let signs_in = random_signs(&input);
                let perturbation = linear_per_sample(input * signs_in, delta, delta_b);
                let signs_out = random_signs(&perturbation);
                mean + perturbation * signs_out
            }
        }
    }

    fn kl_with(&self, w: &Posterior<2>, b: Option<&Posterior<1>>) -> Tensor<1> {
        let kl = w.kl_gaussian(&self.prior, self.kl_samples);
        match b {
            Some(b) => kl + b.kl_gaussian(&self.prior, self.kl_samples),
            None => kl,
        }
    }
}

impl KlDivergence for MeanFieldLinear {
    fn kl(&self) -> Tensor<1> {
        let (w, b) = self.posteriors();
        self.kl_with(&w, b.as_ref())
    }
}

/// Configuration of a [`MeanFieldConv2d`] layer.
#[derive(Config, Debug)]
pub struct MeanFieldConv2dConfig {
    /// `[in_channels, out_channels]`.
    pub channels: [usize; 2],
    /// Kernel `[height, width]`.
    pub kernel_size: [usize; 2],
    /// Stride, padding and dilation.
    #[config(default = "Conv2dGeometry::new()")]
    pub geometry: Conv2dGeometry,
    /// Whether the layer has a (stochastic) bias.
    #[config(default = true)]
    pub bias: bool,
    /// Prior over weights and biases.
    #[config(default = "Prior::Gaussian { mean: 0.0, std: 1.0 }")]
    pub prior: Prior,
    /// Mean of the initial `ρ`.
    #[config(default = -5.0)]
    pub rho_init: f64,
    /// Standard deviation of the jitter on the initial `ρ`.
    #[config(default = 0.1)]
    pub rho_init_std: f64,
    /// Gradient estimator.
    #[config(default = "Estimator::Reparameterization")]
    pub estimator: Estimator,
    /// Monte Carlo samples for the KL when the prior has no closed form.
    #[config(default = 1)]
    pub kl_samples: usize,
}

/// A 2-D convolution with a mean-field Gaussian posterior over its kernel and bias.
///
/// Input `[B, C_in, H, W]`, output `[B, C_out, H', W']`. Flipout signs are drawn per example
/// and channel (shared over positions), so each example sees one consistent kernel.
#[derive(Module, Debug)]
pub struct MeanFieldConv2d {
    /// Posterior over the `[C_out, C_in, kH, kW]` kernel.
    pub weight: PosteriorParam<4>,
    /// Posterior over the `[C_out]` bias.
    pub bias: Option<PosteriorParam<1>>,
    /// Stride, padding, dilation.
    #[module(skip)]
    pub geometry: Conv2dGeometry,
    /// Prior over kernel and bias.
    #[module(skip)]
    pub prior: Prior,
    /// Gradient estimator.
    #[module(skip)]
    pub estimator: Estimator,
    /// Monte Carlo samples for a KL without closed form.
    #[module(skip)]
    pub kl_samples: usize,
}

impl MeanFieldConv2dConfig {
    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("MeanFieldConv2dConfig");
        check.at_least_one("channels[0]", self.channels[0])?;
        check.at_least_one("channels[1]", self.channels[1])?;
        check.at_least_one("kernel_size", self.kernel_size[0].min(self.kernel_size[1]))?;
        check.finite("rho_init", self.rho_init)?;
        check.at_least_one("kl_samples", self.kl_samples)?;
        self.geometry.validate("MeanFieldConv2dConfig")?;
        self.prior.validate("MeanFieldConv2dConfig")
    }

    /// A layer with He-initialised means `μ ~ N(0, 2/fan_in)`.
    pub fn init(&self, device: &Device) -> Result<MeanFieldConv2d, ConfigError> {
        self.validate()?;
        let [cin, cout] = self.channels;
        let [kh, kw] = self.kernel_size;
        let he = (2.0 / (cin * kh * kw) as f64).sqrt();
        let weight = PosteriorParam::init(
            [cout, cin, kh, kw],
            he,
            self.rho_init,
            self.rho_init_std,
            device,
        );
        let bias = self
            .bias
            .then(|| PosteriorParam::init([cout], 0.0, self.rho_init, self.rho_init_std, device));
        Ok(MeanFieldConv2d {
            weight,
            bias,
            geometry: self.geometry.clone(),
            prior: self.prior,
            estimator: self.estimator,
            kl_samples: self.kl_samples,
        })
    }
}

impl MeanFieldConv2d {
    /// Stochastic forward pass `[B, C_in, H, W]` → `[B, C_out, H', W']`.
    ///
    /// # Panics
    /// If the input does not have `C_in` channels (both shapes are named).
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        let cin = self.weight.dims()[1];
        check_channels("MeanFieldConv2d", &input.dims(), cin, 1);
        let options = self.geometry.options();
        match self.estimator {
            Estimator::Reparameterization => {
                let w = self.weight.sample_gaussian();
                let b = self.bias.as_ref().map(|b| b.sample_gaussian());
                conv2d(input, w, b, options)
            }
            Estimator::LocalReparameterization => {
                let mean = conv2d(
                    input.clone(),
                    self.weight.mu.val(),
                    self.bias.as_ref().map(|b| b.mu.val()),
                    options.clone(),
                );
                let var = conv2d(
                    input.square(),
                    self.weight.sigma().square(),
                    self.bias.as_ref().map(|b| b.sigma().square()),
                    options,
                );
                let eps = std_normal_like(&mean);
                mean + (var + VAR_FLOOR).sqrt() * eps
            }
            Estimator::Flipout => {
                let [batch, _, _, _] = input.dims();
                let cout = self.weight.dims()[0];
                let mean = conv2d(
                    input.clone(),
                    self.weight.mu.val(),
                    self.bias.as_ref().map(|b| b.mu.val()),
                    options.clone(),
                );
                let delta = self.weight.sigma() * std_normal_like(&self.weight.mu.val());
                let delta_b = self
                    .bias
                    .as_ref()
                    .map(|b| b.sigma() * std_normal_like(&b.mu.val()));
                let device = input.device();
                let signs_in = random_signs(&Tensor::<4>::zeros([batch, cin, 1, 1], &device));
                let signs_out = random_signs(&Tensor::<4>::zeros([batch, cout, 1, 1], &device));
                mean + conv2d(input * signs_in, delta, delta_b, options) * signs_out
            }
        }
    }

    /// `S` posterior samples in one call: `[S, B, C_in, H, W]` → `[S, B, C_out, H', W']`, with an
    /// independent kernel draw per sample (one grouped convolution).
    pub fn forward_samples(&self, input: Tensor<5>) -> Tensor<5> {
        let cin = self.weight.dims()[1];
        check_channels("MeanFieldConv2d", &input.dims(), cin, 2);
        let [s, batch, c, h, w] = input.dims();
        let options = self.geometry.options();
        match self.estimator {
            Estimator::Reparameterization => {
                let weight = self.weight.sample_gaussian_n::<5>(s);
                let b = self.bias.as_ref().map(|b| b.sample_gaussian_n::<2>(s));
                conv2d_per_sample(input, weight, b, &options)
            }
            // Per-example noise: the sample axis folds into the batch.
            Estimator::LocalReparameterization => {
                let y = self.forward(input.reshape([s * batch, c, h, w]));
                let [_, o, ho, wo] = y.dims();
                y.reshape([s, batch, o, ho, wo])
            }
            Estimator::Flipout => {
                let mu = self.weight.mu.val();
                let cout = mu.dims()[0];
                let mean = conv2d(
                    input.clone().reshape([s * batch, c, h, w]),
                    mu.clone(),
                    self.bias.as_ref().map(|b| b.mu.val()),
                    options.clone(),
                );
                let [_, _, ho, wo] = mean.dims();
                let delta = self.weight.sample_gaussian_n::<5>(s) - mu.unsqueeze();
                let delta_b = self
                    .bias
                    .as_ref()
                    .map(|b| b.sample_gaussian_n::<2>(s) - b.mu.val().unsqueeze());
                let device = input.device();
                let signs_in = random_signs(&Tensor::<5>::zeros([s, batch, c, 1, 1], &device));
                let signs_out = random_signs(&Tensor::<5>::zeros([s, batch, cout, 1, 1], &device));
                let perturbation = conv2d_per_sample(input * signs_in, delta, delta_b, &options);
                mean.reshape([s, batch, cout, ho, wo]) + perturbation * signs_out
            }
        }
    }
}

impl KlDivergence for MeanFieldConv2d {
    fn kl(&self) -> Tensor<1> {
        let kl = self.weight.kl_gaussian(&self.prior, self.kl_samples);
        match &self.bias {
            Some(b) => kl + b.kl_gaussian(&self.prior, self.kl_samples),
            None => kl,
        }
    }
}

#[cfg(test)]
#[path = "mean_field_tests.rs"]
mod tests;
