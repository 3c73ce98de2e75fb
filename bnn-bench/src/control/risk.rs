//! `bnn-bench risk`: Depeweg (2019) §7.2 on the Industrial Benchmark, reduced. A BNN+LV learns
//! the cost from the behaviour policy's data (eqs. 7.37–7.39); for every `(β, γ)` a policy is
//! searched under the risk-sensitive cost (eq. 7.31), then scored on the true system by its
//! mean cost and its model bias (eq. 7.34) from fixed start states: the frontier of Fig. 7.5a
//! and the roll-outs of Fig. 7.6.

use super::industrial::{
    self, D_STATE, SETPOINTS, WINDOW, column_scales, pick_starts, run_policy, standardise,
    state_of, warmed_up,
};
use crate::experiment;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::metrics::{mean, mean_and_standard_error};
use bnn_burn::nets::LatentRegressor;
use bnn_burn::rollout::{
    Dynamics, Policy, PolicyConfig, PolicySearchConfig, RiskConfig, Standardised, model_bias,
    policy_search_with,
};
use bnn_burn::train::{TrainConfig, load_checkpoint, save_checkpoint};
use bnn_burn::training_device;
use bnn_datasets::industrial::{Exploration, IbTrajectory, IndustrialBenchmark};
use burn::module::Module;
use burn::tensor::Tensor;
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::error::Error;
use std::time::Instant;

