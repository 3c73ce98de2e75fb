//! `bnn-bench active`: active-learning studies on the library's loop
//! ([`bnn_burn::active::ActiveLearning`]). `--study linear` is Farquhar (2022) App. C.1's toy:
//! a linear model on a pool of 101 points, rows picked by a Boltzmann proposal over their
//! distance to the labelled ones, and over many trajectories the plain risk `R̃`, `R_PURE` and
//! `R_LURE` at a fixed model against the pool's risk (eqs. 5.7–5.9), and the test error of fits
//! weighted by each (Fig. 5.4b).

#[cfg(test)]
mod tests;

mod depeweg;
mod farquhar;
mod linear;
mod mnist;

use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use std::error::Error;

pub use depeweg::{LV_ACQUISITIONS, LV_PUBLISHED, LvRow, LvTask, PROBLEMS, table as lv_table};
pub use farquhar::{
    FAMILIES, FqEval, FqRow, FqTask, PROPORTIONS, TestingPoint, risk_table as farquhar_risk_table,
    testing_table as farquhar_testing_table,
};
pub use linear::{Estimates, LinearRow, Running, Summaries, Trajectory, linear_table};
pub use mnist::{ACQUISITIONS, MnistRow, MnistTask, PUBLISHED, paired_table, table as mnist_table};

/// The studies, in command-line order.
pub const STUDIES: [&str; 4] = ["linear", "mnist", "depeweg", "farquhar"];

