//! The training loop: seeded minibatch ELBO training with Adam, a progress bar on stderr,
//! optional early stopping on a validation split, and checkpoints through burn records.

use crate::error::{Check, ConfigError};
use crate::objective::{ElboConfig, KlSchedule};
use crate::prior::KlDivergence;
use burn::config::Config;
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::{Device, Int, Tensor};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use std::path::Path;

/// Rows of a data set that can be gathered into minibatches (the first axis indexes examples).
pub trait Batch: Clone {
    /// Number of examples.
    fn len(&self) -> usize;
    /// Whether there are no examples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The examples at `indices`, in that order.
    fn rows(&self, indices: Tensor<1, Int>) -> Self;
    /// The device holding the data.
    fn device(&self) -> Device;
    /// The same data on `device`.
    fn to(self, device: &Device) -> Self;
    /// The same data without autodiff tracking (for evaluation).
    fn plain(self) -> Self;
}

impl<const D: usize> Batch for Tensor<D> {
    fn len(&self) -> usize {
        self.dims()[0]
    }
    fn rows(&self, indices: Tensor<1, Int>) -> Self {
        self.clone().select(0, indices)
    }
    fn device(&self) -> Device {
        Tensor::device(self)
    }
    fn to(self, device: &Device) -> Self {
        self.to_device(device)
    }
    fn plain(self) -> Self {
        self.without_autodiff()
    }
}

impl<const D: usize> Batch for Tensor<D, Int> {
    fn len(&self) -> usize {
        self.dims()[0]
    }
    fn rows(&self, indices: Tensor<1, Int>) -> Self {
        self.clone().select(0, indices)
    }
    fn device(&self) -> Device {
        Tensor::device(self)
    }
    fn to(self, device: &Device) -> Self {
        self.to_device(device)
    }
    fn plain(self) -> Self {
        self.without_autodiff()
    }
}

/// A model trained by the ELBO: it gives per-sample NLLs and (through [`KlDivergence`]) its KL.
pub trait Supervised: Module + KlDivergence {
    /// Inputs, first axis examples.
    type Input: Batch;
    /// Targets, first axis examples.
    type Target: Batch;
    /// Negative log-likelihood of every target under `samples` stochastic passes, `[S, B]`.
    fn nll(&self, input: Self::Input, target: Self::Target, samples: usize) -> Tensor<2>;

    /// The NLL `[S, B]` and the KL of one training step. The default makes two calls; models
    /// whose forward pass and KL share work (e.g. `σ = softplus(ρ)`) override it.
    fn nll_and_kl(
        &self,
        input: Self::Input,
        target: Self::Target,
        samples: usize,
    ) -> (Tensor<2>, Tensor<1>) {
        (self.nll(input, target, samples), self.kl())
    }
}

/// Early stopping on a held-out part of the training data.
#[derive(Config, Debug, PartialEq)]
pub struct EarlyStopping {
    /// Fraction of the training data held out for validation, in (0, 1).
    #[config(default = 0.1)]
    pub validation_fraction: f64,
    /// Epochs without improvement of the validation NLL before stopping.
    #[config(default = 10)]
    pub patience: usize,
}

/// Configuration of [`train`].
#[derive(Config, Debug)]
pub struct TrainConfig {
    /// Passes over the training data.
    pub epochs: usize,
    /// Minibatch size.
    #[config(default = 128)]
    pub batch_size: usize,
    /// Adam learning rate.
    #[config(default = 1e-3)]
    pub learning_rate: f64,
    /// Posterior samples per training example.
    #[config(default = 1)]
    pub train_samples: usize,
    /// KL weight schedule.
    #[config(default = "KlSchedule::Constant { weight: 1.0 }")]
    pub kl_schedule: KlSchedule,
    /// Seed for shuffling, the validation split and the device RNG.
    #[config(default = 0)]
    pub seed: u64,
    /// Early stopping; `None` trains for all epochs.
    pub early_stopping: Option<EarlyStopping>,
    /// Show a progress bar on stderr.
    #[config(default = true)]
    pub progress: bool,
}