/// Options of one `risk` run; defaults are the thesis's settings (§7.2).
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct RiskOptions {
    /// Weights β of the epistemic risk; repeatable [default: 0, 1, 2, 4].
    #[arg(long = "beta")]
    pub betas: Vec<f64>,
    /// Weights γ of the aleatoric risk; repeatable [default: 0, 1, 4].
    #[arg(long = "gamma")]
    pub gammas: Vec<f64>,
    /// Runs, each with its own data, model and policies [default: 1].
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Behaviour-policy trajectories per setpoint (10 setpoints; the thesis: 30 000
    /// transitions) [default: 3; 1 with --quick].
    #[arg(long)]
    pub trajectories: Option<usize>,
    /// Steps per trajectory [default: 1000; 60 with --quick].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Model training epochs [default: 3000; 3 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Black-box α of the model.
    #[arg(long, default_value_t = 0.5)]
    pub alpha: f64,
    /// Joint draws per model training step.
    #[arg(long, default_value_t = 25)]
    pub train_samples: usize,
    /// Roll-out horizon T (the thesis: 100) [default: 100; 5 with --quick].
    #[arg(long)]
    pub horizon: Option<usize>,
    /// Weight draws M per policy step (the thesis: 50) [default: 50; 2 with --quick].
    #[arg(long)]
    pub draws: Option<usize>,
    /// Roll-outs N per weight draw (the thesis: 25) [default: 25; 2 with --quick].
    #[arg(long)]
    pub rollouts: Option<usize>,
    /// Policy-search epochs (the thesis: 750) [default: 750; 1 with --quick].
    #[arg(long)]
    pub policy_epochs: Option<usize>,
    /// Start states per policy step (the thesis: 1).
    #[arg(long, default_value_t = 1)]
    pub policy_batch: usize,
    /// Start states of the data an epoch passes over.
    #[arg(long, default_value_t = 100)]
    pub policy_starts: usize,
    /// Adam's learning rate of the policies.
    #[arg(long, default_value_t = 1e-4)]
    pub policy_lr: f64,
    /// Start states of the evaluation: benchmarks after a behaviour-policy warm-up
    /// [default: 20; 2 with --quick].
    #[arg(long)]
    pub eval_starts: Option<usize>,
    /// True roll-outs per start state (Fig. 7.6: 100) [default: 100; 4 with --quick].
    #[arg(long)]
    pub eval_rollouts: Option<usize>,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl RiskOptions {
    fn betas(&self) -> Vec<f64> {
        match self.betas.is_empty() {
            true => vec![0.0, 1.0, 2.0, 4.0],
            false => self.betas.clone(),
        }
    }
    fn gammas(&self) -> Vec<f64> {
        match self.gammas.is_empty() {
            true => vec![0.0, 1.0, 4.0],
            false => self.gammas.clone(),
        }
    }
    fn trajectories(&self) -> usize {
        self.trajectories.unwrap_or(self.exp.quick_or(1, 3))
    }
    fn steps(&self) -> usize {
        self.steps.unwrap_or(self.exp.quick_or(60, 1000))
    }
    fn epochs(&self) -> usize {
        self.epochs.unwrap_or(self.exp.quick_or(3, 3000))
    }
    fn horizon(&self) -> usize {
        self.horizon.unwrap_or(self.exp.quick_or(5, 100))
    }
    fn draws(&self) -> usize {
        self.draws.unwrap_or(self.exp.quick_or(2, 50))
    }
    fn rollouts(&self) -> usize {
        self.rollouts.unwrap_or(self.exp.quick_or(2, 25))
    }
    fn policy_epochs(&self) -> usize {
        self.policy_epochs.unwrap_or(self.exp.quick_or(1, 750))
    }
    fn eval_starts(&self) -> usize {
        self.eval_starts.unwrap_or(self.exp.quick_or(2, 20))
    }
    fn eval_rollouts(&self) -> usize {
        self.eval_rollouts.unwrap_or(self.exp.quick_or(4, 100))
    }

    /// Checks every choice before any work.
    pub(crate) fn check(&self) -> Result<(), String> {
        for (flag, v) in [
            ("--runs", self.runs),
            ("--trajectories", self.trajectories()),
            ("--epochs", self.epochs()),
            ("--train-samples", self.train_samples),
            ("--horizon", self.horizon()),
            ("--policy-epochs", self.policy_epochs()),
            ("--policy-batch", self.policy_batch),
            ("--policy-starts", self.policy_starts),
            ("--eval-starts", self.eval_starts()),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        for (flag, v) in [
            ("--draws", self.draws()),
            ("--rollouts", self.rollouts()),
            ("--eval-rollouts", self.eval_rollouts()),
        ] {
            if v < 2 {
                return Err(format!("{flag} {v}: at least 2 (a variance is estimated)"));
            }
        }
        if self.steps() <= WINDOW {
            return Err(format!(
                "--steps {}: more than the time embedding's window of {WINDOW}",
                self.steps()
            ));
        }
        for (flag, list) in [("--beta", self.betas()), ("--gamma", self.gammas())] {
            if let Some(v) = list.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
                return Err(format!("{flag} {v}: a finite weight ≥ 0"));
            }
        }
        if !(self.alpha.is_finite() && (0.0..=1.0).contains(&self.alpha)) {
            return Err(format!("--alpha {}: in [0, 1]", self.alpha));
        }
        if !(self.policy_lr.is_finite() && self.policy_lr > 0.0) {
            return Err(format!(
                "--policy-lr {}: finite and positive",
                self.policy_lr
            ));
        }
        Ok(())
    }
}

/// One run of the grid.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// The run (its own data, model and policies).
    pub run: usize,
}

/// One `(β, γ)` policy of a run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Point {
    /// Weight of the epistemic risk.
    pub beta: f64,
    /// Weight of the aleatoric risk.
    pub gamma: f64,
    /// Mean true cost per step over the start states and their roll-outs.
    pub true_cost: f64,
    /// Model bias (eq. 7.34) averaged over the start states.
    pub model_bias: f64,
    /// The model's mean cost per step from the same start states.
    pub model_cost: f64,
    /// Mean true and model cost at each step from the first start state (Fig. 7.6).
    pub curves: (Vec<f64>, Vec<f64>),
    /// The first 20 true roll-outs' costs from the first start state (Fig. 7.6).
    pub paths: Vec<Vec<f64>>,
    /// Policy steps skipped by the NaN guard.
    pub skipped: usize,
    /// Seconds of the search.
    pub search_seconds: f64,
}

