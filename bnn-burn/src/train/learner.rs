//! burn-train's `Learner` for any [`Model`]: [`Learnable`] holds a model with its objective and
//! step settings, and implements burn-train's `TrainStep` and `InferenceStep`, so that a `Bnn`
//! or `BnnLv` trains with burn's dashboard, checkpoints, early stopping and multi-device
//! strategies. Metric adapters: burn's `LossMetric` and `AccuracyMetric`, and [`TermMetric`]
//! (NLL, KL) and [`EceMetric`]. Guide: the book's *burn-train's Learner* page.

use super::{Batch, Minibatch, Model, TrainData, TrainError};
use crate::error::{Check, ConfigError};
use crate::fused::Kernels;
use crate::objective::{ElboConfig, Objective, StepContext, StepRequest};
use crate::predict::{ClassPrediction, GaussianPrediction, Predict, PredictMode};
use crate::step::Inference;
use burn::config::Config;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::{Module, ModuleDisplay};
use burn::optim::lr_scheduler::module_lr_scheduler::ModuleLearningRate;
use burn::optim::{GradientsParams, ModuleOptimizer, MultiGradientsParams};
use burn::tensor::{Device, Int, Tensor, TensorReadError};
use burn::train::metric::state::{FormatOptions, NumericMetricState};
use burn::train::metric::{
    AccuracyInput, Adaptor, LossInput, Metric, MetricAttributes, MetricMetadata, MetricName,
    Numeric, NumericAttributes, NumericEntry, SerializedEntry,
};
use burn::train::{InferenceStep, ItemLazy, TrainOutput, TrainStep};
use burn_std::ExecutionError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How [`Learnable`] steps: draws, kernels, inference, the noise seed and the epoch length.
#[derive(Config, Debug)]
pub struct LearnableConfig {
    /// Posterior draws per training example.
    #[config(default = 1)]
    pub train_samples: usize,
    /// Posterior draws of the validation step's predictive.
    #[config(default = 16)]
    pub valid_samples: usize,
    /// Fused kernels (default) or the composition of burn ops.
    #[config(default = "Kernels::Fused")]
    pub kernels: Kernels,
    /// Sampled weights or moment propagation.
    #[config(default = "Inference::Sampled")]
    pub inference: Inference,
    /// Seed of the fused kernels' noise: step `t` on device `d` draws from the key
    /// `(seed, d, t)`, so no two steps and no two devices share noise.
    #[config(default = 0)]
    pub seed: u64,
    /// Minibatches per epoch, over all devices: the step count becomes the epoch an objective
    /// with a KL schedule reads. `None`: every step is epoch 0, and an objective whose KL
    /// weight changes with the epoch is refused.
    pub batches_per_epoch: Option<usize>,
}

impl LearnableConfig {
    /// Checks every field.
    ///
    /// # Errors
    /// The first field out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let check = Check("LearnableConfig");
        check.at_least_one("train_samples", self.train_samples)?;
        check.at_least_one("valid_samples", self.valid_samples)?;
        if let Some(n) = self.batches_per_epoch {
            check.at_least_one("batches_per_epoch", n)?;
        }
        Ok(())
    }

    /// `model` trained by the ELBO (`mean NLL + KL/N`) under these settings.
    ///
    /// # Errors
    /// A field out of range.
    pub fn init<M: Model + ModuleDisplay>(&self, model: M) -> Result<Learnable<M>, ConfigError> {
        self.init_with(model, ElboConfig::new().init()?)
    }

    /// `model` trained by `objective` (black-box α, PAC-Bayes, an annealed ELBO, ...).
    ///
    /// # Errors
    /// A field out of range, or an objective whose KL weight changes with the epoch without
    /// [`LearnableConfig::batches_per_epoch`].
    pub fn init_with<M: Model + ModuleDisplay>(
        &self,
        model: M,
        objective: impl Objective + Send + Sync + 'static,
    ) -> Result<Learnable<M>, ConfigError> {
        self.validate()?;
        if self.batches_per_epoch.is_none() {
            let weight = |epoch| objective.kl_weight(&StepContext::new(epoch, 1, 1));
            if weight(0) != weight(1_000_000) {
                return Err(ConfigError {
                    config: "LearnableConfig",
                    field: "batches_per_epoch",
                    value: "None".into(),
                    expected: "the minibatches per epoch, for an objective whose KL weight \
                               changes with the epoch",
                });
            }
        }
        let local = model.has_local_update();
        Ok(Learnable {
            model,
            setup: Setup {
                objective: Shared(Arc::new(objective)),
                config: self.clone(),
                devices: Vec::new(),
                counters: Arc::new(vec![AtomicU64::new(0)]),
                valid_steps: Arc::new(AtomicU64::new(0)),
                local: local.then(|| Arc::new(Mutex::new(Vec::new()))),
            },
        })
    }
}

