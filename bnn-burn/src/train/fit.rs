//! [`Trainer`]: the training loop behind [`super::train`].

use super::callbacks::{Callback, EarlyStopping, Flow, StepInfo};
use super::data::{Batch, Minibatch, Model, TrainData};
use super::optim::DecayPlan;
use super::resume::{self, TrainState};
use super::{EpochStats, TrainConfig, TrainError, TrainReport};
use crate::objective::{ElboConfig, Objective, StepContext, StepRequest};
use burn::lr_scheduler::module_lr_scheduler::ModuleLrScheduler;
use burn::module::{ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use std::path::PathBuf;
use std::time::Duration;

/// Rows per evaluation chunk (validation NLL, the final check).
const EVAL_CHUNK: usize = 1024;

/// The training loop with its objective and callbacks.
pub struct Trainer<M> {
    config: TrainConfig,
    objective: Option<Box<dyn Objective>>,
    callbacks: Vec<Box<dyn Callback<M>>>,
    resume: Option<(PathBuf, Duration)>,
    row_weights: Option<Vec<f64>>,
}

impl<M: Model> Trainer<M> {
    /// A trainer with the ELBO of `config.kl_schedule` and no callbacks (early stopping is
    /// added when `config.early_stopping` is set).
    pub fn new(config: TrainConfig) -> Self {
        Self {
            config,
            objective: None,
            callbacks: Vec::new(),
            resume: None,
            row_weights: None,
        }
    }

    /// Weighs every per-row term of the objective (the rows' log-likelihoods, their local KLs)
    /// by `weights[n]`, one per row of the training data in its order
    /// ([`StepContext::row_mean`]): bootstrap counts, importance weights, Farquhar 2022's
    /// unbiased active-learning risks. The global KL keeps its `1/N`, so weights that average
    /// 1 keep the ELBO's balance. Validation rows (early stopping) are scored unweighted.
    pub fn with_row_weights(mut self, weights: Vec<f64>) -> Self {
        self.row_weights = Some(weights);
        self
    }

    /// Saves the training state in `dir` after an epoch when `interval` has passed since the
    /// last save, and after the last epoch; a later `fit` with the same folder, configuration,
    /// data and architecture resumes from the saved epoch and returns the model an
    /// uninterrupted run returns, bit for bit on one device. A saved state holds the model's
    /// parameters with their ids, the optimiser's record, the model's own optimiser state
    /// ([`super::Model::local_state`]) and the epochs' history; the host shuffles are drawn
    /// again from the seed, and the device RNG is reseeded from `(seed, epoch)` at the start
    /// of every epoch (with or without a saved state). A run already finished returns its
    /// saved model without training. The epoch count may grow between runs (to extend one);
    /// everything else must agree, or `fit` refuses with [`TrainError::Resume`].
    ///
    /// Callbacks must be [`Callback::resumable`] (early stopping is not); learning-rate groups
    /// must select parameters by module path, since resumed parameters keep their saved ids.
    pub fn with_resume(mut self, dir: impl Into<PathBuf>, interval: Duration) -> Self {
        self.resume = Some((dir.into(), interval));
        self
    }

    /// Minimises `objective` instead of the ELBO.
    pub fn with_objective(mut self, objective: impl Objective + 'static) -> Self {
        self.objective = Some(Box::new(objective));
        self
    }

    /// Adds a callback (run in the order added, after early stopping).
    pub fn with_callback(mut self, callback: impl Callback<M> + 'static) -> Self {
        self.callbacks.push(Box::new(callback));
        self
    }

    /// Builds the model with `build` on the training device ([`crate::training_device`]),
    /// after seeding the device's generator with `config.seed` (each epoch then reseeds it from
    /// its own stream of that seed), and trains it ([`Trainer::fit`]): one seed fixes the
    /// initial parameters as well as the minibatches and every draw. ([`Trainer::fit`] takes a
    /// model built before, whose initial parameters came from the generator in whatever state
    /// it was.)
    ///
    /// # Errors
    /// `build`'s error, then [`Trainer::fit`]'s.
    pub fn build_and_fit<D, E>(
        self,
        build: impl FnOnce(&Device) -> Result<M, E>,
        data: D,
    ) -> Result<(M, TrainReport), TrainError>
    where
        D: TrainData<Input = M::Input, Target = M::Target>,
        E: Into<TrainError>,
    {
        let device = crate::training_device();
        crate::device::uses_generator();
        device.seed(self.config.seed);
        let model = build(&device).map_err(Into::into)?;
        self.fit(model, data)
    }

    /// Trains `model` on `data`; see [`super::train`].
    ///
    /// # Errors
    /// See [`super::train`].
    pub fn fit<D: TrainData<Input = M::Input, Target = M::Target>>(
        mut self,
        mut model: M,
        data: D,
    ) -> Result<(M, TrainReport), TrainError> {
        let config = self.config.clone();
        config.validate()?;
        // Small variances multiplied together underflow to subnormals (moment training above
        // all), which x86 runs tens of times slower: flush them while training.
        let _flushed = crate::device::SubnormalsFlushed::enter();
        let objective: Box<dyn Objective> = match self.objective.take() {
            Some(o) => o,
            None => Box::new(
                ElboConfig::new()
                    .with_kl_schedule(config.kl_schedule)
                    .init()?,
            ),
        };
        let n = data.len()?;
        if n == 0 {
            return Err(TrainError::Empty);
        }
        if let Some(w) = &self.row_weights {
            check_row_weights(w, n)?;
        }
        let device = model
            .devices()
            .into_iter()
            .next()
            .ok_or(TrainError::NoParameters)?;
        if !device.is_autodiff() {
            return Err(TrainError::NotAutodiff {
                device: format!("{device:?}"),
            });
        }
        let start = web_time::Instant::now();
        // Widths, class labels and rows against the model, before any work: at once where the
        // data are tensors, minibatch by minibatch where they are read lazily.
        let (data, lazy) = super::data::checked_on(data, &model, &device)?;
        let mut rng = StdRng::seed_from_u64(config.seed);
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut rng);
        let n_val = match &config.early_stopping {
            Some(es) if n > 1 => {
                ((n as f64 * es.validation_fraction).round() as usize).clamp(1, n - 1)
            }
            _ => 0,
        };
        let (val_rows, train_rows) = order.split_at(n_val);
        let (val_rows, mut train_rows) = (val_rows.to_vec(), train_rows.to_vec());
        // The rows the divergence check judges, before training and after it: fixed for the
        // run (and a resumed one), so the two values differ by the training, not the rows.
        let check_rows = train_rows[..train_rows.len().min(config.batch_size)].to_vec();
        if let (Some(es), false) = (&config.early_stopping, val_rows.is_empty()) {
            self.callbacks
                .insert(0, Box::new(EarlyStopping::new(es.patience)));
        }

        let mut optim = config.optimizer.init(config.kernels);
        let mut lr = config
            .param_groups
            .iter()
            .fold(ModuleLrScheduler::new(config.learning_rate), |s, g| {
                s.with_group(g.group.clone(), g.learning_rate)
            });
        let request = StepRequest {
            inference: config.inference,
            log_ratio: objective.needs_log_ratio(),
            kernels: config.kernels,
            weight_kl: objective.needs_weight_kl(),
            ..StepRequest::new(config.train_samples)
        };
        let n_train = train_rows.len();
        let row_weights = self.row_weights.clone();
        let check_on_rows = |model: &M| {
            checked_loss(
                model,
                objective.as_ref(),
                &data,
                (&check_rows, &row_weights),
                n_train,
                request,
            )
        };
        // Grown epoch by epoch: `epochs` is a bound, never an allocation.
        let mut history = Vec::new();
        let (mut global_step, mut last) = (0, (0, 0));
        let mut divergence = Divergence::default();
        let mut seconds_before = 0.0;
        let mut state = match self.resume.take() {
            None => None,
            Some((dir, interval)) => {
                if self.callbacks.iter().any(|c| !c.resumable()) {
                    return Err(TrainError::Resume {
                        path: dir.display().to_string(),
                        reason: "a callback keeps state of its own across epochs (early \
                                 stopping, or one whose `resumable()` is false), which a saved \
                                 training state does not hold: set \
                                 TrainConfig::early_stopping to None, drop the callback, or \
                                 train without with_resume"
                            .into(),
                    });
                }
                // The data's content binds the state: another set of the same size is refused,
                // and so are other row weights.
                let mut digest = data.digest(&device)?;
                if let Some(w) = &self.row_weights {
                    digest += &format!("-w{}", crate::integrity::Digest::new().floats(w).hex());
                }
                Some(TrainState::new(
                    dir,
                    interval,
                    &config,
                    (n, n_val),
                    &digest,
                    &model,
                )?)
            }
        };
        let mut epochs_done = 0;
        if let Some(state) = state.as_mut().filter(|s| s.exists()) {
            let fresh = resume::ids(&model);
            let r = state.load(model, optim)?;
            if r.epochs_done > config.epochs {
                return Err(TrainError::Resume {
                    path: state.dir().display().to_string(),
                    reason: format!(
                        "the saved state has trained {} epochs, more than the {} asked",
                        r.epochs_done, config.epochs
                    ),
                });
            }
            resume::check_groups(&config, &fresh, &r.model, state.dir())?;
            (model, optim) = (r.model, r.optim);
            (epochs_done, global_step, history) = (r.epochs_done, r.global_step, r.history);
            divergence.initial = r.initial_loss;
            seconds_before = r.seconds;
            last = (epochs_done - 1, 0);
            // The shuffles of the epochs done, drawn again.
            for _ in 0..epochs_done {
                train_rows.shuffle(&mut rng);
            }
        }
        if divergence.initial.is_none() {
            // `L₀` on the check's rows and draws (its own seed: every epoch below seeds its
            // own draws, so training draws what it would without this check). A non-finite
            // value is left to the first step, which refuses it.
            crate::device::uses_generator();
            device.seed(resume::epoch_seed(config.seed, config.epochs));
            match check_on_rows(&model) {
                Ok(initial) => divergence.start(initial),
                // Not finite before any step: no learning rate helps; the data overflow.
                Err(Unusable::Objective(value)) => {
                    return Err(TrainError::Overflow {
                        value,
                        max_input: largest_input(&data, &check_rows, n_train, &device),
                    });
                }
                // Left to the first step, which refuses it.
                Err(Unusable::Other(_)) => {}
            }
        }
        let bar = progress_bar(&config);
        bar.set_position(epochs_done as u64);

        for epoch in epochs_done..config.epochs {
            // Every epoch's draws follow (seed, epoch), so a run resumed at any epoch draws
            // what an uninterrupted one draws.
            crate::device::uses_generator();
            device.seed(resume::epoch_seed(config.seed, epoch));
            train_rows.shuffle(&mut rng);
            // The decay groups' selection, once an epoch (a callback's update may replace
            // parameters between epochs, never within one).
            let decay = DecayPlan::new(&model, &config.decay_groups);
            let mut sums = Vec::new();
            for (step, rows) in train_rows.chunks(config.batch_size).enumerate() {
                let batch = minibatch(&data, rows, n_train, &device)?;
                if lazy {
                    model.check_data(&batch.input, &batch.target)?;
                }
                let context = context_of(epoch, n_train, rows, &self.row_weights, &device);
                let request = StepRequest {
                    kl_fold: objective.kl_weight(&context),
                    ..request
                };
                let terms = model.step(batch, request)?;
                let loss = objective.loss(terms, &context)?;
                sums.push(Tensor::cat(
                    vec![
                        loss.loss.clone().detach(),
                        loss.nll.detach(),
                        loss.kl.detach(),
                    ],
                    0,
                ));
                let mut grads = GradientsParams::from_grads(loss.loss.backward(), &model);
                model = model.local_update(&mut grads, rows, config.learning_rate);
                decay.apply(&model, &mut grads);
                model = optim.step(lr.step(), model, grads);
                last = (epoch, step);
                let info = StepInfo {
                    epoch,
                    step,
                    global_step,
                };
                global_step += 1;
                for callback in &mut self.callbacks {
                    callback.on_step(&model, &info)?;
                }
            }
            // Every step's loss, read once per epoch (one device sync).
            let values = crate::host::to_vec(Tensor::cat(sums, 0));
            if let Some((step, v)) = values
                .chunks(3)
                .enumerate()
                .find(|(_, v)| !v[0].is_finite())
            {
                bar.abandon();
                return Err(TrainError::NonFinite {
                    epoch,
                    step,
                    value: v[0],
                });
            }
            // Only where `L₀` could not be taken before training.
            divergence.start(values[0]);
            let steps = (values.len() / 3) as f64;
            let mean = |k: usize| values.iter().skip(k).step_by(3).sum::<f64>() / steps;
            let val_nll = match val_rows.is_empty() {
                true => None,
                false => {
                    let scoring = StepRequest {
                        samples: config.train_samples.max(8),
                        ..request
                    };
                    let v = validation_nll(&model, &data, &val_rows, n_train, scoring, &device)?;
                    if !v.is_finite() {
                        bar.abandon();
                        return Err(TrainError::Diverged {
                            epoch,
                            step: last.1,
                            detail: format!("the validation NLL is {v}"),
                        });
                    }
                    Some(v)
                }
            };
            let stats = EpochStats {
                epoch,
                loss: mean(0),
                nll: mean(1),
                kl: mean(2),
                val_nll,
            };
            bar.set_message(format!(
                "loss {:.4}  nll {:.4}  kl {:.1}{}",
                stats.loss,
                stats.nll,
                stats.kl,
                val_nll.map(|v| format!("  val {v:.4}")).unwrap_or_default()
            ));
            bar.inc(1);
            let mut flow = Flow::Continue;
            for callback in &mut self.callbacks {
                if callback.on_epoch_end(&model, &stats)? == Flow::Stop {
                    flow = Flow::Stop;
                }
                model = callback.update(model, &stats)?;
            }
            history.push(stats);
            if let Some(state) = &mut state {
                state.save(
                    epoch + 1 == config.epochs || flow == Flow::Stop,
                    &model,
                    &optim,
                    epoch + 1,
                    global_step,
                    divergence.initial,
                    seconds_before + start.elapsed().as_secs_f64(),
                    &history,
                )?;
            }
            if flow == Flow::Stop {
                break;
            }
        }
        bar.finish_and_clear();
        crate::device::uses_generator();
        device.seed(resume::epoch_seed(config.seed, history.len()));
        // The last update was never followed by a loss: check what it left.
        let check = check_on_rows(&model)
            .map_err(|u| u.to_string())
            .and_then(|per_point| divergence.check_final(per_point));
        if let Err(detail) = check {
            return Err(TrainError::Diverged {
                epoch: last.0,
                step: last.1,
                detail,
            });
        }
        let mut report = TrainReport {
            best_epoch: history.len() - 1,
            history,
            seconds: seconds_before + start.elapsed().as_secs_f64(),
        };
        for callback in &mut self.callbacks {
            model = callback.on_train_end(model, &mut report);
        }
        Ok((model, report))
    }
}

