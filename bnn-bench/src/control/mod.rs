//! `bnn-bench control`: Depeweg (2019) Table 7.1's wet-chicken and Industrial Benchmark rows.
//! Each model column learns the system's change from random exploration, a policy is searched
//! by roll-outs through it (Alg. 1, [`bnn_burn::rollout::policy_search_with`]) and scored on
//! the true system. The columns: the early-stopped MLP with its validation error as noise,
//! the 25-member ensemble (a member per roll-out), the BNN (α = 1, no latent) and BNN+LV by
//! VB, α = ½, α = 1.

pub mod industrial;
pub mod risk;
#[cfg(test)]
mod tests;

use crate::experiment;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use bnn_burn::gp::RandomFeatureGpConfig;
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::layers::WeightConfig;
use bnn_burn::likelihood::{GaussianLikelihoodConfig, NoiseFit};
use bnn_burn::metrics::{mean, mean_and_standard_error};
use bnn_burn::nets::{BnnLvConfig, LatentRegressor, MlpConfig, Regressor};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::posterior::PosteriorConfig;
use bnn_burn::posthoc::Ensemble;
use bnn_burn::recipes::depeweg_weights;
use bnn_burn::rollout::{
    Dynamics, DynamicsDraw, Policy, PolicyConfig, PolicySearchConfig, PolicySearchReport,
    Standardised, policy_search_with,
};
use bnn_burn::train::{EarlyStoppingConfig, TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::dynamics::{RiverGrid, WetChicken};
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use std::error::Error;
use std::time::Instant;

/// A model column of Table 7.1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Column {
    /// The table's name.
    pub name: &'static str,
    /// Short name for flags and ids.
    pub key: &'static str,
    /// The thesis's wet-chicken average reward and its standard error (5 runs).
    pub published: (f64, f64),
    /// The thesis's Industrial Benchmark average reward and its standard error (5 runs).
    pub published_ib: (f64, f64),
}

/// The columns, in the table's order.
pub const COLUMNS: [Column; 7] = [
    Column {
        name: "MLP",
        key: "mlp",
        published: (-2.71, 0.09),
        published_ib: (-183.5, 4.1),
    },
    Column {
        name: "MLP Ens.",
        key: "ensemble",
        published: (-2.64, 0.06),
        published_ib: (-184.5, 7.4),
    },
    Column {
        name: "BNN",
        key: "bnn",
        published: (-2.88, 0.06),
        published_ib: (-177.0, 3.7),
    },
    Column {
        name: "BNN+LV VB",
        key: "vb",
        published: (-2.67, 0.10),
        published_ib: (-180.2, 0.6),
    },
    Column {
        name: "BNN+LV α=0.5",
        key: "alpha-0.5",
        published: (-2.37, 0.01),
        published_ib: (-174.2, 1.1),
    },
    Column {
        name: "BNN+LV α=1",
        key: "alpha-1",
        published: (-2.42, 0.01),
        published_ib: (-171.1, 2.1),
    },
    Column {
        name: "GP",
        key: "gp",
        published: (-3.05, 0.06),
        published_ib: (-285.2, 20.5),
    },
];

/// The system of a `control` run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
pub enum Benchmark {
    /// Wet-chicken (§4.3.1): Table 7.1's first row.
    WetChicken,
    /// The Industrial Benchmark (§4.3.2): Table 7.1's second row.
    Industrial,
}
/// Where wet-chicken's random transitions start (§7.1.4 says "random state transitions").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
pub enum WetData {
    /// One trajectory from the origin under random actions ([`WetChicken::random_transitions`]).
    Trajectory,
    /// Independent states uniform on the river ([`WetChicken::uniform_transitions`]).
    UniformStates,
}
/// Ensemble members (§7.1.3: 25).
const MEMBERS: usize = 25;
/// The members' and the MLP's validation share and patience.
const VALIDATION: f64 = 0.1;
const PATIENCE: usize = 50;
/// The model's noise variance Σ (§7.1.4: fixed at 10⁻⁵ for BNN+LV).
const SIGMA: f64 = 1e-5;

