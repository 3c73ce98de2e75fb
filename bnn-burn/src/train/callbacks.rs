//! Callbacks: code that runs at the end of every step and epoch and may stop training, set
//! parameters in closed form between epochs, or replace the returned model. Early stopping is
//! one; checkpointing another; VBP's noise refit ([`crate::nets::NoiseRefit`]) and posterior
//! moment collectors (SWAG) plug in the same way.

use super::{CheckpointError, EpochStats, TrainError, TrainReport, save_checkpoint};
use burn::module::Module;
use std::path::PathBuf;

/// Whether training goes on after a callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep training.
    Continue,
    /// Stop after this epoch.
    Stop,
}

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepInfo {
    /// Epoch (0-based).
    pub epoch: usize,
    /// Step within the epoch (0-based).
    pub step: usize,
    /// Steps since training started.
    pub global_step: usize,
}

/// A hook into the training loop.
pub trait Callback<M> {
    /// After every optimiser step, with the updated model.
    fn on_step(&mut self, _model: &M, _step: &StepInfo) -> Result<(), TrainError> {
        Ok(())
    }

    /// After every epoch.
    fn on_epoch_end(&mut self, _model: &M, _stats: &EpochStats) -> Result<Flow, TrainError> {
        Ok(Flow::Continue)
    }

    /// After [`Callback::on_epoch_end`]: may return the model with parameters set in closed
    /// form (e.g. VBP's noise precision refit after every epoch). Parameters an update sets
    /// should not be trained by gradient (the optimiser's state of a parameter is kept by id).
    fn update(&mut self, model: M, _stats: &EpochStats) -> Result<M, TrainError> {
        Ok(model)
    }

    /// At the end; may return another model (the best one, an average).
    fn on_train_end(&mut self, model: M, _report: &mut TrainReport) -> M {
        model
    }

    /// Whether training resumed from a saved state ([`super::Trainer::with_resume`]) runs this
    /// callback as an uninterrupted run would: true only for a callback that keeps no state of
    /// its own across epochs (what it sets lives in the model). The default: false, so a
    /// trainer with a stateful callback refuses to resume rather than resume it wrongly.
    fn resumable(&self) -> bool {
        false
    }
}

/// Stops when the validation NLL has not improved for `patience` epochs and returns the model
/// of the best epoch. Needs a validation split (`TrainConfig::early_stopping` makes one and
/// installs this callback).
pub struct EarlyStopping<M> {
    patience: usize,
    best: Option<(f64, usize, M)>,
    since_best: usize,
}

impl<M> EarlyStopping<M> {
    /// Early stopping after `patience` epochs without improvement.
    pub fn new(patience: usize) -> Self {
        Self {
            patience,
            best: None,
            since_best: 0,
        }
    }
}

impl<M: Module> Callback<M> for EarlyStopping<M> {
    fn on_epoch_end(&mut self, model: &M, stats: &EpochStats) -> Result<Flow, TrainError> {
        let Some(v) = stats.val_nll else {
            return Err(TrainError::Config(crate::ConfigError {
                config: "EarlyStopping",
                field: "validation split",
                value: "none".into(),
                expected: "a validation split: set TrainConfig::early_stopping",
            }));
        };
        if self.best.as_ref().is_none_or(|b| v < b.0) {
            self.best = Some((v, stats.epoch, model.clone()));
            self.since_best = 0;
        } else {
            self.since_best += 1;
        }
        Ok(match self.since_best >= self.patience {
            true => Flow::Stop,
            false => Flow::Continue,
        })
    }

    fn on_train_end(&mut self, model: M, report: &mut TrainReport) -> M {
        match self.best.take() {
            Some((_, epoch, best)) => {
                report.best_epoch = epoch;
                best
            }
            None => model,
        }
    }
}

/// Saves the model every `every` epochs to `dir/epoch-NNNN.bpk`.
pub struct Checkpointing {
    dir: PathBuf,
    every: usize,
}

impl Checkpointing {
    /// Checkpoints every `every` (≥ 1) epochs into `dir`, which is created if missing.
    pub fn new(dir: impl Into<PathBuf>, every: usize) -> Self {
        Self {
            dir: dir.into(),
            every: every.max(1),
        }
    }
}

impl<M: Module> Callback<M> for Checkpointing {
    fn on_epoch_end(&mut self, model: &M, stats: &EpochStats) -> Result<Flow, TrainError> {
        if (stats.epoch + 1).is_multiple_of(self.every) {
            std::fs::create_dir_all(&self.dir).map_err(|e| CheckpointError {
                path: self.dir.display().to_string(),
                problem: e.into(),
            })?;
            save_checkpoint(
                model,
                self.dir.join(format!("epoch-{:04}.bpk", stats.epoch)),
            )?;
        }
        Ok(Flow::Continue)
    }

    fn resumable(&self) -> bool {
        true
    }
}

/// Empirical Bayes for the prior scale: every `every` epochs, each layer's prior scale moves to
/// the ELBO's optimum for the current posterior, per tensor
/// ([`crate::nets::Bnn::with_empirical_bayes_prior`]): coordinate ascent on the ELBO in the
/// weights' posterior (by the optimiser) and the prior variances (in closed form). Keeps no
/// state of its own, so a resumed run repeats it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmpiricalBayesPrior {
    every: usize,
    from_epoch: usize,
}

impl EmpiricalBayesPrior {
    /// After every epoch.
    pub fn new() -> Self {
        Self {
            every: 1,
            from_epoch: 0,
        }
    }

    /// After every `epochs` epochs (at least 1).
    pub fn every(epochs: usize) -> Self {
        Self {
            every: epochs.max(1),
            ..Self::new()
        }
    }

    /// The same, but only from the 0-based epoch `epoch` on: the weights first fit under the
    /// configured prior, so that the scale is not fitted to the initial weights.
    pub fn from_epoch(self, epoch: usize) -> Self {
        Self {
            from_epoch: epoch,
            ..self
        }
    }
}

impl Default for EmpiricalBayesPrior {
    fn default() -> Self {
        Self::new()
    }
}

impl<B, L> Callback<crate::nets::Bnn<B, L>> for EmpiricalBayesPrior
where
    B: crate::nets::Body,
    L: crate::likelihood::Likelihood,
{
    fn update(
        &mut self,
        model: crate::nets::Bnn<B, L>,
        stats: &EpochStats,
    ) -> Result<crate::nets::Bnn<B, L>, TrainError> {
        match stats.epoch >= self.from_epoch && (stats.epoch + 1).is_multiple_of(self.every) {
            true => Ok(model.with_empirical_bayes_prior()?),
            false => Ok(model),
        }
    }

    fn resumable(&self) -> bool {
        true
    }
}
