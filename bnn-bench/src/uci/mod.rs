//! `bnn-bench uci`: the standard UCI regression protocol (Hernández-Lobato & Adams 2015; Gal &
//! Ghahramani 2016). For every data set and fixed split: inputs and targets standardised with
//! training statistics, one hidden layer of 50 ReLU units (100 for protein), test RMSE and test
//! log-likelihood in original units; mean ± standard error over splits, beside the published
//! columns of [`crate::published::uci`].
//!
//! A method is one [`UciMethod`] implementation: the built-in ones are registered by name in
//! [`registry`] and run by [`run`]; a user crate runs its own, alone or beside those, through
//! [`run_with`].

use crate::catalogue::{Method, Protocol, Settings, TrainObjective};
use crate::published::uci::{self as uci_published, PublishedColumn};
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::likelihood::{GaussianLikelihoodConfig, NoiseFit, NoiseModel};
use bnn_burn::metrics::mean_and_standard_error;
use bnn_burn::nets::{MlpConfig, Regressor};
use bnn_burn::objective::{PacComplexity, PacKl};
use bnn_burn::posterior::{DropoutMask, PosteriorConfig};
use bnn_burn::predict::{
    GaussianPrediction, MixtureAccumulator, Predict, PredictMode, RegressionScores,
};
use bnn_burn::train::{EarlyStoppingConfig, Inference, TrainConfig};
use bnn_burn::training_device;
use bnn_datasets::uci::{UciData, UciDataset, UciMeta};
use bnn_datasets::{DataRoot, RegressionData, Standardizer};
use burn::module::{Initializer, Module};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

mod harness;
mod methods;
mod plot;
mod posthoc;
mod report;

pub use harness::UciTask;
pub use methods::*;
use plot::*;
pub use posthoc::{PostHocFit, SWAG_EPOCHS, SWAG_RATE_BATCHES, SWAG_SKIP_EPOCHS};
pub use report::*;

/// Posterior samples used for test predictions.
pub const PREDICTION_SAMPLES: usize = 200;

/// Training budget of one fit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Budget {
    /// Passes over the training data.
    pub epochs: usize,
    /// Minibatch size.
    pub batch_size: usize,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Stochastic passes of a test prediction (posterior draws of the predictive mixture).
    #[serde(default = "default_test_passes")]
    pub test_passes: usize,
}

fn default_test_passes() -> usize {
    PREDICTION_SAMPLES
}

/// A data set of a run: one of the protocol's 9 (by name), or a folder of the user's in the
/// `UCI_Datasets` layout (`uci --dataset PATH`), which gets a table without published columns.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum DataSet {
    /// One of the 9.
    Builtin(UciDataset),
    /// A folder of the user's.
    Folder {
        /// Name in tables (the set's folder name).
        name: String,
        /// The folder, as given.
        path: PathBuf,
    },
}

impl DataSet {
    /// One of the 9 names (as `UciDataset` parses them), else an existing folder. A folder
    /// named like one of the 9 is reached through a path (`./boston`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let looks_like_path = s.contains(std::path::MAIN_SEPARATOR) || s.contains('/');
        if !looks_like_path && let Ok(d) = s.parse::<UciDataset>() {
            return Ok(DataSet::Builtin(d));
        }
        let path = PathBuf::from(s);
        if path.is_dir() {
            // Named now, loaded once with the other sets before any training.
            let (_, name) =
                UciData::locate_folder(&path).map_err(|e| format!("--dataset {s}: {e}"))?;
            return Ok(DataSet::Folder { name, path });
        }
        Err(format!(
            "--dataset {s:?}: neither one of the 9 sets ({}) nor a folder",
            UciDataset::ALL.map(|d| d.name()).join(", ")
        ))
    }

    /// Name in tables and logs.
    pub fn name(&self) -> &str {
        match self {
            DataSet::Builtin(d) => d.name(),
            DataSet::Folder { name, .. } => name,
        }
    }

    /// The built-in set, if it is one (the published columns exist only for those).
    pub fn builtin(&self) -> Option<UciDataset> {
        match self {
            DataSet::Builtin(d) => Some(*d),
            DataSet::Folder { .. } => None,
        }
    }

    /// What the command line takes for it (a worker's `--dataset`).
    pub fn argument(&self) -> String {
        match self {
            DataSet::Builtin(d) => d.name().to_string(),
            DataSet::Folder { path, .. } => path.display().to_string(),
        }
    }

    /// Loads it: a built-in set from the data roots, a folder from itself.
    pub fn load(&self, root: &DataRoot) -> Result<UciData, bnn_datasets::DataError> {
        match self {
            DataSet::Builtin(d) => UciData::load(*d, root),
            DataSet::Folder { path, .. } => UciData::load_folder(path),
        }
    }

    /// The name a split's seed is derived from (the folder name of the layout).
    fn seed_name(&self) -> &str {
        match self {
            DataSet::Builtin(d) => d.dir_name(),
            DataSet::Folder { name, .. } => name,
        }
    }
}

