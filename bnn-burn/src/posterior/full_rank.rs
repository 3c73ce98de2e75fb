//! Full-rank Gaussian over each weight tensor (Brack 2022 eq. 3.12; Farquhar 2022 §3.3):
//! `q(w) = N(μ, L Lᵀ)`, `L` lower-triangular with a positive diagonal `σ = param(ρ)`, drawn as
//! `w = μ + L ε`. `n²` parameters for `n` weights: small models only (the eight-schools
//! model's 10, an Iris net's few dozen). `ln q` solves `L z = w − μ` by forward substitution.

use super::{
    PosteriorDist, PosteriorFamily, ScaleInit, ScaleParam, TensorSpec, Unsupported,
    WeightPosterior, numel, row,
};
use crate::error::ConfigError;
use crate::linalg::solve_lower;
use crate::special::HALF_LN_2PI;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Distribution, Tensor};

/// Configuration of the full-rank family.
#[derive(Config, Debug, PartialEq)]
pub struct FullRankConfig {
    /// Initial diagonal scales (the off-diagonal starts at 0).
    #[config(default = "ScaleInit::new()")]
    pub scale: ScaleInit,
}

/// Full-rank Gaussian parameters of one tensor: `μ` and one `[n, n]` matrix whose strict lower
/// triangle is `L`'s and whose diagonal is `ρ` (`n + n²` parameters, as Brack 2022 Table 5.1
/// counts them; the upper triangle is unused).
#[derive(Module, Debug)]
pub struct FullRankPosterior<const D: usize> {
    /// Mean `μ`.
    pub mu: Param<Tensor<D>>,
    /// `L` below the diagonal, `ρ` on it, `[n, n]`.
    pub scale_tril: Param<Tensor<2>>,
    /// How `ρ` gives `σ`.
    #[module(skip)]
    pub param: ScaleParam,
}

/// `N(μ, L Lᵀ)` for one step.
#[derive(Debug, Clone)]
pub struct FullRankDist<const D: usize> {
    /// Mean `μ`.
    pub mu: Tensor<D>,
    /// The Cholesky factor `L`, `[n, n]`.
    pub tril: Tensor<2>,
    /// Its diagonal `σ`, `[n]`.
    pub sigma: Tensor<1>,
}

impl PosteriorFamily for FullRankConfig {
    type Posterior<const D: usize> = FullRankPosterior<D>;

    fn name(&self) -> &'static str {
        "full-rank"
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.scale.validate("FullRankConfig")
    }

    fn init<const D: usize>(&self, mean: Tensor<D>, _: &TensorSpec<D>) -> FullRankPosterior<D> {
        let device = mean.device();
        let n = numel(mean.dims());
        let rho = self.scale.rho([n], &device);
        let scale_tril = Tensor::<2>::eye(n, &device) * rho.reshape([1, n]);
        FullRankPosterior {
            mu: Param::from_tensor(mean),
            scale_tril: Param::from_tensor(scale_tril),
            param: self.scale.param,
        }
    }
}

impl<const D: usize> WeightPosterior<D> for FullRankPosterior<D> {
    type Dist = FullRankDist<D>;

    fn is_correlated(&self) -> bool {
        true
    }

    fn dist(&self) -> FullRankDist<D> {
        let raw = self.scale_tril.val();
        let n = raw.dims()[0];
        let device = raw.device();
        let eye = Tensor::<2>::eye(n, &device);
        let rho = (raw.clone() * eye.clone()).sum_dim(1).reshape([n]);
        let sigma = self.param.sigma(rho);
        let tril = raw.tril(-1) + eye * sigma.clone().reshape([1, n]);
        FullRankDist {
            mu: self.mu.val(),
            tril,
            sigma,
        }
    }

    fn shape(&self) -> [usize; D] {
        self.mu.dims()
    }
}

impl<const D: usize> FullRankDist<D> {
    /// `ε ~ N(0, I)`, `[n, numel]`.
    fn noise(&self, n: usize) -> Tensor<2> {
        crate::device::uses_generator();
        Tensor::<2>::random(
            [n, self.tril.dims()[0]],
            Distribution::Normal(0.0, 1.0),
            &self.mu.device(),
        )
    }
}

impl<const D: usize> PosteriorDist<D> for FullRankDist<D> {
    fn family(&self) -> &'static str {
        "full-rank"
    }

    fn mean(&self) -> Tensor<D> {
        self.mu.clone()
    }

    fn marginal_variance(&self) -> Option<Tensor<D>> {
        Some(
            self.tril
                .clone()
                .square()
                .sum_dim(1)
                .reshape(self.mu.dims()),
        )
    }

    fn correlated_factor(&self) -> Option<Tensor<2>> {
        Some(self.tril.clone())
    }

    fn sample(&self, n: usize) -> Tensor<2> {
        row(self.mu.clone()) + self.perturbation(n)
    }

    fn perturbation(&self, n: usize) -> Tensor<2> {
        self.noise(n).matmul(self.tril.clone().transpose())
    }

    fn sample_with_log_q(&self, n: usize) -> Result<(Tensor<2>, Tensor<1>), Unsupported> {
        let eps = self.noise(n);
        let total = eps.dims()[1];
        let log_q = eps.clone().square().sum_dim(1).reshape([n]) * (-0.5)
            - self.sigma.clone().log().sum()
            - total as f64 * HALF_LN_2PI;
        let w = row(self.mu.clone()) + eps.matmul(self.tril.clone().transpose());
        Ok((w, log_q))
    }

    fn log_q(&self, w: Tensor<2>) -> Result<Tensor<1>, Unsupported> {
        let [s, n] = w.dims();
        let r = w - row(self.mu.clone());
        let z = solve_lower(self.tril.clone(), r.transpose());
        let quadratic = z.square().sum_dim(0).reshape([s]);
        Ok(quadratic * (-0.5) - self.sigma.clone().log().sum() - n as f64 * HALF_LN_2PI)
    }

    fn entropy(&self) -> Tensor<1> {
        let n = self.sigma.dims()[0] as f64;
        self.sigma.clone().log().sum() + n * (HALF_LN_2PI + 0.5)
    }
}
