//! `bnn-bench dynamics`: Haußmann (2021) Table 6.1, the stochastic Lorenz attractor learned by
//! a Bayesian neural SDE ([`bnn_burn::sde`]) under E-Bayes and E-PAC-Bayes, with one of the
//! three equations known up to a noisy parameter (the hybrid drift of eq. 6.5) or none, and
//! the true equations alone with noisy parameters (row v). Every repetition simulates its own
//! data; the score is the test MSE of the paths' mean on the held-out sequences.

pub mod costs;
#[cfg(test)]
mod tests;

use crate::experiment;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use bnn_burn::batch::Sequences;
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::inference::{SgMcmcConfig, SgMcmcError, sg_sample};
use bnn_burn::layers::{Activation, FlatLayout, WeightConfig};
use bnn_burn::likelihood::Likelihood;
use bnn_burn::metrics::mean_and_standard_error;
use bnn_burn::nets::{Cell, MlpConfig, RecurrentConfig, Regressor};
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::sde::{NeuralSde, PriorDrift, SdeData, SdeFitConfig, SdeObjective, SdeTarget, fit};
use bnn_burn::train::{TrainConfig, train as train_net};
use bnn_burn::training_device;
use bnn_datasets::dynamics::{Lorenz, SdePath};
use bnn_datasets::sequences::SequenceData;
use burn::module::Module;
use burn::tensor::{Device, Distribution, Tensor};
use std::error::Error;
use std::time::Instant;

/// A row of Table 6.1: what the known drift covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knowledge {
    /// The table's name.
    pub name: &'static str,
    /// Short name for flags and ids.
    pub key: &'static str,
    /// The known equations (ζ's, κ's, ρ's).
    pub known: [bool; 3],
    /// Whether a network learns the rest (row v has none).
    pub learned: bool,
    /// The thesis's test MSE ± s.e. (50 repetitions) under E-Bayes(-Hybrid) and
    /// E-PAC-Bayes(-Hybrid).
    pub published: [Option<(f64, f64)>; 2],
}

/// The rows, in the table's order.
pub const ROWS: [Knowledge; 5] = [
    Knowledge {
        name: "none",
        key: "none",
        known: [false; 3],
        learned: true,
        published: [Some((29.20, 0.19)), Some((29.05, 0.23))],
    },
    Knowledge {
        name: "γ = [1, 0, 0], ζ ~ N(10, 1)",
        key: "zeta",
        known: [true, false, false],
        learned: true,
        published: [Some((27.58, 0.17)), Some((27.42, 0.16))],
    },
    Knowledge {
        name: "γ = [0, 1, 0], κ ~ N(28, 1)",
        key: "kappa",
        known: [false, true, false],
        learned: true,
        published: [Some((15.87, 0.46)), Some((15.06, 0.35))],
    },
    Knowledge {
        name: "γ = [0, 0, 1], ρ ~ N(2.67, 1)",
        key: "rho",
        known: [false, false, true],
        learned: true,
        published: [Some((27.82, 0.26)), Some((28.37, 0.21))],
    },
    Knowledge {
        name: "(v) true dynamics, noisy parameters",
        key: "full",
        known: [true; 3],
        learned: false,
        published: [Some((16.40, 2.31)), None],
    },
];

/// The methods: the SDE objectives (Table 6.1's columns and the D-BNN (VI) baseline), then
/// recurrent forecasters beside them (no known drift: the row "none" only).
pub const OBJECTIVES: [(&str, &str); 6] = [
    ("e-bayes", "E-Bayes"),
    ("e-pac-bayes", "E-PAC-Bayes"),
    ("d-bnn-vi", "D-BNN (VI)"),
    ("d-bnn-sgld", "D-BNN (SGLD)"),
    ("lstm", "LSTM"),
    ("vlstm", "variational LSTM"),
];

/// Whether a method is a recurrent forecaster rather than an SDE objective.
fn is_forecaster(key: &str) -> bool {
    matches!(key, "lstm" | "vlstm")
}

