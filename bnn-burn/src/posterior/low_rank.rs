//! Low-rank plus diagonal Gaussian over each weight tensor (Brack 2022 §3):
//! `q(w) = N(μ, F Fᵀ + diag σ²)`, `F [n, k]`, drawn as `w = μ + F ε₁ + σ ⊙ ε₂`. Densities use the
//! matrix determinant lemma and Woodbury's identity on the `k × k` capacitance
//! `A = I + Fᵀ diag(σ⁻²) F`. This distribution composes burn ops (the reference); the fused
//! kernels draw the diagonal with the mean-field kernels and the factor with
//! [`crate::fused::add_factor_draws`] and [`crate::fused::factor_kl`]. The formulas: the book's
//! *Sampled variational families* page.

use super::fast_path::{FastPath, FusedKl, KlRequest};
use super::mean_field::MeanFieldNoise;
use super::scale::LocScalePath;
use super::{
    PosteriorDist, PosteriorFamily, ScaleInit, ScaleParam, TensorSpec, Unsupported,
    WeightPosterior, numel, row,
};
use crate::dist::WeightPrior;
use crate::error::{Check, ConfigError};
use crate::linalg::{cholesky, cholesky_log_det, solve_lower};
use crate::special::HALF_LN_2PI;
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Distribution, Tensor};

/// Configuration of the low-rank family.
#[derive(Config, Debug, PartialEq)]
pub struct LowRankConfig {
    /// Rank `k` of the factor `F` (per tensor).
    #[config(default = 2)]
    pub rank: usize,
    /// Initial diagonal scales.
    #[config(default = "ScaleInit::new()")]
    pub scale: ScaleInit,
    /// Standard deviation of the initial factor entries `F_ij ~ N(0, s²)`.
    #[config(default = 1e-3)]
    pub factor_init_std: f64,
}

/// Low-rank Gaussian parameters of one tensor.
///
/// The factor is stored as `F / c`, `c` the initial diagonal scale `σ(ρ₀)`: an optimiser step
/// then moves `F` as much as it moves `σ` (through `σ(ρ)`), instead of ~`1/σ₀` times more.
#[derive(Module, Debug)]
pub struct LowRankPosterior<const D: usize> {
    /// Mean `μ`.
    pub mu: Param<Tensor<D>>,
    /// Factor `F / c`, `[numel, k]`.
    pub factor: Param<Tensor<2>>,
    /// Unconstrained diagonal scale; `σ = param(ρ)`.
    pub rho: Param<Tensor<D>>,
    /// The scale `c` of the factor.
    pub factor_scale: f64,
    /// How `ρ` gives `σ`.
    #[module(skip)]
    pub param: ScaleParam,
}

/// `N(μ, F Fᵀ + diag σ²)` for one step.
#[derive(Debug, Clone)]
pub struct LowRankDist<const D: usize> {
    /// Mean `μ`.
    pub mu: Tensor<D>,
    /// Factor `F`, `[numel, k]`.
    pub factor: Tensor<2>,
    /// Diagonal standard deviation `σ`.
    pub sigma: Tensor<D>,
}

impl PosteriorFamily for LowRankConfig {
    type Posterior<const D: usize> = LowRankPosterior<D>;

    fn name(&self) -> &'static str {
        "low-rank"
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("LowRankConfig");
        check.at_least_one("rank", self.rank)?;
        check.non_negative("factor_init_std", self.factor_init_std)?;
        self.scale.validate("LowRankConfig")
    }

    fn init<const D: usize>(&self, mean: Tensor<D>, _: &TensorSpec<D>) -> LowRankPosterior<D> {
        let device = mean.device();
        let shape = [numel(mean.dims()), self.rank];
        let factor_scale = self.scale.param.sigma_of(self.scale.rho);
        let factor = if self.factor_init_std > 0.0 {
            let std = self.factor_init_std / factor_scale;
            crate::device::uses_generator();
            Tensor::random(shape, Distribution::Normal(0.0, std), &device)
        } else {
            Tensor::zeros(shape, &device)
        };
        let rho = self.scale.rho(mean.dims(), &device);
        LowRankPosterior {
            mu: Param::from_tensor(mean),
            factor: Param::from_tensor(factor),
            rho: Param::from_tensor(rho),
            factor_scale,
            param: self.scale.param,
        }
    }
}