/// Options of one `active` run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct ActiveOptions {
    /// The study: linear (Farquhar 2022 App. C.1's toy), mnist (Haußmann 2021 Tables
    /// 4.1–4.2 with the CLT-BNN), depeweg (Depeweg 2019 Table 6.1 with BNN+LV) or farquhar
    /// (Farquhar 2022 Figs. 5.5–5.8 on unbalanced MNIST, radial vs MC dropout).
    #[arg(long, default_value = "linear")]
    pub study: String,
    /// mnist, farquhar: the images, mnist or fashion.
    #[arg(long, default_value = "mnist")]
    pub dataset: String,
    /// Acquisitions; mnist: [default: random, maxent, bald, ral]; depeweg: epistemic, total,
    /// random or gp (Table 6.1's GP column) [default: epistemic, total].
    #[arg(long = "acquisition")]
    pub acquisitions: Vec<String>,
    /// Runs (trajectories), each with its own data, initial labels and seeds (Haußmann and
    /// Depeweg: 5; Farquhar: 45).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Pool size; mnist: images drawn from the training split [default: 10 000; 2 000 with
    /// --quick]; depeweg: points [default: 500; 100 with --quick]; farquhar: images of the
    /// unbalanced set [default: 2 000; 300 with --quick].
    #[arg(long)]
    pub pool: Option<usize>,
    /// mnist, farquhar: test images, the first ones [default: all, 1 000 with --quick;
    /// farquhar 2 000, 300 with --quick].
    #[arg(long)]
    pub test_images: Option<usize>,
    /// mnist, farquhar: random labels before the first acquisition [default: Haußmann's 50;
    /// Farquhar's 10].
    #[arg(long)]
    pub initial: Option<usize>,
    /// Labels per round [default: Haußmann's 5 (Depeweg: not stated); Farquhar's 1].
    #[arg(long)]
    pub per_round: Option<usize>,
    /// mnist, farquhar: labels at the end [default: Haußmann's 400, 70 with --quick; farquhar
    /// 70, 16 with --quick].
    #[arg(long)]
    pub labels: Option<usize>,
    /// mnist: epochs per round (the thesis: 30); depeweg: epochs of the first fit (and of
    /// every fit with --retrain scratch; the thesis: 5 000) [default: 30; depeweg: 2 000 on
    /// the toys, 500 on wet-chicken; 200 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Minibatch size [default: Haußmann's 10; depeweg: N/25; farquhar 16].
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Adam's learning rate; mnist: the first one, lowered linearly over the rounds (the
    /// thesis: 10⁻⁴) [default: 10⁻⁴; depeweg 3·10⁻³; farquhar 5·10⁻⁴].
    #[arg(long)]
    pub learning_rate: Option<f64>,
    /// farquhar: the posterior families [default: radial, mc-dropout].
    #[arg(long = "family")]
    pub families: Vec<String>,
    /// farquhar: T of the Boltzmann proposal `q(i) ∝ exp(T·BALD_i)` (the thesis: 10 000).
    #[arg(long, default_value_t = 10_000.0)]
    pub proposal_temperature: f64,
    /// farquhar: labels between the evaluations that train models under R̃, R_PURE and
    /// R_LURE (the thesis: 3).
    #[arg(long, default_value_t = 3)]
    pub evaluate_every: usize,
    /// farquhar: optimiser steps of every fit [default: 300; 40 with --quick].
    #[arg(long)]
    pub steps: Option<usize>,
    /// farquhar: draws of the BALD scores (the thesis: 100) [default: 40; 8 with --quick].
    #[arg(long)]
    pub acquisition_samples: Option<usize>,
    /// farquhar: draws of the test predictive [default: 20; 4 with --quick].
    #[arg(long)]
    pub predict_samples: Option<usize>,
    /// farquhar: training labels of active testing's fixed model (the thesis: 1 000)
    /// [default: 1 000; 100 with --quick].
    #[arg(long)]
    pub test_train: Option<usize>,
    /// farquhar: active testing's proposal is `q ∝ H_i + f·mean(H)` over the fixed model's
    /// predictive entropies `H` (its expected loss; Kossen et al. 2021); this is `f`.
    #[arg(long, default_value_t = 0.1)]
    pub test_floor: f64,
    /// farquhar: active tests per run (each a fresh draw of test labels).
    #[arg(long, default_value_t = 1000)]
    pub test_repeats: usize,
    /// depeweg: the problems [default: heteroscedastic, bimodal, wet-chicken].
    #[arg(long = "problem")]
    pub problems: Vec<String>,
    /// depeweg: acquisition rounds after the first fit (the thesis: 150) [default: 30; 3
    /// with --quick].
    #[arg(long)]
    pub iterations: Option<usize>,
    /// depeweg: scratch (a new model every round, as the thesis) or warm (the last round's
    /// model trained on for --round-epochs).
    #[arg(long, default_value = "warm")]
    pub retrain: String,
    /// depeweg: epochs of each warm round [default: 100 on the toys, 50 on wet-chicken; 20
    /// with --quick].
    #[arg(long)]
    pub round_epochs: Option<usize>,
    /// depeweg: weight draws and latent draws per weight draw of the entropy estimates (the
    /// thesis: 500 × 500) [default: 50; 20 with --quick].
    #[arg(long)]
    pub draws: Option<usize>,
    /// depeweg: the k-NN estimator's neighbour (the thesis: 25 of 500 draws) [default: 5].
    #[arg(long)]
    pub neighbour: Option<usize>,
    /// depeweg: training points before the first acquisition [default: the thesis's 750,
    /// 750 and 7 500; 100, 100 and 500 with --quick].
    #[arg(long)]
    pub train_points: Option<usize>,
    /// mnist: folder holding mnist/ and fashion-mnist/ [default: BNN_DATA_DIR, then
    /// ../shared/data].
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
    /// Trajectories, each with its own seed [default: 1000; 100 with --quick].
    #[arg(long)]
    pub trajectories: Option<usize>,
    /// Trajectories per task (the unit a resumed run keeps).
    #[arg(long, default_value_t = 100)]
    pub block: usize,
    /// β of the Boltzmann proposal over the distance scores normalised to [0, 1] (the thesis:
    /// 1).
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
    /// Labelled points at the end, `M` (the thesis: 10 ≤ M ≤ 100; the pool holds 101).
    #[arg(long, default_value_t = 100)]
    pub budget: usize,
    /// Labelled points between the reported `M`s (10, 20, … with the default).
    #[arg(long, default_value_t = 10)]
    pub every: usize,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl ActiveOptions {
    fn acquisitions(&self) -> Vec<String> {
        match self.acquisitions.is_empty() {
            true => ACQUISITIONS[..4].iter().map(|a| a.to_string()).collect(),
            false => self.acquisitions.clone(),
        }
    }

    fn pool(&self) -> usize {
        self.pool
            .unwrap_or(match (self.farquhar(), self.exp.quick) {
                (false, false) => 10_000,
                (false, true) => 2_000,
                (true, false) => 2_000,
                (true, true) => 300,
            })
    }

    fn farquhar(&self) -> bool {
        self.study == "farquhar"
    }

    fn initial(&self) -> usize {
        self.initial
            .unwrap_or(if self.farquhar() { 10 } else { 50 })
    }

    fn per_round(&self) -> usize {
        self.per_round
            .unwrap_or(if self.farquhar() { 1 } else { 5 })
    }

    fn mnist_budget(&self) -> usize {
        self.labels
            .unwrap_or(match (self.farquhar(), self.exp.quick) {
                (false, false) => 400,
                (false, true) => 70,
                (true, false) => 70,
                (true, true) => 16,
            })
    }

    fn lv_problems(&self) -> Vec<String> {
        match self.problems.is_empty() {
            true => depeweg::PROBLEMS.iter().map(|p| p.to_string()).collect(),
            false => self.problems.clone(),
        }
    }

    fn lv_acquisitions(&self) -> Vec<String> {
        match self.acquisitions.is_empty() {
            true => depeweg::LV_ACQUISITIONS[..2]
                .iter()
                .map(|a| a.to_string())
                .collect(),
            false => self.acquisitions.clone(),
        }
    }

    fn lv_pool(&self) -> usize {
        self.pool.unwrap_or(if self.exp.quick { 100 } else { 500 })
    }

    fn lv_iterations(&self) -> usize {
        self.iterations
            .unwrap_or(if self.exp.quick { 3 } else { 30 })
    }

    fn lv_epochs(&self, problem: &str) -> usize {
        let wet = problem == "wet-chicken";
        self.epochs.unwrap_or(match (self.exp.quick, wet) {
            (true, _) => 200,
            (false, false) => 2_000,
            (false, true) => 500,
        })
    }

    fn lv_round_epochs(&self, problem: &str) -> usize {
        let wet = problem == "wet-chicken";
        self.round_epochs.unwrap_or(match (self.exp.quick, wet) {
            (true, _) => 20,
            (false, false) => 100,
            (false, true) => 50,
        })
    }

    fn lv_learning_rate(&self) -> f64 {
        self.learning_rate.unwrap_or(3e-3)
    }

    fn lv_draws(&self) -> usize {
        self.draws.unwrap_or(if self.exp.quick { 20 } else { 50 })
    }

    fn lv_neighbour(&self) -> usize {
        self.neighbour.unwrap_or(5)
    }

    fn lv_train_points(&self, problem: &str) -> usize {
        let wet = problem == "wet-chicken";
        self.train_points.unwrap_or(match (self.exp.quick, wet) {
            (false, false) => 750,
            (false, true) => 7_500,
            (true, false) => 100,
            (true, true) => 500,
        })
    }

    fn fq_families(&self) -> Vec<String> {
        match self.families.is_empty() {
            true => farquhar::FAMILIES.iter().map(|f| f.to_string()).collect(),
            false => self.families.clone(),
        }
    }

    fn fq_steps(&self) -> usize {
        self.steps.unwrap_or(if self.exp.quick { 40 } else { 300 })
    }

    fn fq_batch_size(&self) -> usize {
        self.batch_size.unwrap_or(16)
    }

    fn fq_acquisition_samples(&self) -> usize {
        self.acquisition_samples
            .unwrap_or(if self.exp.quick { 8 } else { 40 })
    }

    fn fq_predict_samples(&self) -> usize {
        self.predict_samples
            .unwrap_or(if self.exp.quick { 4 } else { 20 })
    }

    fn fq_test_train(&self) -> usize {
        self.test_train
            .unwrap_or(if self.exp.quick { 100 } else { 1_000 })
    }

    fn check_farquhar(&self) -> Result<(), String> {
        if !["mnist", "fashion"].contains(&self.dataset.as_str()) {
            return Err(format!("--dataset {}: mnist or fashion", self.dataset));
        }
        for f in self.fq_families() {
            if !farquhar::FAMILIES.contains(&f.as_str()) {
                return Err(format!(
                    "--family {f}: not one of {}",
                    farquhar::FAMILIES.join(", ")
                ));
            }
        }
        for (flag, v) in [
            ("--runs", self.runs),
            ("--initial", self.initial()),
            ("--per-round", self.per_round()),
            ("--evaluate-every", self.evaluate_every),
            ("--steps", self.fq_steps()),
            ("--batch-size", self.fq_batch_size()),
            ("--acquisition-samples", self.fq_acquisition_samples()),
            ("--predict-samples", self.fq_predict_samples()),
            ("--test-train", self.fq_test_train()),
            ("--test-repeats", self.test_repeats),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if self.mnist_budget() <= self.initial() || self.mnist_budget() > self.pool() {
            return Err(format!(
                "--labels {}: above --initial {} and at most --pool {}",
                self.mnist_budget(),
                self.initial(),
                self.pool()
            ));
        }
        for (flag, t) in [
            ("--proposal-temperature", self.proposal_temperature),
            ("--test-floor", self.test_floor),
        ] {
            if !(t.is_finite() && t >= 0.0) {
                return Err(format!("{flag} {t}: a finite number ≥ 0"));
            }
        }
        check_learning_rate(self.learning_rate.unwrap_or(5e-4))
    }

    fn check_depeweg(&self) -> Result<(), String> {
        for p in self.lv_problems() {
            if !depeweg::PROBLEMS.contains(&p.as_str()) {
                return Err(format!(
                    "--problem {p}: not one of {}",
                    depeweg::PROBLEMS.join(", ")
                ));
            }
        }
        for a in self.lv_acquisitions() {
            if !depeweg::LV_ACQUISITIONS.contains(&a.as_str()) {
                return Err(format!(
                    "--acquisition {a}: not one of {}",
                    depeweg::LV_ACQUISITIONS.join(", ")
                ));
            }
        }
        if !["warm", "scratch"].contains(&self.retrain.as_str()) {
            return Err(format!("--retrain {}: warm or scratch", self.retrain));
        }
        for (flag, v) in [
            ("--runs", self.runs),
            ("--per-round", self.per_round()),
            ("--iterations", self.lv_iterations()),
            ("--epochs", self.epochs.unwrap_or(1)),
            ("--round-epochs", self.round_epochs.unwrap_or(1)),
            ("--batch-size", self.batch_size.unwrap_or(1)),
            ("--train-points", self.train_points.unwrap_or(2)),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        let acquired = self.lv_iterations() * self.per_round();
        if acquired > self.lv_pool() {
            return Err(format!(
                "--iterations {} × --per-round {}: {acquired} rows from a --pool of {}",
                self.lv_iterations(),
                self.per_round(),
                self.lv_pool()
            ));
        }
        if self.lv_draws() < 2 || self.lv_neighbour() >= self.lv_draws() {
            return Err(format!(
                "--draws {} and --neighbour {}: at least 2 draws, and the neighbour below them",
                self.lv_draws(),
                self.lv_neighbour()
            ));
        }
        check_learning_rate(self.lv_learning_rate())
    }

    fn check_mnist(&self) -> Result<(), String> {
        if !["mnist", "fashion"].contains(&self.dataset.as_str()) {
            return Err(format!("--dataset {}: mnist or fashion", self.dataset));
        }
        for a in self.acquisitions() {
            if !ACQUISITIONS.contains(&a.as_str()) {
                return Err(format!(
                    "--acquisition {a}: not one of {}",
                    ACQUISITIONS.join(", ")
                ));
            }
        }
        for (flag, v) in [
            ("--runs", self.runs),
            ("--initial", self.initial()),
            ("--per-round", self.per_round()),
            ("--epochs", self.mnist_epochs()),
            ("--batch-size", self.mnist_batch_size()),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if self.mnist_budget() <= self.initial() || self.mnist_budget() > self.pool() {
            return Err(format!(
                "--labels {}: above --initial {} and at most --pool {}",
                self.mnist_budget(),
                self.initial(),
                self.pool()
            ));
        }
        check_learning_rate(self.mnist_learning_rate())
    }

    fn mnist_epochs(&self) -> usize {
        self.epochs.unwrap_or(30)
    }

    fn mnist_batch_size(&self) -> usize {
        self.batch_size.unwrap_or(10)
    }

    fn mnist_learning_rate(&self) -> f64 {
        self.learning_rate.unwrap_or(1e-4)
    }

    fn trajectories(&self) -> usize {
        self.trajectories
            .unwrap_or(if self.exp.quick { 100 } else { 1000 })
    }

    /// The reported `M`s.
    fn checkpoints(&self) -> Vec<usize> {
        (1..=self.budget / self.every.max(1))
            .map(|k| k * self.every)
            .collect()
    }

    fn check(&self) -> Result<(), String> {
        if !STUDIES.contains(&self.study.as_str()) {
            return Err(format!(
                "--study {}: not one of {}",
                self.study,
                STUDIES.join(", ")
            ));
        }
        if self.trajectories() < 2 {
            return Err(format!(
                "--trajectories {}: at least 2 (a standard error)",
                self.trajectories()
            ));
        }
        if self.block == 0 {
            return Err("--block 0: at least 1 trajectory per task".into());
        }
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(format!(
                "--temperature {}: a finite number ≥ 0",
                self.temperature
            ));
        }
        if self.budget < 2 || self.budget > linear::POOL {
            return Err(format!(
                "--budget {}: between 2 and the pool's {} points",
                self.budget,
                linear::POOL
            ));
        }
        if self.every == 0 || self.every > self.budget {
            return Err(format!(
                "--every {}: between 1 and --budget {}",
                self.every, self.budget
            ));
        }
        Ok(())
    }
}

fn check_learning_rate(rate: f64) -> Result<(), String> {
    match rate.is_finite() && rate > 0.0 {
        true => Ok(()),
        false => Err(format!("--learning-rate {rate}: a finite number > 0")),
    }
}

/// One block of trajectories.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// The study.
    pub study: String,
    /// The block's index; its trajectories are `block·size ..`.
    pub block: usize,
    /// Its first trajectory.
    pub first: usize,
    /// Its trajectories.
    pub count: usize,
}

/// The harness.
pub struct ActiveHarness<'a> {
    options: &'a ActiveOptions,
    toy: linear::LinearToy,
}

