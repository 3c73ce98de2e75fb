//! A training step's contract between a model and an objective: what the step must compute
//! ([`StepRequest`]), what it returns ([`StepTerms`]), where it stands ([`StepContext`]), and
//! the [`Model`] trait the training loop trains. Below the objectives and the networks, so that
//! both use it and neither uses the other.

use crate::batch::{Batch, LocalState, Minibatch};
use crate::error::DataMismatch;
use crate::fused::Kernels;
use crate::posterior::Unsupported;
use burn::module::Module;
use burn::tensor::Tensor;

/// How a training step carries the posterior through the network: by sampled weights, or by
/// the moments of the activations (one deterministic pass, the expected log-likelihood in
/// closed form; VBP, CLT and DVI, Haußmann 2021 ch. 3–4, Wu et al. 2019). Set by the trainer
/// ([`crate::train::TrainConfig::inference`]), not by the model: one net trains either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Inference {
    /// Sampled weights (`samples` draws per example).
    #[default]
    Sampled,
    /// Moment propagation, by the net's moment rules ([`crate::nets::MomentConfig`]).
    Moments,
}

/// What a training step must compute.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepRequest {
    /// Sampled weights or moments. A model that cannot step by moments refuses
    /// [`Inference::Moments`] ([`Unsupported`]).
    pub inference: Inference,
    /// Posterior draws per example (under [`Inference::Sampled`]).
    pub samples: usize,
    /// Whether the per-draw `ln q(w_s) − ln p(w_s)` is needed.
    pub log_ratio: bool,
    /// Fused kernels or the composition of burn ops.
    pub kernels: Kernels,
    /// `Some(λ)` when the loss is `… + λ·KL` (see [`crate::objective::Objective::kl_weight`]): the layers may
    /// fold `λ∇KL` into their sampling kernels and report the KL as a constant.
    pub kl_fold: Option<f64>,
    /// Whether the layers' `KL(q ‖ p)` is needed ([`crate::objective::Objective::needs_weight_kl`]); without it
    /// the step may report a KL of 0 and not compute it.
    pub weight_kl: bool,
    /// The base key of the fused kernels' counter-based noise for this step; `None` draws it
    /// from the device's generator. A caller that steps one model on several devices at once
    /// (burn-train's multi-device strategies) gives each step its own key, so that no two
    /// devices draw the same noise however their generators were seeded.
    pub noise_key: Option<u64>,
}

impl StepRequest {
    /// `samples` sampled draws per example, on the fused kernels, no log-ratio, the layers' KL
    /// collected and not folded.
    pub fn new(samples: usize) -> Self {
        Self {
            inference: Inference::Sampled,
            samples,
            log_ratio: false,
            kernels: Kernels::Fused,
            kl_fold: None,
            weight_kl: true,
            noise_key: None,
        }
    }
}

/// `KL(q(w) ‖ p(w))` of the global parameters (one element), with the weight `λ` whose
/// `λ·∇KL` the layers already added inside their fused kernels when the request folded it
/// ([`StepRequest::kl_fold`]). Its value then carries no gradient of its own, and the only loss
/// it fits is `… + λ·KL`: an objective reads it through [`KlTerm::weighted`] (linear use, the
/// weight checked) or [`KlTerm::differentiable`] (any use, refused when folded), so a weight
/// other than the folded one is an error instead of a silently wrong gradient.
#[derive(Debug, Clone)]
pub struct KlTerm {
    value: Tensor<1>,
    folded: Option<f64>,
}

/// An objective used a folded KL with another weight than the one folded, or not linearly.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the layers folded {folded}·∇KL into their kernels, but the objective {}: \
     Objective::kl_weight must return the weight its loss puts on the KL, or None",
    match used { Some(w) => format!("weighs the KL by {w}"), None => "uses it non-linearly".into() }
)]
pub struct KlFoldMismatch {
    /// The folded weight.
    pub folded: f64,
    /// The weight the objective used (`None`: a non-linear use).
    pub used: Option<f64>,
}

impl KlTerm {
    /// A KL with its own gradient (nothing folded).
    pub fn new(value: Tensor<1>) -> Self {
        Self {
            value,
            folded: None,
        }
    }

    /// The KL of a step whose request folded `fold` (`Some(λ)`: the layers added `λ·∇KL`
    /// themselves; `None`: nothing folded).
    pub fn of_request(value: Tensor<1>, fold: Option<f64>) -> Self {
        Self {
            value,
            folded: fold,
        }
    }

    /// The weight folded into the layers, if any.
    pub fn folded_weight(&self) -> Option<f64> {
        self.folded
    }

    /// The value without its gradient, for reports.
    pub fn value(&self) -> Tensor<1> {
        self.value.clone().detach()
    }

    /// `weight·KL` for a loss linear in the KL.
    ///
    /// # Errors
    /// A folded KL whose weight is not `weight` (relative difference above 10⁻⁹).
    pub fn weighted(&self, weight: f64) -> Result<Tensor<1>, KlFoldMismatch> {
        match self.folded {
            Some(f) if (f - weight).abs() > 1e-9 * f.abs().max(weight.abs()) => {
                Err(KlFoldMismatch {
                    folded: f,
                    used: Some(weight),
                })
            }
            _ => Ok(self.value.clone() * weight),
        }
    }

