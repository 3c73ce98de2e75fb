//! MC dropout as variational inference (Gal 2016, ch. 3; `spec/gal-mc-dropout.md`).
//!
//! The noise stays on at prediction time: averaging `T` stochastic passes is the predictive.
//! burn's own `Dropout` switches off outside training, so these layers draw their own masks.
//!
//! * [`McDropout`]: `x ⊙ ε` with Bernoulli `ε ~ Bern(1−p)/(1−p)` or multiplicative Gaussian
//!   `ε ~ N(1, α)`, `α = p/(1−p)`;
//! * [`McDropoutLinear`] / [`McDropoutConv2d`]: dropout on the layer input, then the layer;
//! * [`DropConnectLinear`] / [`DropConnectConv2d`]: a Bernoulli mask on every weight.
//!
//! The KL term is the weight decay of Gal's objective: with prior `N(0, I/l²)` and keep
//! probability `1−p`, `KL ≈ (1−p) l²/2 ‖M‖² + l²/2 ‖b‖²` (up to a constant), so that
//! `mean NLL + KL/N` is `L_dropout` with `λ = l²(1−p)/(2Nτ)` (see [`weight_decay_for_prior`]).

use super::ops::{
    Conv2dGeometry, check_channels, check_last_dim, conv2d_per_sample, linear_per_sample,
};
use crate::error::{Check, ConfigError};
use crate::prior::KlDivergence;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::module::{conv2d, linear};
use burn::tensor::{Device, Distribution, Tensor};

/// The multiplicative noise of a dropout layer.
#[derive(Config, Debug, PartialEq, Copy)]
pub enum DropoutNoise {
    /// `ε ~ Bern(1−p)`, scaled by `1/(1−p)` so that `E[ε] = 1`.
    Bernoulli,
    /// `ε ~ N(1, p/(1−p))`: the same mean and variance as the scaled Bernoulli.
    Gaussian,
}

/// Weight decay `λ = l²(1−p)/(2Nτ)` that makes dropout training equal to VI with the prior
/// `N(0, I/l²)` (Gal 2016, §3.2), for `N` training points and model precision `τ`.
pub fn weight_decay_for_prior(length_scale: f64, p: f64, n_train: usize, tau: f64) -> f64 {
    length_scale * length_scale * (1.0 - p) / (2.0 * n_train as f64 * tau)
}

/// The prior length-scale `l = sqrt(2Nτλ/(1−p))` implied by weight decay `λ` (inverse of
/// [`weight_decay_for_prior`]).
pub fn prior_length_scale_for_weight_decay(lambda: f64, p: f64, n_train: usize, tau: f64) -> f64 {
    (2.0 * n_train as f64 * tau * lambda / (1.0 - p)).sqrt()
}

/// Model precision `τ = (1−p) l² / (2Nλ)` implied by a weight decay (Gal 2016, §3.3).
pub fn model_precision(length_scale: f64, p: f64, n_train: usize, lambda: f64) -> f64 {
    (1.0 - p) * length_scale * length_scale / (2.0 * n_train as f64 * lambda)
}

/// Configuration of [`McDropout`].
#[derive(Config, Debug)]
pub struct McDropoutConfig {
    /// Drop probability `p ∈ [0, 1)`.
    pub p: f64,
    /// Noise distribution.
    #[config(default = "DropoutNoise::Bernoulli")]
    pub noise: DropoutNoise,
}

/// Dropout that stays active at prediction time.
#[derive(Module, Debug)]
pub struct McDropout {
    /// Drop probability.
    pub p: f64,
    /// Noise distribution.
    #[module(skip)]
    pub noise: DropoutNoise,
}

impl McDropoutConfig {
    /// Checks `p ∈ [0, 1)`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        Check("McDropoutConfig").probability("p", self.p)
    }

    /// The layer.
    pub fn init(&self) -> Result<McDropout, ConfigError> {
        self.validate()?;
        Ok(McDropout {
            p: self.p,
            noise: self.noise,
        })
    }
}

impl McDropout {
    /// `x ⊙ ε` with fresh noise for every element and call.
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        if self.p == 0.0 {
            return input;
        }
        let keep = 1.0 - self.p;
        let noise = match self.noise {
            DropoutNoise::Bernoulli => input.random_like(Distribution::Bernoulli(keep)) / keep,
            DropoutNoise::Gaussian => {
                input.random_like(Distribution::Normal(1.0, (self.p / keep).sqrt()))
            }
        };
        input * noise
    }

    /// A mask for a weight tensor: `ε / (1−p)` with Bernoulli or Gaussian `ε` as configured.
    fn weight_noise<const D: usize>(&self, like: &Tensor<D>) -> Tensor<D> {
        self.forward(like.ones_like())
    }
}

