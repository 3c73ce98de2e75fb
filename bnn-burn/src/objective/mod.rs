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

use crate::fused::Kernels;
use burn::tensor::Tensor;

/// What a training step must compute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepRequest {
    /// Posterior draws per example.
    pub samples: usize,
    /// Whether the per-draw `ln q(w_s) − ln p(w_s)` is needed.
    pub log_ratio: bool,
    /// Fused kernels or the composition of burn ops.
    pub kernels: Kernels,
    /// `Some(λ)` when the loss is `… + λ·KL` (see [`Objective::kl_weight`]): the layers may
    /// fold `λ∇KL` into their sampling kernels and report the KL as a constant.
    pub kl_fold: Option<f64>,
    /// Whether the layers' `KL(q ‖ p)` is needed ([`Objective::needs_weight_kl`]); without it
    /// the step may report a KL of 0 and not compute it.
    pub weight_kl: bool,
}

impl StepRequest {
    /// `samples` draws per example, on the fused kernels, no log-ratio, the layers' KL
    /// collected and not folded.
    pub fn new(samples: usize) -> Self {
        Self {
            samples,
            log_ratio: false,
            kernels: Kernels::Fused,
            kl_fold: None,
            weight_kl: true,
        }
    }
}

/// The terms of one training step.
#[derive(Debug, Clone)]
pub struct StepTerms {
    /// `ln p(y_b | x_b, w_s)`, `[S, B]`.
    pub log_likelihood: Tensor<2>,
    /// `KL(q(w) ‖ p(w))` of the global parameters (one element).
    pub kl: Tensor<1>,
    /// Per-row KL of local latent variables, `[B]` (BNN+LV's `q(z_n)`).
    pub local_kl: Option<Tensor<1>>,
    /// `ln q(w_s) − ln p(w_s)` per draw, `[S]`, when requested.
    pub log_ratio: Option<Tensor<1>>,
    /// `ln q(z_{n,s}) − ln p(z_{n,s})` of per-row latents per draw, `[S, B]`, when requested
    /// and the model has latents (black-box α keeps them inside its `logsumexp`).
    pub local_log_ratio: Option<Tensor<2>>,
}

/// Where a step stands in training.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepContext {
    /// Epoch (0-based).
    pub epoch: usize,
    /// Training examples `N`.
    pub n_train: usize,
    /// Examples in this minibatch.
    pub batch_size: usize,
}

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

    /// The loss of one step.
    fn loss(&self, terms: StepTerms, context: &StepContext) -> Loss;

    /// `λ` when the loss is `f(other terms) + λ·KL`, linear in the global KL with a coefficient
    /// known before the step: the training loop then lets the layers fold `λ∇KL` into their
    /// fused sampling kernels ([`crate::layers::Pass::fold_kl`]). `None` (the default) keeps the
    /// KL differentiable on its own.
    fn kl_weight(&self, _context: &StepContext) -> Option<f64> {
        None
    }
}