/// What one run measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// The run.
    pub run: usize,
    /// The behaviour policy's own mean true cost from the start states.
    pub behaviour_cost: f64,
    /// Every `(β, γ)` policy.
    pub points: Vec<Point>,
    /// Seconds of the model's training.
    pub train_seconds: f64,
}

/// The harness.
pub struct RiskHarness<'a> {
    options: &'a RiskOptions,
}

/// Evaluation start states: benchmarks after a behaviour-policy warm-up of 15 + U{0..49}
/// steps, one setpoint after another.
fn starts(n: usize, seed: u64) -> Result<Vec<(IndustrialBenchmark, IbTrajectory)>, Box<dyn Error>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|i| {
            warmed_up(
                SETPOINTS[i % SETPOINTS.len()],
                Exploration::Behaviour,
                &mut rng,
            )
        })
        .collect()
}

/// `rollouts` true roll-outs of `horizon` steps from a start under `act` (states → actions):
/// their costs, `[rollouts][horizon]`.
fn true_rollouts(
    start: &(IndustrialBenchmark, IbTrajectory),
    transform: &bnn_datasets::industrial::CostTransform,
    rollouts: usize,
    horizon: usize,
    seed: u64,
    act: impl FnMut(&[f64]) -> Vec<[f64; 3]>,
) -> Vec<Vec<f64>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut systems: Vec<(IndustrialBenchmark, IbTrajectory)> =
        (0..rollouts).map(|_| start.clone()).collect();
    run_policy(&mut systems, transform, horizon, &mut rng, act)
}

impl<'a> RiskHarness<'a> {
    /// The harness of `options` (checked by [`run`]).
    pub(crate) fn new(options: &'a RiskOptions) -> Self {
        RiskHarness { options }
    }

    fn train(
        &self,
        x: &[f64],
        delta: &[f64],
        seed: u64,
    ) -> Result<LatentRegressor, Box<dyn Error>> {
        let o = self.options;
        let device = training_device();
        let n = x.len() / D_STATE;
        let data = (matrix(x, D_STATE, &device), matrix(delta, 1, &device));
        let config = TrainConfig::new(o.epochs())
            .with_batch_size(n.div_ceil(25))
            .with_train_samples(o.train_samples)
            .with_seed(seed)
            .with_progress(false);
        super::train_lv(&super::Arch::industrial(), data, o.alpha, None, config)
    }

    /// The run's model and its training seconds: the one an interrupted run saved in the
    /// task's state folder under `--resume`, else trained (and saved there before the policies).
    fn model(
        &self,
        x: &[f64],
        delta: &[f64],
        seed: u64,
        context: &TaskContext,
    ) -> Result<(LatentRegressor, f64), Box<dyn Error>> {
        let path = context.state.join("model.bpk");
        if let Some(seconds) = context.part::<f64>("model")? {
            let n = x.len() / D_STATE;
            let fresh = super::lv_config(&super::Arch::industrial())
                .init_regressor(n, &training_device())?;
            match load_checkpoint(fresh, &path) {
                Ok(net) => {
                    eprintln!("[risk] the model trained before, from {}", path.display());
                    return Ok((net, seconds));
                }
                Err(e) => eprintln!("[risk] {e}; training the model again"),
            }
        }
        let started = Instant::now();
        let net = self.train(x, delta, seed)?;
        let seconds = started.elapsed().as_secs_f64();
        std::fs::create_dir_all(&context.state)
            .map_err(|e| format!("{}: cannot create the folder: {e}", context.state.display()))?;
        save_checkpoint(&net, &path)?;
        context.save_part("model", &seconds)?;
        Ok((net, seconds))
    }
}

