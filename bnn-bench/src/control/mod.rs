//! `bnn-bench control`: Depeweg (2019) Table 7.1's wet-chicken row. Each model column learns
//! the river's change of state from random transitions, a policy is searched by roll-outs
//! through it (Alg. 1, [`bnn_burn::rollout::policy_search`]) and scored on the true river.
//! The columns: the early-stopped MLP with its validation error as noise, the 25-member
//! ensemble (a member per roll-out), the BNN (α = 1, no latent) and BNN+LV by VB, α = ½, α = 1.

#[cfg(test)]
mod tests;

use crate::experiment;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
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
    Dynamics, Policy, PolicyConfig, PolicySearchConfig, PolicySearchReport, policy_search,
};
use bnn_burn::train::{EarlyStoppingConfig, TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::dynamics::WetChicken;
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use std::error::Error;
use std::time::Instant;

/// A model column of Table 7.1 (without the GP: the project has none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Column {
    /// The table's name.
    pub name: &'static str,
    /// Short name for flags and ids.
    pub key: &'static str,
    /// The thesis's wet-chicken average reward and its standard error (5 runs).
    pub published: (f64, f64),
}

/// The columns, in the table's order.
pub const COLUMNS: [Column; 6] = [
    Column {
        name: "MLP",
        key: "mlp",
        published: (-2.71, 0.09),
    },
    Column {
        name: "MLP Ens.",
        key: "ensemble",
        published: (-2.64, 0.06),
    },
    Column {
        name: "BNN",
        key: "bnn",
        published: (-2.88, 0.06),
    },
    Column {
        name: "BNN+LV VB",
        key: "vb",
        published: (-2.67, 0.10),
    },
    Column {
        name: "BNN+LV α=0.5",
        key: "alpha-0.5",
        published: (-2.37, 0.01),
    },
    Column {
        name: "BNN+LV α=1",
        key: "alpha-1",
        published: (-2.42, 0.01),
    },
];
/// The GP column the project does not run (Table 7.1: −3.05 ± 0.06).
pub const GP_PUBLISHED: (f64, f64) = (-3.05, 0.06);
/// Ensemble members (§7.1.3: 25).
const MEMBERS: usize = 25;
/// The members' and the MLP's validation share and patience.
const VALIDATION: f64 = 0.1;
const PATIENCE: usize = 50;
/// The model's noise variance Σ (§7.1.4: fixed at 10⁻⁵ for BNN+LV).
const SIGMA: f64 = 1e-5;