/// A model, its objective and its step settings, as one burn module that burn-train's
/// `Learner` trains ([`LearnableConfig::init`]). The record is the model's: a checkpoint of a
/// `Learnable<M>` loads into an `M`.
#[derive(Module, Debug)]
pub struct Learnable<M: Model + ModuleDisplay> {
    /// The model.
    pub model: M,
    #[module(skip)]
    setup: Setup,
}

#[derive(Clone)]
struct Shared(Arc<dyn Objective + Send + Sync>);

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.name())
    }
}

#[derive(Clone, Debug)]
struct Setup {
    objective: Shared,
    config: LearnableConfig,
    /// The devices of a multi-device strategy, in order: a step's device ordinal.
    devices: Vec<Device>,
    /// Steps taken, per device ordinal (shared by every copy of the module).
    counters: Arc<Vec<AtomicU64>>,
    /// Validation steps taken.
    valid_steps: Arc<AtomicU64>,
    /// The rows stepped since the last optimiser step, for a model's own per-row update.
    local: Option<Arc<Mutex<Vec<usize>>>>,
}

impl<M: Model + ModuleDisplay> Learnable<M> {
    /// The same module, told the devices a multi-device strategy runs it on (in the
    /// strategy's order): each device then counts its own steps, and a run's noise does not
    /// depend on which device's thread is first. Without it every device shares one counter:
    /// still no repeated noise, but its order across devices is not reproducible.
    pub fn with_devices(mut self, devices: &[Device]) -> Self {
        self.setup.devices = devices.to_vec();
        let devices = devices.len().clamp(1, VALIDATION);
        self.setup.counters = Arc::new((0..devices).map(|_| AtomicU64::new(0)).collect());
        self
    }