impl Harness for RiskHarness<'_> {
    type Task = Task;
    type Row = Row;

    const NAME: &'static str = "risk";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<Task> {
        (0..self.options.runs).map(|run| Task { run }).collect()
    }

    fn task_id(&self, t: &Task) -> String {
        format!("run {}", t.run)
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "betas": o.betas(),
            "gammas": o.gammas(),
            "trajectories": o.trajectories(),
            "steps": o.steps(),
            "epochs": o.epochs(),
            "alpha": o.alpha,
            "train_samples": o.train_samples,
            "horizon": o.horizon(),
            "draws": o.draws(),
            "rollouts": o.rollouts(),
            "policy_epochs": o.policy_epochs(),
            "policy_batch": o.policy_batch,
            "policy_starts": o.policy_starts,
            "policy_lr": o.policy_lr,
            "eval_starts": o.eval_starts(),
            "eval_rollouts": o.eval_rollouts(),
        })
    }

    fn task_key(&self, _: &Task) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, task: &Task, context: &TaskContext) -> Result<Row, Box<dyn Error>> {
        let o = self.options;
        let run = task.run as u64;
        let data_seed = experiment::derive(o.exp.seed, &["risk", "data"], run);
        let data = industrial::data(
            o.trajectories(),
            o.steps(),
            Exploration::Behaviour,
            data_seed,
        )?;
        let x_scale = column_scales(&data.x, D_STATE);
        let y_scale = column_scales(&data.delta, 1);
        let (net, train_seconds) = self.model(
            &standardise(&data.x, &x_scale),
            &standardise(&data.delta, &y_scale),
            experiment::derive(o.exp.seed, &["risk", "model"], run),
            context,
        )?;
        let device = training_device();
        let plain = device.clone().inner();
        let model = Standardised {
            model: net.clone(),
            x: x_scale.clone(),
            y: y_scale.clone(),
        };
        let frozen = Standardised {
            model: net.valid(),
            x: x_scale,
            y: y_scale,
        };
        let picks = pick_starts(&data, o.policy_starts, data_seed ^ 0x5a);
        let s_scale = column_scales(&data.starts, D_STATE);
        let eval_seed = experiment::derive(o.exp.seed, &["risk", "eval"], run);
        let eval_starts = starts(o.eval_starts(), eval_seed)?;
        let (h, r) = (o.horizon(), o.eval_rollouts());
        let mut behaviour_rng = StdRng::seed_from_u64(eval_seed ^ 0x33);
        let behaviour: Vec<f64> = eval_starts
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                true_rollouts(s, &data.transform, r, h, eval_seed + i as u64, |x| {
                    x.chunks(D_STATE)
                        .map(|e| {
                            let last = [e[WINDOW], e[2 * WINDOW], e[3 * WINDOW]];
                            Exploration::Behaviour.action(last, &mut behaviour_rng)
                        })
                        .collect()
                })
                .concat()
            })
            .collect();
        // Every finished policy is saved as it ends: a resumed run starts at the next one.
        let mut points: Vec<Point> = context.part("points")?.unwrap_or_default();
        for &beta in &o.betas() {
            for &gamma in &o.gammas() {
                if points.iter().any(|p| p.beta == beta && p.gamma == gamma) {
                    continue;
                }
                let started = Instant::now();
                let search_seed = experiment::derive(o.exp.seed, &["risk", "policy"], run);
                device.seed(search_seed);
                let policy = PolicyConfig::new(D_STATE, vec![20, 20], vec![-1.0; 3], vec![1.0; 3])
                    .with_state_scale(Some(s_scale.clone()))
                    .init(&device)?;
                let config = PolicySearchConfig::new(h, o.policy_epochs())
                    .with_batch_size(o.policy_batch)
                    .with_samples(o.draws())
                    .with_learning_rate(o.policy_lr)
                    .with_risk(Some(
                        RiskConfig::new(beta, gamma).with_rollouts(o.rollouts()),
                    ))
                    .with_seed(search_seed);
                let (policy, report) = policy_search_with(
                    &model,
                    policy,
                    matrix(&picks, D_STATE, &device),
                    industrial::transition(data.transform),
                    &config,
                )?;
                let search_seconds = started.elapsed().as_secs_f64();
                let policy: Policy = policy.valid();
                let mut true_costs = Vec::new();
                let mut model_costs = Vec::new();
                let mut biases = Vec::new();
                let mut curves = (Vec::new(), Vec::new());
                let mut paths = Vec::new();
                for (i, s) in eval_starts.iter().enumerate() {
                    let truth =
                        true_rollouts(s, &data.transform, r, h, eval_seed + i as u64, |x| {
                            industrial::actions(&policy, x, &plain)
                        });
                    let true_mean: Vec<f64> = (0..h)
                        .map(|t| mean(&truth.iter().map(|p| p[t]).collect::<Vec<_>>()))
                        .collect();
                    let k = o.draws() * o.rollouts();
                    let x0 = state_of(&s.1, &data.transform);
                    let draw = frozen.dynamics(o.draws()).repeated(o.rollouts());
                    let start: Tensor<2> = matrix(&x0, D_STATE, &plain);
                    let modelled = to_vec(draw.unfold_with(
                        |st| policy.forward(st),
                        start,
                        h,
                        industrial::transition(data.transform),
                    ));
                    let model_mean: Vec<f64> = (0..h)
                        .map(|t| (0..k).map(|j| modelled[j * h + t]).sum::<f64>() / k as f64)
                        .collect();
                    biases.push(model_bias(&true_mean, &model_mean));
                    true_costs.push(mean(&true_mean));
                    model_costs.push(mean(&model_mean));
                    if i == 0 {
                        paths = truth.into_iter().take(20).collect();
                        curves = (true_mean, model_mean);
                    }
                }
                points.push(Point {
                    beta,
                    gamma,
                    true_cost: mean(&true_costs),
                    model_bias: mean(&biases),
                    model_cost: mean(&model_costs),
                    curves,
                    paths,
                    skipped: report.skipped,
                    search_seconds,
                });
                context.save_part("points", &points)?;
                eprintln!(
                    "[risk] run {} / β = {beta}, γ = {gamma}: true cost {:.2}, model bias {:.1} \
                     ({search_seconds:.0} s)",
                    task.run,
                    points[points.len() - 1].true_cost,
                    points[points.len() - 1].model_bias,
                );
            }
        }
        Ok(Row {
            run: task.run,
            behaviour_cost: mean(&behaviour),
            points,
            train_seconds,
        })
    }

    fn describe(&self, f: &Finished<Task, Row>) -> String {
        let r = &f.row;
        let mut s = format!(
            "[risk] run {}: behaviour policy cost {:.1}; model {:.0} s",
            r.run, r.behaviour_cost, r.train_seconds
        );
        for p in &r.points {
            s.push_str(&format!(
                "\n  β {} γ {}: true cost {:.1}, model bias {:.0}, model cost {:.1} ({:.0} s)",
                p.beta, p.gamma, p.true_cost, p.model_bias, p.model_cost, p.search_seconds
            ));
        }
        s
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let rows = run.rows();
        let md = markdown(&rows, self.options, run.wall_seconds);
        crate::plots::write_svg(run.out, "frontier.svg", |p| plot_frontier(p, &rows))?;
        crate::plots::write_svg(run.out, "rollouts.svg", |p| plot_rollouts(p, &rows))?;
        run.write_report(self.options, serde_json::json!({}), &md)
    }
}