/// Steps between SGLD's kept draws.
const SGLD_THIN: usize = 5;

/// Hidden units of the recurrent forecasters.
const LSTM_UNITS: usize = 64;
/// Gal's tied dropout rate of the variational LSTM (inputs and hidden state).
const LSTM_DROPOUT: f64 = 0.1;

/// The bound's δ of E-PAC-Bayes (the thesis's code).
const DELTA: f64 = 0.05;

/// Which sequences a repetition trains and tests on.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
pub enum LorenzSequences {
    /// The thesis's details section: 20 training sequences of 50, 10 test sequences of 100
    /// (a 99-step horizon).
    Details,
    /// The thesis's code (and main text): 20 sequences of 24 each (a 23-step horizon).
    Code,
}

impl LorenzSequences {
    /// `(count, length)` of the training and the test sequences.
    fn shape(self) -> ((usize, usize), (usize, usize)) {
        match self {
            Self::Details => ((20, 50), (10, 100)),
            Self::Code => ((20, 24), (20, 24)),
        }
    }
}

/// Options of one `dynamics` run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct DynamicsOptions {
    /// Rows of Table 6.1 (none, zeta, kappa, rho, full); repeatable [default: all].
    #[arg(long = "knowledge")]
    pub knowledge: Vec<String>,
    /// Methods (e-bayes, e-pac-bayes, d-bnn-vi, d-bnn-sgld, lstm, vlstm); repeatable
    /// [default: all].
    #[arg(long = "objective")]
    pub objectives: Vec<String>,
    /// Repetitions, each on its own simulated attractor and noisy parameters (the thesis: 50)
    /// [default: 10; 2 with --quick].
    #[arg(long)]
    pub repetitions: Option<usize>,
    /// Training epochs (the thesis: 100) [default: 100; 2 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Sampled paths per trajectory and step [default: 8].
    #[arg(long, default_value_t = 8)]
    pub samples: usize,
    /// Trajectories per step (the thesis's code: 4).
    #[arg(long, default_value_t = 4)]
    pub batch_size: usize,
    /// Adam's learning rate (the thesis: 10⁻³).
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Hidden softplus layers of the drift network (the thesis's code: 3 of 100).
    #[arg(long, default_value_t = 3)]
    pub layers: usize,
    /// Units per hidden layer [default: 100; 8 with --quick].
    #[arg(long)]
    pub hidden: Option<usize>,
    /// The sequences: the thesis's details section or its code.
    #[arg(long, value_enum, default_value_t = LorenzSequences::Details)]
    pub sequences: LorenzSequences,
    /// SGLD's step size for D-BNN (SGLD) (the thesis's MOCAP setting is 10⁻⁵; on Lorenz
    /// one chain in four diverged there).
    #[arg(long, default_value_t = 3e-6)]
    pub sgld_step: f64,
    /// Sampled paths of each test prediction [default: 32].
    #[arg(long, default_value_t = 32)]
    pub test_samples: usize,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl DynamicsOptions {
    fn repetitions(&self) -> usize {
        self.repetitions.unwrap_or(self.exp.quick_or(2, 10))
    }
    fn epochs(&self) -> usize {
        self.epochs.unwrap_or(self.exp.quick_or(2, 100))
    }
    fn hidden(&self) -> usize {
        self.hidden.unwrap_or(self.exp.quick_or(8, 100))
    }
    fn rows(&self) -> Vec<Knowledge> {
        ROWS.iter()
            .filter(|r| self.knowledge.is_empty() || self.knowledge.iter().any(|k| k == r.key))
            .copied()
            .collect()
    }
    fn objectives(&self) -> Vec<&'static str> {
        OBJECTIVES
            .iter()
            .map(|o| o.0)
            .filter(|k| self.objectives.is_empty() || self.objectives.iter().any(|o| o == k))
            .collect()
    }

    /// Checks every choice before any work.
    fn check(&self) -> Result<(), String> {
        for k in &self.knowledge {
            if !ROWS.iter().any(|r| r.key == k) {
                let keys: Vec<&str> = ROWS.iter().map(|r| r.key).collect();
                return Err(format!("--knowledge {k:?}: use one of {keys:?}"));
            }
        }
        for o in &self.objectives {
            if !OBJECTIVES.iter().any(|(k, _)| k == o) {
                let keys: Vec<&str> = OBJECTIVES.iter().map(|o| o.0).collect();
                return Err(format!("--objective {o:?}: use one of {keys:?}"));
            }
        }
        for (flag, v) in [
            ("--repetitions", self.repetitions()),
            ("--epochs", self.epochs()),
            ("--samples", self.samples),
            ("--batch-size", self.batch_size),
            ("--hidden", self.hidden()),
            ("--test-samples", self.test_samples),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(format!("--lr {}: a finite positive learning rate", self.lr));
        }
        if !(self.sgld_step.is_finite() && self.sgld_step > 0.0) {
            return Err(format!(
                "--sgld-step {}: a finite positive step",
                self.sgld_step
            ));
        }
        Ok(())
    }
}