/// The minibatch of `rows` on the data's device.
fn minibatch<D: TrainData>(
    data: &D,
    rows: &[usize],
    n_train: usize,
    device: &Device,
) -> Result<Minibatch<D::Input, D::Target>, TrainError> {
    let index = crate::host::labels(rows, device);
    let (input, target) = data.batch(rows, &index, device)?;
    Ok(Minibatch {
        input,
        target,
        rows: index,
        n_train,
    })
}

/// The minibatch of `rows` without autodiff, for evaluating a `valid()` model.
fn plain_minibatch<D: TrainData>(
    data: &D,
    rows: &[usize],
    n_train: usize,
    device: &Device,
) -> Result<Minibatch<D::Input, D::Target>, TrainError> {
    let batch = minibatch(data, rows, n_train, device)?;
    Ok(Minibatch {
        input: batch.input.plain(),
        target: batch.target.plain(),
        rows: batch.rows.without_autodiff(),
        n_train,
    })
}

/// Mean per-example NLL of `rows` (averaged over the request's draws, or by moments), without
/// gradients.
fn validation_nll<M: Model, D: TrainData<Input = M::Input, Target = M::Target>>(
    model: &M,
    data: &D,
    rows: &[usize],
    n_train: usize,
    request: StepRequest,
    device: &Device,
) -> Result<f64, TrainError> {
    let valid = model.valid();
    // Only the log-likelihood is read: the layers' KL is not computed.
    let request = StepRequest {
        weight_kl: false,
        log_ratio: false,
        ..request
    };
    let mut total = 0.0;
    for chunk in rows.chunks(EVAL_CHUNK) {
        let terms = valid.step(plain_minibatch(data, chunk, n_train, device)?, request)?;
        let nll = terms.log_likelihood.mean_dim(0).sum().neg();
        total += crate::host::to_vec(nll)[0];
    }
    Ok(total / rows.len() as f64)
}

