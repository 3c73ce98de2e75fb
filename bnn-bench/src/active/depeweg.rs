//! Depeweg (2019) §6.4, Table 6.1, reduced: active learning with BNN+LV (2 × 20, black-box
//! α = 1) on the heteroscedastic and bimodal toys and wet-chicken. Each run starts from the
//! §6.1 training set, acquires rows from a pool drawn uniformly in input space by the
//! epistemic part `I(W; y*)` (eq. 6.3), by the total entropy `H[y*]`, or at random (or, for
//! the GP column, an RBF GP by its own entropy), and reports the test log-likelihood on a
//! uniform test set after every round.

use super::ActiveOptions;
use crate::experiment;
use crate::runner::{Finished, Harness, ReportInput, TaskContext};
use crate::uci::fmt_mean_se;
use bnn_burn::active::{
    Acquisition, ActiveConfig, ActiveError, ActiveHistory, ActiveLearning, ActiveTask,
    LatentScorer, RegressionScore, RegressionScorer, Retrain, Selection,
};
use bnn_burn::gp::RandomFeatureGpConfig;
use bnn_burn::host::matrix;
use bnn_burn::latent::LatentConfig;
use bnn_burn::metrics::mean_and_standard_error;
use bnn_burn::nets::{BnnLvConfig, LatentRegressor, MlpConfig, Regressor};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::predict::{GaussianPrediction, Predict, PredictMode};
use bnn_burn::recipes::depeweg_weights;
use bnn_burn::train::{TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::dynamics::{WetChicken, WetChickenTransitions};
use bnn_datasets::{RegressionData, Standardizer, toy};
use burn::tensor::Tensor;
use std::collections::BTreeMap;
use std::error::Error;

/// The problems of Table 6.1.
pub const PROBLEMS: [&str; 3] = ["heteroscedastic", "bimodal", "wet-chicken"];

/// The acquisitions: Table 6.1's two BNN+LV columns, uniform picks for reference, and its GP
/// column (an RBF GP by random features, picking by its predictive entropy).
pub const LV_ACQUISITIONS: [&str; 4] = ["epistemic", "total", "random", "gp"];

/// Table 6.1: (problem, `I(W; y*)`, ±, `H[y*]`, ±, GP, ±), test LL after 150 iterations,
/// mean ± standard error over 5 runs (Fig. 6.15's error bars are standard errors).
pub const LV_PUBLISHED: [(&str, f64, f64, f64, f64, f64, f64); 3] = [
    ("heteroscedastic", -1.79, 0.03, -1.92, 0.03, -2.09, 0.02),
    ("bimodal", -2.04, 0.01, -2.06, 0.02, -2.86, 0.01),
    ("wet-chicken", -0.54, 0.02, -0.68, 0.05, -1.80, 0.00),
];

/// Test points of the toys and of wet-chicken (§6.4.3).
const TEST_POINTS: [usize; 3] = [500, 500, 2500];
/// Joint (W, z) draws of the test log-likelihood's mixture.
const TEST_DRAWS: usize = 500;

/// One run of one acquisition on one problem.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LvTask {
    /// The problem.
    pub problem: String,
    /// The acquisition.
    pub acquisition: String,
    /// The run: its data and model seeds.
    pub run: usize,
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LvRow {
    /// The run.
    pub task: LvTask,
    /// `(labelled rows, test LL)` after every round, original units.
    pub curve: Vec<(usize, f64)>,
    /// The test LL after the last round.
    pub final_ll: f64,
    /// The true model's LL on the same test set (the toys; `None` for wet-chicken, whose
    /// resets and clips put mass on points).
    pub oracle_ll: Option<f64>,
    /// The acquired inputs in pick order, original units.
    pub acquired: Vec<Vec<f64>>,
    /// The mean distance of the acquired inputs to their nearest starting training input, in
    /// the inputs' standard deviations: how far from the data the acquisition looked.
    pub pick_distance: f64,
    /// Wall seconds.
    pub seconds: f64,
}

/// One problem's data: the starting training set, the pool and the test set (one target).
struct Problem {
    train: RegressionData,
    pool: RegressionData,
    test: RegressionData,
    oracle_ll: Option<f64>,
}

/// The y-coordinate of the next state as the target (§6.4.3).
fn next_y(t: &WetChickenTransitions) -> Result<RegressionData, Box<dyn Error>> {
    let full = t.next_state_regression();
    let y = full.y.chunks(2).map(|s| s[1]).collect();
    Ok(RegressionData::new(full.x, y, full.n_features, 1)?)
}

fn one_d(r: toy::Regression1d) -> Result<RegressionData, Box<dyn Error>> {
    Ok(RegressionData::new(r.x, r.y, 1, 1)?)
}

impl Problem {
    /// The data of `name` for the seed `seed`: the §6.1 training set of `train` points, a
    /// pool of `pool` points and the test set, both uniform in input space (x in [−4, 4] for
    /// the heteroscedastic toy, [−0.5, 2] for the bimodal one, the river and the action box
    /// for wet-chicken).
    fn new(name: &str, train: usize, pool: usize, seed: u64) -> Result<Self, Box<dyn Error>> {
        let s = |k: u64| experiment::derive(seed, &["active", "depeweg", name], k);
        let index = PROBLEMS.iter().position(|p| *p == name).unwrap_or(0);
        let n_test = TEST_POINTS[index];
        Ok(match name {
            "heteroscedastic" => {
                let test = toy::heteroscedastic(n_test, s(2));
                Self {
                    oracle_ll: Some(toy::heteroscedastic_oracle_log_likelihood(&test)),
                    train: one_d(toy::heteroscedastic_mixture(train, s(0)))?,
                    pool: one_d(toy::heteroscedastic(pool, s(1)))?,
                    test: one_d(test)?,
                }
            }
            "bimodal" => {
                let test = toy::bimodal(n_test, s(2));
                Self {
                    oracle_ll: Some(toy::bimodal_oracle_log_likelihood(&test)),
                    train: one_d(toy::bimodal_exponential(train, s(0)))?,
                    pool: one_d(toy::bimodal(pool, s(1)))?,
                    test: one_d(test)?,
                }
            }
            "wet-chicken" => {
                let world = WetChicken::default();
                Self {
                    oracle_ll: None,
                    train: next_y(&world.random_transitions(train, s(0)))?,
                    pool: next_y(&world.uniform_transitions(pool, s(1)))?,
                    test: next_y(&world.uniform_transitions(n_test, s(2)))?,
                }
            }
            other => return Err(format!("--problem {other}: not one of the study's").into()),
        })
    }
}

/// The study's harness.
pub struct LvStudy<'a> {
    options: &'a ActiveOptions,
}

