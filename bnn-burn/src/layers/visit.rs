//! A network's Bayesian layers in forward order, visited or mapped with their parameter ids: the
//! seam of whole-network transforms (the posterior as the next prior, SWAG's moments, Laplace's
//! curvature, initialisation from a trained net).

use super::ops::Conv2dGeometry;
use super::params::LayerParams;
use super::pass::LayerDraw;
use crate::error::ConfigError;
use crate::posterior::{AnyPosterior, PosteriorDist, WeightPosterior};
use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::tensor::Tensor;

/// The parameters of a layer built from a config (its families chosen at run time).
pub type AnyLayerParams<const DW: usize> = LayerParams<AnyPosterior<DW>, AnyPosterior<1>, DW>;

/// Where a layer sits and what its weight operation is.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerInfo {
    /// Position in forward order (0 = the first layer; the head is last).
    pub index: usize,
    /// The weight operation.
    pub kind: LayerKind,
}

/// The weight operation of a layer.
#[derive(Debug, Clone, PartialEq)]
pub enum LayerKind {
    /// `y = x W + b`, `W` of shape `[d_in, d_out]`.
    Dense,
    /// A 2-D convolution with kernel `[C_out, C_in, kH, kW]`.
    Conv2d(Conv2dGeometry),
}

/// Reads every Bayesian layer of a network ([`crate::nets::Body::visit_layers`]).
pub trait LayerVisitor {
    /// One layer, in forward order.
    fn visit<const DW: usize>(&mut self, layer: LayerInfo, params: &AnyLayerParams<DW>);
}

/// Rebuilds every Bayesian layer of a network ([`crate::nets::Body::map_layers`]).
pub trait LayerMapper {
    /// One layer, in forward order.
    ///
    /// # Errors
    /// When the transform does not apply to this layer (the error names why).
    fn map<const DW: usize>(
        &mut self,
        layer: LayerInfo,
        params: AnyLayerParams<DW>,
    ) -> Result<AnyLayerParams<DW>, ConfigError>;
}

/// The ids of a layer's trainable parameters (a family's location first, then its scales).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerIds {
    /// The weight posterior's parameters.
    pub weight: Vec<ParamId>,
    /// The bias posterior's parameters (empty without a bias).
    pub bias: Vec<ParamId>,
}

struct Ids(Vec<ParamId>);

impl ModuleVisitor for Ids {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.0.push(param.id);
    }
}

fn ids_of(module: &impl Module) -> Vec<ParamId> {
    let mut ids = Ids(Vec::new());
    module.visit(&mut ids);
    ids.0
}

impl<W: WeightPosterior<DW>, B: WeightPosterior<1>, const DW: usize> LayerParams<W, B, DW> {
    /// The ids of the weight's and the bias's parameters.
    pub fn ids(&self) -> LayerIds {
        LayerIds {
            weight: ids_of(&self.weight),
            bias: self.bias.as_ref().map(ids_of).unwrap_or_default(),
        }
    }

    /// The posterior means of weight and bias as one network draw, `[1, numel]` each (the MAP
    /// weights of a point estimate).
    pub fn mean_draw(&self) -> LayerDraw {
        LayerDraw {
            weight: self.weight.dist().mean().reshape([1, -1]),
            bias: self.bias.as_ref().map(|b| b.dist().mean().reshape([1, -1])),
        }
    }

    /// `ln p(w_s) + ln p(b_s)` of each of `S` draws under the layer's priors, `[S]` (a bias
    /// without a prior, [`crate::layers::Bias::Point`], adds nothing).
    pub fn log_prior(&self, draw: &LayerDraw) -> Tensor<1> {
        let weight = self.weight_prior.log_prob(draw.weight.clone());
        match (&self.bias_prior, &draw.bias) {
            (Some(prior), Some(bias)) => weight + prior.log_prob(bias.clone()),
            _ => weight,
        }
    }

    /// `ln q(w_s) + ln q(b_s)` of each of `S` draws under the layer's posteriors, `[S]`.
    ///
    /// # Errors
    /// When a posterior has no density (a point mass, a dropout mask).
    pub fn log_q(&self, draw: &LayerDraw) -> Result<Tensor<1>, crate::posterior::Unsupported> {
        let weight = self.weight.dist().log_q(draw.weight.clone())?;
        match (&self.bias, &draw.bias) {
            (Some(q), Some(bias)) => Ok(weight + q.dist().log_q(bias.clone())?),
            _ => Ok(weight),
        }
    }

