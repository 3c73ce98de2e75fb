//! Objectives: what turns a model's step terms into the loss to minimise.
//!
//! A model's training step returns its [`StepTerms`] (per-draw log-likelihoods `[S, B]`, the
//! global KL, an optional local KL per row, an optional per-draw `ln q(w_s) − ln p(w_s)`); an
//! [`Objective`] combines them. The ELBO is one; black-box α (Depeweg 2019) and PAC-Bayes
//! bounds (Haußmann 2021) are others, without a change to the training loop.

mod alpha;
mod elbo;
mod pac_bayes;

pub use alpha::{AlphaBound, AlphaConfig, AlphaDivergence};
pub use elbo::{Elbo, ElboConfig, KlSchedule};
pub use pac_bayes::{PacBayes, PacBayesConfig, PacBound, PacComplexity, PacKl};

pub use crate::step::{Inference, KlFoldMismatch, KlTerm, StepContext, StepRequest, StepTerms};
use burn::tensor::Tensor;

/// An objective's value, and its two parts for reports.
#[derive(Debug, Clone)]
pub struct Loss {
    /// The quantity to minimise (one element).
    pub loss: Tensor<1>,
    /// Mean negative log-likelihood per example (one element).
    pub nll: Tensor<1>,
    /// The KL term as the objective weighs it, before division by `N` (one element).
    pub kl: Tensor<1>,
}

/// A training objective.
pub trait Objective {
    /// A name for reports.
    fn name(&self) -> &'static str;

    /// Whether the objective needs [`StepTerms::log_ratio`].
    fn needs_log_ratio(&self) -> bool {
        false
    }

    /// Whether the loss uses [`StepTerms::kl`], the layers' `KL(q ‖ p)` (the default). An
    /// objective without it (BEDL-PAC's, whose weights are fitted by type-II maximum
    /// likelihood) lets the training loop skip computing it every step.
    fn needs_weight_kl(&self) -> bool {
        true
    }

    /// The loss of one step. The global KL is read through [`KlTerm::weighted`] (with the
    /// weight [`Objective::kl_weight`] returned, when it returned one) or
    /// [`KlTerm::differentiable`].
    ///
    /// # Errors
    /// A KL folded into the layers with another weight than the loss gives it.
    fn loss(&self, terms: StepTerms, context: &StepContext) -> Result<Loss, KlFoldMismatch>;

    /// `λ` when the loss is `f(other terms) + λ·KL`, linear in the global KL with a coefficient
    /// known before the step: the training loop then lets the layers fold `λ∇KL` into their
    /// fused sampling kernels ([`crate::layers::Pass::fold_kl`]). `None` (the default) keeps the
    /// KL differentiable on its own.
    fn kl_weight(&self, _context: &StepContext) -> Option<f64> {
        None
    }
}