/// Fig. 7.5a's table: per `(β, γ)`, the true cost and the model bias (mean ± s.e. over runs).
pub fn table(rows: &[Row]) -> String {
    let mut md = String::from(
        "| β | γ | runs | true cost per step | model bias | model's cost per step | on the frontier |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let Some(first) = rows.first() else {
        return md;
    };
    let frontier: Vec<Vec<bool>> = rows.iter().map(|r| on_frontier(&r.points)).collect();
    for (j, p) in first.points.iter().enumerate() {
        let pick = |f: fn(&Point) -> f64| across_runs(rows, j, f);
        let fmt = |v: Vec<f64>, d: usize| {
            let (m, se) = mean_and_standard_error(&v);
            crate::uci::fmt_mean_se(m, se, d)
        };
        let frontier_runs = frontier.iter().filter(|f| f.get(j) == Some(&true)).count();
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {frontier_runs} of {} |\n",
            p.beta,
            p.gamma,
            rows.len(),
            fmt(pick(|p| p.true_cost), 1),
            fmt(pick(|p| p.model_bias), 0),
            fmt(pick(|p| p.model_cost), 1),
            rows.len()
        ));
    }
    let behaviour: Vec<f64> = rows.iter().map(|r| r.behaviour_cost).collect();
    md.push_str(&format!(
        "| behaviour policy | | {} | {:.1} | | | |\n",
        rows.len(),
        mean(&behaviour)
    ));
    md
}

