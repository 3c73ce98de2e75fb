//! What every Bayesian layer holds: the posteriors of its weight tensor and bias, their priors
//! and the gradient estimator. The dense and the convolutional layer differ only in their
//! [`WeightOp`](super::estimator::WeightOp) and shapes.

use super::estimator::{self, Estimator, WeightOp};
use super::fused_path::MomentParams;
use super::pass::{LayerDraw, Pass};
use super::weights::WeightConfig;
use crate::dist::{Moments, WeightPrior};
use crate::error::ConfigError;
use crate::fused::Kernels;
use crate::posterior::{PosteriorDist, PosteriorFamily, TensorSpec, Unsupported, WeightPosterior};
use burn::module::Module;
use burn::tensor::{Device, Tensor};

/// The posteriors and priors of a layer's weight (a `DW`-dimensional tensor) and bias.
#[derive(Module, Debug)]
pub struct LayerParams<W: Module, B: Module, const DW: usize> {
    /// Posterior over the weight.
    pub weight: W,
    /// Posterior over the bias.
    pub bias: Option<B>,
    /// Prior over the weight.
    pub weight_prior: WeightPrior<DW>,
    /// Prior over the bias (`None` without a bias, or for a point bias without a prior term,
    /// [`Bias::Point`](super::Bias::Point)).
    pub bias_prior: Option<WeightPrior<1>>,
    /// Gradient estimator.
    #[module(skip)]
    pub estimator: Estimator,
    /// The clamp of `ln σ²` inside the KL ([`crate::dist::Prior::ClampedGaussian`]).
    #[module(skip)]
    pub kl_log_var_range: Option<(f64, f64)>,
    /// The hyperprior whose `−ln p(μ, σ²)` replaces the KL ([`crate::dist::Prior::Hyper`]).
    #[module(skip)]
    pub hyperprior: Option<crate::dist::HyperPrior>,
}

impl<W: WeightPosterior<DW>, B: WeightPosterior<1>, const DW: usize> LayerParams<W, B, DW> {
    /// The weight of `spec` (means from `weights.initializer` with the given fans) and a bias of
    /// `bias` entries (means 0), both of `family`, with `weights.prior`.
    pub(crate) fn init<F>(
        weights: &WeightConfig,
        family: &F,
        spec: TensorSpec<DW>,
        fans: [usize; 2],
        bias: Option<usize>,
        device: &Device,
    ) -> Self
    where
        F: PosteriorFamily<Posterior<DW> = W, Posterior<1> = B>,
    {
        let (weight, weight_prior) = weights.weight(family, spec, fans, device);
        let (bias, bias_prior) = match bias.map(|n| weights.bias(family, n, device)) {
            Some((posterior, prior)) => (Some(posterior), prior),
            None => (None, None),
        };
        Self {
            weight,
            bias,
            weight_prior,
            bias_prior,
            estimator: weights.estimator,
            kl_log_var_range: weights.prior.log_var_range(),
            hyperprior: weights.prior.hyperprior(),
        }
    }

    /// Shape of the weight tensor.
    pub fn shape(&self) -> [usize; DW] {
        self.weight.shape()
    }

    /// Whether every draw equals the mean.
    pub fn is_point(&self) -> bool {
        self.weight.is_point() && self.bias.as_ref().is_none_or(|b| b.is_point())
    }

    /// One sampled weight and bias, `[1, numel]` each, to hold fixed.
    pub fn draw(&self) -> LayerDraw {
        self.draws(1)
    }

    /// `KL(q ‖ p)` of weight and bias (one element); under a hyperprior its `−ln p(μ, σ²)`.
    pub fn kl(&self) -> Tensor<1> {
        self.kl_on(Kernels::Reference)
    }

    /// [`Self::kl`] on `kernels` (where they compute a family's KL,
    /// [`crate::posterior::PosteriorDist::scaled_point`]).
    pub(crate) fn kl_on(&self, kernels: Kernels) -> Tensor<1> {
        let bias = self.bias.as_ref().map(|b| b.dist());
        estimator::layer_kl(&self.weight.dist(), bias.as_ref(), self, kernels)
    }

    /// The same parameters with `q` of every tensor, moment-matched, as its prior (VCL); a point
    /// bias ([`Bias::Point`](super::Bias::Point)) keeps no prior.
    ///
    /// # Errors
    /// When a posterior has no positive marginal variance (e.g. a point estimate).
    pub fn with_posterior_as_prior(mut self) -> Result<Self, ConfigError> {
        self.weight_prior = WeightPrior::from_posterior(&self.weight.dist())?;
        // A point bias (no prior term) stays without one.
        if let (Some(b), Some(_)) = (&self.bias, &self.bias_prior) {
            self.bias_prior = Some(WeightPrior::from_posterior(&b.dist())?);
        }
        Ok(self)
    }