impl TrainConfig {
    /// Checks every field; the error names the field and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("TrainConfig");
        check.at_least_one("epochs", self.epochs)?;
        check.at_least_one("batch_size", self.batch_size)?;
        check.at_least_one("train_samples", self.train_samples)?;
        check.positive("learning_rate", self.learning_rate)?;
        if let Some(es) = &self.early_stopping {
            check.open_unit("early_stopping.validation_fraction", es.validation_fraction)?;
            check.at_least_one("early_stopping.patience", es.patience)?;
        }
        Ok(())
    }
}

/// Why training could not run or could not finish.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A configuration value is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No training examples.
    #[error("training data is empty: there must be at least one example")]
    Empty,
    /// Inputs and targets disagree on the number of examples.
    #[error("inputs have {inputs} examples but targets have {targets}")]
    LengthMismatch {
        /// Number of input rows.
        inputs: usize,
        /// Number of target rows.
        targets: usize,
    },
    /// The loss became NaN or infinite.
    #[error(
        "the loss became {value} in epoch {epoch}: lower the learning rate, check the data for \
         NaN, or standardise the targets"
    )]
    NonFinite {
        /// Epoch (0-based).
        epoch: usize,
        /// The value seen.
        value: f64,
    },
}

/// Averages of one epoch.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EpochStats {
    /// Epoch (0-based).
    pub epoch: usize,
    /// Mean loss (−ELBO/N) over minibatches.
    pub loss: f64,
    /// Mean NLL per example.
    pub nll: f64,
    /// Model KL (mean over minibatches).
    pub kl: f64,
    /// Validation NLL per example, when early stopping is on.
    pub val_nll: Option<f64>,
}

/// What happened during [`train`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct TrainReport {
    /// One entry per epoch run.
    pub history: Vec<EpochStats>,
    /// The epoch whose parameters were returned.
    pub best_epoch: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
}

fn scalar(t: Tensor<1>) -> f64 {
    t.into_data()
        .try_into_vec_as::<f64>()
        .map(|v| v[0])
        .unwrap_or(f64::NAN)
}

/// Mean per-example NLL of `model` on a data set, without gradients, in chunks of `batch`.
pub fn evaluate_nll<M: Supervised>(
    model: &M,
    input: &M::Input,
    target: &M::Target,
    samples: usize,
    batch: usize,
) -> f64 {
    let model = model.valid();
    let n = input.len();
    let device = input.device().without_autodiff();
    let mut total = 0.0;
    for start in (0..n).step_by(batch.max(1)) {
        let idx: Vec<usize> = (start..(start + batch).min(n)).collect();
        let t = crate::host::labels(&idx, &input.device());
        let x = input.rows(t.clone()).plain().to(&device);
        let y = target.rows(t).plain().to(&device);
        total += scalar(model.nll(x, y, samples).mean_dim(0).sum().reshape([1]));
    }
    total / n as f64
}