    /// The steps taken so far, over all devices.
    pub fn steps(&self) -> u64 {
        self.setup
            .counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// Train and validation loaders over `train` and `valid` for burn-train: minibatches of
    /// `batch_size` rows (the last one smaller), shuffled by `seed`, carrying their row ids and
    /// the training set's size `N` (the objective's `KL/N`). Checks the data against the model
    /// first.
    ///
    /// # Errors
    /// Empty, mismatched or non-finite data, or data that does not fit the model.
    #[allow(clippy::type_complexity)]
    pub fn loaders<D>(
        &self,
        train: D,
        valid: D,
        batch_size: usize,
        seed: u64,
    ) -> Result<
        (
            Arc<dyn DataLoader<Minibatch<M::Input, M::Target>>>,
            Arc<dyn DataLoader<Minibatch<M::Input, M::Target>>>,
        ),
        TrainError,
    >
    where
        D: TrainData<Input = M::Input, Target = M::Target> + Send + Sync + 'static,
        M::Input: Send + std::fmt::Debug + 'static,
        M::Target: Send + std::fmt::Debug + 'static,
    {
        Check("loaders")
            .at_least_one("batch_size", batch_size)
            .map_err(TrainError::from)?;
        let home = crate::device::device();
        let n_train = train.len()?;
        let mut built = Vec::new();
        for (data, shuffle) in [(train, true), (valid, false)] {
            let n = data.len()?;
            if n == 0 {
                return Err(TrainError::Empty);
            }
            let (data, _) = super::data::checked_on(data, &self.model, &home)?;
            let batcher = RowBatcher {
                data: Arc::new(data),
                n_train,
                home: home.clone(),
            };
            let builder = DataLoaderBuilder::new(batcher).batch_size(batch_size);
            let builder = if shuffle {
                builder.shuffle(seed)
            } else {
                builder
            };
            built.push(builder.build(InMemDataset::new((0..n).collect::<Vec<usize>>())));
        }
        let valid = built.pop().expect("two loaders");
        let train = built.pop().expect("two loaders");
        Ok((train, valid))
    }

    /// The step's request: the objective's needs, this step's noise key and fold.
    fn request(&self, context: &StepContext, device: &Device, train: bool) -> StepRequest {
        let setup = &self.setup;
        let objective = &setup.objective.0;
        let ordinal = setup
            .devices
            .iter()
            .position(|d| d == device)
            .unwrap_or(0)
            .min(setup.counters.len() - 1);
        // Validation steps draw from a stream of their own (the last ordinal), so that they
        // leave the training steps' keys where they were.
        let noise_key = match train {
            true => {
                let step = setup.counters[ordinal].fetch_add(1, Ordering::Relaxed);
                noise_key(setup.config.seed, ordinal, step)
            }
            false => {
                let step = setup.valid_steps.fetch_add(1, Ordering::Relaxed);
                noise_key(setup.config.seed, VALIDATION, step)
            }
        };
        StepRequest {
            inference: setup.config.inference,
            log_ratio: objective.needs_log_ratio(),
            kernels: setup.config.kernels,
            kl_fold: if train {
                objective.kl_weight(context)
            } else {
                None
            },
            weight_kl: objective.needs_weight_kl(),
            noise_key: Some(noise_key),
            ..StepRequest::new(setup.config.train_samples)
        }
    }

    /// The epoch the steps taken so far stand in.
    fn epoch(&self) -> usize {
        match self.setup.config.batches_per_epoch {
            Some(n) => (self.steps() / n as u64) as usize,
            None => 0,
        }
    }

    /// The objective's loss and terms of one minibatch.
    fn terms(&self, batch: Minibatch<M::Input, M::Target>, train: bool) -> StepItem {
        let batch_size = batch.input.len();
        let context = StepContext::new(self.epoch(), batch.n_train, batch_size);
        let device = batch.rows.device();
        let request = self.request(&context, &device, train);
        let terms = self
            .model
            .step(batch, request)
            .unwrap_or_else(|e| panic!("the model cannot take the Learner's step: {e}"));
        let loss = self
            .setup
            .objective
            .0
            .loss(terms, &context)
            .unwrap_or_else(|e| panic!("the objective cannot weigh the step's KL: {e}"));
        StepItem {
            loss: loss.loss,
            nll: loss.nll,
            kl: loss.kl,
            batch_size,
        }
    }
}

impl<M: Model + ModuleDisplay> TrainStep for Learnable<M>
where
    M::Input: Send + 'static,
    M::Target: Send + 'static,
{
    type Input = Minibatch<M::Input, M::Target>;
    type Output = StepItem;

    fn step(&self, batch: Self::Input) -> TrainOutput<StepItem> {
        if let Some(rows) = &self.setup.local {
            let ids = crate::host::to_vec(batch.rows.clone().float());
            let mut rows = rows.lock().expect("rows of the steps");
            rows.extend(ids.into_iter().map(|r| r as usize));
        }
        let item = self.terms(batch, true);
        let grads = item.loss.backward();
        TrainOutput::new(self, grads, item)
    }

    fn optimize(
        self,
        optim: &mut ModuleOptimizer,
        lr: ModuleLearningRate,
        mut grads: GradientsParams,
    ) -> Self {
        let Self { mut model, setup } = self;
        if let Some(rows) = &setup.local {
            let rows = std::mem::take(&mut *rows.lock().expect("rows of the steps"));
            model = model.local_update(&mut grads, &rows, lr.base());
        }
        optim.step(lr, Self { model, setup }, grads)
    }

    fn optimize_multi(
        self,
        optim: &mut ModuleOptimizer,
        lr: ModuleLearningRate,
        grads: MultiGradientsParams,
    ) -> Self {
        assert!(
            self.setup.local.is_none(),
            "a model with its own per-row optimiser (BNN+LV's latents) trains on one device: \
             use ExecutionStrategy::SingleDevice, or the library's Trainer"
        );
        optim.step_multi(lr, self, grads)
    }
}

impl<M> InferenceStep for Learnable<M>
where
    M: Model + ModuleDisplay + Predict<Input = <M as Model>::Input>,
    M::Prediction: Validation<<M as Model>::Target>,
    <M as Model>::Input: Send + 'static,
    <M as Model>::Target: Send + 'static,
{
    type Input = Minibatch<<M as Model>::Input, <M as Model>::Target>;
    type Output = ValidItem<<M::Prediction as Validation<<M as Model>::Target>>::Item>;

    fn step(&self, batch: Self::Input) -> Self::Output {
        let (input, target) = (batch.input.clone(), batch.target.clone());
        let terms = self.terms(batch, false);
        let mode = match self.setup.config.inference {
            Inference::Sampled => PredictMode::Samples(self.setup.config.valid_samples),
            Inference::Moments => PredictMode::Moments,
        };
        let prediction = self
            .model
            .predict(input, mode)
            .unwrap_or_else(|e| panic!("the model cannot predict the validation batch: {e}"));
        ValidItem {
            terms,
            predictive: prediction.item(target),
        }
    }
}

/// The ordinal of the validation steps' noise.
const VALIDATION: usize = (1 << 16) - 1;

/// The noise key of step `step` on the device at `ordinal`: distinct for every (ordinal, step)
/// below 2¹⁶ devices and 2⁴⁸ steps (`mix` is a bijection of 64-bit words).
fn noise_key(seed: u64, ordinal: usize, step: u64) -> u64 {
    debug_assert!(ordinal <= VALIDATION && step < 1 << 48);
    use crate::fused::rng::mix;
    mix(seed ^ mix(((ordinal as u64) << 48) ^ step))
}

/// A predictive distribution's part of a validation item.
pub trait Validation<T> {
    /// What the metrics read.
    type Item: ItemLazy + 'static;
    /// The item of this prediction's targets `target`.
    fn item(self, target: T) -> Self::Item;
}

impl Validation<Tensor<1, Int>> for ClassPrediction {
    type Item = ClassItem;