impl<'a> LvStudy<'a> {
    /// The study of `options`.
    pub fn new(options: &'a ActiveOptions) -> Self {
        Self { options }
    }

    fn run_one(&self, task: &LvTask, ctx: &TaskContext) -> Result<LvRow, Box<dyn Error>> {
        let started = std::time::Instant::now();
        let o = self.options;
        let seed = experiment::derive(o.exp.seed, &["active", "depeweg"], task.run as u64);
        let n_train = o.lv_train_points(&task.problem);
        let problem = Problem::new(&task.problem, n_train, o.lv_pool(), seed)?;
        // Scalers of the starting training set, fixed over the rounds (a warm start keeps
        // the units it was trained in).
        let (sx, sy) = problem.train.fit_standardizers()?;
        let d = problem.train.n_features;
        let device = training_device();
        let mut inputs = problem.train.x.clone();
        inputs.extend_from_slice(&problem.pool.x);
        let mut targets = problem.train.y.clone();
        targets.extend_from_slice(&problem.pool.y);
        let x = sx.transform(&inputs);
        let data = matrix(&x, d, &device);
        let mut fit = LvFit {
            x,
            y: sy.transform(&targets),
            d,
            test_x: matrix(&sx.transform(&problem.test.x), d, &device),
            test_y: matrix(&sy.transform(&problem.test.y), 1, &device),
            sy: sy.clone(),
            seed,
            problem: task.problem.clone(),
            options: o,
        };
        let retrain = match o.retrain.as_str() {
            "scratch" => Retrain::Scratch,
            _ => Retrain::Warm,
        };
        let budget = n_train + o.lv_iterations() * o.per_round();
        let config = ActiveConfig::new(n_train, o.per_round(), budget)
            .with_initial_rows((0..n_train).collect())
            .with_retrain(retrain)
            .with_seed(seed);
        if !ctx.resume {
            let _ = std::fs::remove_dir_all(&ctx.state);
        }
        let looped = ActiveLearning::new(config).with_state(&ctx.state);
        let draws = o.lv_draws();
        let scorer = |epistemic| LatentScorer {
            epistemic,
            n_w: draws,
            n_z: draws,
            k: o.lv_neighbour(),
            chunk: 64,
        };
        let (epistemic, total) = (scorer(true), scorer(false));
        let history = match task.acquisition.as_str() {
            // The GP's predictive is Gaussian: its entropy and test LL in closed form.
            "gp" => {
                let entropy = RegressionScorer::new(RegressionScore::Entropy, PredictMode::Moments);
                let mut acquisition: Acquisition<'_, Regressor> =
                    Acquisition::new(&entropy, Selection::Top);
                looped.run(&mut acquisition, data, &mut fit)?.1
            }
            a => {
                let mut acquisition: Acquisition<'_, LatentRegressor> = match a {
                    "epistemic" => Acquisition::new(&epistemic, Selection::Top),
                    "total" => Acquisition::new(&total, Selection::Top),
                    "random" => Acquisition::random(),
                    other => return Err(format!("--acquisition {other}: unknown").into()),
                };
                looped.run(&mut acquisition, data, &mut fit)?.1
            }
        };
        let curve = history.curve("test_ll");
        let picked: Vec<usize> = history.rows().into_iter().skip(n_train).collect();
        let acquired = picked
            .iter()
            .map(|&r| inputs[r * d..(r + 1) * d].to_vec())
            .collect();
        let distances: Vec<f64> = picked
            .iter()
            .map(|&r| nearest(&fit.x[r * d..(r + 1) * d], &fit.x[..n_train * d]))
            .collect();
        Ok(LvRow {
            task: task.clone(),
            final_ll: curve.last().map_or(f64::NAN, |c| c.1),
            curve,
            oracle_ll: problem.oracle_ll,
            acquired,
            pick_distance: bnn_burn::metrics::mean(&distances),
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

/// The Euclidean distance of `x` to its nearest row of `rows` (row-major, `x.len()` wide).
fn nearest(x: &[f64], rows: &[f64]) -> f64 {
    rows.chunks(x.len().max(1))
        .map(|r| r.iter().zip(x).map(|(a, b)| (a - b) * (a - b)).sum::<f64>())
        .fold(f64::INFINITY, f64::min)
        .sqrt()
}

/// BNN+LV's side of the loop: fits on the labelled rows (standardised), the test LL of the
/// `TEST_DRAWS`-component mixture in original units.
struct LvFit<'a> {
    x: Vec<f64>,
    y: Vec<f64>,
    d: usize,
    test_x: burn::tensor::Tensor<2>,
    test_y: burn::tensor::Tensor<2>,
    sy: Standardizer,
    seed: u64,
    problem: String,
    options: &'a ActiveOptions,
}

impl ActiveTask<LatentRegressor> for LvFit<'_> {
    fn fit(
        &mut self,
        round: usize,
        rows: &[usize],
        _: Option<&[f64]>,
        warm: Option<LatentRegressor>,
    ) -> Result<LatentRegressor, ActiveError> {
        let o = self.options;
        let d = self.d;
        let device = training_device();
        let n = rows.len();
        let (x, y) = self.labelled(rows);
        let mlp = MlpConfig::new(d, vec![20, 20], 1).with_weights(depeweg_weights(1.0));
        let build =
            |device: &burn::tensor::Device| BnnLvConfig::new(mlp.clone()).init_regressor(n, device);
        let warm_start = o.retrain != "scratch";
        let epochs = match (&warm, warm_start) {
            (Some(_), true) => o.lv_round_epochs(&self.problem),
            _ => o.lv_epochs(&self.problem),
        };
        let config = TrainConfig::new(epochs)
            .with_batch_size(o.batch_size.unwrap_or(n.div_ceil(25)).max(1))
            .with_learning_rate(o.lv_learning_rate())
            .with_train_samples(25)
            .with_seed(experiment::derive(self.seed, &["fit"], round as u64))
            .with_progress(false);
        let trainer =
            Trainer::new(config).with_objective(AlphaConfig::new().with_alpha(1.0).init()?);
        let model = match warm {
            Some(m) => {
                let m = m.with_training_rows(n, &LatentConfig::new())?;
                trainer.fit(m, (x, y))?.0
            }
            // A resumed warm run: the loop loads the round's saved model over this one.
            None if warm_start && round > 0 => build(&device)?,
            None => trainer.build_and_fit(build, (x, y))?.0,
        };
        Ok(model)
    }

    fn evaluate(
        &mut self,
        model: &LatentRegressor,
        _: &ActiveHistory,
    ) -> Result<BTreeMap<String, f64>, ActiveError> {
        self.test_scores(model, PredictMode::Samples(TEST_DRAWS))
    }
}

impl LvFit<'_> {
    /// The labelled rows' inputs and targets, standardised, on the training device.
    fn labelled(&self, rows: &[usize]) -> (Tensor<2>, Tensor<2>) {
        let (d, device) = (self.d, training_device());
        let x: Vec<f64> = rows
            .iter()
            .flat_map(|&r| self.x[r * d..(r + 1) * d].iter().copied())
            .collect();
        let y: Vec<f64> = rows.iter().map(|&r| self.y[r]).collect();
        (matrix(&x, d, &device), matrix(&y, 1, &device))
    }

