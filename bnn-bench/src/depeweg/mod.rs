//! `bnn-bench depeweg`: Tables 5.1 and 5.2 of Depeweg (2019). BNN+LV under black-box α (VB at
//! α = 10⁻⁶, α = ½, α = 1) and a BNN (α = 1) on seven UCI sets, the heteroscedastic and bimodal toys
//! and wet-chicken: 5 random 90/10 splits, 2 hidden ReLU layers, Adam 10⁻³ for 5 000 epochs in
//! minibatches of N/25, `K` joint draws per step; test LL of the `K`-draw mixture (eq. 5.7) and
//! RMSE, mean ± s.e. over the splits beside the published columns. Every split is a task of the
//! bench's runner ([`crate::runner`]). Protocol and results: the book's *Latent-variable BNNs*
//! page.

use crate::experiment;
use crate::uci::{MeanSe, z_score};
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::metrics::mean_and_standard_error;
use bnn_burn::nets::{BnnLvConfig, MlpConfig};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::predict::{
    GaussianPrediction, MixtureAccumulator, Predict, PredictMode, RegressionScores,
};
use bnn_burn::recipes::depeweg_weights;
use bnn_burn::train::{TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::dynamics::WetChicken;
use bnn_datasets::toy;
use bnn_datasets::uci::{UciData, UciDataset};
use bnn_datasets::{DataRoot, RegressionData};
use burn::module::Module;
use burn::tensor::Tensor;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use std::error::Error;
use std::path::PathBuf;

mod fit;
mod harness;
mod published;
mod report;
#[cfg(test)]
mod tests;

pub use fit::*;
pub use harness::DepewegTask;
pub use published::*;
pub use report::*;

/// A data set of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepewegSet {
    /// One of the UCI sets.
    Uci(UciDataset),
    /// `y = 7 sin x + 3|cos(x/2)| ε`, `x ~ U[−4, 4]`, n = 1000.
    Heteroscedastic,
    /// `y = z·10 cos x + (1 − z)·10 sin x + ε`, `x ~ U[−0.5, 2]`, n = 2500.
    Bimodal,
    /// Wet-chicken 2-D: `(x, y, a_x, a_y) → y'`, n = 2500.
    WetChicken,
    /// The Industrial Benchmark (§4.3.2): the cost from the 61-column time embedding of 5
    /// random trajectories of 1 000 steps at each setpoint 10, …, 100 (n ≈ 50 000). Opt-in
    /// (`--dataset industrial`): not among the default ten.
    Industrial,
}

/// Every set the harness knows: the default ten, then the Industrial Benchmark.
pub const ALL_SETS: [DepewegSet; 11] = [
    SETS[0],
    SETS[1],
    SETS[2],
    SETS[3],
    SETS[4],
    SETS[5],
    SETS[6],
    SETS[7],
    SETS[8],
    SETS[9],
    DepewegSet::Industrial,
];

/// The ten sets of the tables run by default, in their order.
pub const SETS: [DepewegSet; 10] = [
    DepewegSet::Uci(UciDataset::Boston),
    DepewegSet::Uci(UciDataset::PowerPlant),
    DepewegSet::Uci(UciDataset::Concrete),
    DepewegSet::Uci(UciDataset::Energy),
    DepewegSet::Uci(UciDataset::Kin8nm),
    DepewegSet::Uci(UciDataset::Naval),
    DepewegSet::Uci(UciDataset::Wine),
    DepewegSet::Heteroscedastic,
    DepewegSet::Bimodal,
    DepewegSet::WetChicken,
];