/// Trains `model` by minimising `mean NLL + KL/N` (the negative ELBO per point) with Adam.
///
/// The model must live on an autodiff device ([`crate::training_device`]); the data is moved
/// there. Everything random (shuffling, the validation split, the device RNG) follows
/// `config.seed`. With early stopping, the parameters of the epoch with the lowest validation
/// NLL are returned.
pub fn train<M: Supervised>(
    mut model: M,
    input: M::Input,
    target: M::Target,
    config: &TrainConfig,
) -> Result<(M, TrainReport), TrainError> {
    config.validate()?;
    let (n_in, n_out) = (input.len(), target.len());
    if n_in != n_out {
        return Err(TrainError::LengthMismatch {
            inputs: n_in,
            targets: n_out,
        });
    }
    if n_in == 0 {
        return Err(TrainError::Empty);
    }
    let start = std::time::Instant::now();
    let device = model.devices()[0].clone();
    device.seed(config.seed);
    let mut rng = StdRng::seed_from_u64(config.seed);
    let input = input.to(&device);
    let target = target.to(&device);

    let mut order: Vec<usize> = (0..n_in).collect();
    order.shuffle(&mut rng);
    let n_val = config
        .early_stopping
        .as_ref()
        .map(|es| ((n_in as f64 * es.validation_fraction).round() as usize).clamp(1, n_in - 1))
        .filter(|_| n_in > 1)
        .unwrap_or(0);
    let (val_idx, train_idx) = order.split_at(n_val);
    let mut train_idx = train_idx.to_vec();
    let validation = (n_val > 0).then(|| {
        let t = crate::host::labels(val_idx, &device);
        (input.rows(t.clone()), target.rows(t))
    });

    let elbo = ElboConfig::new(train_idx.len())
        .with_kl_schedule(config.kl_schedule)
        .init()?;
    let mut optim = AdamConfig::new().init();
    let bar = progress_bar(config);
    let mut history = Vec::with_capacity(config.epochs);
    let mut best: Option<(f64, usize, M)> = None;
    let mut since_best = 0;

    for epoch in 0..config.epochs {
        train_idx.shuffle(&mut rng);
        let mut sums: Option<Tensor<1>> = None;
        let mut steps = 0usize;
        for chunk in train_idx.chunks(config.batch_size) {
            let t = crate::host::labels(chunk, &device);
            let (nll, kl) =
                model.nll_and_kl(input.rows(t.clone()), target.rows(t), config.train_samples);
            let terms = elbo.terms(nll, kl, epoch);
            let stats = Tensor::cat(
                vec![
                    terms.loss.clone().detach(),
                    terms.nll.detach(),
                    terms.kl.detach(),
                ],
                0,
            );
            sums = Some(match sums {
                Some(s) => s + stats,
                None => stats,
            });
            let grads = GradientsParams::from_grads(terms.loss.backward(), &model);
            model = optim.step(config.learning_rate, model, grads);
            steps += 1;
        }
        let means: Vec<f64> = sums
            .expect("at least one minibatch")
            .into_data()
            .try_into_vec_as::<f64>()
            .unwrap_or_default()
            .into_iter()
            .map(|v| v / steps as f64)
            .collect();
        let (loss, nll, kl) = (means[0], means[1], means[2]);
        if !loss.is_finite() {
            bar.abandon();
            return Err(TrainError::NonFinite { epoch, value: loss });
        }
        let val_nll = validation
            .as_ref()
            .map(|(x, y)| evaluate_nll(&model, x, y, config.train_samples.max(8), 1024));
        history.push(EpochStats {
            epoch,
            loss,
            nll,
            kl,
            val_nll,
        });
        bar.set_message(format!(
            "loss {loss:.4}  nll {nll:.4}  kl {kl:.1}{}",
            val_nll.map(|v| format!("  val {v:.4}")).unwrap_or_default()
        ));
        bar.inc(1);
        if let (Some(v), Some(es)) = (val_nll, &config.early_stopping) {
            if best.as_ref().is_none_or(|b| v < b.0) {
                best = Some((v, epoch, model.clone()));
                since_best = 0;
            } else {
                since_best += 1;
                if since_best >= es.patience {
                    break;
                }
            }
        }
    }
    bar.finish_and_clear();
    let last = history.len() - 1;
    let (model, best_epoch) = match best {
        Some((_, epoch, m)) => (m, epoch),
        None => (model, last),
    };
    Ok((
        model,
        TrainReport {
            history,
            best_epoch,
            seconds: start.elapsed().as_secs_f64(),
        },
    ))
}

fn progress_bar(config: &TrainConfig) -> indicatif::ProgressBar {
    if !config.progress {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(config.epochs as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("epoch {pos}/{len} [{elapsed_precise}] {msg}")
    {
        bar.set_style(style);
    }
    bar
}

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
#[error("checkpoint {path}: {source}")]
pub struct CheckpointError {
    /// The file.
    pub path: String,
    /// What burn's recorder reported.
    pub source: burn::store::RecordError,
}

/// Saves every parameter of `model` to `path` (a burnpack file, full precision).
pub fn save_checkpoint<M: Module>(
    model: &M,
    path: impl AsRef<Path>,
) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    model
        .clone()
        .save_file(path)
        .map_err(|source| CheckpointError {
            path: path.display().to_string(),
            source,
        })
}

/// Loads parameters saved by [`save_checkpoint`] into `model` (which fixes the architecture).
pub fn load_checkpoint<M: Module>(model: M, path: impl AsRef<Path>) -> Result<M, CheckpointError> {
    let path = path.as_ref();
    model.try_load_file(path).map_err(|source| CheckpointError {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
#[path = "train_tests.rs"]
mod tests;