impl Harness for ActiveHarness<'_> {
    type Task = Task;
    type Row = LinearRow;

    const NAME: &'static str = "active";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<Task> {
        let (n, b) = (self.options.trajectories(), self.options.block);
        (0..n.div_ceil(b))
            .map(|k| Task {
                study: self.options.study.clone(),
                block: k,
                first: k * b,
                count: b.min(n - k * b),
            })
            .collect()
    }

    fn task_id(&self, t: &Task) -> String {
        format!(
            "{} / trajectories {}–{}",
            t.study,
            t.first,
            t.first + t.count - 1
        )
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "study": o.study,
            "temperature": o.temperature,
            "budget": o.budget,
            "every": o.every,
        })
    }

    fn task_key(&self, t: &Task) -> serde_json::Value {
        serde_json::json!({ "first": t.first, "count": t.count })
    }

    fn run_task(&self, task: &Task, _: &TaskContext) -> Result<LinearRow, Box<dyn Error>> {
        let o = self.options;
        let trajectories = (task.first..task.first + task.count)
            .map(|t| {
                self.toy
                    .trajectory(t as u64, o.temperature, o.budget, &o.checkpoints())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LinearRow::of(task.block, o.checkpoints(), &trajectories))
    }

    fn describe(&self, f: &Finished<Task, LinearRow>) -> String {
        let r = &f.row;
        let last = r.checkpoints.len() - 1;
        let e = &r.estimates[last];
        let truth = self.toy.truth;
        format!(
            "[active] {}: at M = {}, mean bias R̃ {:+.4}, PURE {:+.4}, LURE {:+.4} ({:.0} s)",
            f.id,
            r.checkpoints[last],
            e.plain.mean - truth,
            e.pure.mean - truth,
            e.lure.mean - truth,
            f.seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let rows = run.rows();
        let md = linear::markdown(&rows, &self.toy, self.options, run.wall_seconds);
        run.write_report(
            self.options,
            serde_json::json!({
                "pool_risk": self.toy.truth,
                "optimal_test_mse": self.toy.optimal_test_mse,
            }),
            &md,
        )
    }
}

/// The `--dataset`'s training and test images from `--data-dir`.
fn load_images(
    options: &ActiveOptions,
) -> Result<
    (
        bnn_datasets::MnistFamily,
        bnn_datasets::ImageSet,
        bnn_datasets::ImageSet,
    ),
    Box<dyn Error>,
> {
    let root = bnn_datasets::DataRoot::new(options.data_dir.as_deref());
    let family = match options.dataset.as_str() {
        "fashion" => bnn_datasets::MnistFamily::FashionMnist,
        _ => bnn_datasets::MnistFamily::Mnist,
    };
    let train = family.load(bnn_datasets::Split::Train, &root)?;
    let test = family.load(bnn_datasets::Split::Test, &root)?;
    Ok((family, train, test))
}

/// Runs `active --study mnist` with `options`: loads the images and runs every acquisition.
///
/// # Errors
/// Options out of range (before any work), missing files (named), the runner's and the loop's
/// failures.
pub fn run_mnist(options: &ActiveOptions) -> Result<Vec<MnistRow>, Box<dyn Error>> {
    options.check_mnist()?;
    let (family, train, test) = load_images(options)?;
    let test = match options.test_images.or(options.exp.quick.then_some(1_000)) {
        Some(k) => test.first(k),
        None => test,
    };
    options.run.check()?;
    let study = mnist::MnistStudy::new(options, family, train, test);
    let done = runner::run(&study, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}

/// Runs `active --study farquhar` with `options`: loads the images, then every family's
/// trajectories.
///
/// # Errors
/// Options out of range (before any work), missing files (named), the runner's and the loop's
/// failures.
pub fn run_farquhar(options: &ActiveOptions) -> Result<Vec<FqRow>, Box<dyn Error>> {
    options.check_farquhar()?;
    let (family, train, test) = load_images(options)?;
    run_farquhar_on(options, family, train, test)
}

/// [`run_farquhar`] on given images (`family` names their normalisation).
///
/// # Errors
/// As [`run_farquhar`], less the files.
pub fn run_farquhar_on(
    options: &ActiveOptions,
    family: bnn_datasets::MnistFamily,
    train: bnn_datasets::ImageSet,
    test: bnn_datasets::ImageSet,
) -> Result<Vec<FqRow>, Box<dyn Error>> {
    options.check_farquhar()?;
    let k = options
        .test_images
        .unwrap_or(if options.exp.quick { 300 } else { 2_000 });
    options.run.check()?;
    let study = farquhar::FqStudy::new(options, family, train, test.first(k));
    let done = runner::run(&study, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}

/// Runs `active --study depeweg` with `options`: every problem, acquisition and run.
///
/// # Errors
/// Options out of range (before any work), the runner's and the loop's failures.
pub fn run_depeweg(options: &ActiveOptions) -> Result<Vec<LvRow>, Box<dyn Error>> {
    options.check_depeweg()?;
    options.run.check()?;
    let study = depeweg::LvStudy::new(options);
    let done = runner::run(&study, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}

/// Runs `active --study linear` with `options`.
///
/// # Errors
/// Options out of range (before any work), then the runner's and the loop's failures.
pub fn run(options: &ActiveOptions) -> Result<Vec<LinearRow>, Box<dyn Error>> {
    options.check()?;
    let harness = ActiveHarness {
        options,
        toy: linear::LinearToy::new(options.exp.seed),
    };
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