/// Options of one `control` run. Defaults are the thesis's settings for the chosen benchmark
/// (wet-chicken's or, in brackets, the Industrial Benchmark's).
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct ControlOptions {
    /// The system: wet-chicken or industrial.
    #[arg(long, value_enum, default_value_t = Benchmark::WetChicken)]
    pub benchmark: Benchmark,
    /// Model columns (mlp, ensemble, bnn, vb, alpha-0.5, alpha-1, gp); repeatable [default: all].
    #[arg(long = "column")]
    pub columns: Vec<String>,
    /// Runs per column, each on its own transitions [default: 5; 2 with --quick].
    #[arg(long)]
    pub runs: Option<usize>,
    /// Wet-chicken: random transitions the models learn from (§7.1.4: 2 500).
    #[arg(long, default_value_t = 2500)]
    pub transitions: usize,
    /// Wet-chicken: where the random transitions start: along one trajectory from the origin,
    /// or from states uniform on the river.
    #[arg(long, value_enum, default_value_t = WetData::Trajectory)]
    pub wet_data: WetData,
    /// Industrial Benchmark: random trajectories per setpoint (§7.1.4: 7) [default: 7; 1 with
    /// --quick].
    #[arg(long)]
    pub trajectories: Option<usize>,
    /// Industrial Benchmark: steps per trajectory (§7.1.4: 1 000) [default: 1000; 60 with
    /// --quick].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Model training epochs [default: 1500 (3000, the thesis code's); 30 (3) with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Adam's learning rate of the models.
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Joint draws per model training step (K; the thesis code: 25 on CPUs, 50 for IB)
    /// [default: 25].
    #[arg(long, default_value_t = 25)]
    pub train_samples: usize,
    /// Policy-search epochs [default: 100 (750); 2 (1) with --quick].
    #[arg(long)]
    pub policy_epochs: Option<usize>,
    /// Start states per policy step [default: 10 (25)].
    #[arg(long)]
    pub policy_batch: Option<usize>,
    /// Industrial Benchmark: start states drawn from the data for the search; an epoch is
    /// this over --policy-batch steps (the thesis code: 100 minibatches of 25) [default: 2500].
    #[arg(long, default_value_t = 2500)]
    pub policy_starts: usize,
    /// Adam's learning rate of the policy [default: 1e-5 (1e-4)].
    #[arg(long)]
    pub policy_lr: Option<f64>,
    /// Roll-out horizon T [default: 5 (75)].
    #[arg(long)]
    pub horizon: Option<usize>,
    /// Weight draws K per policy step [default: 20 (25)].
    #[arg(long)]
    pub samples: Option<usize>,
    /// Evaluation runs: wet-chicken canoeists from the origin [default: 1000], or Industrial
    /// Benchmarks per setpoint after a random warm-up [default: 25].
    #[arg(long)]
    pub eval_runs: Option<usize>,
    /// Steps of each evaluation run [default: 200 (100)].
    #[arg(long)]
    pub eval_steps: Option<usize>,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl ControlOptions {
    fn ib(&self) -> bool {
        self.benchmark == Benchmark::Industrial
    }
    /// Wet-chicken's value or the Industrial Benchmark's.
    fn by<T>(&self, wet: T, ib: T) -> T {
        if self.ib() { ib } else { wet }
    }
    fn runs(&self) -> usize {
        self.runs.unwrap_or(self.exp.quick_or(2, 5))
    }
    fn trajectories(&self) -> usize {
        self.trajectories.unwrap_or(self.exp.quick_or(1, 7))
    }
    fn steps(&self) -> usize {
        self.steps.unwrap_or(self.exp.quick_or(60, 1000))
    }
    fn epochs(&self) -> usize {
        self.epochs
            .unwrap_or(self.by(self.exp.quick_or(30, 1500), self.exp.quick_or(3, 3000)))
    }
    fn policy_epochs(&self) -> usize {
        self.policy_epochs
            .unwrap_or(self.by(self.exp.quick_or(2, 100), self.exp.quick_or(1, 750)))
    }
    fn policy_batch(&self) -> usize {
        self.policy_batch.unwrap_or(self.by(10, 25))
    }
    fn policy_lr(&self) -> f64 {
        self.policy_lr.unwrap_or(self.by(1e-5, 1e-4))
    }
    fn horizon(&self) -> usize {
        self.horizon.unwrap_or(self.by(5, 75))
    }
    fn samples(&self) -> usize {
        self.samples.unwrap_or(self.by(20, 25))
    }
    fn eval_runs(&self) -> usize {
        self.eval_runs.unwrap_or(self.by(1000, 25))
    }
    fn eval_steps(&self) -> usize {
        self.eval_steps.unwrap_or(self.by(200, 100))
    }
    fn columns(&self) -> Vec<Column> {
        match self.columns.is_empty() {
            true => COLUMNS.to_vec(),
            false => COLUMNS
                .iter()
                .filter(|c| self.columns.iter().any(|k| k == c.key))
                .copied()
                .collect(),
        }
    }

    /// Checks every choice before any work.
    fn check(&self) -> Result<(), String> {
        for c in &self.columns {
            if !COLUMNS.iter().any(|k| k.key == c) {
                let keys: Vec<&str> = COLUMNS.iter().map(|k| k.key).collect();
                return Err(format!("--column {c:?}: use one of {keys:?}"));
            }
        }
        for (flag, v) in [
            ("--runs", self.runs()),
            ("--epochs", self.epochs()),
            ("--train-samples", self.train_samples),
            ("--policy-epochs", self.policy_epochs()),
            ("--policy-batch", self.policy_batch()),
            ("--policy-starts", self.policy_starts),
            ("--horizon", self.horizon()),
            ("--samples", self.samples()),
            ("--eval-runs", self.eval_runs()),
            ("--eval-steps", self.eval_steps()),
            ("--trajectories", self.trajectories()),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if self.steps() <= industrial::WINDOW {
            return Err(format!(
                "--steps {}: more than the time embedding's window of {}",
                self.steps(),
                industrial::WINDOW
            ));
        }
        if self.transitions < 50 {
            return Err(format!(
                "--transitions {}: at least 50 (a validation split of 10 % is held out)",
                self.transitions
            ));
        }
        for (flag, v) in [("--lr", self.lr), ("--policy-lr", self.policy_lr())] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{flag} {v}: a finite positive learning rate"));
            }
        }
        Ok(())
    }
}