impl DepewegSet {
    /// Name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            DepewegSet::Uci(d) => d.name(),
            DepewegSet::Heteroscedastic => "heteroscedastic",
            DepewegSet::Bimodal => "bimodal",
            DepewegSet::WetChicken => "wet-chicken",
            DepewegSet::Industrial => "industrial",
        }
    }

    /// The set named `s` (case-insensitive); an error lists the known names.
    pub fn parse(s: &str) -> Result<Self, String> {
        ALL_SETS
            .iter()
            .copied()
            .find(|d| d.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let known: Vec<_> = ALL_SETS.iter().map(|d| d.name()).collect();
                format!("--dataset {s:?}: unknown; known: {}", known.join(", "))
            })
    }

    /// Hidden units per layer (§5.2: 20 for the toys and wet-chicken, 50 elsewhere).
    pub fn hidden(self) -> usize {
        match self {
            DepewegSet::Uci(_) | DepewegSet::Industrial => 50,
            _ => 20,
        }
    }

    /// All rows of the set: the UCI files (from `root`), or the generated problem (its own
    /// seed, the same for every split and model).
    ///
    /// # Errors
    /// A missing or malformed UCI file (named).
    pub fn load(self, root: &DataRoot, seed: u64) -> Result<RegressionData, Box<dyn Error>> {
        let data_seed = experiment::derive(seed, &[self.name(), "data"], 0);
        let one_d = |t: toy::Regression1d| RegressionData::new(t.x, t.y, 1, 1);
        Ok(match self {
            DepewegSet::Uci(d) => UciData::load(d, root)?.data,
            DepewegSet::Heteroscedastic => one_d(toy::heteroscedastic(1000, data_seed))?,
            DepewegSet::Bimodal => one_d(toy::bimodal(2500, data_seed))?,
            DepewegSet::WetChicken => {
                let t = WetChicken::default().random_transitions(2500, data_seed);
                let full = t.next_state_regression();
                // The target of Table 5.1: the y-coordinate of the next state.
                let y = full.y.chunks(2).map(|s| s[1]).collect();
                RegressionData::new(full.x, y, full.n_features, 1)?
            }
            DepewegSet::Industrial => {
                use bnn_datasets::industrial::{IndustrialBenchmark, time_embedding};
                let setpoints: Vec<f64> = (1..=10).map(|k| 10.0 * k as f64).collect();
                let t = IndustrialBenchmark::random_trajectories(&setpoints, 5, 1000, data_seed)?;
                time_embedding(&t, 15)?
            }
        })
    }
}

/// A model column of the tables.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DepewegModel {
    /// Name on the command line and in tables.
    pub name: &'static str,
    /// Whether the net has a latent input per data point (BNN+LV) or not (BNN).
    pub latent: bool,
    /// The α of black-box α (below 10⁻³ the exact ELBO: VB).
    pub alpha: f64,
    /// `0`: a BNN trained by black-box α. `K > 0`: the MLP ensemble baseline (§2.4.1, eqs.
    /// 2.51–2.55): `K` early-stopped MLPs, each on its own random validation split, with its
    /// validation MSE as its noise variance; the predictive their Gaussian mixture.
    pub members: usize,
}

/// The model columns: Table 5.1's BNN, BNN+LV at Table 5.2's three α, and the MLP ensemble of
/// both tables.
pub const MODELS: [DepewegModel; 5] = [
    DepewegModel {
        name: "BNN",
        latent: false,
        alpha: 1.0,
        members: 0,
    },
    DepewegModel {
        name: "BNN+LV VB",
        latent: true,
        alpha: 1e-6,
        members: 0,
    },
    DepewegModel {
        name: "BNN+LV α=0.5",
        latent: true,
        alpha: 0.5,
        members: 0,
    },
    DepewegModel {
        name: "BNN+LV α=1",
        latent: true,
        alpha: 1.0,
        members: 0,
    },
    DepewegModel {
        name: "MLP Ens.",
        latent: false,
        alpha: 0.0,
        members: ENSEMBLE_MEMBERS,
    },
];

/// Members of the MLP ensemble (§5.2: 25).
pub const ENSEMBLE_MEMBERS: usize = 25;

impl DepewegModel {
    /// The model named `s`: its name, case-insensitive, with `a` or `alpha` accepted for `α`
    /// and spaces optional (`"BNN+LV alpha=0.5"`, `bnn+lv-vb` → VB).
    ///
    /// # Errors
    /// An unknown name, listing the known ones.
    pub fn parse(s: &str) -> Result<Self, String> {
        let norm = |t: &str| {
            t.to_lowercase()
                .replace("alpha", "α")
                .replace(['-', ' ', '_'], "")
                .replace("+lva", "+lvα")
                .replace("α=", "α")
        };
        MODELS
            .iter()
            .copied()
            .find(|m| norm(m.name) == norm(s))
            .ok_or_else(|| {
                let known: Vec<_> = MODELS.iter().map(|m| format!("{:?}", m.name)).collect();
                format!("--model {s:?}: unknown; known: {}", known.join(", "))
            })
    }
}