/// The `j`-th policy's `f` in every run that has it.
fn across_runs(rows: &[Row], j: usize, f: fn(&Point) -> f64) -> Vec<f64> {
    rows.iter().filter_map(|r| r.points.get(j)).map(f).collect()
}

/// Which of a run's policies are on its cost–bias frontier (Fig. 7.5a): no other policy of the
/// run has both a true cost and a model bias at most its own, one of them lower.
pub fn on_frontier(points: &[Point]) -> Vec<bool> {
    let dominates = |a: &Point, b: &Point| {
        a.true_cost <= b.true_cost
            && a.model_bias <= b.model_bias
            && (a.true_cost < b.true_cost || a.model_bias < b.model_bias)
    };
    points
        .iter()
        .map(|p| !points.iter().any(|q| dominates(q, p)))
        .collect()
}

fn markdown(rows: &[Row], o: &RiskOptions, wall: f64) -> String {
    let mut md = format!(
        "# Risk-sensitive policy search on the Industrial Benchmark (Depeweg 2019 §7.2, \
         Figs. 7.5a and 7.6)\n\n\
         Each run gathers {} behaviour-policy trajectories (eqs. 7.37–7.39) of {} steps at each \
         setpoint 10, 20, …, 100; a BNN+LV (α = {}, 2 × 75, {} epochs, K = {}) learns the \
         change of the transformed cost from the 61-column embedding. For every (β, γ) a \
         [61, 20, 20, 3] policy is searched under eq. 7.31 (T = {}, M = {} weight draws × N = \
         {} roll-outs, minibatches of {} from {} start states, {} epochs, Adam at {}), then run \
         on the true benchmark from {} start states (a behaviour-policy warm-up of 15 + \
         U{{0..49}} steps), {} roll-outs each: the true cost per step and the model bias \
         Σ_t (E_true c_t − E_model c_t)² (eq. 7.34), averaged over the start states. The \
         thesis shows curves only (Fig. 7.5a): larger β lowers the model bias at a higher \
         cost, and the best trade-off has γ = 0.\n\n",
        o.trajectories(),
        o.steps(),
        o.alpha,
        o.epochs(),
        o.train_samples,
        o.horizon(),
        o.draws(),
        o.rollouts(),
        o.policy_batch,
        o.policy_starts,
        o.policy_epochs(),
        o.policy_lr,
        o.eval_starts(),
        o.eval_rollouts()
    );
    md.push_str(&table(rows));
    md.push_str(&format!(
        "\nFigures: `frontier.svg` (true cost against model bias, a curve per γ, the mean over \
         runs ± one s.e.), \
         `rollouts.svg` (Fig. 7.6: true roll-outs, their mean and the model's mean from the \
         first start state). Wall time {wall:.0} s.\n"
    ));
    md
}