/// One repetition of one row under one objective.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// The row's key.
    pub knowledge: String,
    /// The objective's key.
    pub objective: String,
    /// The repetition.
    pub repetition: usize,
}

/// What one task measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The row's key.
    pub knowledge: String,
    /// The objective's key.
    pub objective: String,
    /// The repetition.
    pub repetition: usize,
    /// Test MSE of the sampled paths' mean against the test sequences (all times after the
    /// start, all coordinates); `None` when the paths diverged (a non-finite state).
    pub test_mse: Option<f64>,
    /// Mean predictive log-likelihood per coordinate and time of the test sequences under a
    /// Gaussian of the sampled paths' mean and variance (`None`: diverged).
    #[serde(default)]
    pub test_ll: Option<f64>,
    /// Theorem 1's bound on the expected risk after training (SDE methods; `None` otherwise).
    #[serde(default)]
    pub risk_bound: Option<f64>,
    /// The last epoch's mean loss (`None` for row v, which trains nothing).
    pub final_loss: Option<f64>,
    /// Seconds of training.
    pub train_seconds: f64,
}

impl Row {
    /// The row of `task` before anything is measured (a diverged row as it stands).
    fn of(task: &Task) -> Self {
        Self {
            knowledge: task.knowledge.clone(),
            objective: task.objective.clone(),
            repetition: task.repetition,
            test_mse: None,
            test_ll: None,
            risk_bound: None,
            final_loss: None,
            train_seconds: 0.0,
        }
    }
}

/// The known equations of a row with their noisy parameters: `γ∘r(h)` on `[S, N, 3]`.
struct KnownLorenz {
    known: [bool; 3],
    zeta: f64,
    kappa: f64,
    rho: f64,
}

impl PriorDrift for KnownLorenz {
    fn drift(&self, h: Tensor<3>, _t: f64) -> Tensor<3> {
        let [s, n, _] = h.dims();
        let at = |j: usize| h.clone().narrow(2, j, 1);
        let (x, y, z) = (at(0), at(1), at(2));
        let zero = || Tensor::<3>::zeros([s, n, 1], &h.device());
        let parts = vec![
            match self.known[0] {
                true => (y.clone() - x.clone()) * self.zeta,
                false => zero(),
            },
            match self.known[1] {
                true => x.clone() * (z.clone().neg() + self.kappa) - y.clone(),
                false => zero(),
            },
            match self.known[2] {
                true => x * y - z * self.rho,
                false => zero(),
            },
        ];
        Tensor::cat(parts, 2)
    }
}

/// Sequences as `[N, len, 3]` on a grid starting at 0.
fn observed(paths: &[SdePath], device: &Device) -> SdeData {
    let len = paths[0].len();
    let values: Vec<f64> = paths.iter().flat_map(|p| p.states.clone()).collect();
    let t0 = paths[0].times[0];
    SdeData {
        times: paths[0].times.iter().map(|t| t - t0).collect(),
        observed: matrix(&values, 3, device).reshape([paths.len(), len, 3]),
    }
}