/// The training budget of one fit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DepewegBudget {
    /// Passes over the training rows.
    pub epochs: usize,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// Minibatches per epoch (the batch is `⌈N/batches⌉`; the code: 25).
    pub batches: usize,
    /// Joint draws of weights and latents per step (`K` of the energy).
    pub train_samples: usize,
    /// Draws of the test predictive mixture.
    pub test_draws: usize,
}

/// The `bnn-bench depeweg` command line ([`DepewegArgs::options`] resolves its defaults).
#[derive(Debug, Clone, clap::Args)]
pub struct DepewegArgs {
    /// Data sets (boston, power, concrete, energy, kin8nm, naval, wine, heteroscedastic,
    /// bimodal, wet-chicken, and the opt-in industrial); repeatable [default: the 10].
    #[arg(long = "dataset")]
    pub datasets: Vec<String>,
    /// Models ("BNN", "BNN+LV VB", "BNN+LV alpha=0.5", "BNN+LV alpha=1"; `α` for `alpha`);
    /// repeatable [default: the 4].
    #[arg(long = "model")]
    pub models: Vec<String>,
    /// Random 90/10 splits per set [default: 5; 2 with --quick].
    #[arg(long)]
    pub splits: Option<usize>,
    /// Training epochs [default: the thesis's 5000; 100 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Adam's learning rate (the thesis: 1e-3).
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Minibatches per epoch: the batch is ⌈N/batches⌉ (the thesis's code: 25).
    #[arg(long, default_value_t = 25)]
    pub batches: usize,
    /// Joint draws of weights and latents per training step (K of the energy; the thesis's
    /// code advises at least 15, 25 on CPUs, and uses 50).
    #[arg(long, default_value_t = 25)]
    pub train_samples: usize,
    /// Draws of the test predictive mixture [default: 200; 100 with --quick]; each split also
    /// scores the same net under 25 times as many (a second, less biased LL estimate).
    #[arg(long)]
    pub test_draws: Option<usize>,
    /// The seed, and `quick`: the small budget (see the command's help).
    #[command(flatten)]
    pub exp: crate::runner::ExperimentArgs,
    /// Folder holding uci/ [default: BNN_DATA_DIR, then ../shared/data, then the cache].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The output folder (depeweg.md, depeweg.json and rows/), resuming, reporting only and
    /// worker processes.
    #[command(flatten)]
    pub run: crate::runner::RunnerOptions,
}

impl DepewegArgs {
    /// The options, `--quick`'s defaults filled in.
    pub fn options(self) -> DepewegOptions {
        let quick = self.exp.quick;
        DepewegOptions {
            datasets: self.datasets,
            models: self.models,
            splits: self.splits.unwrap_or(if quick { 2 } else { 5 }),
            budget: DepewegBudget {
                epochs: self.epochs.unwrap_or(if quick { 100 } else { 5000 }),
                learning_rate: self.lr,
                batches: self.batches,
                train_samples: self.train_samples,
                test_draws: self.test_draws.unwrap_or(if quick { 100 } else { 200 }),
            },
            seed: self.exp.seed,
            data_dir: self.data_dir,
            run: self.run,
        }
    }
}

/// Options of one `depeweg` run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DepewegOptions {
    /// Data sets (names; empty: the ten).
    pub datasets: Vec<String>,
    /// Models (names; empty: the four).
    pub models: Vec<String>,
    /// Random splits per set.
    pub splits: usize,
    /// The budget of every fit.
    pub budget: DepewegBudget,
    /// Seed of data, splits and training.
    pub seed: u64,
    /// Data folder (default search when `None`).
    pub data_dir: Option<PathBuf>,
    /// The output folder, resuming (the finished splits in `out/rows` with this budget, seed
    /// and data), reporting only (from the finished rows, training nothing) and worker
    /// processes (one split each at a time).
    #[serde(flatten)]
    pub run: crate::runner::RunnerOptions,
}

