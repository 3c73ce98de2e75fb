//! The Bayesian 2-D convolution over any posterior family: a posterior over the `[C_out, C_in,
//! kH, kW]` kernel and one over the bias, on activations with a leading sample axis.

use super::estimator::WeightOp;
use super::ops::{Conv2dGeometry, check_channels, conv2d_per_sample, random_signs};
use super::params::LayerParams;
use super::pass::Pass;
use super::weights::WeightConfig;
use crate::dist::Moments;
use crate::error::{Check, ConfigError};
use crate::fused::{self, Kernels};
use crate::posterior::{AnyPosterior, KlDivergence, TensorSpec, Unsupported, WeightPosterior};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Device, Tensor};

/// A Bayesian 2-D convolution. Flipout signs are drawn per example and channel (shared over
/// positions), so each example sees one consistent kernel.
#[derive(Module, Debug)]
pub struct BayesianConv2d<W: Module = AnyPosterior<4>, B: Module = AnyPosterior<1>> {
    /// Posteriors, priors and estimator.
    pub params: LayerParams<W, B, 4>,
    /// Stride, padding, dilation.
    #[module(skip)]
    pub geometry: Conv2dGeometry,
}

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
    /// Posterior family, prior, estimator, initialiser, bias.
    #[config(default = "WeightConfig::new()")]
    pub weights: WeightConfig,
}

impl BayesianConv2dConfig {
    /// The layer (weight means from the configured initialiser, bias means 0). A layer of a
    /// statically chosen family is built as for [`super::BayesianLinearConfig::init_with`].
    pub fn init(&self, device: &Device) -> Result<BayesianConv2d, ConfigError> {
        let check = Check("BayesianConv2dConfig");
        check.at_least_one("channels[0]", self.channels[0])?;
        check.at_least_one("channels[1]", self.channels[1])?;
        check.at_least_one("kernel_size", self.kernel_size[0].min(self.kernel_size[1]))?;
        self.geometry.validate("BayesianConv2dConfig")?;
        self.weights.validate("BayesianConv2dConfig")?;
        let [cin, cout] = self.channels;
        let [kh, kw] = self.kernel_size;
        let spec = TensorSpec {
            shape: [cout, cin, kh, kw],
            input_axis: Some(1),
        };
        let fans = [cin * kh * kw, cout * kh * kw];
        let bias = (self.weights.bias != super::Bias::None).then_some(cout);
        Ok(BayesianConv2d {
            params: LayerParams::init(
                &self.weights,
                &self.weights.posterior,
                spec,
                fans,
                bias,
                device,
            ),
            geometry: self.geometry.clone(),
        })
    }
}

/// A convolution on `[S, B, C, H, W]` activations: with `fused`, one weight for all samples
/// runs [`fused::conv2d`] (`im2col` and a matrix product) and one per sample
/// [`fused::conv2d_per_sample`], otherwise burn's `conv2d` (grouped by sample for per-sample
/// weights).
struct ConvOp {
    shape: [usize; 4],
    options: ConvOptions<2>,
    fused: bool,
}

impl WeightOp<5, 4> for ConvOp {
    fn weight_shape(&self) -> [usize; 4] {
        self.shape
    }
    fn apply(&self, x: Tensor<5>, w: Tensor<4>, bias: Option<Tensor<1>>) -> Tensor<5> {
        let [s, b, c, h, wd] = x.dims();
        let x = x.reshape([s * b, c, h, wd]);
        let y = if self.fused {
            let y = fused::conv2d(x, w, &self.options);
            match bias {
                Some(b) => {
                    let o = b.dims()[0];
                    y + b.reshape([1, o, 1, 1])
                }
                None => y,
            }
        } else {
            conv2d(x, w, bias, self.options.clone())
        };
        let [_, o, ho, wo] = y.dims();
        y.reshape([s, b, o, ho, wo])
    }
    fn apply_per_sample(&self, x: Tensor<5>, w: Tensor<2>) -> Tensor<5> {
        let s = w.dims()[0];
        let [o, c, kh, kw] = self.shape;
        let w = w.reshape([s, o, c, kh, kw]);
        if self.fused {
            fused::conv2d_per_sample(x, w, &self.options)
        } else {
            conv2d_per_sample(x, w, None, &self.options)
        }
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
    fn sign_group(&self, dims: [usize; 5]) -> usize {
        dims[3] * dims[4]
    }
}

impl<W: WeightPosterior<4>, B: WeightPosterior<1>> BayesianConv2d<W, B> {
    /// The layer's output for a pass: `[S, B, C_in, H, W]` → `[S, B, C_out, H', W']`.
    ///
    /// # Panics
    /// If the input does not have `C_in` channels (both shapes are named).
    pub fn run(&self, x: Tensor<5>, pass: &mut Pass) -> Tensor<5> {
        let shape = self.params.shape();
        check_channels("BayesianConv2d", &x.dims(), shape[1], 2);
        let op = ConvOp {
            shape,
            options: self.geometry.options(),
            fused: pass.kernels() == Kernels::Fused,
        };
        let input = pass.keep_input(&x);
        let y = self.params.run(&op, x, pass);
        pass.probe(input, y)
    }

    /// Moment propagation: `[S, B, C_in, H, W]` moments → `[S, B, C_out, H', W']` by the
    /// linear moment rule in the sliding window (see [`Pass::moments`]).
    ///
    /// # Errors
    /// When the posterior has no marginal variance.
    pub fn moments(&self, m: Moments<5>, pass: &mut Pass) -> Result<Moments<5>, Unsupported> {
        let shape = self.params.shape();
        check_channels("BayesianConv2d", &m.mean.dims(), shape[1], 2);
        let op = ConvOp {
            shape,
            options: self.geometry.options(),
            fused: pass.kernels() == Kernels::Fused,
        };
        self.params.moments(&op, m, pass)
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
}

impl<W: WeightPosterior<4>, B: WeightPosterior<1>> KlDivergence for BayesianConv2d<W, B> {
    fn kl(&self) -> Tensor<1> {
        self.params.kl()
    }
}