/// The harness.
pub struct DynamicsHarness<'a> {
    options: &'a DynamicsOptions,
}

impl DynamicsHarness<'_> {
    fn run_one(&self, task: &Task) -> Result<Row, Box<dyn Error>> {
        let o = self.options;
        let knowledge = runner::of_task(&ROWS, "knowledge", |r| r.key == task.knowledge);
        let rep = task.repetition as u64;
        // Data and noisy parameters depend on the repetition only: every row and objective
        // of a repetition sees the same attractor.
        let data_seed = experiment::derive(o.exp.seed, &["dynamics", "data"], rep);
        let system = Lorenz::default();
        let (train_shape, test_shape) = o.sequences.shape();
        let (train, test) = system.splits(data_seed, train_shape, test_shape);
        let mut noise = bnn_burn::host::HostNormals::new(data_seed ^ 0x5eed);
        let prior = KnownLorenz {
            known: knowledge.known,
            zeta: system.zeta + noise.next(),
            kappa: system.kappa + noise.next(),
            rho: system.rho + noise.next(),
        };
        let seed = device_seed(task, o);
        let device = training_device();
        device.seed(seed);
        let diffusion = vec![system.diffusion; 3];
        let any_known = knowledge.known.iter().any(|k| *k);
        let started = Instant::now();
        if is_forecaster(&task.objective) {
            return forecaster_row(task, &train, &test, o, started);
        }
        if task.objective == "d-bnn-sgld" {
            let known = any_known.then_some(&prior);
            return sgld_row(task, (&train, &test), &diffusion, known, o, started);
        }
        let (net, final_loss, bound) = if knowledge.learned {
            let net = MlpConfig::new(4, vec![o.hidden(); o.layers], 3)
                .with_activation(Activation::Softplus)
                .init_regressor(&device)?;
            let objective = match task.objective.as_str() {
                "e-bayes" => SdeObjective::EBayes,
                "d-bnn-vi" => SdeObjective::Elbo,
                _ => SdeObjective::EPacBayes { delta: DELTA },
            };
            let config = SdeFitConfig::new(o.epochs())
                .with_batch_size(o.batch_size)
                .with_samples(o.samples)
                .with_learning_rate(o.lr)
                .with_objective(objective)
                .with_seed(seed);
            let known: Option<&dyn PriorDrift> = any_known.then_some(&prior as &dyn PriorDrift);
            let (net, report) = fit(net, &diffusion, known, &observed(&train, &device), &config)?;
            let bound = Some(report.risk_bound).filter(|b| b.is_finite());
            (net, report.epoch_losses.last().copied(), bound)
        } else {
            let zero = MlpConfig::new(4, vec![], 3)
                .with_weights(WeightConfig::of(PosteriorConfig::point()).with_initializer(
                    bnn_burn::layers::MeanInit::Burn(burn::nn::Initializer::Zeros),
                ))
                .init_regressor(&device)?;
            (zero, None, None)
        };
        let train_seconds = started.elapsed().as_secs_f64();
        let (test_mse, test_ll) = sde_scores(
            &net.valid(),
            &diffusion,
            any_known.then_some(&prior),
            &test,
            o,
        );
        Ok(Row {
            test_mse,
            test_ll,
            risk_bound: bound,
            final_loss,
            train_seconds,
            ..Row::of(task)
        })
    }
}

/// The SDE with the row's known drift, if any.
fn hybrid<'a, L: Likelihood>(
    sde: NeuralSde<'a, L>,
    prior: Option<&'a KnownLorenz>,
) -> NeuralSde<'a, L> {
    match prior {
        Some(p) => sde.with_prior(p),
        None => sde,
    }
}