impl std::fmt::Display for DataSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<UciDataset> for DataSet {
    fn from(d: UciDataset) -> Self {
        DataSet::Builtin(d)
    }
}

/// One split, ready for a method: standardised training rows and test inputs, test targets in
/// original units, and the target scaler to go back to them.
pub struct PreparedSplit<'a> {
    /// Which data set.
    pub dataset: &'a DataSet,
    /// Split number.
    pub k: usize,
    /// Standardised training rows.
    pub train: RegressionData,
    /// Standardised test inputs, `[n_test, n_features]`.
    pub test_x: Vec<f64>,
    /// Test targets in original units.
    pub test_y: Vec<f64>,
    /// Target scaler fitted on the training rows.
    pub y_scaler: Standardizer,
    /// Protocol settings (hidden units, dropout and τ grids).
    pub meta: &'a UciMeta,
    /// Training budget.
    pub budget: Budget,
    /// Seed for this method on this split.
    pub seed: u64,
}

/// What a method reports for one split.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SplitOutcome {
    /// Mean test log-likelihood per point, original units.
    pub test_ll: f64,
    /// Test RMSE of the predictive mean, original units.
    pub test_rmse: f64,
    /// Fraction of test targets inside their central 90 % predictive interval (`None`: a
    /// method that does not say, or a row written before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage_90: Option<f64>,
    /// The same after split-conformal calibration on the even-numbered test rows, measured on
    /// the odd-numbered ones ([`RegressionScores::conformal_coverage_90`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conformal_coverage_90: Option<f64>,
    /// PSIS `k̂` of the fitted posterior against the log joint on the training rows
    /// ([`bnn_burn::inference::network_check`]): whether its draws can be trusted as an
    /// importance proposal (`None`: a posterior without a density, a method that does not
    /// say, or a row written before it was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k_hat: Option<f64>,
    /// Method-specific choices (e.g. the grid point chosen), for the record.
    pub detail: String,
}

/// Options of one `uci` run (the `bnn-bench uci` command line).
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct UciOptions {
    /// Data sets: a name (boston, concrete, energy, kin8nm, naval, power, protein, wine,
    /// yacht) or the path of a folder of your own in the UCI_Datasets layout (its table has
    /// no published columns); repeatable [default: the 9].
    #[arg(long = "dataset", value_parser = DataSet::parse)]
    pub datasets: Vec<DataSet>,
    /// Methods: any of the catalogue's, by name, and Depeweg's models; repeatable [default:
    /// MAP, "MC dropout", MFVI, MFVI-LRT, "MFVI-LRT (EB prior)", "MFVI-LRT (late EB prior)",
    /// Radial, Low-rank, VBP, DVI, CLT, BEDL, BEDL-PAC, BEDL-Hyper, "Deep ensemble", SWAG,
    /// MultiSWAG, "Laplace (last layer)", "Laplace (KFAC)", "Laplace (KFAC, λ per layer)", BNN,
    /// "BNN+LV VB", "BNN+LV alpha=0.5", "BNN+LV alpha=1"].
    #[arg(long = "method")]
    pub methods: Vec<String>,
    /// Splits per data set [default: the protocol's 20 (5 for protein); 3 with --quick].
    #[arg(long)]
    pub splits: Option<usize>,
    /// Training epochs [default: the protocol's n_epochs, raised to 8000 optimiser steps, at
    /// most 10 × n_epochs; MC dropout: Gal's 100 × n_epochs; capped at ~1500 steps with
    /// --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// The seed, and `quick`: the small budget (see the command's help).
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: crate::runner::ExperimentArgs,
    /// Folder holding uci/ [default: BNN_DATA_DIR, then ../shared/data, then the cache].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The output folder, resuming and worker processes. Workers are the running executable
    /// started again with one task: `jobs` above 1 only in a program that has called
    /// [`allow_worker_processes`] (the `bnn-bench` binary; a user crate that calls [`run`] or
    /// [`run_with`] keeps `jobs = 1`, or gets an error before any work). With `resume`, the
    /// finished rows in `out/rows` (and an interrupted row's finished splits) computed under
    /// this run's seed, budget, split count and data are reused; rows there of other data sets
    /// or methods are kept in the new records.
    #[serde(flatten)]
    #[command(flatten)]
    pub run: crate::runner::RunnerOptions,
}