/// One column's run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// The column's key.
    pub column: String,
    /// The run (its own transitions and seeds).
    pub run: usize,
}

/// What one run measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The column's key.
    pub column: String,
    /// The run.
    pub run: usize,
    /// The policy's average reward per step on the true river.
    pub reward: f64,
    /// The untrained policy's, same canoeists and turbulence.
    pub reward_before: f64,
    /// Random paddling's, same canoeists and turbulence.
    pub reward_random: f64,
    /// The mean roll-out cost `Σ_t c_t` in the model of the first and last policy epoch.
    pub model_cost: (f64, f64),
    /// Policy steps skipped by the NaN guard.
    pub skipped: usize,
    /// Seconds of the model's training.
    pub train_seconds: f64,
    /// Seconds of the policy search.
    pub search_seconds: f64,
}

/// The random transitions of run `seed`: inputs `[s, a]` (4 columns), changes `Δs` (2).
fn transitions(
    world: &WetChicken,
    n: usize,
    kind: WetData,
    seed: u64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let data = match kind {
        WetData::Trajectory => world.random_transitions(n, seed),
        WetData::UniformStates => world.uniform_transitions(n, seed),
    };
    let x = data
        .states
        .iter()
        .zip(&data.actions)
        .flat_map(|(s, a)| [s[0], s[1], a[0], a[1]])
        .collect();
    let delta = data
        .states
        .iter()
        .zip(&data.next_states)
        .flat_map(|(s, t)| [t[0] - s[0], t[1] - s[1]])
        .collect();
    let starts = data.states.iter().flatten().copied().collect();
    (x, delta, starts)
}

/// A trained model of any column.
enum Model {
    Latent(Box<LatentRegressor>),
    Net(Box<Regressor>),
    Members(Ensemble<Regressor>),
}

/// A network's widths: inputs, hidden layers, outputs.
struct Arch {
    d_in: usize,
    hidden: Vec<usize>,
    d_out: usize,
}

impl Arch {
    /// Wet-chicken's model: `[s, a]` (4) → 2 × 20 → `Δs` (2).
    fn wet_chicken() -> Self {
        Self {
            d_in: 4,
            hidden: vec![20, 20],
            d_out: 2,
        }
    }

    /// The Industrial Benchmark's: the embedding (61) → 2 × 75 → the cost's change (1).
    fn industrial() -> Self {
        Self {
            d_in: industrial::D_STATE,
            hidden: vec![75, 75],
            d_out: 1,
        }
    }

    fn mlp(&self) -> MlpConfig {
        MlpConfig::new(self.d_in, self.hidden.clone(), self.d_out)
    }
}