/// D-BNN (SGLD)'s row: SGLD on the drift network's weights ([`SdeTarget`]) from its initial
/// values, a burn-in of as many steps as the SDE methods' epochs take, then `test_samples`
/// draws [`SGLD_THIN`] steps apart; one test path per draw. A state that stops being finite
/// is a diverged row.
fn sgld_row(
    task: &Task,
    (train, test): (&[SdePath], &[SdePath]),
    diffusion: &[f64],
    prior: Option<&KnownLorenz>,
    o: &DynamicsOptions,
    started: Instant,
) -> Result<Row, Box<dyn Error>> {
    let device = training_device();
    let net = MlpConfig::new(4, vec![o.hidden(); o.layers], 3)
        .with_activation(Activation::Softplus)
        .with_weights(WeightConfig::of(PosteriorConfig::point()))
        .init_regressor(&device)?;
    let target = SdeTarget::new(
        hybrid(NeuralSde::new(&net, diffusion.to_vec()), prior),
        observed(train, &device),
        o.samples,
        1.0,
    );
    let config = SgMcmcConfig::new(o.sgld_step)
        .with_batch_size(o.batch_size)
        .with_burn_in(o.epochs() * train.len().div_ceil(o.batch_size))
        .with_draws(o.test_samples)
        .with_thin(SGLD_THIN)
        .with_seed(device_seed(task, o));
    let init: Vec<f64> = to_vec(FlatLayout::flatten(net.mean_draw()));
    let mut row = Row::of(task);
    let run = match sg_sample(&target, &init, &config) {
        Ok(run) => run,
        Err(SgMcmcError::NotFinite { .. }) => {
            row.train_seconds = started.elapsed().as_secs_f64();
            return Ok(row);
        }
        Err(e) => return Err(e.into()),
    };
    row.train_seconds = started.elapsed().as_secs_f64();
    row.final_loss = run.log_density.last().map(|lp| -lp);
    let plain = device.inner();
    let net = net.valid();
    let data = observed(test, &plain);
    let [n, len, d] = data.observed.dims();
    let flat: Vec<f64> = run.draws.concat();
    let theta = matrix(&flat, init.len(), &plain);
    let tester = SdeTarget::new(
        hybrid(NeuralSde::new(&net, diffusion.to_vec()), prior),
        data.clone(),
        1,
        1.0,
    );
    let h0 = data.observed.clone().narrow(1, 0, 1).reshape([n, d]);
    let paths = tester.paths(theta, h0, &data.times);
    let truth = data.observed.narrow(1, 1, len - 1);
    (row.test_mse, row.test_ll) = path_scores(paths.states.narrow(2, 1, len - 1), truth);
    Ok(row)
}