/// Configuration of [`McDropoutLinear`] and [`DropConnectLinear`].
#[derive(Config, Debug)]
pub struct DropoutLinearConfig {
    /// Input width.
    pub d_input: usize,
    /// Output width.
    pub d_output: usize,
    /// Drop probability `p ∈ [0, 1)`.
    pub p: f64,
    /// Noise distribution.
    #[config(default = "DropoutNoise::Bernoulli")]
    pub noise: DropoutNoise,
    /// Whether the layer has a bias.
    #[config(default = true)]
    pub bias: bool,
    /// Prior length-scale `l` (prior `N(0, I/l²)`); sets the weight decay through the KL.
    #[config(default = 0.01)]
    pub length_scale: f64,
}

impl DropoutLinearConfig {
    fn checked(&self, name: &'static str) -> Result<McDropout, ConfigError> {
        let check = Check(name);
        check.at_least_one("d_input", self.d_input)?;
        check.at_least_one("d_output", self.d_output)?;
        check.positive("length_scale", self.length_scale)?;
        check.probability("p", self.p)?;
        McDropoutConfig::new(self.p).with_noise(self.noise).init()
    }

    fn weights(&self, device: &Device) -> (Param<Tensor<2>>, Option<Param<Tensor<1>>>) {
        let he = (2.0 / self.d_input as f64).sqrt();
        let w = Tensor::random(
            [self.d_input, self.d_output],
            Distribution::Normal(0.0, he),
            device,
        );
        let b = self
            .bias
            .then(|| Param::from_tensor(Tensor::zeros([self.d_output], device)));
        (Param::from_tensor(w), b)
    }

    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.checked("DropoutLinearConfig").map(|_| ())
    }

    /// A linear layer whose input is dropped out (Gal's MC dropout).
    pub fn init_mc_dropout(&self, device: &Device) -> Result<McDropoutLinear, ConfigError> {
        let dropout = self.checked("DropoutLinearConfig")?;
        let (weight, bias) = self.weights(device);
        Ok(McDropoutLinear {
            dropout,
            weight,
            bias,
            length_scale: self.length_scale,
        })
    }

    /// A linear layer whose individual weights are dropped (DropConnect).
    pub fn init_drop_connect(&self, device: &Device) -> Result<DropConnectLinear, ConfigError> {
        let dropout = self.checked("DropoutLinearConfig")?;
        let (weight, bias) = self.weights(device);
        Ok(DropConnectLinear {
            dropout,
            weight,
            bias,
            length_scale: self.length_scale,
        })
    }
}

/// Gal's weight-decay KL `(1−p) l²/2 ‖M‖² + l²/2 ‖b‖²`.
fn dropout_kl<const D: usize>(
    p: f64,
    length_scale: f64,
    weight: &Param<Tensor<D>>,
    bias: &Option<Param<Tensor<1>>>,
) -> Tensor<1> {
    let l2 = length_scale * length_scale;
    let kl = weight.val().square().sum() * ((1.0 - p) * l2 / 2.0);
    match bias {
        Some(b) => kl + b.val().square().sum() * (l2 / 2.0),
        None => kl,
    }
}

/// `y = (x ⊙ ε) M + b`: MC dropout on the input of a linear layer.
#[derive(Module, Debug)]
pub struct McDropoutLinear {
    /// The input dropout.
    pub dropout: McDropout,
    /// `[d_input, d_output]` weight `M`.
    pub weight: Param<Tensor<2>>,
    /// `[d_output]` bias.
    pub bias: Option<Param<Tensor<1>>>,
    /// Prior length-scale `l`.
    pub length_scale: f64,
}

impl McDropoutLinear {
    /// Stochastic forward pass `[..., d_input]` → `[..., d_output]` (fresh masks per element).
    ///
    /// # Panics
    /// If the last axis of `input` is not `d_input` (both shapes are named).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        check_last_dim("McDropoutLinear", &input, self.weight.dims()[0]);
        linear(
            self.dropout.forward(input),
            self.weight.val(),
            self.bias.as_ref().map(|b| b.val()),
        )
    }

    /// `S` samples in one call: `[S, B, d_input]` → `[S, B, d_output]`.
    pub fn forward_samples(&self, input: Tensor<3>) -> Tensor<3> {
        self.forward(input)
    }
}