/// Fixed Gaussian noise of scale `std` on `d` outputs.
fn fixed_noise(
    std: f64,
    d: usize,
    device: &Device,
) -> Result<bnn_burn::likelihood::GaussianLikelihood, bnn_burn::ConfigError> {
    GaussianLikelihoodConfig::new()
        .with_d_output(d)
        .with_noise_std(std)
        .with_fit(NoiseFit::Fixed)
        .init(device)
}

/// An early-stopped point MLP whose noise is its validation error (eq. 7.26;
/// [`crate::depeweg::early_stopped_mlp`]).
fn early_stopped_mlp(
    arch: &Arch,
    data: (Tensor<2>, Tensor<2>),
    o: &ControlOptions,
    seed: u64,
) -> Result<Regressor, Box<dyn Error>> {
    let n = data.0.dims()[0];
    let config = TrainConfig::new(o.epochs())
        .with_batch_size(n.div_ceil(25))
        .with_learning_rate(o.lr)
        .with_seed(seed)
        .with_early_stopping(Some(
            EarlyStoppingConfig::new()
                .with_validation_fraction(VALIDATION)
                .with_patience(PATIENCE),
        ))
        .with_progress(false);
    let mlp = arch
        .mlp()
        .with_weights(WeightConfig::of(PosteriorConfig::point()));
    Ok(crate::depeweg::early_stopped_mlp(&mlp, data, config)?.0)
}

/// Trains the column's model on `(x, Δ)`. BNN+LV's noise is fixed at Σ on wet-chicken
/// (§7.1.4) and learned on the Industrial Benchmark (as in chapter 5).
fn train(
    column: &Column,
    arch: &Arch,
    x: &[f64],
    delta: &[f64],
    o: &ControlOptions,
    seed: u64,
) -> Result<Model, Box<dyn Error>> {
    let device = training_device();
    let n = x.len() / arch.d_in;
    let data = (
        matrix(x, arch.d_in, &device),
        matrix(delta, arch.d_out, &device),
    );
    let config = TrainConfig::new(o.epochs())
        .with_batch_size(n.div_ceil(25))
        .with_learning_rate(o.lr)
        .with_train_samples(o.train_samples)
        .with_seed(seed)
        .with_progress(false);
    let body = arch.mlp().with_weights(depeweg_weights(1.0));
    Ok(match column.key {
        "mlp" => Model::Net(Box::new(early_stopped_mlp(arch, data, o, seed)?)),
        "ensemble" => Model::Members(
            Ensemble::train(MEMBERS, |m| {
                early_stopped_mlp(
                    arch,
                    data.clone(),
                    o,
                    experiment::derive(seed, &["member"], m as u64),
                )
            })
            .map_err(|(m, e)| format!("ensemble member {m}: {e}"))?,
        ),
        // An RBF GP by random features, its hyperparameters by the evidence (one lengthscale
        // per input on wet-chicken's four, one for all on the IB's embedding).
        "gp" => {
            let gp = RandomFeatureGpConfig::new()
                .with_ard(arch.d_in <= 8)
                .with_seed(seed)
                .fit(data.0, data.1)?;
            Model::Net(Box::new(gp.model))
        }
        "bnn" => {
            let build = |d: &Device| body.init_regressor(d);
            let (net, _) = Trainer::new(config)
                .with_objective(AlphaConfig::new().with_alpha(1.0).init()?)
                .build_and_fit(build, data)?;
            Model::Net(Box::new(net))
        }
        key => {
            let alpha = match key {
                "vb" => 0.0,
                "alpha-0.5" => 0.5,
                _ => 1.0,
            };
            let noise = (!o.ib()).then(|| SIGMA.sqrt());
            Model::Latent(Box::new(train_lv(arch, data, alpha, noise, config)?))
        }
    })
}

/// A BNN+LV of `arch` trained on `(x, Δ)` by black-box α (`alpha = 0`: VB), its noise fixed
/// at `noise_std` or learned (`None`).
/// The BNN+LV of `arch` under the thesis's weight prior.
fn lv_config(arch: &Arch) -> BnnLvConfig {
    BnnLvConfig::new(arch.mlp().with_weights(depeweg_weights(1.0)))
}