/// Divergence after the last update, judged on the objective's own loss per point (both values
/// at epoch 0's context, so a KL warm-up cannot trigger it; and the quantity trained, so an
/// α-energy is judged as itself, not by its per-draw NLL, which a mass-covering α may
/// legitimately raise): above `L₀ + (|L₀| + 1)`, with `L₀` its value for the untrained model
/// on the same rows (the first batch of the run's seeded order), training ended worse than
/// twice where it started. (`L₀` was once the first step's loss, on another minibatch: on a
/// small, noisy problem minibatch noise alone could then pass the bar in a short run.)
/// A learning rate of 10 ends there with noise variances of 10²⁰ and every value finite; a
/// healthy run ends far below `L₀`. Mid-training spikes are not judged: a run from a large
/// initial σ, or a small problem with a fixed high precision, can spike by orders of magnitude
/// early and then recover.
#[derive(Debug, Default)]
struct Divergence {
    initial: Option<f64>,
}

impl Divergence {
    const RISE: f64 = 1.0;

    /// Records `L₀` (the first value given; later calls keep it).
    fn start(&mut self, first: f64) {
        self.initial.get_or_insert(first);
    }

    /// Checks the value after the last update.
    fn check_final(&self, value: f64) -> Result<(), String> {
        let initial = self.initial.unwrap_or(value);
        let limit = initial + Self::RISE * (initial.abs() + 1.0);
        match value.is_finite() && value <= limit {
            true => Ok(()),
            false => Err(format!(
                "the objective per point on a fixed training minibatch rose from {initial:.4} \
                 before training to {value:.4e} after the last update"
            )),
        }
    }
}