/// Minibatch size per data set (Haußmann 2021 §3.3, the PBP-protocol batch sizes); a user's
/// set gets the size of the built-in sets of its size (up to 800 training rows 16, up to 1500
/// 32, up to 12 000 64, beyond 256: the same sizes for all 9 at their training-set sizes).
pub fn batch_size(d: &DataSet, n_train: usize) -> usize {
    match d.builtin() {
        Some(UciDataset::Boston | UciDataset::Energy | UciDataset::Yacht) => 16,
        Some(UciDataset::Concrete | UciDataset::Wine) => 32,
        Some(UciDataset::Kin8nm | UciDataset::Naval | UciDataset::PowerPlant) => 64,
        Some(UciDataset::Protein) => 256,
        None => match n_train {
            0..=800 => 16,
            801..=1500 => 32,
            1501..=12_000 => 64,
            _ => 256,
        },
    }
}

/// Fewest optimiser steps of a full-protocol fit (see [`budget`]).
pub const MIN_STEPS: usize = 8000;

/// The budget of a data set under `options`. Full protocol: the protocol's `n_epochs` (40; 20
/// for protein, Hernández-Lobato & Adams 2015), raised until a fit takes at least [`MIN_STEPS`]
/// optimiser steps and capped at Gal's `10 × n_epochs`. The variational methods converge per
/// step, and 40 epochs are only 720 steps on yacht. `--quick` caps a fit at ~1500 steps (at
/// least 4 epochs); `--epochs` overrides both.
pub fn budget(d: &DataSet, meta: &UciMeta, n_train: usize, options: &UciOptions) -> Budget {
    let batch = batch_size(d, n_train);
    let steps_per_epoch = n_train.div_ceil(batch).max(1);
    let full = meta
        .n_epochs
        .max(MIN_STEPS.div_ceil(steps_per_epoch))
        .min(meta.n_epochs * 10);
    Budget {
        epochs: run_epochs(full, steps_per_epoch, options),
        batch_size: batch,
        learning_rate: 3e-3,
        test_passes: PREDICTION_SAMPLES,
    }
}

/// The epochs a run uses of a method's `full` budget: `--epochs` when given, else `full`
/// capped at ~1500 optimiser steps (at least 4 epochs) with `--quick`.
pub fn run_epochs(full: usize, steps_per_epoch: usize, options: &UciOptions) -> usize {
    match options.epochs {
        Some(e) => e,
        None if options.exp.quick => full.min((1500 / steps_per_epoch).max(4)),
        None => full,
    }
}

/// The number of splits to run on a data set with `available` splits: `--splits` when given
/// (an error naming the flag and the allowed range when it is 0 or above `available`), else
/// all of them (3 with `--quick`).
pub fn splits_of(
    options: &UciOptions,
    dataset: &DataSet,
    available: usize,
) -> Result<usize, String> {
    match options.splits {
        Some(k) if k == 0 || k > available => Err(format!(
            "--splits {k}: {dataset} has {available} splits; allowed: 1 to {available}"
        )),
        Some(k) => Ok(k),
        None if options.exp.quick => Ok(3.min(available)),
        None => Ok(available),
    }
}

/// Per-split results of one method on one data set.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MethodResult {
    /// Method.
    pub method: String,
    /// Data set.
    pub dataset: DataSet,
    /// Budget used.
    pub budget: Budget,
    /// One outcome per split, in split order.
    pub splits: Vec<SplitOutcome>,
    /// Seconds over all splits (the sum of the splits' own times, those reused by a resumed run
    /// included; 0 for a split finished by a version that did not record its time).
    pub seconds: f64,
    /// The revisions the bench that ran the splits was built from, in split order, each once
    /// (several when a resumed row's splits came from several builds; empty in records
    /// written before they were kept).
    #[serde(default)]
    pub revisions: Vec<String>,
}