fn train_lv(
    arch: &Arch,
    data: (Tensor<2>, Tensor<2>),
    alpha: f64,
    noise_std: Option<f64>,
    config: TrainConfig,
) -> Result<LatentRegressor, Box<dyn Error>> {
    let n = data.0.dims()[0];
    let lv = lv_config(arch);
    let build = |d: &Device| match noise_std {
        None => lv.init_regressor(n, d),
        Some(std) => lv.init(fixed_noise(std, arch.d_out, d)?, n, d),
    };
    let trainer = Trainer::new(config);
    let trainer = match alpha {
        0.0 => trainer,
        a => trainer.with_objective(AlphaConfig::new().with_alpha(a).init()?),
    };
    Ok(trainer.build_and_fit(build, data)?.0)
}

/// The policy's actions for `states`, on `device`.
fn actions(policy: &Policy, states: &[[f64; 2]], device: &Device) -> Vec<[f64; 2]> {
    let flat: Vec<f64> = states.iter().flatten().copied().collect();
    let a = to_vec(policy.forward(matrix(&flat, 2, device)));
    a.chunks(2).map(|c| [c[0], c[1]]).collect()
}

/// The harness.
pub struct ControlHarness<'a> {
    options: &'a ControlOptions,
    world: WetChicken,
}

/// The policy before and after the search, and the search's report.
type Searched = (Policy, Policy, PolicySearchReport);