impl DepewegOptions {
    /// Checks the numbers before any work: the error names the flag.
    ///
    /// # Errors
    /// A zero count, or a learning rate that is not finite and positive.
    pub fn check(&self) -> Result<(), String> {
        let b = &self.budget;
        for (flag, v) in [
            ("--splits", self.splits),
            ("--epochs", b.epochs),
            ("--batches", b.batches),
            ("--test-draws", b.test_draws),
        ] {
            if v == 0 {
                return Err(format!("{flag} 0: give at least 1"));
            }
        }
        if b.train_samples < 2 {
            return Err(format!(
                "--train-samples {}: black-box α needs at least 2 draws per step (with one, \
                 the energy is the ELBO's whatever α)",
                b.train_samples
            ));
        }
        if !(b.learning_rate.is_finite() && b.learning_rate > 0.0) {
            return Err(format!(
                "--lr {}: give a finite positive learning rate",
                b.learning_rate
            ));
        }
        if self.splits > 10 {
            return Err(format!(
                "--splits {}: at most 10 (the test rows of the random 90/10 splits are drawn \
                 independently; the thesis uses 5)",
                self.splits
            ));
        }
        Ok(())
    }
}

/// One finished split.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SplitRow {
    /// Data set name.
    pub dataset: String,
    /// Model name.
    pub model: String,
    /// Split number.
    pub split: usize,
    /// Seed of the run.
    pub seed: u64,
    /// Budget of the fit.
    pub budget: DepewegBudget,
    /// Training rows.
    pub n_train: usize,
    /// Test LL per point, original units.
    pub test_ll: f64,
    /// Test RMSE of the predictive mean, original units.
    pub test_rmse: f64,
    /// Fraction of test targets inside their central 90 % predictive interval; absent from
    /// rows written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage_90: Option<f64>,
    /// The same after split-conformal calibration on the even-numbered test rows, measured on
    /// the odd-numbered ones; absent from rows written before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conformal_coverage_90: Option<f64>,
    /// Learned noise std `√Σ`, original units.
    pub noise_std: f64,
    /// `(T, LL)`: the test LL of a mixture of `T` draws of the same net ([`FitScores::wide`]);
    /// absent from rows written before it was measured.
    #[serde(default)]
    pub wide: Option<(usize, f64)>,
    /// Training and evaluation time, s.
    pub seconds: f64,
    /// Git revision of the run.
    pub git_revision: String,
}

/// A random 90/10 split of `n` rows (split `k`; the same for every model): (train, test).
pub fn random_split(n: usize, seed: u64, set: DepewegSet, k: usize) -> (Vec<usize>, Vec<usize>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(experiment::derive(
        seed,
        &[set.name(), "split"],
        k as u64,
    ));
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng);
    let n_test = (n / 10).max(1);
    let test = order[..n_test].to_vec();
    let train = order[n_test..].to_vec();
    (train, test)
}

/// Runs the selected (set, model, split) fits not yet finished (a task each, [`crate::runner`]),
/// writing each split's row as it finishes, then the report of every finished row in `out`
/// under this budget and seed; returns its table.
///
/// # Errors
/// Before any work: bad options (named), an unknown or repeated set or model, an output folder
/// that cannot be written or that another run holds, a missing data file. Then a diverged fit
/// (the rows finished so far stay; `--resume` continues).
pub fn run(options: &DepewegOptions) -> Result<Vec<TableRow>, Box<dyn Error>> {
    options.check()?;
    let runner = &options.run;
    runner.check()?;
    experiment::refuse_repeats("--dataset", options.datasets.iter().map(String::as_str))?;
    experiment::refuse_repeats("--model", options.models.iter().map(String::as_str))?;
    let sets = if options.datasets.is_empty() {
        SETS.to_vec()
    } else {
        options
            .datasets
            .iter()
            .map(|s| DepewegSet::parse(s))
            .collect::<Result<Vec<_>, _>>()?
    };
    let models = if options.models.is_empty() {
        MODELS.to_vec()
    } else {
        options
            .models
            .iter()
            .map(|s| DepewegModel::parse(s))
            .collect::<Result<Vec<_>, _>>()?
    };
    for (i, m) in models.iter().enumerate() {
        if models[..i].contains(m) {
            return Err(format!("--model {:?} is given twice; give each once", m.name).into());
        }
    }
    let root = DataRoot::new(options.data_dir.as_deref());
    // Every data set loads before any training: a missing file fails now.
    let data = sets
        .iter()
        .map(|&s| Ok((s, s.load(&root, options.seed)?)))
        .collect::<Result<Vec<_>, Box<dyn Error>>>()?;
    let harness = harness::DepewegHarness::new(options, data, models);
    crate::runner::run(&harness, runner)?;
    Ok(harness.table.take())
}
