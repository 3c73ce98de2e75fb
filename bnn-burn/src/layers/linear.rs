//! The Bayesian linear layer over any posterior family: `y = x W + b`, `W ~ q(W)`, `b ~ q(b)`.

use super::estimator::WeightOp;
use super::ops::{check_last_dim, random_signs};
use super::params::LayerParams;
use super::pass::Pass;
use super::weights::WeightConfig;
use crate::dist::Moments;
use crate::error::{Check, ConfigError};
use crate::fused::{self, Kernels};
use crate::posterior::{
    AnyPosterior, KlDivergence, PosteriorFamily, TensorSpec, Unsupported, WeightPosterior,
};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::module::linear;
use burn::tensor::{Device, Tensor};

/// Configuration of a [`BayesianLinear`] layer.
#[derive(Config, Debug)]
pub struct BayesianLinearConfig {
    /// Input width.
    pub d_input: usize,
    /// Output width.
    pub d_output: usize,
    /// Posterior family, prior, estimator, initialiser, bias.
    #[config(default = "WeightConfig::new()")]
    pub weights: WeightConfig,
}

/// A Bayesian dense layer: a posterior over the `[d_input, d_output]` weight and one over the
/// bias, each with its prior. Generic over the families; [`BayesianLinearConfig`] builds the
/// run-time choice ([`AnyPosterior`]).
#[derive(Module, Debug)]
pub struct BayesianLinear<W: Module = AnyPosterior<2>, B: Module = AnyPosterior<1>> {
    /// Posteriors, priors and estimator.
    pub params: LayerParams<W, B, 2>,
}

impl BayesianLinearConfig {
    /// The layer of the configured family (weight means from the configured initialiser, bias
    /// means 0).
    pub fn init(&self, device: &Device) -> Result<BayesianLinear, ConfigError> {
        self.init_with(&self.weights.posterior, device)
    }

    /// The layer with `family` in place of the configured posterior: a statically typed layer,
    /// e.g. `BayesianLinear<MeanFieldPosterior<2>, MeanFieldPosterior<1>>`.
    #[allow(clippy::type_complexity)]
    pub fn init_with<F: PosteriorFamily>(
        &self,
        family: &F,
        device: &Device,
    ) -> Result<BayesianLinear<F::Posterior<2>, F::Posterior<1>>, ConfigError> {
        let check = Check("BayesianLinearConfig");
        check.at_least_one("d_input", self.d_input)?;
        check.at_least_one("d_output", self.d_output)?;
        self.weights.validate_with(family, "BayesianLinearConfig")?;
        let spec = TensorSpec {
            shape: [self.d_input, self.d_output],
            input_axis: Some(0),
        };
        let fans = [self.d_input, self.d_output];
        let bias = (self.weights.bias != super::Bias::None).then_some(self.d_output);
        Ok(BayesianLinear {
            params: LayerParams::init(&self.weights, family, spec, fans, bias, device),
        })
    }
}

/// `x W` on `[S, B, d_in]` activations: with `fused`, one weight for all samples runs
/// [`fused::matmul`] and one per sample [`fused::batched_matmul`], otherwise burn's `linear`
/// and `matmul`.
pub(super) struct LinearOp {
    shape: [usize; 2],
    fused: bool,
}

impl LinearOp {
    pub(super) fn new(shape: [usize; 2], pass: &Pass) -> Self {
        Self {
            shape,
            fused: pass.kernels() == Kernels::Fused,
        }
    }
}

