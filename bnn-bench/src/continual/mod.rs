//! `bnn-bench continual`: Farquhar (2022) §5.1's continual-learning evaluations on the library's
//! loop ([`bnn_burn::continual::run_sequence`]): split MNIST, split Fashion-MNIST and permuted
//! MNIST; VCL, VCL with k-center coresets, "coreset only" and EWC; mean-field and radial
//! posteriors; single-head (with the test-time-knowledge score) or multi-head. Each row is one
//! sequence: every task's test accuracy after each task, and the first task's model's mean
//! predictive entropy on the second task (Fig. 5.1's diagnostic).

mod report;
mod sequence;
#[cfg(test)]
pub(crate) mod tests;

use crate::catalogue::Method;
use crate::experiment;
use crate::runner::{self, Finished, Harness, ReportInput, TaskContext};
use bnn_burn::layers::Estimator;
use bnn_burn::likelihood::{Categorical, Likelihood, TaskHeads};
use bnn_datasets::continual::{SPLIT_PAIRS, permuted_tasks, split_tasks};
use bnn_datasets::{DataRoot, ImageSet, MnistFamily, Normalization, Split};
use std::error::Error;
use std::path::PathBuf;

pub use report::{continual_table, entropy_table};
pub use sequence::HIDDEN;

/// Classes of MNIST and Fashion-MNIST.
const CLASSES: usize = 10;

/// A task sequence.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Sequence {
    /// MNIST's class pairs (0, 1) … (8, 9).
    SplitMnist,
    /// Fashion-MNIST's class pairs.
    SplitFashion,
    /// MNIST, then seeded pixel permutations of it (`--permuted-tasks` in all).
    PermutedMnist,
}

impl Sequence {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::SplitMnist => "split-mnist",
            Self::SplitFashion => "split-fashion",
            Self::PermutedMnist => "permuted-mnist",
        }
    }

    fn family(self) -> MnistFamily {
        match self {
            Self::SplitFashion => MnistFamily::FashionMnist,
            _ => MnistFamily::Mnist,
        }
    }
}

/// How tasks follow each other (Farquhar 2022 §5.1's methods).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// VCL without a coreset: the posterior as the next prior.
    Vcl,
    /// VCL with k-center coresets and their fine-tune before testing.
    VclCoreset,
    /// A model trained from the initial prior every task, fine-tuned on the coresets under
    /// that prior (Farquhar 2022 §5.1's "coreset only").
    CoresetOnly,
    /// EWC: a point network, the diagonal Laplace of the last task as the next prior.
    Ewc,
}

impl Strategy {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Vcl => "vcl",
            Self::VclCoreset => "vcl-coreset",
            Self::CoresetOnly => "coreset-only",
            Self::Ewc => "ewc",
        }
    }

    /// The weight model: the family's for the variational strategies, MAP for EWC.
    fn method(self, family: Family) -> Method {
        match (self, family) {
            (Self::Ewc, _) | (_, Family::Point) => Method::map(1.0),
            (_, Family::MeanField) => Method::mean_field(Estimator::LocalReparameterization),
            (_, Family::Radial) => Method::radial(),
        }
    }
}

/// The posterior family of the variational strategies.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// Mean-field Gaussian (local reparameterisation).
    MeanField,
    /// Radial.
    Radial,
    /// A point estimate (EWC's; not a command-line choice).
    #[value(skip)]
    Point,
}

impl Family {
    /// The printed name.
    pub fn name(self) -> &'static str {
        match self {
            Self::MeanField => "mean-field",
            Self::Radial => "radial",
            Self::Point => "point",
        }
    }
}

/// Heads of the network.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Heads {
    /// One softmax over the ten classes; the test-time-knowledge score is reported beside.
    Single,
    /// One two-class head per split task, trained and tested on its own task only.
    Multi,
}