impl MethodResult {
    /// Whether `other` is the same row of a table (data set and method).
    pub fn same_row(&self, other: &Self) -> bool {
        self.dataset == other.dataset && self.method == other.method
    }

    /// Mean and standard error of the test LL (no standard error for a single split).
    pub fn ll(&self) -> MeanSe {
        mean_and_standard_error(&self.splits.iter().map(|s| s.test_ll).collect::<Vec<_>>())
    }

    /// Mean and standard error of the test RMSE (no standard error for a single split).
    pub fn rmse(&self) -> MeanSe {
        mean_and_standard_error(&self.splits.iter().map(|s| s.test_rmse).collect::<Vec<_>>())
    }

    /// Mean and standard error of the 90 % intervals' coverage, when every split measured it.
    pub fn coverage_90(&self) -> Option<MeanSe> {
        let c: Option<Vec<f64>> = self.splits.iter().map(|s| s.coverage_90).collect();
        c.filter(|c| !c.is_empty())
            .map(|c| mean_and_standard_error(&c))
    }

    /// Mean and standard error of PSIS `k̂` over the splits, when every split measured it.
    pub fn k_hat(&self) -> Option<MeanSe> {
        let c: Option<Vec<f64>> = self.splits.iter().map(|s| s.k_hat).collect();
        c.filter(|c| !c.is_empty())
            .map(|c| mean_and_standard_error(&c))
    }

    /// The same for the split-conformal intervals.
    pub fn conformal_coverage_90(&self) -> Option<MeanSe> {
        let c: Option<Vec<f64>> = self
            .splits
            .iter()
            .map(|s| s.conformal_coverage_90)
            .collect();
        c.filter(|c| !c.is_empty())
            .map(|c| mean_and_standard_error(&c))
    }
}

/// The seed of one (data set, method, split): independent of which other data sets and methods
/// are in the run, so a row can be reproduced alone.
pub fn split_seed(seed: u64, dataset: &DataSet, method: &str, k: usize) -> u64 {
    crate::experiment::derive(seed, &[dataset.seed_name(), method], k as u64)
}

/// Prepares split `k` of `data`: standardisation fitted on the training rows.
pub fn prepare<'a>(
    dataset: &'a DataSet,
    data: &'a UciData,
    k: usize,
    budget: Budget,
    seed: u64,
) -> Result<PreparedSplit<'a>, Box<dyn Error>> {
    let split = data.split(k)?;
    let (sx, sy) = split.train.fit_standardizers()?;
    Ok(PreparedSplit {
        dataset,
        k,
        train: split.train.standardized(&sx, &sy)?,
        test_x: sx.transform(&split.test.x),
        test_y: split.test.y,
        y_scaler: sy,
        meta: &data.meta,
        budget,
        seed,
    })
}

pub use crate::runner::allow_worker_processes;

/// Runs the protocol on the built-in methods ([`registry`]) and writes `uci.json`, `uci.md` and
/// `uci.svg` to `options.out` ([`run_with`]).
///
/// # Errors
/// Those of [`run_with`].
pub fn run(options: &UciOptions) -> Result<Vec<MethodResult>, Box<dyn Error>> {
    // Any catalogue entry by name; without names, the registry's.
    let defaults: Vec<&str> = registry().iter().map(|m| m.name()).collect();
    let is_default = |m: &dyn UciMethod| defaults.contains(&m.name());
    run_among(options, every_method(), is_default)
}