impl ControlHarness<'_> {
    /// Alg. 1 through `model` from `starts` by `transition`, the policy's states scaled by
    /// `scale` if given.
    fn search(
        &self,
        model: &impl Dynamics,
        starts: Tensor<2>,
        transition: impl Fn(&DynamicsDraw<'_>, Tensor<3>, Tensor<3>) -> (Tensor<3>, Tensor<2>),
        scale: Option<(Vec<f64>, Vec<f64>)>,
        seed: u64,
    ) -> Result<Searched, Box<dyn Error>> {
        let o = self.options;
        let device = starts.device();
        device.seed(seed);
        let [_, d] = starts.dims();
        let d_a = self.options.by(2, 3);
        let policy = PolicyConfig::new(d, vec![20, 20], vec![-1.0; d_a], vec![1.0; d_a])
            .with_state_scale(scale)
            .init(&device)?;
        let config = PolicySearchConfig::new(o.horizon(), o.policy_epochs())
            .with_batch_size(o.policy_batch())
            .with_samples(o.samples())
            .with_learning_rate(o.policy_lr())
            .with_seed(seed);
        let config = match o.ib() {
            true => config,
            false => config.with_state_box(Some((
                vec![0.0, 0.0],
                vec![self.world.width, self.world.length],
            ))),
        };
        let (trained, report) =
            policy_search_with(model, policy.clone(), starts, transition, &config)?;
        Ok((policy, trained, report))
    }

    /// The average reward of the river's best grid policy ([`WetChicken::optimal_policy`])
    /// under the evaluation of run 0: what a perfect model and search could reach.
    fn optimal_reward(&self) -> f64 {
        let o = self.options;
        let policy = self.world.optimal_policy(&RiverGrid::default());
        let eval_seed = experiment::derive(o.exp.seed, &["control", "eval"], 0);
        self.world
            .average_reward(o.eval_runs(), o.eval_steps(), eval_seed, |s| {
                s.iter().map(|x| policy.act(*x)).collect()
            })
    }

    /// Wet-chicken's run: the model, the search with the cost `l − y` of every next state,
    /// and the scores on the true river (trained, untrained, random paddling).
    fn run_wet_chicken(&self, column: &Column, run: u64) -> Result<Row, Box<dyn Error>> {
        let o = self.options;
        // The data depend on the run only: every column learns from the same transitions.
        let data_seed = experiment::derive(o.exp.seed, &["control", "data"], run);
        let seed = experiment::derive(o.exp.seed, &["control", column.key], run);
        let (x, delta, starts) = transitions(&self.world, o.transitions, o.wet_data, data_seed);
        let started = Instant::now();
        let model = train(column, &Arch::wet_chicken(), &x, &delta, o, seed)?;
        let train_seconds = started.elapsed().as_secs_f64();
        let device = training_device();
        let starts = matrix(&starts, 2, &device);
        let started = Instant::now();
        let search_seed = experiment::derive(o.exp.seed, &["control", "policy"], run);
        let length = self.world.length;
        let step = move |d: &DynamicsDraw<'_>, s: Tensor<3>, a: Tensor<3>| {
            let next = d.step(s, a);
            let [k, b, _] = next.dims();
            let cost = (next.clone().narrow(2, 1, 1).neg() + length).reshape([k, b]);
            (next, cost)
        };
        let (before, after, report) = match &model {
            Model::Latent(m) => self.search(m.as_ref(), starts, step, None, search_seed)?,
            Model::Net(m) => self.search(m.as_ref(), starts, step, None, search_seed)?,
            Model::Members(m) => self.search(m, starts, step, None, search_seed)?,
        };
        let search_seconds = started.elapsed().as_secs_f64();
        let plain = device.inner();
        let eval_seed = experiment::derive(o.exp.seed, &["control", "eval"], run);
        let score = |p: &Policy| {
            let p = p.clone().valid();
            self.world
                .average_reward(o.eval_runs(), o.eval_steps(), eval_seed, |s| {
                    actions(&p, s, &plain)
                })
        };
        let mut rng = bnn_burn::host::HostNormals::new(eval_seed ^ 0x7a);
        let reward_random =
            self.world
                .average_reward(o.eval_runs(), o.eval_steps(), eval_seed, |s| {
                    s.iter()
                        .map(|_| [2.0 * rng.uniform() - 1.0, 2.0 * rng.uniform() - 1.0])
                        .collect()
                });
        let costs = &report.epoch_costs;
        Ok(Row {
            column: column.key.to_string(),
            run: run as usize,
            reward: score(&after),
            reward_before: score(&before),
            reward_random,
            model_cost: (costs[0], costs[costs.len() - 1]),
            skipped: report.skipped,
            train_seconds,
            search_seconds,
        })
    }

    /// The Industrial Benchmark's run: the model on standardised embeddings and changes of
    /// the transformed cost, the search through the embedded transition, and the thesis
    /// code's evaluation (rewards are negated mean costs).
    fn run_industrial(&self, column: &Column, run: u64) -> Result<Row, Box<dyn Error>> {
        use industrial::{D_STATE, column_scales, standardise};
        let o = self.options;
        let data_seed = experiment::derive(o.exp.seed, &["control-ib", "data"], run);
        let seed = experiment::derive(o.exp.seed, &["control-ib", column.key], run);
        let data = industrial::data(
            o.trajectories(),
            o.steps(),
            bnn_datasets::industrial::Exploration::Uniform,
            data_seed,
        )?;
        let x_scale = column_scales(&data.x, D_STATE);
        let y_scale = column_scales(&data.delta, 1);
        let x = standardise(&data.x, &x_scale);
        let delta = standardise(&data.delta, &y_scale);
        let started = Instant::now();
        let model = train(column, &Arch::industrial(), &x, &delta, o, seed)?;
        let train_seconds = started.elapsed().as_secs_f64();
        let device = training_device();
        // The search's start states: a random subset of the data's states.
        let picks = industrial::pick_starts(&data, o.policy_starts, seed ^ 0x5a);
        let s_scale = column_scales(&data.starts, D_STATE);
        let starts = matrix(&picks, D_STATE, &device);
        let started = Instant::now();
        let search_seed = experiment::derive(o.exp.seed, &["control-ib", "policy"], run);
        let step = industrial::transition(data.transform);
        fn scaled<M>(
            model: M,
            x: &(Vec<f64>, Vec<f64>),
            y: &(Vec<f64>, Vec<f64>),
        ) -> Standardised<M> {
            Standardised {
                model,
                x: x.clone(),
                y: y.clone(),
            }
        }
        let scale = Some(s_scale);
        let (before, after, report) = match &model {
            Model::Latent(m) => self.search(
                &scaled(m.as_ref().clone(), &x_scale, &y_scale),
                starts,
                step,
                scale,
                search_seed,
            )?,
            Model::Net(m) => self.search(
                &scaled(m.as_ref().clone(), &x_scale, &y_scale),
                starts,
                step,
                scale,
                search_seed,
            )?,
            Model::Members(m) => self.search(
                &scaled(m.clone(), &x_scale, &y_scale),
                starts,
                step,
                scale,
                search_seed,
            )?,
        };
        let search_seconds = started.elapsed().as_secs_f64();
        let plain = device.inner();
        let eval_seed = experiment::derive(o.exp.seed, &["control-ib", "eval"], run);
        let (runs, steps) = (o.eval_runs(), o.eval_steps());
        let score = |p: &Policy| -> Result<f64, Box<dyn Error>> {
            let p = p.clone().valid();
            let cost = industrial::evaluate(&data.transform, runs, steps, eval_seed, |s| {
                industrial::actions(&p, s, &plain)
            })?;
            Ok(-cost)
        };
        let mut rng = bnn_burn::host::HostNormals::new(eval_seed ^ 0x7a);
        let reward_random = -industrial::evaluate(&data.transform, runs, steps, eval_seed, |s| {
            (0..s.len() / D_STATE)
                .map(|_| [0; 3].map(|_| 2.0 * rng.uniform() - 1.0))
                .collect()
        })?;
        let costs = &report.epoch_costs;
        Ok(Row {
            column: column.key.to_string(),
            run: run as usize,
            reward: score(&after)?,
            reward_before: score(&before)?,
            reward_random,
            model_cost: (costs[0], costs[costs.len() - 1]),
            skipped: report.skipped,
            train_seconds,
            search_seconds,
        })
    }
}