/// Why [`checked_loss`] found a model unusable.
enum Unusable {
    /// The objective on the rows is this non-finite value.
    Objective(f64),
    /// A parameter is not finite, or the step failed.
    Other(String),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Objective(v) => write!(f, "the objective on a training minibatch is {v}"),
            Self::Other(s) => f.write_str(s),
        }
    }
}

/// The largest magnitude among the inputs of `rows` (`NaN` when they are not float tensors
/// that read back).
fn largest_input<D: TrainData>(data: &D, rows: &[usize], n_train: usize, device: &Device) -> f64 {
    let Ok(batch) = plain_minibatch(data, rows, n_train, device) else {
        return f64::NAN;
    };
    batch.input.max_abs().unwrap_or(f64::NAN)
}

/// The context of a step on `rows`, their weights gathered from `weights` (one per data row).
fn context_of(
    epoch: usize,
    n_train: usize,
    rows: &[usize],
    weights: &Option<Vec<f64>>,
    device: &Device,
) -> StepContext {
    let row_weights = weights.as_ref().map(|w| {
        let picked: Vec<f32> = rows.iter().map(|&r| w[r] as f32).collect();
        Tensor::<1>::from_data(burn::tensor::TensorData::new(picked, [rows.len()]), device)
    });
    StepContext {
        rows: rows.to_vec(),
        row_weights,
        ..StepContext::new(epoch, n_train, rows.len())
    }
}