    fn item(self, labels: Tensor<1, Int>) -> ClassItem {
        ClassItem {
            log_prob: self.log_prob(labels.clone()),
            probs: self.mean(),
            labels,
        }
    }
}

impl Validation<Tensor<2>> for GaussianPrediction {
    type Item = RegressionItem;

    fn item(self, target: Tensor<2>) -> RegressionItem {
        RegressionItem {
            log_prob: self.log_prob(target.clone()),
            mean: self.mean(),
            target,
        }
    }
}

/// The objective's terms of one training step (one element each).
#[derive(Debug, Clone)]
pub struct StepItem {
    /// The loss.
    pub loss: Tensor<1>,
    /// Mean NLL per example.
    pub nll: Tensor<1>,
    /// The KL as the objective weighs it.
    pub kl: Tensor<1>,
    /// Examples in the minibatch.
    pub batch_size: usize,
}

/// A validation step: the objective's terms and the predictive's scores.
#[derive(Debug, Clone)]
pub struct ValidItem<P> {
    /// The objective's terms.
    pub terms: StepItem,
    /// The predictive's part.
    pub predictive: P,
}

/// A classifier's predictive on a validation minibatch.
#[derive(Debug, Clone)]
pub struct ClassItem {
    /// `ln p(y_b | x_b)` of the predictive, `[B]`.
    pub log_prob: Tensor<1>,
    /// Predictive class probabilities, `[B, C]`.
    pub probs: Tensor<2>,
    /// The labels, `[B]`.
    pub labels: Tensor<1, Int>,
}

/// A regressor's predictive on a validation minibatch.
#[derive(Debug, Clone)]
pub struct RegressionItem {
    /// `ln p(y_b | x_b)` of the predictive, `[B]`.
    pub log_prob: Tensor<1>,
    /// Predictive mean, `[B, D]`.
    pub mean: Tensor<2>,
    /// The targets, `[B, D]`.
    pub target: Tensor<2>,
}

fn off_tape<const D: usize>(t: Tensor<D>) -> Tensor<D> {
    t.without_autodiff()
}

impl ItemLazy for StepItem {
    fn sync(self) -> Result<Self, ExecutionError> {
        self.loss.device().flush()?;
        Ok(Self {
            loss: off_tape(self.loss),
            nll: off_tape(self.nll),
            kl: off_tape(self.kl),
            batch_size: self.batch_size,
        })
    }
}

impl ItemLazy for ClassItem {
    fn sync(self) -> Result<Self, ExecutionError> {
        Ok(Self {
            log_prob: off_tape(self.log_prob),
            probs: off_tape(self.probs),
            labels: self.labels.without_autodiff(),
        })
    }
}

impl ItemLazy for RegressionItem {
    fn sync(self) -> Result<Self, ExecutionError> {
        Ok(Self {
            log_prob: off_tape(self.log_prob),
            mean: off_tape(self.mean),
            target: off_tape(self.target),
        })
    }
}

impl<P: ItemLazy> ItemLazy for ValidItem<P> {
    fn sync(self) -> Result<Self, ExecutionError> {
        Ok(Self {
            terms: self.terms.sync()?,
            predictive: self.predictive.sync()?,
        })
    }
}

impl Adaptor<LossInput> for StepItem {
    fn adapt(&self) -> LossInput {
        LossInput::new(self.loss.clone())
    }
}

impl<P> Adaptor<LossInput> for ValidItem<P> {
    fn adapt(&self) -> LossInput {
        self.terms.adapt()
    }
}

impl Adaptor<AccuracyInput> for ValidItem<ClassItem> {
    fn adapt(&self) -> AccuracyInput {
        AccuracyInput::new(
            self.predictive.probs.clone(),
            self.predictive.labels.clone(),
        )
    }
}

/// What [`TermMetric`] reads: the NLL and KL of a step, one element each, over `count` rows.
pub struct TermsInput {
    nll: Tensor<1>,
    kl: Tensor<1>,
    count: usize,
}

impl Adaptor<TermsInput> for StepItem {
    fn adapt(&self) -> TermsInput {
        TermsInput {
            nll: self.nll.clone(),
            kl: self.kl.clone(),
            count: self.batch_size,
        }
    }
}

/// Validation reads the predictive's NLL, `−(1/B) Σ ln p(y_b | x_b)`, not the objective's
/// expected one.
impl<P: PredictiveLogProb> Adaptor<TermsInput> for ValidItem<P> {
    fn adapt(&self) -> TermsInput {
        TermsInput {
            nll: -self.predictive.log_prob().mean().reshape([1]),
            kl: self.terms.kl.clone(),
            count: self.terms.batch_size,
        }
    }
}

/// A predictive item's `ln p(y_b | x_b)`.
pub trait PredictiveLogProb {
    /// `[B]`.
    fn log_prob(&self) -> Tensor<1>;
}

impl PredictiveLogProb for ClassItem {
    fn log_prob(&self) -> Tensor<1> {
        self.log_prob.clone()
    }
}

impl PredictiveLogProb for RegressionItem {
    fn log_prob(&self) -> Tensor<1> {
        self.log_prob.clone()
    }
}

/// One term for burn-train's dashboard: the NLL per example (training: the objective's
/// expected NLL; validation: the predictive's) or the KL as the objective weighs it.
#[derive(Clone)]
pub struct TermMetric {
    kl: bool,
    name: MetricName,
    state: NumericMetricState,
}

impl TermMetric {
    /// The NLL per example.
    pub fn nll() -> Self {
        Self {
            kl: false,
            name: Arc::new("NLL".into()),
            state: NumericMetricState::default(),
        }
    }