/// Options of one `continual` run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct ContinualOptions {
    /// Task sequences [default: all three].
    #[arg(long = "sequence", value_enum)]
    pub sequences: Vec<Sequence>,
    /// Strategies [default: all four].
    #[arg(long = "strategy", value_enum)]
    pub strategies: Vec<Strategy>,
    /// Posterior families of VCL and the coresets [default: mean-field and radial].
    #[arg(long = "family", value_enum)]
    pub families: Vec<Family>,
    /// Heads [default: single]; multi-head runs the split sequences' variational strategies.
    #[arg(long = "heads", value_enum)]
    pub heads: Vec<Heads>,
    /// Repetitions, each from its own seed [default: 3; 1 with --quick].
    #[arg(long)]
    pub seeds: Option<usize>,
    /// Epochs per task [default: 10; 2 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Epochs of the coresets' fine-tune [default: --epochs × 5; a coreset is one minibatch].
    #[arg(long)]
    pub coreset_epochs: Option<usize>,
    /// Adam's learning rate of the coresets' fine-tune.
    #[arg(long, default_value_t = 1e-3)]
    pub coreset_learning_rate: f64,
    /// Coreset images per task (VCL and the thesis: 40).
    #[arg(long, default_value_t = 40)]
    pub coreset: usize,
    /// Minibatch size.
    #[arg(long, default_value_t = 256)]
    pub batch_size: usize,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 1e-3)]
    pub learning_rate: f64,
    /// Training images per task, the first ones [default: all; 1 000 with --quick].
    #[arg(long)]
    pub train_images: Option<usize>,
    /// Test images per task, the first ones [default: all; 500 with --quick].
    #[arg(long)]
    pub test_images: Option<usize>,
    /// Tasks of permuted MNIST (the thesis: 10).
    #[arg(long, default_value_t = 10)]
    pub permuted_tasks: usize,
    /// EWC's λ: the weight of the last task's Fisher in the next prior.
    #[arg(long, default_value_t = 1.0)]
    pub ewc_lambda: f64,
    /// Posterior draws per test prediction.
    #[arg(long, default_value_t = 10)]
    pub samples: usize,
    /// Folder holding mnist/ and fashion-mnist/ [default: BNN_DATA_DIR, then ../shared/data].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The seed, and `quick`: the small budget.
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: runner::ExperimentArgs,
    /// The output folder, resuming, worker processes.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: runner::RunnerOptions,
}

impl ContinualOptions {
    /// The options of `out` with every default (the full budget).
    pub fn new(out: PathBuf) -> Self {
        Self {
            sequences: Vec::new(),
            strategies: Vec::new(),
            families: Vec::new(),
            heads: Vec::new(),
            seeds: None,
            epochs: None,
            coreset_epochs: None,
            coreset_learning_rate: 1e-3,
            coreset: 40,
            batch_size: 256,
            learning_rate: 1e-3,
            train_images: None,
            test_images: None,
            permuted_tasks: 10,
            ewc_lambda: 1.0,
            samples: 10,
            data_dir: None,
            exp: runner::ExperimentArgs::default(),
            run: runner::RunnerOptions::new(out),
        }
    }

    fn or_all<T: Copy>(chosen: &[T], all: &[T]) -> Vec<T> {
        if chosen.is_empty() {
            all.to_vec()
        } else {
            chosen.to_vec()
        }
    }

    fn sequences(&self) -> Vec<Sequence> {
        Self::or_all(
            &self.sequences,
            &[
                Sequence::SplitMnist,
                Sequence::SplitFashion,
                Sequence::PermutedMnist,
            ],
        )
    }

    fn strategies(&self) -> Vec<Strategy> {
        Self::or_all(
            &self.strategies,
            &[
                Strategy::Vcl,
                Strategy::VclCoreset,
                Strategy::CoresetOnly,
                Strategy::Ewc,
            ],
        )
    }

    fn families(&self) -> Vec<Family> {
        Self::or_all(&self.families, &[Family::MeanField, Family::Radial])
    }

    fn heads(&self) -> Vec<Heads> {
        Self::or_all(&self.heads, &[Heads::Single])
    }

    fn seeds(&self) -> usize {
        self.seeds.unwrap_or(if self.exp.quick { 1 } else { 3 })
    }

    pub(crate) fn epochs(&self) -> usize {
        self.epochs.unwrap_or(if self.exp.quick { 2 } else { 10 })
    }

    pub(crate) fn coreset_epochs(&self) -> usize {
        self.coreset_epochs.unwrap_or(self.epochs() * 5)
    }

    fn train_images(&self) -> Option<usize> {
        self.train_images.or(self.exp.quick.then_some(1_000))
    }

    fn test_images(&self) -> Option<usize> {
        self.test_images.or(self.exp.quick.then_some(500))
    }