/// Refuses row weights that are not one finite, non-negative number per data row, or that are
/// all zero.
fn check_row_weights(weights: &[f64], n: usize) -> Result<(), TrainError> {
    let problem = |value: String, expected: &'static str| {
        Err(TrainError::Config(crate::error::ConfigError {
            config: "Trainer",
            field: "row_weights",
            value,
            expected,
        }))
    };
    if weights.len() != n {
        return problem(
            format!("{} weights for {n} rows", weights.len()),
            "one weight per row of the training data",
        );
    }
    if let Some((row, w)) = weights
        .iter()
        .enumerate()
        .find(|(_, w)| !w.is_finite() || **w < 0.0)
    {
        return problem(format!("{w} at row {row}"), "finite weights ≥ 0");
    }
    if weights.iter().all(|w| *w == 0.0) {
        return problem("all zero".into(), "at least one weight > 0");
    }
    Ok(())
}

/// Finite parameters and objective on the rows `rows` (the divergence check's, before training
/// and after the last update); returns the objective's loss there (at epoch 0's context).
fn checked_loss<M: Model, D: TrainData<Input = M::Input, Target = M::Target>>(
    model: &M,
    objective: &dyn Objective,
    data: &D,
    (rows, weights): (&[usize], &Option<Vec<f64>>),
    n_train: usize,
    request: StepRequest,
) -> Result<f64, Unusable> {
    let mut finite = FiniteParams(Ok(()));
    model.visit(&mut finite);
    finite.0.map_err(Unusable::Other)?;
    let device = model
        .devices()
        .into_iter()
        .next()
        .ok_or_else(|| Unusable::Other("no parameters".into()))?;
    let batch = plain_minibatch(data, rows, n_train, &device)
        .map_err(|e| Unusable::Other(e.to_string()))?;
    let terms = model
        .valid()
        .step(batch, request)
        .map_err(|e| Unusable::Other(e.to_string()))?;
    let context = context_of(0, n_train, rows, weights, &device.inner());
    let loss = objective
        .loss(terms, &context)
        .map_err(|e| Unusable::Other(e.to_string()))?;
    let value = crate::host::to_vec(Tensor::cat(vec![loss.loss, loss.nll, loss.kl], 0));
    match value[0].is_finite() {
        true => Ok(value[0]),
        false => Err(Unusable::Objective(value[0])),
    }
}

/// Visits every float parameter; records the first that holds a NaN or an infinity (one float
/// per parameter read back: [`crate::host::non_finite_per_row`] of the flattened values).
struct FiniteParams(Result<(), String>);

impl ModuleVisitor for FiniteParams {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if self.0.is_ok() {
            let value = param.val();
            let dims = value.dims();
            let flat = value.reshape([1, dims.iter().product::<usize>()]);
            if crate::host::non_finite_per_row(flat)[0] != 0.0 {
                self.0 = Err(format!(
                    "a parameter of shape {dims:?} holds NaN or infinity"
                ));
            }
        }
    }
}

fn progress_bar(config: &TrainConfig) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    // Off when asked, and when stderr is a file or a pipe (logs, CI, worker processes).
    if !config.progress || !std::io::stderr().is_terminal() {
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