    /// The KL.
    pub fn kl() -> Self {
        Self {
            kl: true,
            name: Arc::new("KL".into()),
            state: NumericMetricState::default(),
        }
    }

    fn format(&self) -> FormatOptions {
        FormatOptions::new(self.name.clone()).precision(if self.kl { 1 } else { 4 })
    }
}

impl Metric for TermMetric {
    type Input = TermsInput;

    fn name(&self) -> MetricName {
        self.name.clone()
    }

    fn update(
        &mut self,
        item: &TermsInput,
        _metadata: &MetricMetadata,
    ) -> Result<SerializedEntry, TensorReadError> {
        let term = if self.kl { &item.kl } else { &item.nll };
        let value = term.clone().mean().try_into_scalar::<f64>()?;
        self.state.update(value, item.count);
        Ok(self.state.compute_update(self.format()))
    }

    fn compute(&mut self) -> Result<SerializedEntry, TensorReadError> {
        Ok(self.state.compute_final(self.format()))
    }

    fn clear(&mut self) {
        self.state.reset()
    }

    fn attributes(&self) -> MetricAttributes {
        NumericAttributes {
            unit: None,
            higher_is_better: false,
        }
        .into()
    }
}

impl Numeric for TermMetric {
    fn value(&self) -> Option<NumericEntry> {
        Some(self.state.current_value())
    }