    /// Test LL and RMSE of `model`'s predictive in `mode`, original units.
    fn test_scores<M>(
        &self,
        model: &M,
        mode: PredictMode,
    ) -> Result<BTreeMap<String, f64>, ActiveError>
    where
        M: Predict<Input = Tensor<2>, Prediction = GaussianPrediction>,
    {
        let s = model
            .predict(self.test_x.clone(), mode)?
            .scores(self.test_y.clone(), &self.sy.std);
        Ok(BTreeMap::from([
            ("test_ll".to_string(), s.log_likelihood),
            ("test_rmse".to_string(), s.rmse),
        ]))
    }
}

/// Table 6.1's GP column: an RBF GP by random features refitted on the labelled rows every
/// round, its lengthscales, signal and noise by the evidence (the thesis: GPy, type-II ML).
impl ActiveTask<Regressor> for LvFit<'_> {
    fn fit(
        &mut self,
        round: usize,
        rows: &[usize],
        _: Option<&[f64]>,
        _: Option<Regressor>,
    ) -> Result<Regressor, ActiveError> {
        let (x, y) = self.labelled(rows);
        let gp = RandomFeatureGpConfig::new()
            .with_seed(experiment::derive(self.seed, &["gp"], round as u64))
            .fit(x, y)?;
        Ok(gp.model)
    }

    fn evaluate(
        &mut self,
        model: &Regressor,
        _: &ActiveHistory,
    ) -> Result<BTreeMap<String, f64>, ActiveError> {
        self.test_scores(model, PredictMode::Moments)
    }
}