    /// The KL with its gradient, for any use.
    ///
    /// # Errors
    /// A folded KL (its gradient is already inside the layers).
    pub fn differentiable(&self) -> Result<Tensor<1>, KlFoldMismatch> {
        match self.folded {
            Some(f) => Err(KlFoldMismatch {
                folded: f,
                used: None,
            }),
            None => Ok(self.value.clone()),
        }
    }
}

/// The terms of one training step.
#[derive(Debug, Clone)]
pub struct StepTerms {
    /// `ln p(y_b | x_b, w_s)`, `[S, B]`.
    pub log_likelihood: Tensor<2>,
    /// `KL(q(w) ‖ p(w))` of the global parameters.
    pub kl: KlTerm,
    /// Per-row KL of local latent variables, `[B]` (BNN+LV's `q(z_n)`).
    pub local_kl: Option<Tensor<1>>,
    /// `ln q(w_s) − ln p(w_s)` per draw, `[S]`, when requested.
    pub log_ratio: Option<Tensor<1>>,
    /// `ln q(z_{n,s}) − ln p(z_{n,s})` of per-row latents per draw, `[S, B]`, when requested
    /// and the model has latents (black-box α keeps them inside its `logsumexp`).
    pub local_log_ratio: Option<Tensor<2>>,
}

/// Where a step stands in training, and which rows it sees.
#[derive(Debug, Clone)]
pub struct StepContext {
    /// Epoch (0-based).
    pub epoch: usize,
    /// Training examples `N`.
    pub n_train: usize,
    /// Examples in this minibatch.
    pub batch_size: usize,
    /// The minibatch's row indices into the training data (empty where a caller outside the
    /// training loop does not say).
    pub rows: Vec<usize>,
    /// The weights `v_b` of the minibatch's rows in every per-row term, `[B]`
    /// ([`crate::train::Trainer::with_row_weights`]); `None`: every row weighs 1.
    pub row_weights: Option<Tensor<1>>,
}

impl StepContext {
    /// A step of `batch_size` unweighted rows in `epoch`, of `n_train` training examples.
    pub fn new(epoch: usize, n_train: usize, batch_size: usize) -> Self {
        Self {
            epoch,
            n_train,
            batch_size,
            rows: Vec::new(),
            row_weights: None,
        }
    }

    /// The minibatch mean of a per-row term `t` (`[B]`) under the row weights:
    /// `(1/B) Σ_b v_b t_b` (one element). Every objective averages its per-row terms (the
    /// log-likelihood, a local KL) through it, so that weighted rows (bootstrap counts,
    /// Farquhar 2022's unbiased active-learning risks, eqs. 5.7–5.10) reach every objective.
    pub fn row_mean(&self, per_row: Tensor<1>) -> Tensor<1> {
        match &self.row_weights {
            Some(v) => (per_row * v.clone()).mean().reshape([1]),
            None => per_row.mean().reshape([1]),
        }
    }
}

/// What the training loop needs from a model: its terms for one minibatch.
pub trait Model: Module + 'static {
    /// Inputs.
    type Input: Batch;
    /// Targets.
    type Target: Batch;

    /// Checks that `input` and `target` fit the model (their widths, class labels, rows):
    /// training calls it before the first step. The default accepts anything.
    ///
    /// # Errors
    /// The first mismatch, naming the part and the row where there is one.
    fn check_data(&self, input: &Self::Input, target: &Self::Target) -> Result<(), DataMismatch> {
        let _ = (input, target);
        Ok(())
    }

    /// The log-likelihoods, KL and any requested extra terms of one minibatch.
    ///
    /// # Errors
    /// When the model cannot compute a requested term (e.g. `ln q` of a point estimate).
    fn step(
        &self,
        batch: Minibatch<Self::Input, Self::Target>,
        request: StepRequest,
    ) -> Result<StepTerms, Unsupported>;

    /// Parameters the model updates itself instead of the optimiser, after each step's backward
    /// pass (BNN+LV's per-row latents: [`crate::latent::LatentTable::sparse_step`]); it takes
    /// their gradients out of `grads`, so the optimiser leaves them alone. `rows` are the
    /// minibatch's rows and `learning_rate` the configured one. The default: nothing.
    fn local_update(
        self,
        _grads: &mut burn::optim::GradientsParams,
        _rows: &[usize],
        _learning_rate: f64,
    ) -> Self {
        self
    }

    /// Whether [`Model::local_update`] does anything (it then needs each step's rows).
    fn has_local_update(&self) -> bool {
        false
    }

    /// The state of [`Model::local_update`]'s own optimiser, saved with a training state
    /// between epochs ([`crate::train::Trainer::with_resume`]). The default: none.
    fn local_state(&self) -> LocalState {
        LocalState::default()
    }

    /// The model with a state from [`Model::local_state`] restored.
    ///
    /// # Errors
    /// When the state does not fit the model (the default accepts only an empty state).
    fn with_local_state(self, state: LocalState) -> Result<Self, String>
    where
        Self: Sized,
    {
        match state.is_empty() {
            true => Ok(self),
            false => Err("the model keeps no local optimiser state, but one was saved".into()),
        }
    }
}