    fn running_value(&self) -> Option<NumericEntry> {
        Some(self.state.running_value())
    }

    fn final_value(&self) -> NumericEntry {
        self.state.final_value()
    }
}

/// What [`EceMetric`] reads: predictive probabilities and labels.
pub struct CalibrationInput {
    probs: Tensor<2>,
    labels: Tensor<1, Int>,
}

impl Adaptor<CalibrationInput> for ValidItem<ClassItem> {
    fn adapt(&self) -> CalibrationInput {
        CalibrationInput {
            probs: self.predictive.probs.clone(),
            labels: self.predictive.labels.clone(),
        }
    }
}

/// Expected calibration error over an epoch's validation rows ([`crate::metrics::ece`], 15
/// equal-width bins; Guo et al. 2017): the epoch's value uses every row, not a mean of
/// minibatches.
#[derive(Clone)]
pub struct EceMetric {
    bins: usize,
    probs: Vec<f64>,
    labels: Vec<usize>,
    classes: usize,
    value: Option<f64>,
}

impl Default for EceMetric {
    fn default() -> Self {
        Self::new()
    }
}

impl EceMetric {
    /// ECE with 15 bins.
    pub fn new() -> Self {
        Self {
            bins: 15,
            probs: Vec::new(),
            labels: Vec::new(),
            classes: 0,
            value: None,
        }
    }

    fn entry(&mut self) -> SerializedEntry {
        let value = if self.labels.is_empty() {
            f64::NAN
        } else {
            crate::metrics::ece(&self.probs, self.classes, &self.labels, self.bins)
        };
        self.value = Some(value);
        SerializedEntry::new(
            format!("ECE {value:.4}"),
            NumericEntry::Value(value).serialize(),
        )
    }
}

impl Metric for EceMetric {
    type Input = CalibrationInput;

    fn name(&self) -> MetricName {
        Arc::new("ECE".into())
    }

    fn update(
        &mut self,
        item: &CalibrationInput,
        _metadata: &MetricMetadata,
    ) -> Result<SerializedEntry, TensorReadError> {
        let [_, classes] = item.probs.dims();
        self.classes = classes;
        let probs = item.probs.clone().try_into_data_as::<f64>()?;
        let labels = item.labels.clone().try_into_data_as::<i64>()?;
        self.probs.extend(probs.iter::<f64>());
        self.labels.extend(labels.iter::<i64>().map(|l| l as usize));
        Ok(self.entry())
    }

    fn compute(&mut self) -> Result<SerializedEntry, TensorReadError> {
        Ok(self.entry())
    }

    fn clear(&mut self) {
        self.probs.clear();
        self.labels.clear();
        self.value = None;
    }

    fn attributes(&self) -> MetricAttributes {
        NumericAttributes {
            unit: None,
            higher_is_better: false,
        }
        .into()
    }
}

impl Numeric for EceMetric {
    fn value(&self) -> Option<NumericEntry> {
        self.value.map(NumericEntry::Value)
    }

    fn running_value(&self) -> Option<NumericEntry> {
        self.value.map(NumericEntry::Value)
    }

    fn final_value(&self) -> NumericEntry {
        NumericEntry::Value(self.value.unwrap_or(f64::NAN))
    }
}

/// burn's batcher of row ids: the rows of the data, moved to the step's device, with their ids
/// and the training set's size.
struct RowBatcher<D> {
    data: Arc<D>,
    n_train: usize,
    home: Device,
}

impl<D> Batcher<usize, Minibatch<D::Input, D::Target>> for RowBatcher<D>
where
    D: TrainData + Send + Sync,
{
    fn batch(&self, rows: Vec<usize>, device: &Device) -> Minibatch<D::Input, D::Target> {
        let index = crate::host::labels(&rows, &self.home);
        let (input, target) = self
            .data
            .batch(&rows, &index, &self.home)
            .unwrap_or_else(|e| panic!("the Learner's minibatch could not be read: {e}"));
        Minibatch {
            input: input.to(device),
            target: target.to(device),
            rows: index.to_device(device),
            n_train: self.n_train,
        }
    }
}

#[cfg(test)]
#[path = "learner_tests.rs"]
mod tests;