impl Harness for ControlHarness<'_> {
    type Task = Task;
    type Row = Row;

    const NAME: &'static str = "control";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<Task> {
        let runs: Vec<usize> = (0..self.options.runs()).collect();
        runner::grid(&self.options.columns(), &runs, |c, r| Task {
            column: c.key.to_string(),
            run: *r,
        })
    }

    fn task_id(&self, t: &Task) -> String {
        format!("{} / run {}", t.column, t.run)
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        let mut key = serde_json::json!({
            "seed": o.exp.seed,
            "epochs": o.epochs(),
            "lr": o.lr,
            "policy_epochs": o.policy_epochs(),
            "policy_lr": o.policy_lr(),
            "horizon": o.horizon(),
            "samples": o.samples(),
            "eval_runs": o.eval_runs(),
            "eval_steps": o.eval_steps(),
        });
        let extra = match o.benchmark {
            // The wet-chicken record's key, from before the other benchmark and flags.
            Benchmark::WetChicken => {
                let mut e = serde_json::json!({ "transitions": o.transitions });
                if o.train_samples != 25 {
                    e["train_samples"] = o.train_samples.into();
                }
                if o.policy_batch() != 10 {
                    e["policy_batch"] = o.policy_batch().into();
                }
                if o.wet_data != WetData::Trajectory {
                    e["wet_data"] = serde_json::to_value(o.wet_data).expect("an enum");
                }
                e
            }
            Benchmark::Industrial => serde_json::json!({
                "benchmark": "industrial",
                "trajectories": o.trajectories(),
                "steps": o.steps(),
                "train_samples": o.train_samples,
                "policy_batch": o.policy_batch(),
                "policy_starts": o.policy_starts,
            }),
        };
        for (k, v) in extra.as_object().expect("an object") {
            key[k] = v.clone();
        }
        key
    }

    fn task_key(&self, _: &Task) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, task: &Task, _: &TaskContext) -> Result<Row, Box<dyn Error>> {
        let column = runner::of_task(&COLUMNS, "column", |c| c.key == task.column);
        match self.options.benchmark {
            Benchmark::WetChicken => self.run_wet_chicken(column, task.run as u64),
            Benchmark::Industrial => self.run_industrial(column, task.run as u64),
        }
    }

    fn describe(&self, f: &Finished<Task, Row>) -> String {
        let r = &f.row;
        format!(
            "[control] {} / run {}: reward {:.3} (untrained {:.3}, random {:.3}); model cost \
             {:.2} → {:.2}; {:.0} + {:.0} s",
            r.column,
            r.run,
            r.reward,
            r.reward_before,
            r.reward_random,
            r.model_cost.0,
            r.model_cost.1,
            r.train_seconds,
            r.search_seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let rows = run.rows();
        let optimal = (!self.options.ib()).then(|| self.optimal_reward());
        let md = markdown(&rows, self.options, optimal, run.wall_seconds);
        run.write_report(self.options, serde_json::json!({ "optimal": optimal }), &md)
    }
}