/// Runs the protocol on `methods` in place of the built-in ones: a user's own [`UciMethod`]s,
/// alone or beside [`registry`]'s, under the same splits, seeds ([`split_seed`]), budgets,
/// resuming and reports (their rows have no published columns unless a built-in name is
/// theirs). `options.methods` selects among `methods` by name (case-insensitive; empty: all).
/// Writes `uci.json`, `uci.md` and `uci.svg` to `options.out`.
///
/// ```no_run
/// use bnn_bench::uci::{self, PreparedSplit, SplitOutcome, UciMethod, UciOptions};
/// use std::error::Error;
///
/// /// A Gaussian at the training targets' mean and standard deviation.
/// struct Constant;
///
/// impl UciMethod for Constant {
///     fn name(&self) -> &'static str {
///         "Constant"
///     }
///     fn run(&self, split: &PreparedSplit) -> Result<SplitOutcome, Box<dyn Error>> {
///         // Standardised training targets have mean 0 and std 1: in original units, the
///         // training mean and std.
///         let (mean, std) = (split.y_scaler.mean[0], split.y_scaler.std[0]);
///         let n = split.test_y.len() as f64;
///         let z2 = |y: &f64| ((y - mean) / std).powi(2);
///         let test_ll = -split.test_y.iter().map(z2).sum::<f64>() / (2.0 * n)
///             - std.ln()
///             - 0.5 * (2.0 * std::f64::consts::PI).ln();
///         let test_rmse = std * (split.test_y.iter().map(z2).sum::<f64>() / n).sqrt();
///         Ok(SplitOutcome { test_ll, test_rmse, coverage_90: None, conformal_coverage_90: None, k_hat: None, detail: String::new() })
///     }
/// }
///
/// let mut methods = uci::registry();
/// methods.push(Box::new(Constant));
/// let options = UciOptions {
///     datasets: vec![bnn_datasets::UciDataset::Yacht.into()],
///     methods: vec!["Constant".into(), "MFVI".into()],
///     splits: Some(3),
///     epochs: None,
///     exp: bnn_bench::runner::ExperimentArgs { seed: 0, quick: true },
///     data_dir: None,
///     run: bnn_bench::runner::RunnerOptions::new("runs/my-method"),
/// };
/// let rows = uci::run_with(&options, methods)?;
/// # Ok::<(), Box<dyn Error>>(())
/// ```
///
/// # Errors
/// Before any work: two methods of one name, a name in `options.methods` that none has, `jobs`
/// 0 or above 1 without [`allow_worker_processes`], `epochs` 0, an `out` that cannot be written,
/// a data set that does not load or a split count it does not have. Then a method's error, or
/// a report that cannot be written (the rows finished so far stay in `uci.partial.json`).
pub fn run_with(
    options: &UciOptions,
    methods: Vec<Box<dyn UciMethod>>,
) -> Result<Vec<MethodResult>, Box<dyn Error>> {
    run_among(options, methods, |_| true)
}

/// [`run_with`], where no `--method` runs the methods `is_default` keeps.
fn run_among(
    options: &UciOptions,
    methods: Vec<Box<dyn UciMethod>>,
    is_default: impl Fn(&dyn UciMethod) -> bool,
) -> Result<Vec<MethodResult>, Box<dyn Error>> {
    let runner = &options.run;
    runner.check()?;
    if options.epochs == Some(0) {
        return Err("--epochs must be at least 1".into());
    }
    crate::experiment::refuse_repeats("--dataset", options.datasets.iter().map(|d| d.name()))?;
    crate::experiment::refuse_repeats("--method", options.methods.iter().map(String::as_str))?;
    let all = methods;
    let methods: Vec<&dyn UciMethod> = crate::experiment::select_or_defaults(
        &all,
        &options.methods,
        |m| m.name(),
        |m| is_default(m.as_ref()),
    )?
    .into_iter()
    .map(|m| m.as_ref())
    .collect();
    let root = DataRoot::new(options.data_dir.as_deref());
    let all_sets = UciDataset::ALL.map(DataSet::Builtin);
    let datasets = match options.datasets.is_empty() {
        true => &all_sets[..],
        false => &options.datasets[..],
    };
    // Every set and every split it runs is read now: a missing or bad file stops the run
    // before any training.
    let sets = datasets
        .iter()
        .map(|d| harness::LoadedSet::load(d, &root, options))
        .collect::<Result<Vec<_>, _>>()?;
    // What a method needs beyond rows and splits, and settings that look wrong for the data.
    let mut warnings = Vec::new();
    for set in &sets {
        for m in &methods {
            m.check(&set.data)?;
            warnings.extend(m.warnings(&set.data));
        }
    }
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let harness = harness::UciHarness {
        options,
        methods,
        sets,
        warnings,
    };
    let rows = crate::runner::run(&harness, runner)?;
    Ok(rows.into_iter().map(|f| f.row).collect())
}

#[cfg(test)]
mod tests;