impl KlDivergence for McDropoutLinear {
    fn kl(&self) -> Tensor<1> {
        dropout_kl(self.dropout.p, self.length_scale, &self.weight, &self.bias)
    }
}

/// `y = x (M ⊙ E) + b`, a Bernoulli (or Gaussian) mask on every weight (DropConnect).
#[derive(Module, Debug)]
pub struct DropConnectLinear {
    /// The weight-mask distribution.
    pub dropout: McDropout,
    /// `[d_input, d_output]` weight `M`.
    pub weight: Param<Tensor<2>>,
    /// `[d_output]` bias (not masked).
    pub bias: Option<Param<Tensor<1>>>,
    /// Prior length-scale `l`.
    pub length_scale: f64,
}

impl DropConnectLinear {
    /// Forward pass with one weight mask shared by all rows.
    ///
    /// # Panics
    /// If the last axis of `input` is not `d_input` (both shapes are named).
    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        check_last_dim("DropConnectLinear", &input, self.weight.dims()[0]);
        let w = self.weight.val();
        let w = w.clone() * self.dropout.weight_noise(&w);
        linear(input, w, self.bias.as_ref().map(|b| b.val()))
    }

    /// `S` samples in one call, one weight mask per sample.
    pub fn forward_samples(&self, input: Tensor<3>) -> Tensor<3> {
        check_last_dim("DropConnectLinear", &input, self.weight.dims()[0]);
        let s = input.dims()[0];
        let w = self.weight.val().unsqueeze::<3>().repeat_dim(0, s);
        let w = w.clone() * self.dropout.weight_noise(&w);
        let b = self
            .bias
            .as_ref()
            .map(|b| b.val().unsqueeze::<2>().repeat_dim(0, s));
        linear_per_sample(input, w, b)
    }
}

impl KlDivergence for DropConnectLinear {
    fn kl(&self) -> Tensor<1> {
        dropout_kl(self.dropout.p, self.length_scale, &self.weight, &self.bias)
    }
}

/// Configuration of [`McDropoutConv2d`] and [`DropConnectConv2d`].
#[derive(Config, Debug)]
pub struct DropoutConv2dConfig {
    /// `[in_channels, out_channels]`.
    pub channels: [usize; 2],
    /// Kernel `[height, width]`.
    pub kernel_size: [usize; 2],
    /// Drop probability `p ∈ [0, 1)`.
    pub p: f64,
    /// Stride, padding and dilation.
    #[config(default = "Conv2dGeometry::new()")]
    pub geometry: Conv2dGeometry,
    /// Noise distribution.
    #[config(default = "DropoutNoise::Bernoulli")]
    pub noise: DropoutNoise,
    /// Whether the layer has a bias.
    #[config(default = true)]
    pub bias: bool,
    /// Prior length-scale `l`.
    #[config(default = 0.01)]
    pub length_scale: f64,
}

impl DropoutConv2dConfig {
    fn checked(&self) -> Result<McDropout, ConfigError> {
        let check = Check("DropoutConv2dConfig");
        check.at_least_one("channels[0]", self.channels[0])?;
        check.at_least_one("channels[1]", self.channels[1])?;
        check.at_least_one("kernel_size", self.kernel_size[0].min(self.kernel_size[1]))?;
        check.positive("length_scale", self.length_scale)?;
        check.probability("p", self.p)?;
        self.geometry.validate("DropoutConv2dConfig")?;
        McDropoutConfig::new(self.p).with_noise(self.noise).init()
    }