impl Harness for LvStudy<'_> {
    type Task = LvTask;
    type Row = LvRow;

    const NAME: &'static str = "active";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<LvTask> {
        let o = self.options;
        let mut out = Vec::new();
        for problem in o.lv_problems() {
            for run in 0..o.runs {
                for a in o.lv_acquisitions() {
                    out.push(LvTask {
                        problem: problem.clone(),
                        acquisition: a,
                        run,
                    });
                }
            }
        }
        out
    }

    fn task_id(&self, t: &LvTask) -> String {
        format!("{} / {} / run {}", t.problem, t.acquisition, t.run)
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "study": o.study,
            "pool": o.lv_pool(),
            "per_round": o.per_round(),
            "iterations": o.lv_iterations(),
            "retrain": o.retrain,
            "epochs": o.epochs,
            "round_epochs": o.round_epochs,
            "batch_size": o.batch_size,
            "learning_rate": o.lv_learning_rate(),
            "draws": o.lv_draws(),
            "neighbour": o.lv_neighbour(),
        })
    }

    fn task_key(&self, t: &LvTask) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "train_points": o.lv_train_points(&t.problem),
            "epochs": o.lv_epochs(&t.problem),
            "round_epochs": o.lv_round_epochs(&t.problem),
        })
    }

    fn run_task(&self, task: &LvTask, ctx: &TaskContext) -> Result<LvRow, Box<dyn Error>> {
        self.run_one(task, ctx)
    }

    fn describe(&self, f: &Finished<LvTask, LvRow>) -> String {
        format!(
            "[active] {}: test LL {:.3} after {} rounds ({:.0} s)",
            f.id,
            f.row.final_ll,
            f.row.curve.len().saturating_sub(1),
            f.seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let o = self.options;
        let rows = run.rows();
        let mut md = format!(
            "# Active learning with BNN+LV (Depeweg 2019 Table 6.1, reduced)\n\n\
             BNN+LV 2 × 20 under black-box α = 1 from the §6.1 training set, then {} rounds of \
             {} rows from a uniform pool of {}; {}; entropies from {} × {} draws with k = {}. \
             Test LL on a uniform test set. Ours: mean ± standard error over runs; the thesis: \
             150 rounds, retrained from scratch for 5 000 epochs, ± standard error over 5 \
             runs.\n\n",
            o.lv_iterations(),
            o.per_round(),
            o.lv_pool(),
            match o.retrain.as_str() {
                "scratch" => format!(
                    "every round a new model for {} (toys) or {} (wet-chicken) epochs",
                    o.lv_epochs("bimodal"),
                    o.lv_epochs("wet-chicken")
                ),
                _ => format!(
                    "a first fit of {} (toys) or {} (wet-chicken) epochs, then {} or {} epochs \
                     per round from the last model",
                    o.lv_epochs("bimodal"),
                    o.lv_epochs("wet-chicken"),
                    o.lv_round_epochs("bimodal"),
                    o.lv_round_epochs("wet-chicken")
                ),
            },
            o.lv_draws(),
            o.lv_draws(),
            o.lv_neighbour(),
        );
        md.push_str(&table(&rows));
        md.push_str(&format!("\nWall time {:.0} s.\n", run.wall_seconds));
        run.write_report(o, serde_json::json!({}), &md)
    }
}