    /// Checks every setting before any work; the error names the flag.
    pub fn check(&self) -> Result<(), String> {
        for (flag, v) in [
            ("--seeds", self.seeds()),
            ("--epochs", self.epochs()),
            ("--coreset-epochs", self.coreset_epochs()),
            ("--batch-size", self.batch_size),
            ("--samples", self.samples),
            ("--train-images", self.train_images().unwrap_or(1)),
            ("--test-images", self.test_images().unwrap_or(1)),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: at least 1"));
            }
        }
        if self.permuted_tasks < 2 {
            return Err(format!(
                "--permuted-tasks {}: at least 2 (a sequence)",
                self.permuted_tasks
            ));
        }
        for (flag, v) in [
            ("--learning-rate", self.learning_rate),
            ("--coreset-learning-rate", self.coreset_learning_rate),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{flag} {v}: a finite number > 0"));
            }
        }
        if !(self.ewc_lambda.is_finite() && self.ewc_lambda >= 0.0) {
            return Err(format!(
                "--ewc-lambda {}: a finite number ≥ 0",
                self.ewc_lambda
            ));
        }
        if let Some(k) = self.train_images()
            && self.coreset >= k
        {
            return Err(format!(
                "--coreset {}: fewer than --train-images {k}, so a task keeps rows to train on",
                self.coreset
            ));
        }
        if self.tasks().is_empty() {
            return Err(
                "--heads multi runs the split sequences' variational strategies only: \
                        nothing to run"
                    .into(),
            );
        }
        Ok(())
    }

    /// The run's sequences, in task order.
    fn tasks(&self) -> Vec<Task> {
        let mut out = Vec::new();
        for sequence in self.sequences() {
            for heads in self.heads() {
                if heads == Heads::Multi && sequence == Sequence::PermutedMnist {
                    continue;
                }
                for strategy in self.strategies() {
                    let families = match strategy {
                        Strategy::Ewc if heads == Heads::Multi => continue,
                        Strategy::Ewc => vec![Family::Point],
                        _ => self.families(),
                    };
                    for family in families {
                        for seed in 0..self.seeds() {
                            out.push(Task {
                                sequence,
                                heads,
                                method: strategy,
                                family,
                                seed,
                            });
                        }
                    }
                }
            }
        }
        out
    }
}

/// One sequence's tasks: training and test images and the classes a task's head covers.
pub(crate) struct TaskData {
    pub(crate) train: ImageSet,
    pub(crate) test: ImageSet,
    pub(crate) classes: Vec<u8>,
}

/// One sequence run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// The task sequence.
    pub sequence: Sequence,
    /// Single- or multi-head.
    pub heads: Heads,
    /// The strategy.
    pub method: Strategy,
    /// The posterior family ([`Family::Point`] for EWC).
    pub family: Family,
    /// The repetition.
    pub seed: usize,
}

impl Task {
    /// `split-mnist / single / vcl / mean-field / seed 0`.
    pub fn id(&self) -> String {
        format!(
            "{} / {} / {} / {} / seed {}",
            self.sequence.name(),
            match self.heads {
                Heads::Single => "single",
                Heads::Multi => "multi",
            },
            self.method.name(),
            self.family.name(),
            self.seed
        )
    }
}

/// What one sequence measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ContinualRow {
    /// The run.
    pub task: Task,
    /// `scores[t][s]`: task `s`'s test accuracy (%) after training on tasks `0..=t`, over all
    /// classes (single-head) or the task's own (multi-head).
    pub scores: Vec<Vec<f64>>,
    /// The same over each task's own classes: test-time knowledge for a single head.
    pub known_task: Vec<Vec<f64>>,
    /// The first task's model's mean predictive entropy (nats) on the second task's test
    /// images.
    pub second_task_entropy: Option<f64>,
    /// Training images per task (coresets included).
    pub train_images: Vec<usize>,
    /// Wall seconds.
    pub seconds: f64,
}

impl ContinualRow {
    /// The mean accuracy over the tasks seen, after each task.
    pub fn average(&self) -> Vec<f64> {
        self.scores
            .iter()
            .map(|r| r.iter().sum::<f64>() / r.len() as f64)
            .collect()
    }
}

/// The harness: one task per sequence run.
pub(crate) struct ContinualHarness<'a> {
    options: &'a ContinualOptions,
    /// Each sequence's tasks, normalisation and data digest.
    data: Vec<(Sequence, Vec<TaskData>, Normalization, String)>,
}

impl ContinualHarness<'_> {
    fn data_of(&self, sequence: Sequence) -> (&[TaskData], &Normalization, &str) {
        let (_, tasks, norm, digest) = self
            .data
            .iter()
            .find(|d| d.0 == sequence)
            .expect("every sequence's data loaded");
        (tasks, norm, digest)
    }
}