    fn weights(&self, device: &Device) -> (Param<Tensor<4>>, Option<Param<Tensor<1>>>) {
        let [cin, cout] = self.channels;
        let [kh, kw] = self.kernel_size;
        let he = (2.0 / (cin * kh * kw) as f64).sqrt();
        let w = Tensor::random([cout, cin, kh, kw], Distribution::Normal(0.0, he), device);
        let b = self
            .bias
            .then(|| Param::from_tensor(Tensor::zeros([cout], device)));
        (Param::from_tensor(w), b)
    }

    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.checked().map(|_| ())
    }

    /// A convolution whose input feature maps are dropped out (Gal's Bayesian CNN).
    pub fn init_mc_dropout(&self, device: &Device) -> Result<McDropoutConv2d, ConfigError> {
        let dropout = self.checked()?;
        let (weight, bias) = self.weights(device);
        Ok(McDropoutConv2d {
            dropout,
            weight,
            bias,
            geometry: self.geometry.clone(),
            length_scale: self.length_scale,
        })
    }

    /// A convolution whose kernel entries are dropped (DropConnect).
    pub fn init_drop_connect(&self, device: &Device) -> Result<DropConnectConv2d, ConfigError> {
        let dropout = self.checked()?;
        let (weight, bias) = self.weights(device);
        Ok(DropConnectConv2d {
            dropout,
            weight,
            bias,
            geometry: self.geometry.clone(),
            length_scale: self.length_scale,
        })
    }
}

/// MC dropout on the input of a 2-D convolution.
#[derive(Module, Debug)]
pub struct McDropoutConv2d {
    /// The input dropout.
    pub dropout: McDropout,
    /// `[C_out, C_in, kH, kW]` kernel.
    pub weight: Param<Tensor<4>>,
    /// `[C_out]` bias.
    pub bias: Option<Param<Tensor<1>>>,
    /// Stride, padding, dilation.
    #[module(skip)]
    pub geometry: Conv2dGeometry,
    /// Prior length-scale `l`.
    pub length_scale: f64,
}

impl McDropoutConv2d {
    /// `[B, C_in, H, W]` → `[B, C_out, H', W']` with fresh masks per element.
    ///
    /// # Panics
    /// If the input does not have `C_in` channels (both shapes are named).
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        check_channels("McDropoutConv2d", &input.dims(), self.weight.dims()[1], 1);
        conv2d(
            self.dropout.forward(input),
            self.weight.val(),
            self.bias.as_ref().map(|b| b.val()),
            self.geometry.options(),
        )
    }

    /// `S` samples in one call: `[S, B, C_in, H, W]` → `[S, B, C_out, H', W']`.
    pub fn forward_samples(&self, input: Tensor<5>) -> Tensor<5> {
        check_channels("McDropoutConv2d", &input.dims(), self.weight.dims()[1], 2);
        let [s, b, c, h, w] = input.dims();
        let y = self.forward(input.reshape([s * b, c, h, w]));
        let [_, o, ho, wo] = y.dims();
        y.reshape([s, b, o, ho, wo])
    }
}

impl KlDivergence for McDropoutConv2d {
    fn kl(&self) -> Tensor<1> {
        dropout_kl(self.dropout.p, self.length_scale, &self.weight, &self.bias)
    }
}

/// DropConnect on the kernel of a 2-D convolution.
#[derive(Module, Debug)]
pub struct DropConnectConv2d {
    /// The weight-mask distribution.
    pub dropout: McDropout,
    /// `[C_out, C_in, kH, kW]` kernel.
    pub weight: Param<Tensor<4>>,
    /// `[C_out]` bias (not masked).
    pub bias: Option<Param<Tensor<1>>>,
    /// Stride, padding, dilation.
    #[module(skip)]
    pub geometry: Conv2dGeometry,
    /// Prior length-scale `l`.
    pub length_scale: f64,
}

impl DropConnectConv2d {
    /// Forward pass with one kernel mask shared by the batch.
    ///
    /// # Panics
    /// If the input does not have `C_in` channels (both shapes are named).
    pub fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        check_channels("DropConnectConv2d", &input.dims(), self.weight.dims()[1], 1);
        let w = self.weight.val();
        let w = w.clone() * self.dropout.weight_noise(&w);
        conv2d(
            input,
            w,
            self.bias.as_ref().map(|b| b.val()),
            self.geometry.options(),
        )
    }

    /// `S` samples in one call, one kernel mask per sample.
    pub fn forward_samples(&self, input: Tensor<5>) -> Tensor<5> {
        check_channels("DropConnectConv2d", &input.dims(), self.weight.dims()[1], 2);
        let s = input.dims()[0];
        let w = self.weight.val().unsqueeze::<5>().repeat_dim(0, s);
        let w = w.clone() * self.dropout.weight_noise(&w);
        let b = self
            .bias
            .as_ref()
            .map(|b| b.val().unsqueeze::<2>().repeat_dim(0, s));
        conv2d_per_sample(input, w, b, &self.geometry.options())
    }
}