/// Final test LL per problem and acquisition beside Table 6.1, with the starting fit's LL, the
/// oracle's, and how far from the starting data the picks lay.
pub fn table(rows: &[LvRow]) -> String {
    let mut md = String::from(
        "| problem | acquisition | runs | start LL | final LL | thesis | oracle LL | pick distance |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for problem in PROBLEMS {
        for a in LV_ACQUISITIONS {
            let runs: Vec<&LvRow> = rows
                .iter()
                .filter(|r| r.task.problem == problem && r.task.acquisition == a)
                .collect();
            if runs.is_empty() {
                continue;
            }
            let stat = |f: &dyn Fn(&LvRow) -> Option<f64>| {
                let v: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
                if v.is_empty() {
                    return "–".to_string();
                }
                let (m, se) = mean_and_standard_error(&v);
                fmt_mean_se(m, se, 3)
            };
            let published = LV_PUBLISHED.iter().find(|p| p.0 == problem);
            let thesis = published.map_or("–".to_string(), |p| match a {
                "epistemic" => format!("{:.2} ± {:.2}", p.1, p.2),
                "total" => format!("{:.2} ± {:.2}", p.3, p.4),
                "gp" => format!("{:.2} ± {:.2}", p.5, p.6),
                _ => "–".to_string(),
            });
            md.push_str(&format!(
                "| {problem} | {a} | {} | {} | {} | {thesis} | {} | {} |\n",
                runs.len(),
                stat(&|r| r.curve.first().map(|c| c.1)),
                stat(&|r| Some(r.final_ll)),
                stat(&|r| r.oracle_ll),
                stat(&|r| Some(r.pick_distance)),
            ));
        }
    }
    md
}
