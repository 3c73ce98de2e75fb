//! The point estimate (MAP): `q(w) = δ(w − w₀)`. Its KL slot carries `−ln p(w₀)`, the negative
//! log prior, so that `mean NLL + KL/N` is the MAP objective (weight decay for a Gaussian prior;
//! Brack 2022 §3).

use super::{PosteriorDist, PosteriorFamily, TensorSpec, Unsupported, WeightPosterior, numel, row};
use crate::dist::WeightPrior;
use crate::error::ConfigError;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::Tensor;

/// Configuration of the point family (no hyperparameters: the prior sets the penalty).
#[derive(Config, Debug, PartialEq)]
pub struct PointConfig {}

/// A weight tensor without uncertainty.
#[derive(Module, Debug)]
pub struct PointPosterior<const D: usize> {
    /// The weights `w₀`.
    pub weight: Param<Tensor<D>>,
}

/// `δ(w − w₀)` for one step.
#[derive(Debug, Clone)]
pub struct PointDist<const D: usize> {
    /// The weights.
    pub weight: Tensor<D>,
}

impl PosteriorFamily for PointConfig {
    type Posterior<const D: usize> = PointPosterior<D>;

    fn name(&self) -> &'static str {
        "point"
    }

    fn validate(&self) -> Result<(), ConfigError> {
        Ok(())
    }

    fn point_estimate(&self) -> Option<Self> {
        Some(self.clone())
    }

    fn init<const D: usize>(&self, mean: Tensor<D>, _spec: &TensorSpec<D>) -> PointPosterior<D> {
        PointPosterior {
            weight: Param::from_tensor(mean),
        }
    }
}

impl<const D: usize> WeightPosterior<D> for PointPosterior<D> {
    type Dist = PointDist<D>;

    fn dist(&self) -> PointDist<D> {
        PointDist {
            weight: self.weight.val(),
        }
    }

    fn shape(&self) -> [usize; D] {
        self.weight.dims()
    }

    fn is_point(&self) -> bool {
        true
    }
}

impl<const D: usize> PosteriorDist<D> for PointDist<D> {
    fn family(&self) -> &'static str {
        "point"
    }

    fn mean(&self) -> Tensor<D> {
        self.weight.clone()
    }

    fn marginal_variance(&self) -> Option<Tensor<D>> {
        Some(self.weight.zeros_like())
    }

    fn sample(&self, n: usize) -> Tensor<2> {
        row(self.weight.clone()).expand([n, numel(self.weight.dims())])
    }

    fn perturbation(&self, n: usize) -> Tensor<2> {
        Tensor::zeros([n, numel(self.weight.dims())], &self.weight.device())
    }

    fn log_q(&self, _w: Tensor<2>) -> Result<Tensor<1>, Unsupported> {
        Err(Unsupported {
            family: "point posterior",
            what: "a point mass has no density ln q(w)",
        })
    }

    fn entropy(&self) -> Tensor<1> {
        Tensor::zeros([1], &self.weight.device())
    }

    /// `−ln p(w₀)`, exactly (no draws, no zero variances).
    fn kl(&self, prior: &WeightPrior<D>) -> Tensor<1> {
        match prior {
            WeightPrior::Gaussian(g) => g.point_cross_entropy(self.weight.clone(), 1.0),
            WeightPrior::ScaleMixture(_) => prior.log_prob(row(self.weight.clone())).neg(),
        }
    }

    fn scaled_point(&self) -> Option<(Tensor<D>, f64)> {
        Some((self.weight.clone(), 1.0))
    }
}