/// Options of one `control` run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct ControlOptions {
    /// Model columns (mlp, ensemble, bnn, vb, alpha-0.5, alpha-1); repeatable [default: all].
    #[arg(long = "column")]
    pub columns: Vec<String>,
    /// Runs per column, each on its own transitions [default: 5; 2 with --quick].
    #[arg(long)]
    pub runs: Option<usize>,
    /// Random transitions the models learn from (§7.1.4: 2 500).
    #[arg(long, default_value_t = 2500)]
    pub transitions: usize,
    /// Model training epochs [default: 1500; 30 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Adam's learning rate of the models.
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Policy-search epochs (§7.1.4: 100) [default: 100; 2 with --quick].
    #[arg(long)]
    pub policy_epochs: Option<usize>,
    /// Adam's learning rate of the policy (§7.1.4: 10⁻⁵).
    #[arg(long, default_value_t = 1e-5)]
    pub policy_lr: f64,
    /// Roll-out horizon T (§7.1.4: 5).
    #[arg(long, default_value_t = 5)]
    pub horizon: usize,
    /// Weight draws K per policy step (§7.1.4: 20).
    #[arg(long, default_value_t = 20)]
    pub samples: usize,
    /// Canoeists of the true-river evaluation, each for --eval-steps from the origin.
    #[arg(long, default_value_t = 1000)]
    pub eval_runs: usize,
    /// Steps of each evaluation canoeist.
    #[arg(long, default_value_t = 200)]
    pub eval_steps: usize,
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
    fn quick_or<T>(&self, quick: T, full: T) -> T {
        if self.exp.quick { quick } else { full }
    }
    fn runs(&self) -> usize {
        self.runs.unwrap_or(self.quick_or(2, 5))
    }
    fn epochs(&self) -> usize {
        self.epochs.unwrap_or(self.quick_or(30, 1500))
    }
    fn policy_epochs(&self) -> usize {
        self.policy_epochs.unwrap_or(self.quick_or(2, 100))
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
            ("--policy-epochs", self.policy_epochs()),
            ("--horizon", self.horizon),
            ("--samples", self.samples),
            ("--eval-runs", self.eval_runs),
            ("--eval-steps", self.eval_steps),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if self.transitions < 50 {
            return Err(format!(
                "--transitions {}: at least 50 (a validation split of 10 % is held out)",
                self.transitions
            ));
        }
        for (flag, v) in [("--lr", self.lr), ("--policy-lr", self.policy_lr)] {
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
fn transitions(world: &WetChicken, n: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let data = world.random_transitions(n, seed);
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

/// Fixed Gaussian noise of scale `std` on both outputs.
fn fixed_noise(
    std: f64,
    device: &Device,
) -> Result<bnn_burn::likelihood::GaussianLikelihood, bnn_burn::ConfigError> {
    GaussianLikelihoodConfig::new()
        .with_d_output(2)
        .with_noise_std(std)
        .with_fit(NoiseFit::Fixed)
        .init(device)
}

/// An early-stopped point MLP 4-20-20-2 whose noise is its validation error (eq. 7.26;
/// [`crate::depeweg::early_stopped_mlp`]).
fn early_stopped_mlp(
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
    let mlp =
        MlpConfig::new(4, vec![20, 20], 2).with_weights(WeightConfig::of(PosteriorConfig::point()));
    Ok(crate::depeweg::early_stopped_mlp(&mlp, data, config)?.0)
}

/// Trains the column's model on `(x, Δ)`.
fn train(
    column: &Column,
    x: &[f64],
    delta: &[f64],
    o: &ControlOptions,
    seed: u64,
) -> Result<Model, Box<dyn Error>> {
    let device = training_device();
    let n = x.len() / 4;
    let data = (matrix(x, 4, &device), matrix(delta, 2, &device));
    let config = TrainConfig::new(o.epochs())
        .with_batch_size(n.div_ceil(25))
        .with_learning_rate(o.lr)
        .with_train_samples(25)
        .with_seed(seed)
        .with_progress(false);
    let body = MlpConfig::new(4, vec![20, 20], 2).with_weights(depeweg_weights(1.0));
    Ok(match column.key {
        "mlp" => Model::Net(Box::new(early_stopped_mlp(data, o, seed)?)),
        "ensemble" => Model::Members(
            Ensemble::train(MEMBERS, |m| {
                early_stopped_mlp(
                    data.clone(),
                    o,
                    experiment::derive(seed, &["member"], m as u64),
                )
            })
            .map_err(|(m, e)| format!("ensemble member {m}: {e}"))?,
        ),
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
            let build = |d: &Device| {
                BnnLvConfig::new(body.clone()).init(fixed_noise(SIGMA.sqrt(), d)?, n, d)
            };
            let trainer = Trainer::new(config);
            let trainer = match alpha {
                0.0 => trainer,
                a => trainer.with_objective(AlphaConfig::new().with_alpha(a).init()?),
            };
            let (net, _) = trainer.build_and_fit(build, data)?;
            Model::Latent(Box::new(net))
        }
    })
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

impl ControlHarness<'_> {
    fn search(
        &self,
        model: &impl Dynamics,
        starts: Tensor<2>,
        seed: u64,
    ) -> Result<(Policy, Policy, PolicySearchReport), Box<dyn Error>> {
        let o = self.options;
        let device = starts.device();
        device.seed(seed);
        let policy =
            PolicyConfig::new(2, vec![20, 20], vec![-1.0, -1.0], vec![1.0, 1.0]).init(&device)?;
        let length = self.world.length;
        // The cost of a step: the distance to the waterfall, l − y of the next state.
        let cost = move |s: &Tensor<3>| {
            let [k, b, _] = s.dims();
            (s.clone().narrow(2, 1, 1).neg() + length).reshape([k, b])
        };
        let config = PolicySearchConfig::new(o.horizon, o.policy_epochs())
            .with_batch_size(10)
            .with_samples(o.samples)
            .with_learning_rate(o.policy_lr)
            .with_state_box(Some((
                vec![0.0, 0.0],
                vec![self.world.width, self.world.length],
            )))
            .with_seed(seed);
        let (trained, report) = policy_search(model, policy.clone(), starts, cost, &config)?;
        Ok((policy, trained, report))
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
        serde_json::json!({
            "seed": o.exp.seed,
            "transitions": o.transitions,
            "epochs": o.epochs(),
            "lr": o.lr,
            "policy_epochs": o.policy_epochs(),
            "policy_lr": o.policy_lr,
            "horizon": o.horizon,
            "samples": o.samples,
            "eval_runs": o.eval_runs,
            "eval_steps": o.eval_steps,
        })
    }

    fn task_key(&self, _: &Task) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, task: &Task, _: &TaskContext) -> Result<Row, Box<dyn Error>> {
        let o = self.options;
        let column = runner::of_task(&COLUMNS, "column", |c| c.key == task.column);
        // The data depend on the run only: every column learns from the same transitions.
        let data_seed = experiment::derive(o.exp.seed, &["control", "data"], task.run as u64);
        let seed = experiment::derive(o.exp.seed, &["control", column.key], task.run as u64);
        let (x, delta, starts) = transitions(&self.world, o.transitions, data_seed);
        let started = Instant::now();
        let model = train(column, &x, &delta, o, seed)?;
        let train_seconds = started.elapsed().as_secs_f64();
        let device = training_device();
        let starts = matrix(&starts, 2, &device);
        let started = Instant::now();
        let search_seed = experiment::derive(o.exp.seed, &["control", "policy"], task.run as u64);
        let (before, after, report) = match &model {
            Model::Latent(m) => self.search(m.as_ref(), starts, search_seed)?,
            Model::Net(m) => self.search(m.as_ref(), starts, search_seed)?,
            Model::Members(m) => self.search(m, starts, search_seed)?,
        };
        let search_seconds = started.elapsed().as_secs_f64();
        let plain = device.inner();
        let eval_seed = experiment::derive(o.exp.seed, &["control", "eval"], task.run as u64);
        let score = |p: &Policy| {
            let p = p.clone().valid();
            self.world
                .average_reward(o.eval_runs, o.eval_steps, eval_seed, |s| {
                    actions(&p, s, &plain)
                })
        };
        let mut rng = bnn_burn::host::HostNormals::new(eval_seed ^ 0x7a);
        let reward_random = self
            .world
            .average_reward(o.eval_runs, o.eval_steps, eval_seed, |s| {
                s.iter()
                    .map(|_| [2.0 * rng.uniform() - 1.0, 2.0 * rng.uniform() - 1.0])
                    .collect()
            });
        let costs = &report.epoch_costs;
        Ok(Row {
            column: column.key.to_string(),
            run: task.run,
            reward: score(&after),
            reward_before: score(&before),
            reward_random,
            model_cost: (costs[0], costs[costs.len() - 1]),
            skipped: report.skipped,
            train_seconds,
            search_seconds,
        })
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
        let md = markdown(&rows, self.options, run.wall_seconds);
        run.write_report(self.options, serde_json::json!({}), &md)
    }
}

/// Table 7.1's wet-chicken row: per column, the average reward (mean ± s.e. over runs) beside
/// the thesis's (± s.e. over 5 runs) and their difference in combined standard errors.
pub fn table(rows: &[Row]) -> String {
    let mut md = String::from(
        "| column | runs | average reward | thesis | difference (s.e.) | untrained policy | \
         random paddling |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in &COLUMNS {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.column == c.key).collect();
        if mine.is_empty() {
            continue;
        }
        let rewards: Vec<f64> = mine.iter().map(|r| r.reward).collect();
        let (m, se) = mean_and_standard_error(&rewards);
        let (pm, pse) = c.published;
        let diff = se.map_or("–".to_string(), |s| {
            format!("{:+.1}", (m - pm) / (s * s + pse * pse).sqrt())
        });
        let before: Vec<f64> = mine.iter().map(|r| r.reward_before).collect();
        let random: Vec<f64> = mine.iter().map(|r| r.reward_random).collect();
        md.push_str(&format!(
            "| {} | {} | {} | {pm:.2} ± {pse:.2} | {diff} | {:.2} | {:.2} |\n",
            c.name,
            mine.len(),
            crate::uci::fmt_mean_se(m, se, 2),
            mean(&before),
            mean(&random)
        ));
    }
    md.push_str(&format!(
        "| GP | – | not run (no GP in the project) | {:.2} ± {:.2} | | | |\n",
        GP_PUBLISHED.0, GP_PUBLISHED.1
    ));
    md
}

/// The report.
fn markdown(rows: &[Row], o: &ControlOptions, wall: f64) -> String {
    let mut md = format!(
        "# Model-based policy search on wet-chicken (Depeweg 2019 Table 7.1, first row)\n\n\
         Each run draws {} random transitions; every column learns `Δs` from `[s, a]` with a \
         2 × 20 ReLU network ({} epochs, Adam at {}, minibatches of N/25), then a [2, 20, 20, 2] \
         policy (tanh to [−1, 1]²) is searched by Alg. 1: T = {}, K = {}, minibatches of 10 \
         start states from the transitions, {} epochs, Adam at {}, the cost `l − y` of every \
         next state, roll-out states clamped to the river. The policy is scored on the true \
         river: the average reward per step of {} canoeists from the origin over {} steps \
         (the project's protocol). The thesis's ± is a standard error over 5 runs; so is ours.\n\n",
        o.transitions,
        o.epochs(),
        o.lr,
        o.horizon,
        o.samples,
        o.policy_epochs(),
        o.policy_lr,
        o.eval_runs,
        o.eval_steps
    );
    md.push_str(&table(rows));
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