impl WeightOp<3, 2> for LinearOp {
    fn weight_shape(&self) -> [usize; 2] {
        self.shape
    }
    fn apply(&self, x: Tensor<3>, w: Tensor<2>, b: Option<Tensor<1>>) -> Tensor<3> {
        if !self.fused {
            return linear(x, w, b);
        }
        let y = fused::matmul(x, w);
        match b {
            Some(b) => y + b.unsqueeze_dims(&[0, 1]),
            None => y,
        }
    }
    fn apply_per_sample(&self, x: Tensor<3>, w: Tensor<2>) -> Tensor<3> {
        let s = w.dims()[0];
        let per_sample = w.reshape([s, self.shape[0], self.shape[1]]);
        match (self.fused, s) {
            // One draw: one product, as `apply`'s.
            (true, 1) => fused::matmul(x, per_sample.reshape(self.shape)),
            (true, _) => fused::batched_matmul(x, per_sample),
            (false, _) => x.matmul(per_sample),
        }
    }
    fn add_bias(&self, y: Tensor<3>, b: Tensor<2>) -> Tensor<3> {
        y + b.unsqueeze_dim(1)
    }
    fn coupled_variance(&self, x: Tensor<3>, factor: Tensor<2>) -> Option<Tensor<3>> {
        let [s, b, _] = x.dims();
        let [d_in, d_out] = self.shape;
        let r = factor.dims()[1];
        let per_column = x
            .reshape([s * b, d_in])
            .matmul(factor.reshape([d_in, d_out * r]));
        Some(
            per_column
                .reshape([s, b, d_out, r])
                .square()
                .sum_dim(3)
                .reshape([s, b, d_out]),
        )
    }
    fn input_signs(&self, x: &Tensor<3>) -> Tensor<3> {
        random_signs(x)
    }
    fn output_signs(&self, y: &Tensor<3>) -> Tensor<3> {
        random_signs(y)
    }
    fn sign_group(&self, _: [usize; 3]) -> usize {
        1
    }
}

impl<W: WeightPosterior<2>, B: WeightPosterior<1>> BayesianLinear<W, B> {
    /// `[d_input, d_output]`.
    pub fn shape(&self) -> [usize; 2] {
        self.params.shape()
    }

    /// The layer's output for a pass: `[S, B, d_input]` → `[S, B, d_output]`.
    ///
    /// # Panics
    /// If the last axis is not `d_input` (both shapes are named).
    pub fn run(&self, x: Tensor<3>, pass: &mut Pass) -> Tensor<3> {
        let shape = self.shape();
        check_last_dim("BayesianLinear", &x, shape[0]);
        let input = pass.keep_input(&x);
        let y = self.params.run(&LinearOp::new(shape, pass), x, pass);
        pass.probe(input, y)
    }

    /// Moment propagation: `[S, B, d_input]` moments → `[S, B, d_output]` by the linear moment
    /// rule (see [`Pass::moments`]).
    ///
    /// # Errors
    /// When the posterior has no marginal variance.
    ///
    /// # Panics
    /// If the last axis is not `d_input`.
    pub fn moments(&self, m: Moments<3>, pass: &mut Pass) -> Result<Moments<3>, Unsupported> {
        let shape = self.shape();
        check_last_dim("BayesianLinear", &m.mean, shape[0]);
        self.params.moments(&LinearOp::new(shape, pass), m, pass)
    }

    /// `S` posterior samples in one call: `[S, B, d_input]` → `[S, B, d_output]`.
    pub fn forward_samples(&self, x: Tensor<3>) -> Tensor<3> {
        let s = x.dims()[0];
        self.run(x, &mut Pass::predict(s))
    }

    /// One stochastic pass on `[..., d_input]`, returning `[..., d_output]` (burn's `Linear`
    /// convention).
    pub fn forward<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let mut dims = x.dims();
        let rows: usize = dims[..D - 1].iter().product();
        let flat = x.reshape([1, rows, dims[D - 1]]);
        let y = self.forward_samples(flat);
        dims[D - 1] = y.dims()[2];
        y.reshape(dims)
    }
}

impl<W: WeightPosterior<2>, B: WeightPosterior<1>> KlDivergence for BayesianLinear<W, B> {
    fn kl(&self) -> Tensor<1> {
        self.params.kl()
    }
}