/// Fig. 7.5a: true cost against model bias, a curve per γ through the β values; each point is
/// the mean over runs with ± one standard error on both axes.
fn plot_frontier(path: &std::path::Path, rows: &[Row]) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let Some(first) = rows.first() else {
        return Ok(());
    };
    /// One policy of the grid over the runs: its γ and the (mean, s.e.) of its model bias and
    /// true cost.
    struct Summary {
        gamma: f64,
        bias: (f64, f64),
        cost: (f64, f64),
    }
    let stat = |j: usize, f: fn(&Point) -> f64| {
        let (m, se) = mean_and_standard_error(&across_runs(rows, j, f));
        (m, se.unwrap_or(0.0))
    };
    let points: Vec<Summary> = (0..first.points.len())
        .map(|j| Summary {
            gamma: first.points[j].gamma,
            bias: stat(j, |p| p.model_bias),
            cost: stat(j, |p| p.true_cost),
        })
        .collect();
    let span = |f: fn(&Summary) -> (f64, f64)| {
        let lo = points
            .iter()
            .map(|p| f(p).0 - f(p).1)
            .fold(f64::INFINITY, f64::min);
        let hi = points
            .iter()
            .map(|p| f(p).0 + f(p).1)
            .fold(f64::NEG_INFINITY, f64::max);
        crate::plots::axis_range(lo, hi, 0.1, 1.0)
    };
    let x = span(|p| p.bias)?;
    let y = span(|p| p.cost)?;
    let root = SVGBackend::new(path, (560, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Cost against model bias (Fig. 7.5a)", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc("model bias")
        .y_desc("true cost per step")
        .draw()?;
    let mut gammas: Vec<f64> = points.iter().map(|p| p.gamma).collect();
    gammas.sort_by(f64::total_cmp);
    gammas.dedup();
    for (i, g) in gammas.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let these: Vec<&Summary> = points.iter().filter(|p| p.gamma == *g).collect();
        let curve: Vec<(f64, f64)> = these.iter().map(|p| (p.bias.0, p.cost.0)).collect();
        chart
            .draw_series(LineSeries::new(curve.clone(), color))?
            .label(format!("γ = {g}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
        chart.draw_series(curve.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
        chart.draw_series(these.iter().flat_map(|p| {
            let ((b, bs), (c, cs)) = (p.bias, p.cost);
            [
                PathElement::new(vec![(b - bs, c), (b + bs, c)], color),
                PathElement::new(vec![(b, c - cs), (b, c + cs)], color),
            ]
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Fig. 7.6: from the first start state, true roll-outs (light), their mean and the model's
/// mean, for (β, γ) = (0, 0), (4, 0) and (0, 4) where the grid has them (first run).
fn plot_rollouts(path: &std::path::Path, rows: &[Row]) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let Some(r) = rows.first() else {
        return Ok(());
    };
    let shown: Vec<&Point> = [(0.0, 0.0), (4.0, 0.0), (0.0, 4.0)]
        .iter()
        .filter_map(|(b, g)| r.points.iter().find(|p| p.beta == *b && p.gamma == *g))
        .collect();
    if shown.is_empty() {
        return Ok(());
    }
    let all: Vec<f64> = shown
        .iter()
        .flat_map(|p| p.paths.iter().flatten().chain(&p.curves.1).copied())
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let y = crate::plots::axis_range(lo, hi, 0.05, 1.0)?;
    let h = shown[0].curves.0.len();
    let root = SVGBackend::new(path, (400 * shown.len() as u32, 360)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, p) in root.split_evenly((1, shown.len())).iter().zip(&shown) {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("β = {}, γ = {}", p.beta, p.gamma),
                ("sans-serif", 16),
            )
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(45)
            .build_cartesian_2d(0.0..h as f64, y.clone())?;
        chart.configure_mesh().x_desc("t").y_desc("cost").draw()?;
        let light = RGBColor(144, 238, 144);
        for path in &p.paths {
            chart.draw_series(LineSeries::new(
                path.iter().enumerate().map(|(t, c)| (t as f64, *c)),
                light,
            ))?;
        }
        let dark = RGBColor(0, 100, 0);
        chart.draw_series(LineSeries::new(
            p.curves.0.iter().enumerate().map(|(t, c)| (t as f64, *c)),
            dark.stroke_width(2),
        ))?;
        chart.draw_series(LineSeries::new(
            p.curves.1.iter().enumerate().map(|(t, c)| (t as f64, *c)),
            BLUE.stroke_width(2),
        ))?;
    }
    root.present()?;
    Ok(())
}

/// Runs the grid.
///
/// # Errors
/// Bad options (before any work), a fit's or search's error, a report that cannot be written.
pub fn run(options: &RiskOptions) -> Result<Vec<Row>, Box<dyn Error>> {
    options.check()?;
    let harness = RiskHarness::new(options);
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