/// A recurrent forecaster's row: trained on the next-step windows of the training sequences
/// (1 to 49 steps, standardised), then from each test sequence's first observation
/// `test_samples` forecasts that feed back a draw of the next state (mean plus the learned
/// noise), scored as the SDE's paths.
fn forecaster_row(
    task: &Task,
    train: &[SdePath],
    test: &[SdePath],
    o: &DynamicsOptions,
    started: Instant,
) -> Result<Row, Box<dyn Error>> {
    let device = training_device();
    device.seed(device_seed(task, o));
    let scale = Scale::of(train);
    let scaled: Vec<SdePath> = train.iter().map(|p| scale.apply(p)).collect();
    let max_len = train[0].len() - 1;
    let windows = SequenceData::next_step(&scaled, 1, max_len, 1)?;
    let batch = windows.batch(&device);
    let data = (
        Sequences {
            values: batch.values,
            mask: batch.mask,
        },
        batch.targets,
    );
    let p = if task.objective == "vlstm" {
        LSTM_DROPOUT
    } else {
        0.0
    };
    let net = RecurrentConfig::new(3, o.exp.quick_or(8, LSTM_UNITS), 3)
        .with_cell(Cell::Lstm)
        .with_weights(WeightConfig::of(PosteriorConfig::point()))
        .with_input_dropout(p)
        .with_hidden_dropout(p)
        .init_regressor(&device)?;
    let config = TrainConfig::new(o.epochs())
        .with_batch_size(32)
        .with_learning_rate(o.lr)
        .with_seed(device_seed(task, o));
    let (net, report) = train_net(net, data, &config)?;
    let train_seconds = started.elapsed().as_secs_f64();
    let net = net.valid();
    let plain = device.inner();
    let n = test.len();
    let len = test[0].len();
    let starts: Vec<f64> = test
        .iter()
        .flat_map(|p| scale.apply(p).state(0).to_vec())
        .collect();
    let context = Sequences::full(matrix(&starts, 3, &plain).reshape([n, 1, 3]));
    let noise_std = net.likelihood.noise_std().reshape([1, 1, 3]);
    let mut steps = Vec::with_capacity(len - 1);
    net.forecast_with(context, len - 1, o.test_samples, |mean| {
        let eps = Tensor::<3>::random(mean.dims(), Distribution::Normal(0.0, 1.0), &plain);
        let next = mean + eps * noise_std.clone();
        steps.push(next.clone());
        next
    });
    let paths = scale.undo(Tensor::stack::<4>(steps, 2));
    let truth = observed(test, &plain).observed.narrow(1, 1, len - 1);
    let (test_mse, test_ll) = path_scores(paths, truth);
    Ok(Row {
        test_mse,
        test_ll,
        final_loss: report.history.last().map(|e| e.loss),
        train_seconds,
        ..Row::of(task)
    })
}

/// The seed of a task's device generator.
fn device_seed(task: &Task, o: &DynamicsOptions) -> u64 {
    experiment::derive(
        o.exp.seed,
        &["dynamics", &task.knowledge, &task.objective],
        task.repetition as u64,
    )
}

/// Per-coordinate standardisation by the training sequences' mean and std.
struct Scale {
    mean: [f64; 3],
    std: [f64; 3],
}

impl Scale {
    fn of(paths: &[SdePath]) -> Self {
        let mut columns: [Vec<f64>; 3] = Default::default();
        for p in paths {
            for (i, v) in p.states.iter().enumerate() {
                columns[i % 3].push(*v);
            }
        }
        let stats = columns.map(|c| mean_and_std(&c));
        Self {
            mean: stats.map(|s| s.0),
            std: stats.map(|s| s.1),
        }
    }

    fn apply(&self, p: &SdePath) -> SdePath {
        SdePath {
            states: p
                .states
                .iter()
                .enumerate()
                .map(|(i, v)| (v - self.mean[i % 3]) / self.std[i % 3])
                .collect(),
            ..p.clone()
        }
    }

    /// Standardised `[.., 3]` back to the data's units.
    fn undo(&self, x: Tensor<4>) -> Tensor<4> {
        let device = x.device();
        let std = Tensor::<1>::from_floats(self.std, &device).reshape([1, 1, 1, 3]);
        let mean = Tensor::<1>::from_floats(self.mean, &device).reshape([1, 1, 1, 3]);
        x * std + mean
    }
}

/// Mean and (population) standard deviation.
fn mean_and_std(xs: &[f64]) -> (f64, f64) {
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64;
    (m, var.sqrt().max(1e-12))
}

/// Test MSE of the paths' mean and the mean Gaussian predictive log-likelihood (the paths'
/// mean and variance per sequence, time and coordinate) of sampled paths `[S, N, K, D]`
/// against `truth [N, K, D]`; `(None, None)` when a path is not finite.
fn path_scores(paths: Tensor<4>, truth: Tensor<3>) -> (Option<f64>, Option<f64>) {
    let [s, n, k, d] = paths.dims();
    let mean = paths.clone().mean_dim(0).reshape([n, k, d]);
    let var = (paths - mean.clone().unsqueeze_dim::<4>(0))
        .square()
        .sum_dim(0)
        .reshape([n, k, d])
        / (s.max(2) - 1) as f64;
    let var = var.clamp_min(1e-6);
    let err = (mean - truth).square();
    let mse = to_vec(err.clone().mean())[0];
    let ll = (err / var.clone() + (var * (2.0 * std::f64::consts::PI)).log()) * -0.5;
    let ll = to_vec(ll.mean())[0];
    match mse.is_finite() && ll.is_finite() {
        true => (Some(mse), Some(ll)),
        false => (None, None),
    }
}