impl<const D: usize> WeightPosterior<D> for LowRankPosterior<D> {
    type Dist = LowRankDist<D>;

    fn is_correlated(&self) -> bool {
        true
    }

    fn dist(&self) -> LowRankDist<D> {
        LowRankDist {
            mu: self.mu.val(),
            factor: self.factor.val() * self.factor_scale,
            sigma: self.param.sigma(self.rho.val()),
        }
    }

    fn shape(&self) -> [usize; D] {
        self.mu.dims()
    }

    /// The diagonal on the mean-field kernels, the factor's share `F z` and its KL terms on
    /// their own (`LowRankPath`).
    fn fast_path(&self) -> Option<Box<dyn FastPath<D>>> {
        let (mu, rho) = (self.mu.val(), self.rho.val());
        Some(Box::new(LowRankPath {
            diagonal: LocScalePath::new(mu, rho, self.param),
            stored: self.factor.val(),
            scale: self.factor_scale,
        }))
    }
}

/// The low-rank family on the fused kernels: `w = μ + σ⊙ε + F z` is the mean-field kernels'
/// draw plus a `k`-column product ([`crate::fused::add_factor_draws`], in place); the KL adds the
/// factor's terms `½‖F‖²/σ₀² − ½ ln det A` ([`crate::fused::factor_kl`]) to the diagonal's. `F =
/// c · stored`: the scale is applied to the `k`-sized quantities, not to `F`.
struct LowRankPath<const D: usize> {
    diagonal: LocScalePath<D, MeanFieldNoise>,
    stored: Tensor<2>,
    scale: f64,
}

/// The sub-stream of a draw's key that gives the factor's `z` (the diagonal's `ε_s` take
/// sub-streams `0..n`).
const FACTOR_STREAM: u32 = u32::MAX;

impl<const D: usize> LowRankPath<D> {
    /// The factor's part of the KL, differentiable in `F` and `ρ`, under the scalar prior's
    /// `1/σ₀²` or the per-weight prior's `σ₀ᵢ`.
    fn factor_kl(&self, plan: &FusedKl) -> Tensor<1> {
        let (prior, _) = plan
            .foldable()
            .expect("a low-rank tensor's KL is closed-form or per weight");
        let q = self.diagonal.loc_scale();
        crate::fused::factor_kl(self.stored.clone(), q.rho, q.rule, self.scale, prior)
    }
}

impl<const D: usize> FastPath<D> for LowRankPath<D> {
    fn mean(&self) -> Tensor<D> {
        self.diagonal.mean()
    }

    /// The diagonal's plan under a Gaussian prior, scalar or per weight; none under a scale
    /// mixture or a clamp of `ln σ²`.
    fn kl_plan(&self, prior: &WeightPrior<D>, range: Option<(f64, f64)>) -> Option<FusedKl> {
        match (range, self.diagonal.kl_plan(prior, None)?) {
            (None, FusedKl::Mixture(..)) | (Some(_), _) => None,
            (None, plan) => Some(plan),
        }
    }

    fn draws(
        &self,
        n: usize,
        center: bool,
        key: u64,
        kl: Option<KlRequest<'_>>,
    ) -> (Tensor<2>, Option<Tensor<1>>) {
        let (w, value) = self.diagonal.draws(n, center, key, kl);
        let (stored, c) = (self.stored.clone(), self.scale);
        let w = crate::fused::add_factor_draws(w, stored, c, key, FACTOR_STREAM);
        (w, value.zip(kl).map(|(v, r)| v + self.factor_kl(r.plan)))
    }