    /// The layer with each prior's scale at the ELBO's optimum for the current posterior
    /// ([`WeightPrior::empirical_bayes`], weight and bias apart); a point bias stays without a
    /// prior.
    ///
    /// # Errors
    /// A prior that is not a scalar Gaussian, or an optimum that is not a positive scale.
    pub fn with_empirical_bayes_prior(mut self) -> Result<Self, ConfigError> {
        self.weight_prior = self.weight_prior.empirical_bayes(&self.weight.dist())?;
        if let (Some(b), Some(p)) = (&self.bias, &self.bias_prior) {
            self.bias_prior = Some(p.empirical_bayes(&b.dist())?);
        }
        Ok(self)
    }

    /// The layer's output under `pass` (see [`estimator`]), adding its terms to the pass.
    pub(crate) fn run<const DX: usize>(
        &self,
        op: &impl WeightOp<DX, DW>,
        x: Tensor<DX>,
        pass: &mut Pass,
    ) -> Tensor<DX> {
        estimator::run(self, op, x, pass)
    }

    /// The linear moment rule (Haußmann 2021 §0): with weights independent of the inputs,
    /// `E[f] = E[h] ∗ E[w] + E[b]` and
    /// `Var[f] = E[h²] ∗ Var[w] + Var[h] ∗ E[w]² + Var[b]` (two weight operations beside the
    /// mean's; covariances between units are dropped; one, `E[h]² ∗ Var[w] + Var[b]`, for a
    /// [`Moments::deterministic`] input). Weights coupled by `Cov = diag + G Gᵀ` (low-rank,
    /// full-rank) add `Σ_{i≠l} E[h_i] E[h_l] Cov(w_i, w_l)` per unit (dense layers). The pass's KL gets the layer's KL. On the fused
    /// kernels the variances and the KL come from [`crate::fused::moments`], one pass per
    /// tensor each way, wherever it applies (`fused_path::moment_params`).
    ///
    /// # Errors
    /// When a posterior has no marginal variance.
    pub(crate) fn moments<const DX: usize>(
        &self,
        op: &impl WeightOp<DX, DW>,
        m: Moments<DX>,
        pass: &mut Pass,
    ) -> Result<Moments<DX>, Unsupported> {
        let MomentParams {
            w_mean,
            w_var,
            b_mean,
            b_var,
        } = match super::fused_path::moment_params(self, pass) {
            Some(p) => p,
            None => self.moment_params(pass)?,
        };
        let mean = op.apply(m.mean.clone(), w_mean.clone(), b_mean);
        let var = match w_var {
            // A deterministic input (`Var[h] = 0`, `E[h²] = E[h]²`): the `E[w]²` term is 0, so
            // its weight operation (and its backward pass) is skipped.
            Some(w_var) if m.is_deterministic() => op.apply(m.mean.clone().square(), w_var, b_var),
            Some(w_var) => {
                op.apply(m.var.clone(), w_mean.square(), b_var)
                    + op.apply(m.second_moment(), w_var, None)
            }
            None => op.apply(m.var.clone(), w_mean.square(), b_var),
        };
        if !self.weight.is_correlated() {
            return Ok(Moments::new(mean, var));
        }
        let weight = self.weight.dist();
        let Some(g) = weight.correlated_factor() else {
            return Ok(Moments::new(mean, var));
        };
        // `‖Σ_i E[h_i] G_i‖²` less its `i = l` terms, which `Var[w]` holds already.
        let coupled = op
            .coupled_variance(m.mean.clone(), g.clone())
            .ok_or(Unsupported {
                family: weight.family(),
                what: "moment propagation through a convolution needs uncorrelated weights: \
                       predict this family with samples",
            })?;
        let own = op.apply(
            m.mean.square(),
            g.square().sum_dim(1).reshape(self.shape()),
            None,
        );
        Ok(Moments::new(mean, (var + coupled - own).clamp_min(0.0)))
    }

    /// The moment rule's parameters from the evaluated posteriors (burn ops), the layer's KL
    /// added to the pass when it collects it.
    ///
    /// # Errors
    /// When a posterior has no marginal variance.
    fn moment_params(&self, pass: &mut Pass) -> Result<MomentParams<DW>, Unsupported> {
        let weight = self.weight.dist();
        let bias = self.bias.as_ref().map(|b| b.dist());
        let no_variance = |family| Unsupported {
            family,
            what: "this posterior has no marginal variance, which moment propagation needs",
        };
        let b_var = match (&bias, self.bias.as_ref().is_none_or(|b| b.is_point())) {
            (Some(b), false) => Some(
                b.marginal_variance()
                    .ok_or_else(|| no_variance(b.family()))?,
            ),
            _ => None,
        };
        let w_var = if self.weight.is_point() {
            None
        } else {
            Some(
                weight
                    .marginal_variance()
                    .ok_or_else(|| no_variance(weight.family()))?,
            )
        };
        if pass.collects_kl() {
            pass.add_kl(estimator::layer_kl(
                &weight,
                bias.as_ref(),
                self,
                pass.kernels(),
            ));
        }
        Ok(MomentParams {
            w_mean: weight.mean(),
            w_var,
            b_mean: bias.as_ref().map(|b| b.mean()),
            b_var,
        })
    }
}