/// A row of Table 7.1: per column, the average reward (mean ± s.e. over runs) beside the
/// thesis's (± s.e. over 5 runs) and their difference in combined standard errors.
/// `optimal`: the average reward of the river's best grid policy under the same evaluation
/// ([`WetChicken::optimal_policy`]), shown below the columns.
pub fn table(rows: &[Row], benchmark: Benchmark, optimal: Option<f64>) -> String {
    let (random, digits) = match benchmark {
        Benchmark::WetChicken => ("random paddling", 2),
        Benchmark::Industrial => ("random actions", 1),
    };
    let mut md = format!(
        "| column | runs | average reward | thesis | difference (s.e.) | untrained policy | \
         {random} |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in &COLUMNS {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.column == c.key).collect();
        let (pm, pse) = match benchmark {
            Benchmark::WetChicken => c.published,
            Benchmark::Industrial => c.published_ib,
        };
        if mine.is_empty() {
            md.push_str(&format!(
                "| {} | – | not run | {pm:.prec$} ± {pse:.prec$} | | | |\n",
                c.name,
                prec = digits
            ));
            continue;
        }
        let rewards: Vec<f64> = mine.iter().map(|r| r.reward).collect();
        let (m, se) = mean_and_standard_error(&rewards);
        let diff = se.map_or("–".to_string(), |s| {
            format!("{:+.1}", (m - pm) / (s * s + pse * pse).sqrt())
        });
        let before: Vec<f64> = mine.iter().map(|r| r.reward_before).collect();
        let random: Vec<f64> = mine.iter().map(|r| r.reward_random).collect();
        md.push_str(&format!(
            "| {} | {} | {} | {pm:.prec$} ± {pse:.prec$} | {diff} | {:.prec$} | {:.prec$} |\n",
            c.name,
            mine.len(),
            crate::uci::fmt_mean_se(m, se, digits),
            mean(&before),
            mean(&random),
            prec = digits
        ));
    }
    if let Some(best) = optimal {
        md.push_str(&format!(
            "| best policy (value iteration on the true river) | – | {best:.prec$} | | | | |\n",
            prec = digits
        ));
    }
    md
}

/// The report.
fn markdown(rows: &[Row], o: &ControlOptions, optimal: Option<f64>, wall: f64) -> String {
    let mut md = match o.benchmark {
        Benchmark::WetChicken => format!(
            "# Model-based policy search on wet-chicken (Depeweg 2019 Table 7.1, first row)\n\n\
             Each run draws {} random transitions; every column learns `Δs` from `[s, a]` with \
             a 2 × 20 ReLU network ({} epochs, Adam at {}, minibatches of N/25), then a \
             [2, 20, 20, 2] policy (tanh to [−1, 1]²) is searched by Alg. 1: T = {}, K = {}, \
             minibatches of {} start states from the transitions, {} epochs, Adam at {}, the \
             cost `l − y` of every next state, roll-out states clamped to the river. The policy \
             is scored on the true river: the average reward per step of {} canoeists from the \
             origin over {} steps (the project's protocol). The thesis's ± is a standard error \
             over 5 runs; so is ours.\n\n",
            o.transitions,
            o.epochs(),
            o.lr,
            o.horizon(),
            o.samples(),
            o.policy_batch(),
            o.policy_epochs(),
            o.policy_lr(),
            o.eval_runs(),
            o.eval_steps()
        ),
        Benchmark::Industrial => format!(
            "# Model-based policy search on the Industrial Benchmark (Depeweg 2019 Table 7.1, \
             second row)\n\n\
             Each run explores {} random trajectories of {} steps at each setpoint 10, 20, …, \
             100; every column learns the change of the log–logit-transformed cost from the \
             61-column time embedding (standardised) with a 2 × 75 ReLU network ({} epochs, Adam \
             at {}, minibatches of N/25, K = {}), then a [61, 20, 20, 3] policy (tanh to \
             [−1, 1]³) is searched by Alg. 1 through roll-outs whose steerings move by the \
             benchmark's rule and whose cost by the model: T = {}, K = {}, minibatches of {} \
             from {} start states of the data, {} epochs, Adam at {}. Scored as the thesis's \
             code does: {} benchmarks per setpoint, a random warm-up of 15 + U{{0..49}} steps, \
             then {} policy steps; the reward is the negated mean cost. The thesis's ± is a \
             standard error over 5 runs; so is ours.\n\n",
            o.trajectories(),
            o.steps(),
            o.epochs(),
            o.lr,
            o.train_samples,
            o.horizon(),
            o.samples(),
            o.policy_batch(),
            o.policy_starts,
            o.policy_epochs(),
            o.policy_lr(),
            o.eval_runs(),
            o.eval_steps()
        ),
    };
    md.push_str(&table(rows, o.benchmark, optimal));
    md.push_str(&format!("\nWall time {wall:.0} s.\n"));
    md
}

/// Runs the grid.
///
/// # Errors
/// Bad options (before any work), a fit's or search's error, a report that cannot be written.
pub fn run(options: &ControlOptions) -> Result<Vec<Row>, Box<dyn Error>> {
    options.check()?;
    let harness = ControlHarness {
        options,
        world: WetChicken::default(),
    };
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
