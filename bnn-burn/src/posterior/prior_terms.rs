//! What a prior needs of a posterior: its moments as the next task's prior, and the prior
//! cross-entropy `E_q[−ln p(w)]` of the KL. Here, not in [`crate::dist`], so that priors do not
//! depend on posteriors.

use super::PosteriorDist;
use crate::dist::WeightPrior;
use crate::error::ConfigError;
use burn::tensor::Tensor;

impl<const D: usize> WeightPrior<D> {
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