/// The test scores ([`path_scores`]) of `test_samples` paths from each test sequence's first
/// observation against the sequence at every later time and coordinate.
fn sde_scores(
    net: &Regressor,
    diffusion: &[f64],
    prior: Option<&KnownLorenz>,
    test: &[SdePath],
    o: &DynamicsOptions,
) -> (Option<f64>, Option<f64>) {
    let device = net.devices()[0].clone();
    let data = observed(test, &device);
    let [n, len, d] = data.observed.dims();
    let sde = hybrid(NeuralSde::new(net, diffusion.to_vec()), prior);
    let h0 = data.observed.clone().narrow(1, 0, 1).reshape([n, d]);
    let paths = sde.paths(h0, &data.times, o.test_samples);
    let truth = data.observed.narrow(1, 1, len - 1);
    path_scores(paths.states.narrow(2, 1, len - 1), truth)
}

impl Harness for DynamicsHarness<'_> {
    type Task = Task;
    type Row = Row;

    const NAME: &'static str = "dynamics";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<Task> {
        let o = self.options;
        let mut tasks = Vec::new();
        for row in o.rows() {
            for objective in o.objectives() {
                // Row v trains nothing: one objective stands for all; forecasters know no
                // equations: the row none only.
                if (!row.learned && objective != OBJECTIVES[0].0)
                    || (is_forecaster(objective) && row.known.iter().any(|k| *k))
                {
                    continue;
                }
                for repetition in 0..o.repetitions() {
                    tasks.push(Task {
                        knowledge: row.key.to_string(),
                        objective: objective.to_string(),
                        repetition,
                    });
                }
            }
        }
        tasks
    }

    fn task_id(&self, t: &Task) -> String {
        format!("{} / {} / {}", t.knowledge, t.objective, t.repetition)
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        let mut key = serde_json::json!({
            "seed": o.exp.seed,
            "epochs": o.epochs(),
            "samples": o.samples,
            "batch_size": o.batch_size,
            "lr": o.lr,
            "layers": o.layers,
            "hidden": o.hidden(),
            "test_samples": o.test_samples,
        });
        // The record's key from before these options.
        if o.sequences != LorenzSequences::Details {
            key["sequences"] = serde_json::to_value(o.sequences).expect("an enum");
        }
        if o.sgld_step != 3e-6 {
            key["sgld_step"] = o.sgld_step.into();
        }
        key
    }

    fn task_key(&self, _: &Task) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, task: &Task, _: &TaskContext) -> Result<Row, Box<dyn Error>> {
        self.run_one(task)
    }

    fn describe(&self, f: &Finished<Task, Row>) -> String {
        let r = &f.row;
        let score = match (r.test_mse, r.test_ll) {
            (Some(m), Some(l)) => format!("test MSE {m:.2}, LL {l:.2}"),
            _ => "diverged".to_string(),
        };
        let bound = r
            .risk_bound
            .map_or(String::new(), |b| format!(", bound {b:.2}"));
        format!(
            "[dynamics] {} / {} / {}: {score}{bound}; {:.0} s",
            r.knowledge, r.objective, r.repetition, r.train_seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let rows = run.rows();
        let md = markdown(&rows, self.options, run.wall_seconds);
        run.write_report(self.options, serde_json::json!({}), &md)
    }
}