impl Harness for ContinualHarness<'_> {
    type Task = Task;
    type Row = ContinualRow;

    const NAME: &'static str = "continual";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<Task> {
        self.options.tasks()
    }

    fn task_id(&self, t: &Task) -> String {
        t.id()
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.exp.seed,
            "epochs": o.epochs(),
            "coreset_epochs": o.coreset_epochs(),
            "coreset_learning_rate": o.coreset_learning_rate,
            "coreset": o.coreset,
            "batch_size": o.batch_size,
            "learning_rate": o.learning_rate,
            "permuted_tasks": o.permuted_tasks,
            "ewc_lambda": o.ewc_lambda,
            "samples": o.samples,
            "hidden": HIDDEN,
        })
    }

    /// A row depends on its own sequence's images only: runs of other sequences share the
    /// folder.
    fn task_key(&self, t: &Task) -> serde_json::Value {
        serde_json::json!({ "data": self.data_of(t.sequence).2 })
    }

    fn run_task(&self, task: &Task, _: &TaskContext) -> Result<ContinualRow, Box<dyn Error>> {
        let (tasks, norm, _) = self.data_of(task.sequence);
        sequence::run_one(self.options, tasks, norm, task)
    }

    fn describe(&self, f: &Finished<Task, ContinualRow>) -> String {
        let avg = f.row.average();
        format!(
            "[continual] {}: average accuracy after each task {} ({:.0} s)",
            f.id,
            avg.iter()
                .map(|a| format!("{a:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
            f.seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let rows = run.rows();
        let md = report::markdown(&rows, self.options, run.wall_seconds);
        run.write_report(self.options, serde_json::json!({}), &md)
    }
}

/// Loads the sequences' images from `options.data_dir` and runs them.
///
/// # Errors
/// Bad options (before any work), missing files (named), the runner's and the loop's failures.
pub fn run(options: &ContinualOptions) -> Result<Vec<ContinualRow>, Box<dyn Error>> {
    options.check()?;
    let root = DataRoot::new(options.data_dir.as_deref());
    let mut sets = Vec::new();
    for family in [MnistFamily::Mnist, MnistFamily::FashionMnist] {
        if options.sequences().iter().any(|s| s.family() == family) {
            sets.push((
                family,
                family.load(Split::Train, &root)?,
                family.load(Split::Test, &root)?,
            ));
        }
    }
    run_on(options, &sets)
}

/// Runs `options` on the given training and test sets of each image family.
///
/// # Errors
/// As [`run`].
pub fn run_on(
    options: &ContinualOptions,
    sets: &[(MnistFamily, ImageSet, ImageSet)],
) -> Result<Vec<ContinualRow>, Box<dyn Error>> {
    options.check()?;
    options.run.check()?;
    let mut data = Vec::new();
    for sequence in options.sequences() {
        let mut digest = bnn_burn::integrity::Digest::new();
        let (_, train, test) = sets
            .iter()
            .find(|s| s.0 == sequence.family())
            .ok_or_else(|| {
                format!(
                    "{}: no {} images",
                    sequence.name(),
                    sequence.family().dir_name()
                )
            })?;
        let cap =
            |set: &ImageSet, k: Option<usize>| k.map_or_else(|| set.clone(), |k| set.first(k));
        let tasks: Vec<TaskData> = match sequence {
            Sequence::PermutedMnist => {
                let seed = experiment::derive(options.exp.seed, &["permutations"], 0);
                let train = permuted_tasks(
                    &cap(train, options.train_images()),
                    options.permuted_tasks,
                    seed,
                );
                let test = permuted_tasks(
                    &cap(test, options.test_images()),
                    options.permuted_tasks,
                    seed,
                );
                train
                    .into_iter()
                    .zip(test)
                    .map(|(train, test)| TaskData {
                        train,
                        test,
                        classes: (0..CLASSES as u8).collect(),
                    })
                    .collect()
            }
            _ => split_tasks(train, &SPLIT_PAIRS)
                .into_iter()
                .zip(split_tasks(test, &SPLIT_PAIRS))
                .zip(SPLIT_PAIRS)
                .map(|((train, test), pair)| TaskData {
                    train: cap(&train, options.train_images()),
                    test: cap(&test, options.test_images()),
                    classes: pair.to_vec(),
                })
                .collect(),
        };
        for (k, t) in tasks.iter().enumerate() {
            for (what, set) in [("training", &t.train), ("test", &t.test)] {
                if set.is_empty() {
                    return Err(format!("{} task {k}: no {what} images", sequence.name()).into());
                }
            }
            if t.train.len() <= options.coreset {
                return Err(format!(
                    "--coreset {}: {} task {k} has {} training images",
                    options.coreset,
                    sequence.name(),
                    t.train.len()
                )
                .into());
            }
            digest
                .number(t.train.len() as u64)
                .update(&t.train.pixels)
                .update(&t.train.labels)
                .update(&t.test.pixels)
                .update(&t.test.labels);
        }
        data.push((
            sequence,
            tasks,
            sequence.family().normalization(),
            digest.hex(),
        ));
    }
    let harness = ContinualHarness { options, data };
    let done = runner::run(&harness, &options.run)?;
    Ok(done.into_iter().map(|d| d.row).collect())
}
