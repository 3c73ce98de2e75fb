//! The Bayesian 2-D convolution over any posterior family: a posterior over the `[C_out, C_in,
//! kH, kW]` kernel and one over the bias, on activations with a leading sample axis.

use super::estimator::{Stochastic, WeightOp};
use super::ops::{Conv2dGeometry, check_channels, conv2d_per_sample, random_signs};
use super::pass::{LayerDraw, Pass};
use super::weights::WeightConfig;
use crate::dist::WeightPrior;
use crate::error::{Check, ConfigError};
use crate::posterior::{AnyPosterior, KlDivergence, PosteriorFamily, TensorSpec, WeightPosterior};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Device, Tensor};

/// Configuration of a [`BayesianConv2d`] layer.
#[derive(Config, Debug)]
pub struct BayesianConv2dConfig {
    /// `[in_channels, out_channels]`.
    pub channels: [usize; 2],
    /// Kernel `[height, width]`.
    pub kernel_size: [usize; 2],
    /// Stride, padding and dilation.
    #[config(default = "Conv2dGeometry::new()")]
    pub geometry: Conv2dGeometry,
    /// Whether the layer has a bias.
    #[config(default = true)]
    pub bias: bool,
    /// Posterior family, prior, estimator and initialiser.
    #[config(default = "WeightConfig::new()")]
    pub weights: WeightConfig,
}

/// A Bayesian 2-D convolution. Flipout signs are drawn per example and channel (shared over
/// positions), so each example sees one consistent kernel.
#[derive(Module, Debug)]
pub struct BayesianConv2d<W: Module = AnyPosterior<4>, B: Module = AnyPosterior<1>> {
    /// Posterior over the kernel.
    pub weight: W,
    /// Posterior over the bias.
    pub bias: Option<B>,
    /// Prior over the kernel.
    pub weight_prior: WeightPrior<4>,
    /// Prior over the bias.
    pub bias_prior: Option<WeightPrior<1>>,
    /// Stride, padding, dilation.
    #[module(skip)]
    pub geometry: Conv2dGeometry,
    /// Gradient estimator.
    #[module(skip)]
    pub estimator: super::Estimator,
}

impl BayesianConv2dConfig {
    /// The layer of the configured family.
    pub fn init(&self, device: &Device) -> Result<BayesianConv2d, ConfigError> {
        self.init_with(&self.weights.posterior, device)
    }

    /// The layer with `family` in place of the configured posterior.
    #[allow(clippy::type_complexity)]
    pub fn init_with<F: PosteriorFamily>(
        &self,
        family: &F,
        device: &Device,
    ) -> Result<BayesianConv2d<F::Posterior<4>, F::Posterior<1>>, ConfigError> {
        let check = Check("BayesianConv2dConfig");
        check.at_least_one("channels[0]", self.channels[0])?;
        check.at_least_one("channels[1]", self.channels[1])?;
        check.at_least_one("kernel_size", self.kernel_size[0].min(self.kernel_size[1]))?;
        self.geometry.validate("BayesianConv2dConfig")?;
        self.weights.validate_with(family, "BayesianConv2dConfig")?;
        let [cin, cout] = self.channels;
        let [kh, kw] = self.kernel_size;
        let spec = TensorSpec {
            shape: [cout, cin, kh, kw],
            input_axis: Some(1),
        };
        let fans = [cin * kh * kw, cout * kh * kw];
        let (weight, weight_prior) = self.weights.weight(family, spec, fans, device);
        let (bias, bias_prior) = match self.bias {
            true => {
                let (b, p) = self.weights.bias(family, cout, device);
                (Some(b), Some(p))
            }
            false => (None, None),
        };
        Ok(BayesianConv2d {
            weight,
            bias,
            weight_prior,
            bias_prior,
            geometry: self.geometry.clone(),
            estimator: self.weights.estimator,
        })
    }
}

/// A convolution on `[S, B, C, H, W]` activations.
struct ConvOp {
    shape: [usize; 4],
    options: ConvOptions<2>,
}

impl WeightOp<5, 4> for ConvOp {
    fn weight_shape(&self) -> [usize; 4] {
        self.shape
    }
    fn apply(&self, x: Tensor<5>, w: Tensor<4>) -> Tensor<5> {
        let [s, b, c, h, wd] = x.dims();
        let y = conv2d(x.reshape([s * b, c, h, wd]), w, None, self.options.clone());
        let [_, o, ho, wo] = y.dims();
        y.reshape([s, b, o, ho, wo])
    }
    fn apply_per_sample(&self, x: Tensor<5>, w: Tensor<2>) -> Tensor<5> {
        let s = w.dims()[0];
        let [o, c, kh, kw] = self.shape;
        conv2d_per_sample(x, w.reshape([s, o, c, kh, kw]), None, &self.options)
    }
    fn add_bias(&self, y: Tensor<5>, b: Tensor<2>) -> Tensor<5> {
        let [k, o] = b.dims();
        y + b.reshape([k, 1, o, 1, 1])
    }
    fn input_signs(&self, x: &Tensor<5>) -> Tensor<5> {
        let [s, b, c, _, _] = x.dims();
        random_signs(&Tensor::<5>::zeros([s, b, c, 1, 1], &x.device()))
    }
    fn output_signs(&self, y: &Tensor<5>) -> Tensor<5> {
        let [s, b, o, _, _] = y.dims();
        random_signs(&Tensor::<5>::zeros([s, b, o, 1, 1], &y.device()))
    }
}

impl<W: WeightPosterior<4>, B: WeightPosterior<1>> BayesianConv2d<W, B> {
    fn stochastic(&self) -> Stochastic<'_, W, B, 4> {
        Stochastic {
            weight: &self.weight,
            bias: self.bias.as_ref(),
            weight_prior: &self.weight_prior,
            bias_prior: self.bias_prior.as_ref(),
            estimator: self.estimator,
        }
    }

    /// The layer's output for a pass: `[S, B, C_in, H, W]` → `[S, B, C_out, H', W']`.
    ///
    /// # Panics
    /// If the input does not have `C_in` channels (both shapes are named).
    pub fn run(&self, x: Tensor<5>, pass: &mut Pass) -> Tensor<5> {
        let shape = self.weight.shape();
        check_channels("BayesianConv2d", &x.dims(), shape[1], 2);
        let op = ConvOp {
            shape,
            options: self.geometry.options(),
        };
        self.stochastic().run(&op, x, pass)
    }

    /// `S` posterior samples in one call: `[S, B, C_in, H, W]` → `[S, B, C_out, H', W']`.
    pub fn forward_samples(&self, x: Tensor<5>) -> Tensor<5> {
        let s = x.dims()[0];
        self.run(x, &mut Pass::predict(s))
    }

    /// One stochastic pass `[B, C_in, H, W]` → `[B, C_out, H', W']`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        self.forward_samples(x.unsqueeze::<5>()).squeeze_dim(0)
    }

    /// One sampled kernel and bias to hold fixed.
    pub fn draw(&self) -> LayerDraw {
        self.stochastic().draw()
    }

    /// Whether every draw equals the mean.
    pub fn is_point(&self) -> bool {
        self.weight.is_point() && self.bias.as_ref().is_none_or(|b| b.is_point())
    }
}

impl<W: WeightPosterior<4>, B: WeightPosterior<1>> KlDivergence for BayesianConv2d<W, B> {
    fn kl(&self) -> Tensor<1> {
        self.stochastic().kl()
    }
}