impl KlDivergence for DropConnectConv2d {
    fn kl(&self) -> Tensor<1> {
        dropout_kl(self.dropout.p, self.length_scale, &self.weight, &self.bias)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{seeded, test_device, to_vec};

    #[test]
    fn dropout_is_stochastic_at_prediction_time() {
        // A plain (non-autodiff) device is the prediction setting where burn's Dropout is off.
        // 64 masked units or weights per pass: two passes agree with probability 2⁻⁶⁴. The lock
        // keeps other tests from reseeding the RNG between the two passes.
        let device = test_device();
        let _guard = seeded(&device, 3);
        let l = DropoutLinearConfig::new(64, 4, 0.5)
            .init_mc_dropout(&device)
            .unwrap();
        let x = Tensor::<2>::ones([1, 64], &device);
        let a = to_vec(l.forward(x.clone()));
        let b = to_vec(l.forward(x));
        assert_ne!(a, b, "two prediction passes must differ");
        let c = DropoutConv2dConfig::new([8, 8], [1, 1], 0.5)
            .init_drop_connect(&device)
            .unwrap();
        let x = Tensor::<4>::ones([1, 8, 4, 4], &device);
        assert_ne!(to_vec(c.forward(x.clone())), to_vec(c.forward(x)));
    }

    #[test]
    fn noise_has_unit_mean_and_the_dropout_variance() {
        let device = test_device();
        let _guard = seeded(&device, 31);
        let n = 100_000;
        for noise in [DropoutNoise::Bernoulli, DropoutNoise::Gaussian] {
            let d = McDropoutConfig::new(0.2).with_noise(noise).init().unwrap();
            let e = to_vec(d.forward(Tensor::<1>::ones([n], &device)));
            let mean = e.iter().sum::<f64>() / n as f64;
            let var = e.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n as f64 - 1.0);
            let alpha: f64 = 0.2 / 0.8;
            let se = (alpha / n as f64).sqrt();
            assert!((mean - 1.0).abs() < 5.0 * se, "{noise:?}: mean {mean}");
            // Var of the sample variance ≤ (μ4 − α²)/n; μ4 ≤ 3α² + ... use a loose 10 se bound.
            assert!(
                (var - alpha).abs() < 10.0 * alpha * (3.0 / n as f64).sqrt(),
                "{noise:?}: var {var}"
            );
        }
    }

    #[test]
    fn weight_decay_and_prior_mappings_are_inverse() {
        let lambda = weight_decay_for_prior(0.01, 0.05, 500, 2.5);
        let expected = 1e-4 * 0.95 / (2.0 * 500.0 * 2.5);
        assert!((lambda - expected).abs() < 1e-18);
        let l = prior_length_scale_for_weight_decay(lambda, 0.05, 500, 2.5);
        assert!((l - 0.01).abs() < 1e-12);
        let tau = model_precision(0.01, 0.05, 500, lambda);
        assert!((tau - 2.5).abs() < 1e-9);
    }

    #[test]
    fn kl_is_the_scaled_weight_decay() {
        let device = test_device();
        let l = DropoutLinearConfig::new(3, 2, 0.1)
            .with_length_scale(0.5)
            .init_mc_dropout(&device)
            .unwrap();
        let w2: f64 = to_vec(l.weight.val()).iter().map(|w| w * w).sum();
        let kl = to_vec(l.kl())[0];
        assert!((kl - 0.9 * 0.25 / 2.0 * w2).abs() < 1e-5 * kl.abs().max(1e-6));
    }

    #[test]
    fn invalid_dropout_probability_is_rejected() {
        let device = test_device();
        for p in [-0.1, 1.0, f64::NAN] {
            let err = DropoutLinearConfig::new(3, 2, p)
                .init_mc_dropout(&device)
                .unwrap_err();
            assert_eq!(err.field, "p");
            assert!(err.to_string().contains("[0, 1)"), "{err}");
        }
    }

    #[test]
    fn drop_connect_samples_use_one_mask_per_sample() {
        let device = test_device();
        let l = DropoutLinearConfig::new(6, 3, 0.5)
            .init_drop_connect(&device)
            .unwrap();
        let x = Tensor::<3>::ones([2, 2, 6], &device);
        let y = to_vec(l.forward_samples(x));
        assert_eq!(y[0..3], y[3..6], "rows of one sample share a mask");
        assert_ne!(y[0..3], y[6..9], "different samples have different masks");
    }
}
