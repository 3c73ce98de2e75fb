//! What a prior needs of a posterior: its moments as the next task's prior, and the prior
//! cross-entropy `E_q[−ln p(w)]` of the KL. Here, not in [`crate::dist`], so that priors do not
//! depend on posteriors.

use super::PosteriorDist;
use crate::dist::WeightPrior;
use crate::error::ConfigError;
use burn::tensor::Tensor;

impl<const D: usize> WeightPrior<D> {
    /// The scalar Gaussian prior `N(μ₀, σ₀²)` whose variance maximises the ELBO for `q`, its
    /// mean kept: `σ₀² = (1/P) Σ_i ((E_q w_i − μ₀)² + Var_q w_i)` over the tensor's `P`
    /// entries (the stationary point of `−KL(q ‖ p)` in `σ₀²`; type-II maximum likelihood of
    /// the prior scale, Bishop 2006 §3.5 for the linear model). A point estimate counts its
    /// variance as 0.
    ///
    /// # Errors
    /// A prior that is not a scalar Gaussian (a per-weight prior or a scale mixture), or a
    /// tensor whose optimum is not a positive finite scale (all entries at the prior mean).
    pub fn empirical_bayes<Q: PosteriorDist<D> + ?Sized>(
        &self,
        q: &Q,
    ) -> Result<Self, ConfigError> {
        let bad = |field: &'static str, value: String, expected: &'static str| ConfigError {
            config: "WeightPrior::empirical_bayes",
            field,
            value,
            expected,
        };
        let (m0, _) = match self {
            WeightPrior::Gaussian(g) => g.scalars(),
            WeightPrior::ScaleMixture(_) => None,
        }
        .ok_or_else(|| {
            bad(
                "prior",
                "a per-weight Gaussian or a scale mixture".into(),
                "a scalar Gaussian prior N(μ₀, σ₀²)",
            )
        })?;
        let mean = q.mean();
        let device = mean.device();
        let mut second = (mean - m0).square();
        if let Some(var) = q.marginal_variance() {
            second = second + var;
        }
        let s0 = crate::host::to_vec(second.mean())[0].sqrt();
        if !(s0 > 0.0 && s0.is_finite()) {
            return Err(bad(
                "posterior",
                format!("σ₀ = {s0}"),
                "a posterior away from the prior mean (a positive, finite optimal scale)",
            ));
        }
        Ok(WeightPrior::Gaussian(crate::dist::GaussianPrior::scalar(
            m0, s0, &device,
        )))
    }

    /// The Gaussian that matches `q`'s mean and marginal variance, detached from the graph:
    /// the next task's prior in variational continual learning (exact for mean-field `q`).
    ///
    /// # Errors
    /// When `q` has no marginal variance, or a variance that is not positive (a point mass).
    pub fn from_posterior<Q: PosteriorDist<D> + ?Sized>(q: &Q) -> Result<Self, ConfigError> {
        let bad = |value: String| ConfigError {
            config: "WeightPrior::from_posterior",
            field: "posterior marginal variance",
            value,
            expected: "a posterior with a positive marginal variance everywhere",
        };
        let var = q.marginal_variance().ok_or_else(|| bad("none".into()))?;
        let min = crate::host::to_vec(var.clone().min())[0];
        if !(min > 0.0 && min.is_finite()) {
            return Err(bad(format!("min {min}")));
        }
        Ok(Self::gaussian(q.mean().detach(), var.sqrt().detach()))
    }

    /// The prior cross-entropy `E_q[−ln p(w)]` (one element): closed form for a Gaussian prior
    /// and a posterior with a marginal variance; otherwise a Monte Carlo average over
    /// reparameterised draws of `q` (unbiased and differentiable).
    pub fn cross_entropy<Q: PosteriorDist<D> + ?Sized>(&self, q: &Q) -> Tensor<1> {
        if let (WeightPrior::Gaussian(g), Some(var)) = (self, q.marginal_variance()) {
            return g.cross_entropy_moments(q.mean(), Some(var));
        }
        let samples = match self {
            WeightPrior::ScaleMixture(m) => m.mc_samples,
            WeightPrior::Gaussian(_) => 1,
        };
        (self.log_prob(q.sample(samples)).mean()).neg()
    }
}
