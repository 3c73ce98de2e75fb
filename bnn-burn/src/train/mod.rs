//! The training loop: seeded minibatches, any [`Objective`](crate::objective::Objective) (the
//! ELBO by default), a choice of optimiser with per-group learning rates and penalties, callbacks,
//! a training state saved between epochs, and a check of every step so that it never returns a
//! model that predicts NaN. Guide: the book's *Training* and *Callbacks and resume* pages.

mod callbacks;
mod checkpoint;
mod data;
mod error;
mod fit;
mod gradient_noise;
#[cfg(feature = "learner")]
mod learner;
mod optim;
mod resume;

pub use callbacks::{Callback, Checkpointing, EarlyStopping, EmpiricalBayesPrior, Flow, StepInfo};
pub use checkpoint::{CheckpointError, CheckpointProblem, load_checkpoint, save_checkpoint};
pub use data::{Batch, DIGEST_CHUNK, DatasetSource, LocalState, Minibatch, Model, TrainData};
pub use error::TrainError;
pub use fit::Trainer;
pub use gradient_noise::{GradientNoiseMonitor, GradientNoiseRecord, gradient_noise};
#[cfg(feature = "learner")]
pub use learner::{
    CalibrationInput, ClassItem, EceMetric, Learnable, LearnableConfig, PredictiveLogProb,
    RegressionItem, StepItem, TermMetric, TermsInput, ValidItem, Validation,
};
pub use optim::{DecayGroup, LrGroup, OptimizerConfig};

use crate::error::{Check, ConfigError};
use crate::fused::Kernels;
use crate::objective::KlSchedule;
pub use crate::step::Inference;
use burn::config::Config;

/// Early stopping on a held-out part of the training data.
#[derive(Config, Debug, PartialEq)]
pub struct EarlyStoppingConfig {
    /// Fraction of the training data held out for validation, in (0, 1).
    #[config(default = 0.1)]
    pub validation_fraction: f64,
    /// Epochs without improvement of the validation NLL before stopping.
    #[config(default = 10)]
    pub patience: usize,
}

/// Configuration of [`train`] and [`Trainer`].
#[derive(Config, Debug)]
pub struct TrainConfig {
    /// Passes over the training data.
    pub epochs: usize,
    /// Minibatch size.
    #[config(default = 128)]
    pub batch_size: usize,
    /// Base learning rate.
    #[config(default = 1e-3)]
    pub learning_rate: f64,
    /// Learning rates of parameter groups (e.g. the noise of the likelihood).
    #[config(default = "Vec::new()")]
    pub param_groups: Vec<LrGroup>,
    /// L2 penalties on parameter groups (e.g. Sensoy et al.'s on the dense weights only),
    /// applied to the gradients before every optimiser step.
    #[config(default = "Vec::new()")]
    pub decay_groups: Vec<DecayGroup>,
    /// The optimiser.
    #[config(default = "OptimizerConfig::adam()")]
    pub optimizer: OptimizerConfig,
    /// Posterior samples per training example.
    #[config(default = 1)]
    pub train_samples: usize,
    /// KL weight schedule of the default objective (the ELBO).
    #[config(default = "KlSchedule::Constant { weight: 1.0 }")]
    pub kl_schedule: KlSchedule,
    /// Seed for shuffling, the validation split and the device RNG while training; with
    /// [`train_built`] / [`Trainer::build_and_fit`] also of the initial parameters.
    #[config(default = 0)]
    pub seed: u64,
    /// Early stopping; `None` trains for all epochs.
    pub early_stopping: Option<EarlyStoppingConfig>,
    /// Show a progress bar on stderr when stderr is a terminal (never when it is a file or a
    /// pipe); `with_progress(false)` switches it off everywhere.
    #[config(default = true)]
    pub progress: bool,
    /// The fused kernels and optimiser (default), or the composition of burn ops and burn's
    /// optimisers (the reference).
    #[config(default = "Kernels::Fused")]
    pub kernels: Kernels,
    /// Train by sampled weights (default) or by moment propagation (VBP, CLT, DVI: the net's
    /// [`crate::nets::MomentConfig`] says how moments pass its layers). Early stopping's
    /// validation NLL is computed the same way.
    #[config(default = "Inference::Sampled")]
    pub inference: Inference,
}

impl TrainConfig {
    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("TrainConfig");
        check.at_least_one("epochs", self.epochs)?;
        check.at_least_one("batch_size", self.batch_size)?;
        check.at_least_one("train_samples", self.train_samples)?;
        check.positive("learning_rate", self.learning_rate)?;
        for g in &self.param_groups {
            check.non_negative("param_groups.learning_rate", g.learning_rate)?;
        }
        for g in &self.decay_groups {
            check.non_negative("decay_groups.weight_decay", g.weight_decay)?;
        }
        self.optimizer.validate()?;
        self.kl_schedule.validate("TrainConfig")?;
        if let Some(es) = &self.early_stopping {
            check.open_unit("early_stopping.validation_fraction", es.validation_fraction)?;
            check.at_least_one("early_stopping.patience", es.patience)?;
        }
        Ok(())
    }
}

/// Averages of one epoch.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpochStats {
    /// Epoch (0-based).
    pub epoch: usize,
    /// Mean loss over minibatches.
    pub loss: f64,
    /// Mean NLL per example.
    pub nll: f64,
    /// Model KL (mean over minibatches).
    pub kl: f64,
    /// Validation NLL per example, when early stopping is on.
    pub val_nll: Option<f64>,
}

/// What happened during training.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TrainReport {
    /// One entry per epoch run.
    pub history: Vec<EpochStats>,
    /// The epoch whose parameters were returned.
    pub best_epoch: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Trains `model` on `data` by minimising the ELBO (`mean NLL + KL/N`) with the configured
/// optimiser: [`Trainer::new`]`(config).fit(model, data)`.
///
/// The model must live on an autodiff device ([`crate::training_device`]); the data is moved
/// there. Everything random in training follows `config.seed`; the model's initial parameters
/// were drawn when it was built: [`train_built`] builds it from the same seed.
///
/// # Errors
/// A [`TrainError`] for a bad configuration, empty or mismatched data, a model without
/// autodiff, or a loss or parameter that stops being finite (naming the epoch and step).
pub fn train<M: Model, D: TrainData<Input = M::Input, Target = M::Target>>(
    model: M,
    data: D,
    config: &TrainConfig,
) -> Result<(M, TrainReport), TrainError> {
    Trainer::new(config.clone()).fit(model, data)
}

/// Builds the model with `build` after seeding the device's generator from `config.seed`, then
/// trains it ([`Trainer::build_and_fit`]): one seed fixes the whole run, the initial
/// parameters included.
///
/// # Errors
/// `build`'s error, then those of [`train`].
pub fn train_built<M, D, E>(
    build: impl FnOnce(&burn::tensor::Device) -> Result<M, E>,
    data: D,
    config: &TrainConfig,
) -> Result<(M, TrainReport), TrainError>
where
    M: Model,
    D: TrainData<Input = M::Input, Target = M::Target>,
    E: Into<TrainError>,
{
    Trainer::new(config.clone()).build_and_fit(build, data)
}

#[cfg(test)]
mod tests;