    fn variance(&self, kl: Option<KlRequest<'_>>) -> (Tensor<D>, Option<Tensor<1>>) {
        let (var, value) = self.diagonal.variance(kl);
        let rows = self.stored.clone().square().sum_dim(1).reshape(var.dims());
        let var = var + rows * (self.scale * self.scale);
        (var, value.zip(kl).map(|(v, r)| v + self.factor_kl(r.plan)))
    }

    fn kl(&self, plan: &FusedKl, key: Option<u64>) -> Tensor<1> {
        self.diagonal.kl(plan, key) + self.factor_kl(plan)
    }
}

/// Cholesky factor of the capacitance `A = I + G`, `[k, k]`, from its Gram part
/// `G = Fᵀ diag(σ⁻²) F`.
fn capacitance_cholesky(gram: Tensor<2>) -> Tensor<2> {
    let k = gram.dims()[0];
    let device = gram.device();
    cholesky(gram + Tensor::eye(k, &device))
}

impl<const D: usize> LowRankDist<D> {
    /// Cholesky factor of the capacitance `A = I + Fᵀ diag(σ⁻²) F`, `[k, k]`.
    fn capacitance_factor(&self) -> Tensor<2> {
        let var = self.sigma.clone().square().reshape([-1, 1]);
        let scaled = self.factor.clone() / var;
        capacitance_cholesky(self.factor.clone().transpose().matmul(scaled))
    }

    /// `ln det Σ` (one element).
    fn log_det(&self, l: Tensor<2>) -> Tensor<1> {
        self.sigma.clone().log().sum() * 2.0 + cholesky_log_det(l)
    }
}

impl<const D: usize> PosteriorDist<D> for LowRankDist<D> {
    fn family(&self) -> &'static str {
        "low-rank"
    }

    fn mean(&self) -> Tensor<D> {
        self.mu.clone()
    }

    fn marginal_variance(&self) -> Option<Tensor<D>> {
        let factor_part = self
            .factor
            .clone()
            .square()
            .sum_dim(1)
            .reshape(self.mu.dims());
        Some(self.sigma.clone().square() + factor_part)
    }

    fn correlated_factor(&self) -> Option<Tensor<2>> {
        Some(self.factor.clone())
    }

    fn sample(&self, n: usize) -> Tensor<2> {
        row(self.mu.clone()) + self.perturbation(n)
    }

    fn perturbation(&self, n: usize) -> Tensor<2> {
        let device = self.mu.device();
        let [total, k] = self.factor.dims();
        crate::device::uses_generator();
        let shared = Tensor::<2>::random([n, k], Distribution::Normal(0.0, 1.0), &device)
            .matmul(self.factor.clone().transpose());
        let own = Tensor::<2>::random([n, total], Distribution::Normal(0.0, 1.0), &device);
        shared + row(self.sigma.clone()) * own
    }

    fn log_q(&self, w: Tensor<2>) -> Result<Tensor<1>, Unsupported> {
        let s = w.dims()[0];
        let l = self.capacitance_factor();
        let r = w - row(self.mu.clone());
        let u = r.clone() / row(self.sigma.clone()).square();
        let t = u.clone().matmul(self.factor.clone());
        let z = solve_lower(l.clone(), t.transpose());
        let quadratic = (r * u).sum_dim(1).reshape([s]) - z.square().sum_dim(0).reshape([s]);
        let n = numel(self.mu.dims()) as f64;
        Ok(quadratic * (-0.5) - self.log_det(l) * 0.5 - n * HALF_LN_2PI)
    }

    fn entropy(&self) -> Tensor<1> {
        let n = numel(self.mu.dims()) as f64;
        self.log_det(self.capacitance_factor()) * 0.5 + n * (HALF_LN_2PI + 0.5)
    }
}