/// Table 6.1: per row and method the test MSE (mean ± s.e. over the repetitions whose paths
/// stayed finite, and how many diverged) beside the thesis's (± s.e. over 50) and their
/// difference in combined standard errors (positive: ours lower, better); the test
/// log-likelihood and Theorem 1's bound (mean ± s.e.) beside it.
pub fn table(rows: &[Row]) -> String {
    let mut md = String::from(
        "| prior knowledge | method | repetitions | test MSE | test LL | Theorem 1 bound | \
         diverged | thesis MSE | difference (s.e.) |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let summary = |xs: &[f64]| match xs.is_empty() {
        true => ("–".to_string(), f64::NAN, None),
        false => {
            let (m, se) = mean_and_standard_error(xs);
            (crate::uci::fmt_mean_se(m, se, 2), m, se)
        }
    };
    for k in &ROWS {
        for (c, (key, name)) in OBJECTIVES.iter().enumerate() {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| r.knowledge == k.key && r.objective == *key)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let mse: Vec<f64> = mine.iter().filter_map(|r| r.test_mse).collect();
            let ll: Vec<f64> = mine.iter().filter_map(|r| r.test_ll).collect();
            let bound: Vec<f64> = mine.iter().filter_map(|r| r.risk_bound).collect();
            let diverged = mine.len() - mse.len();
            let (score, m, se) = summary(&mse);
            let (published, diff) = match k.published.get(c).copied().flatten() {
                Some((pm, pse)) => (
                    format!("{pm:.2} ± {pse:.2}"),
                    se.map_or("–".to_string(), |s| {
                        format!("{:+.1}", (pm - m) / (s * s + pse * pse).sqrt())
                    }),
                ),
                None => ("–".to_string(), "–".to_string()),
            };
            let name = match k.learned {
                true => (*name).to_string(),
                false => "none trained".to_string(),
            };
            md.push_str(&format!(
                "| {} | {name} | {} | {score} | {} | {} | {diverged} | {published} | {diff} |\n",
                k.name,
                mine.len(),
                summary(&ll).0,
                summary(&bound).0,
            ));
        }
    }
    md
}

/// The report.
fn markdown(rows: &[Row], o: &DynamicsOptions, wall: f64) -> String {
    let (train, test) = o.sequences.shape();
    format!(
        "# Neural SDEs on the stochastic Lorenz attractor (Haußmann 2021 Table 6.1)\n\n\
         Each repetition simulates the attractor (2·10⁵ Euler–Maruyama steps of 10⁻⁴, every \
         100th kept; {} training sequences of {} observations, {} test sequences of {}) and \
         draws the known parameters from N(true, 1). The drift network ({} softplus layers of \
         {} on [h, t], mean-field) is trained for {} epochs by Adam at {} on minibatches of {} \
         sequences with {} paths each; the known equations join it as the hybrid drift. D-BNN \
         (VI) trains the same network by the ELBO of its weights; D-BNN (SGLD) samples point \
         weights by SGLD (step {}, a burn-in of as many steps, draws {} steps apart). The LSTMs ({} units, point \
         weights; the variational one with Gal's tied dropout at {}) learn next-step windows \
         of the standardised training sequences for as many epochs and forecast by feeding \
         back draws of the next state. Test MSE: the mean of {} paths (forecasts) from each \
         test sequence's first observation against the sequence; test LL: per coordinate and \
         time, under a Gaussian of the paths' mean and variance; Theorem 1's bound (eq. 6.15, \
         δ = 0.05) after training, above 1 vacuous. The thesis's ± is a standard error over \
         50 repetitions; ours over the repetitions shown.\n\n{}\nWall time {wall:.0} s.\n",
        train.0,
        train.1,
        test.0,
        test.1,
        o.layers,
        o.hidden(),
        o.epochs(),
        o.lr,
        o.batch_size,
        o.samples,
        o.sgld_step,
        SGLD_THIN,
        LSTM_UNITS,
        LSTM_DROPOUT,
        o.test_samples,
        table(rows)
    )
}

/// Runs the grid.
///
/// # Errors
/// Bad options (before any work), a fit's error, a report that cannot be written.
pub fn run(options: &DynamicsOptions) -> Result<Vec<Row>, Box<dyn Error>> {
    options.check()?;
    let harness = DynamicsHarness { options };
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