    /// `n` independent draws with `ln q` of each, `[S]`, in one pass: a full-rank posterior
    /// computes it from its draws' noise (exact where a triangular solve of an ill-conditioned
    /// factor loses every digit).
    ///
    /// # Errors
    /// When a posterior has no density (a point mass, a dropout mask).
    pub fn draws_with_log_q(
        &self,
        n: usize,
    ) -> Result<(LayerDraw, Tensor<1>), crate::posterior::Unsupported> {
        let (weight, mut log_q) = self.weight.dist().sample_with_log_q(n)?;
        let bias = match &self.bias {
            Some(q) => {
                let (bias, bias_log_q) = q.dist().sample_with_log_q(n)?;
                log_q = log_q + bias_log_q;
                Some(bias)
            }
            None => None,
        };
        Ok((LayerDraw { weight, bias }, log_q))
    }

    /// `n` independent draws of weight and bias, `[n, numel]` each.
    pub fn draws(&self, n: usize) -> LayerDraw {
        LayerDraw {
            weight: self.weight.dist().sample(n),
            bias: self.bias.as_ref().map(|b| b.dist().sample(n)),
        }
    }
}

/// Collects a value from every layer, in forward order.
pub(crate) struct Collect<T, F: FnMut(LayerInfo, &dyn LayerView) -> T>(pub Vec<T>, pub F);

/// What [`Collect`] can read of any layer, whatever its weight's rank.
pub(crate) trait LayerView {
    fn mean_draw(&self) -> LayerDraw;
    fn draws(&self, n: usize) -> LayerDraw;
    fn is_point(&self) -> bool;
    fn kl(&self) -> Tensor<1>;
    fn log_prior(&self, draw: &LayerDraw) -> Tensor<1>;
    fn draws_with_log_q(
        &self,
        n: usize,
    ) -> Result<(LayerDraw, Tensor<1>), crate::posterior::Unsupported>;
}

impl<const DW: usize> LayerView for AnyLayerParams<DW> {
    fn mean_draw(&self) -> LayerDraw {
        LayerParams::mean_draw(self)
    }
    fn draws(&self, n: usize) -> LayerDraw {
        LayerParams::draws(self, n)
    }
    fn is_point(&self) -> bool {
        LayerParams::is_point(self)
    }
    fn kl(&self) -> Tensor<1> {
        LayerParams::kl(self)
    }
    fn log_prior(&self, draw: &LayerDraw) -> Tensor<1> {
        LayerParams::log_prior(self, draw)
    }
    fn draws_with_log_q(
        &self,
        n: usize,
    ) -> Result<(LayerDraw, Tensor<1>), crate::posterior::Unsupported> {
        LayerParams::draws_with_log_q(self, n)
    }
}

impl<T, F: FnMut(LayerInfo, &dyn LayerView) -> T> LayerVisitor for Collect<T, F> {
    fn visit<const DW: usize>(&mut self, layer: LayerInfo, params: &AnyLayerParams<DW>) {
        let value = (self.1)(layer, params);
        self.0.push(value);
    }
}

/// Maps every layer to its empirical-Bayes prior scale
/// ([`LayerParams::with_empirical_bayes_prior`]).
pub(crate) struct EmpiricalBayesPrior;

impl LayerMapper for EmpiricalBayesPrior {
    fn map<const DW: usize>(
        &mut self,
        _: LayerInfo,
        params: AnyLayerParams<DW>,
    ) -> Result<AnyLayerParams<DW>, ConfigError> {
        params.with_empirical_bayes_prior()
    }
}

/// Maps every layer to its posterior as the prior ([`LayerParams::with_posterior_as_prior`]).
pub(crate) struct PosteriorAsPrior;

impl LayerMapper for PosteriorAsPrior {
    fn map<const DW: usize>(
        &mut self,
        _: LayerInfo,
        params: AnyLayerParams<DW>,
    ) -> Result<AnyLayerParams<DW>, ConfigError> {
        params.with_posterior_as_prior()
    }
}
