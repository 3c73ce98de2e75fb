//! `bnn-bench uci`: the standard UCI regression protocol (Hernández-Lobato & Adams 2015; Gal &
//! Ghahramani 2016). For every data set and fixed split: inputs and targets standardised with
//! training statistics, one hidden layer of 50 ReLU units (100 for protein), test RMSE and test
//! log-likelihood in original units; mean ± standard error over splits, beside the published
//! columns of [`crate::uci_published`].
//!
//! A method is one [`UciMethod`] implementation registered by name in [`registry`].

use crate::methods::Method;
use crate::uci_published::{self, PublishedColumn};
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::layers::{Estimator, WeightConfig};
use bnn_burn::likelihood::{GaussianLikelihoodConfig, NoiseFit};
use bnn_burn::metrics::mean_and_standard_error;
use bnn_burn::nets::{MlpConfig, Regressor};
use bnn_burn::predict::{GaussianPrediction, MixtureAccumulator, Predict, PredictMode};
use bnn_burn::train::{EarlyStoppingConfig, TrainConfig, train};
use bnn_burn::training_device;
use bnn_datasets::uci::{UciData, UciDataset, UciMeta};
use bnn_datasets::{DataRoot, RegressionData, Standardizer};
use burn::module::{Initializer, Module};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

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
            let data = UciData::load_folder(&path).map_err(|e| format!("--dataset {s}: {e}"))?;
            return Ok(DataSet::Folder {
                name: data.name,
                path,
            });
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
    /// Method-specific choices (e.g. the grid point chosen), for the record.
    pub detail: String,
}

/// A UCI method: fits on a prepared split and reports test LL and RMSE.
pub trait UciMethod {
    /// Name used on the command line and in tables.
    fn name(&self) -> &'static str;
    /// Fits on `split.train` and evaluates on the test rows.
    fn run(&self, split: &PreparedSplit) -> Result<SplitOutcome, Box<dyn Error>>;
    /// The training budget on a data set with `n_train` training rows (default: [`budget`]).
    fn budget(&self, d: &DataSet, meta: &UciMeta, n_train: usize, options: &UciOptions) -> Budget {
        budget(d, meta, n_train, options)
    }
}

/// Every registered method, in table order.
pub fn registry() -> Vec<Box<dyn UciMethod>> {
    let fit = |method: Method| BayesianFit {
        method,
        train_samples: 1,
        early_stopping: None,
    };
    vec![
        // A point estimate overfits a 50-unit net within the budget (noise learned far below
        // the test residuals): it keeps the epoch of best NLL on 10 % of the training rows.
        Box::new(BayesianFit {
            early_stopping: Some(EarlyStoppingConfig::new().with_patience(20)),
            ..fit(Method::map(1.0))
        }),
        Box::new(GalDropout),
        Box::new(fit(Method::mean_field(Estimator::Reparameterization))),
        Box::new(fit(Method::mean_field(Estimator::LocalReparameterization))),
        Box::new(fit(Method::radial())),
        Box::new(fit(Method::low_rank(2))),
    ]
}

/// Activations held at once by a chunk of test passes (elements of the widest layer).
const PASS_CHUNK_ELEMENTS: usize = 10_000_000;

/// Test LL (mixture over `split.budget.test_passes` posterior draws, original units) and RMSE of
/// the predictive mean. The draws go through the net in chunks ([`MixtureAccumulator`]), so
/// Gal's 10 000 passes over protein's 4 573 test rows need no 18 GB tensor.
pub fn evaluate(model: &Regressor, split: &PreparedSplit) -> Result<(f64, f64), Box<dyn Error>> {
    let device = model.devices()[0].clone();
    let d = split.train.n_features;
    let x = matrix(&split.test_x, d, &device);
    let y = matrix(&split.y_scaler.transform(&split.test_y), 1, &device);
    let passes = split.budget.test_passes.max(1);
    let width = split.meta.n_hidden.max(d) * split.test_y.len().max(1);
    let chunk = (PASS_CHUNK_ELEMENTS / width).clamp(1, passes);
    let mut acc = MixtureAccumulator::new(y);
    while acc.draws() < passes {
        let want = chunk.min(passes - acc.draws());
        let GaussianPrediction::Samples(draws) =
            model.predict(x.clone(), PredictMode::Samples(want))?
        else {
            return Err("a sampled prediction returned moments".into());
        };
        let got = draws.mean.dims()[0];
        acc.add(&draws);
        if got < want {
            break; // a point estimate answers with its one draw
        }
    }
    let scores = acc.scores(&split.y_scaler.std);
    Ok((scores.log_likelihood, scores.rmse))
}

/// Trains a one-hidden-layer regressor with `weights` on `data`; `fixed_noise_std`
/// (standardised units) fixes the Gaussian noise, `None` learns it from 0.5.
fn fit(
    weights: &WeightConfig,
    data: &RegressionData,
    split: &PreparedSplit,
    fixed_noise_std: Option<f64>,
    train_samples: usize,
    early_stopping: Option<EarlyStoppingConfig>,
    seed: u64,
) -> Result<(Regressor, usize), Box<dyn Error>> {
    let device = training_device();
    device.seed(seed);
    let likelihood = GaussianLikelihoodConfig::new()
        .with_noise_std(fixed_noise_std.unwrap_or(0.5))
        .with_fit(if fixed_noise_std.is_some() {
            NoiseFit::Fixed
        } else {
            NoiseFit::Learned
        })
        .init(&device)?;
    let model = MlpConfig::new(data.n_features, vec![split.meta.n_hidden], 1)
        .with_weights(weights.clone())
        .init(likelihood, &device)?;
    let config = TrainConfig::new(split.budget.epochs)
        .with_batch_size(split.budget.batch_size)
        .with_learning_rate(split.budget.learning_rate)
        .with_train_samples(train_samples)
        .with_seed(seed)
        .with_early_stopping(early_stopping)
        .with_progress(false);
    let x = matrix(&data.x, data.n_features, &device);
    let y = matrix(&data.y, 1, &device);
    let (model, report) = train(model, (x, y), &config)?;
    Ok((model.valid(), report.best_epoch))
}

/// A regressor of one weight model with a learned homoscedastic noise.
pub struct BayesianFit {
    /// The method (its name is the table's).
    pub method: Method,
    /// Posterior samples per training point.
    pub train_samples: usize,
    /// Early stopping on held-out training rows (`None`: the whole budget).
    pub early_stopping: Option<EarlyStoppingConfig>,
}

impl UciMethod for BayesianFit {
    fn name(&self) -> &'static str {
        self.method.name
    }

    fn run(&self, split: &PreparedSplit) -> Result<SplitOutcome, Box<dyn Error>> {
        let (model, best_epoch) = fit(
            &self.method.weights,
            &split.train,
            split,
            None,
            self.train_samples,
            self.early_stopping.clone(),
            split.seed,
        )?;
        let noise = to_vec(model.likelihood.noise_std())[0] * split.y_scaler.std[0];
        let (test_ll, test_rmse) = evaluate(&model, split)?;
        Ok(SplitOutcome {
            test_ll,
            test_rmse,
            detail: match self.early_stopping {
                Some(_) => {
                    format!("learned noise std {noise:.4}, best validation epoch {best_epoch}")
                }
                None => format!("learned noise std {noise:.4}"),
            },
        })
    }
}

/// MC dropout under Gal's current UCI protocol (`spec/gal-mc-dropout.md`; his repository's
/// "Grid Search (new)"): dropout on the input and on the hidden layer, MSE on standardised
/// targets plus weight decay `λ = l²(1−p)/(2Nτ)` (l = 10⁻²), Adam at 10⁻³, batch 128, 10 × the
/// protocol's epochs (400; 200 for protein), Keras's initialisation (Glorot-uniform kernels, zero
/// biases). Every (p, τ) of the data set's grid is trained on
/// the first 80 % of the training rows and scored by validation LL on the last 20 %; the best
/// pair is refit on all training rows. Test LL from `T = 10 000` stochastic passes with noise
/// precision τ in original units: `logsumexp_t(−½τ(y − ŷ_t)²) − ln T − ½ ln 2π + ½ ln τ`.
///
/// As a variational objective this is a Gaussian likelihood of variance ½ (`−ln p = (y − f)² +
/// const`, the MSE) and the dropout family's KL under the prior `N(0, τ/l²)`, whose weight-decay
/// term is `λ‖M‖²` per training point (Gal 2016, §3.2).
pub struct GalDropout;

/// Gal's prior length-scale.
pub const GAL_LENGTH_SCALE: f64 = 1e-2;
/// Gal's minibatch size.
pub const GAL_BATCH: usize = 128;
/// Gal's test passes `T`.
pub const GAL_TEST_PASSES: usize = 10_000;

impl GalDropout {
    /// Fits one (p, τ) on `eval.train` and scores it on `eval`'s test rows.
    fn fit_and_score(
        &self,
        p: f64,
        tau: f64,
        eval: &PreparedSplit,
    ) -> Result<(f64, f64), Box<dyn Error>> {
        // Prior N(0, τ/l²) on M: the dropout KL's weight decay is l²(1−p)/(2Nτ)·‖M‖².
        // Keras's Dense defaults: Glorot-uniform kernels, zero biases.
        let weights = Method::mc_dropout(p, GAL_LENGTH_SCALE / tau.sqrt())
            .weights
            .with_initializer(Initializer::XavierUniform { gain: 1.0 });
        let (mut model, _) = fit(
            &weights,
            &eval.train,
            eval,
            Some(std::f64::consts::FRAC_1_SQRT_2),
            1,
            None,
            eval.seed,
        )?;
        // Predict with the noise precision τ in original units.
        let noise = 1.0 / (tau.sqrt() * eval.y_scaler.std[0]);
        model.likelihood = GaussianLikelihoodConfig::new()
            .with_noise_std(noise)
            .with_fit(NoiseFit::Fixed)
            .init(&model.devices()[0])?;
        evaluate(&model, eval)
    }
}

/// Whether `value` is the smallest or largest of a grid of several values.
pub fn on_grid_edge(value: f64, grid: &[f64]) -> bool {
    let min = grid.iter().copied().fold(f64::INFINITY, f64::min);
    let max = grid.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    grid.len() > 1 && (value == min || value == max)
}

impl UciMethod for GalDropout {
    fn name(&self) -> &'static str {
        "MC dropout"
    }

    /// 10 × the protocol's epochs at batch 128, Adam at 10⁻³, 10 000 test passes; `--quick`
    /// caps a fit at ~1500 steps and predicts with 1 000 passes.
    fn budget(&self, _d: &DataSet, meta: &UciMeta, n_train: usize, options: &UciOptions) -> Budget {
        let steps_per_epoch = n_train.div_ceil(GAL_BATCH).max(1);
        let full = meta.n_epochs * 10;
        Budget {
            epochs: run_epochs(full, steps_per_epoch, options),
            batch_size: GAL_BATCH,
            learning_rate: 1e-3,
            test_passes: if options.quick {
                GAL_TEST_PASSES / 10
            } else {
                GAL_TEST_PASSES
            },
        }
    }

    fn run(&self, split: &PreparedSplit) -> Result<SplitOutcome, Box<dyn Error>> {
        // Gal's validation rows: the last 20 % of the training rows, in the split's order.
        let n = split.train.len();
        let n_fit = (n as f64 * 0.8) as usize;
        let rows = |r: std::ops::Range<usize>| split.train.select(&r.collect::<Vec<_>>());
        let val_rows = rows(n_fit..n)?;
        let val_split = PreparedSplit {
            dataset: split.dataset,
            k: split.k,
            train: rows(0..n_fit)?,
            test_x: val_rows.x,
            test_y: split.y_scaler.inverse(&val_rows.y),
            y_scaler: split.y_scaler.clone(),
            meta: split.meta,
            budget: split.budget,
            seed: split.seed,
        };
        let (rates, taus) = (&split.meta.dropout_rates, &split.meta.tau_values);
        let mut best: Option<(f64, f64, f64)> = None;
        for &p in rates {
            for &tau in taus {
                let (val_ll, _) = self.fit_and_score(p, tau, &val_split)?;
                if best.is_none_or(|b| val_ll > b.2) {
                    best = Some((p, tau, val_ll));
                }
            }
        }
        let (p, tau, val_ll) = best.ok_or_else(|| {
            format!(
                "{}: empty grid ({} dropout rates, {} τ values); see dropout_rates.txt and \
                 tau_values.txt",
                split.dataset,
                rates.len(),
                taus.len()
            )
        })?;
        let mut edges = Vec::new();
        if on_grid_edge(p, rates) {
            edges.push(format!("p = {p}"));
        }
        if on_grid_edge(tau, taus) {
            edges.push(format!("τ = {tau}"));
        }
        let warning = if edges.is_empty() {
            String::new()
        } else {
            let w = format!("; warning: {} on the edge of its grid", edges.join(" and "));
            eprintln!(
                "[{}] MC dropout split {}: {} on the edge of its grid (dropout_rates.txt, \
                 tau_values.txt)",
                split.dataset,
                split.k + 1,
                edges.join(" and ")
            );
            w
        };
        let (test_ll, test_rmse) = self.fit_and_score(p, tau, split)?;
        Ok(SplitOutcome {
            test_ll,
            test_rmse,
            detail: format!("p = {p}, τ = {tau} (validation LL {val_ll:.3}){warning}"),
        })
    }
}

/// Options of one `uci` run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UciOptions {
    /// Data sets.
    pub datasets: Vec<DataSet>,
    /// Method names (empty: all registered).
    pub methods: Vec<String>,
    /// Splits per data set (default: all of the protocol's).
    pub splits: Option<usize>,
    /// Epochs (default: see [`budget`]).
    pub epochs: Option<usize>,
    /// Seed.
    pub seed: u64,
    /// Quick mode: 3 splits and at most ~1500 optimiser steps per fit.
    pub quick: bool,
    /// Output folder.
    pub out: PathBuf,
    /// Data folder (default search when `None`).
    pub data_dir: Option<PathBuf>,
    /// Worker processes; each runs one (data set, method) row at a time. Workers are the
    /// running executable started as `<exe> uci …`: above 1 only from the `bnn-bench` binary
    /// (a user crate that calls [`run`] keeps `jobs = 1`).
    pub jobs: usize,
    /// Reuse the rows of an interrupted run (`uci.partial.json` in `out`) that have this run's
    /// seed, budget and split count.
    pub resume: bool,
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
        None if options.quick => full.min((1500 / steps_per_epoch).max(4)),
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
        None if options.quick => Ok(3.min(available)),
        None => Ok(available),
    }
}

/// Refuses a report of non-finite numbers or of rows without splits: the error names the data
/// set, method and split.
pub fn check_results(results: &[MethodResult]) -> Result<(), String> {
    for r in results {
        if r.splits.is_empty() {
            return Err(format!("{} / {}: no splits to report", r.dataset, r.method));
        }
        for (k, s) in r.splits.iter().enumerate() {
            let row = format!("{} / {} split {}", r.dataset, r.method, k + 1);
            crate::experiment::check_finite(&row, "test LL", s.test_ll)?;
            crate::experiment::check_finite(&row, "test RMSE", s.test_rmse)?;
        }
    }
    Ok(())
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
    /// Wall time over all splits, seconds.
    pub seconds: f64,
}

impl MethodResult {
    /// Mean and standard error of the test LL.
    pub fn ll(&self) -> (f64, f64) {
        mean_and_standard_error(&self.splits.iter().map(|s| s.test_ll).collect::<Vec<_>>())
    }

    /// Mean and standard error of the test RMSE.
    pub fn rmse(&self) -> (f64, f64) {
        mean_and_standard_error(&self.splits.iter().map(|s| s.test_rmse).collect::<Vec<_>>())
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

/// One row of a run: a method on a data set.
struct Unit<'a> {
    dataset: &'a DataSet,
    set: &'a UciData,
    method: &'a dyn UciMethod,
    n_splits: usize,
    budget: Budget,
}

/// One finished split of a row, as its progress file keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct SplitRecord {
    seed: u64,
    budget: Budget,
    k: usize,
    outcome: SplitOutcome,
}

/// Where a row's finished splits are kept while it runs (removed when the row is done): a
/// resumed run reuses those of the same seed and budget, so an interrupted long row loses at
/// most the split in progress.
fn progress_path(unit: &Unit, out: &Path) -> PathBuf {
    out.join(format!(
        "{}-{}.splits.jsonl",
        unit.dataset.seed_name(),
        unit.method.name().replace(' ', "_")
    ))
}

/// The splits of `unit` already finished under `seed` (split number → outcome).
fn finished_splits(
    path: &Path,
    unit: &Unit,
    seed: u64,
) -> Result<Vec<Option<SplitOutcome>>, Box<dyn Error>> {
    let mut done: Vec<Option<SplitOutcome>> = vec![None; unit.n_splits];
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(format!("{}: {e}", path.display()).into()),
    };
    for (line, l) in text.lines().enumerate() {
        // A line cut off by the interruption is the split in progress: skip it.
        let Ok(r) = serde_json::from_str::<SplitRecord>(l) else {
            eprintln!(
                "{}: line {} unreadable, rerunning that split",
                path.display(),
                line + 1
            );
            continue;
        };
        if r.seed == seed && r.budget == unit.budget && r.k < unit.n_splits {
            done[r.k] = Some(r.outcome);
        }
    }
    Ok(done)
}

/// Runs one row in this process, printing a line per split. With `resume`, the splits finished
/// by an interrupted run of the same row (seed and budget) are reused.
fn run_unit(
    unit: &Unit,
    seed: u64,
    out: &Path,
    resume: bool,
) -> Result<MethodResult, Box<dyn Error>> {
    let t0 = Instant::now();
    let (dataset, set, method, n_splits) = (unit.dataset, unit.set, unit.method, unit.n_splits);
    let progress = progress_path(unit, out);
    let mut splits = if resume {
        finished_splits(&progress, unit, seed)?
    } else {
        let _ = std::fs::remove_file(&progress);
        vec![None; n_splits]
    };
    let reused = splits.iter().flatten().count();
    if reused > 0 {
        eprintln!(
            "[{dataset}] {}: {reused} finished splits reused",
            method.name()
        );
    }
    let todo: Vec<usize> = (0..n_splits).filter(|&k| splits[k].is_none()).collect();
    for k in todo {
        let prepared = prepare(
            dataset,
            set,
            k,
            unit.budget,
            split_seed(seed, dataset, method.name(), k),
        )?;
        let outcome = method.run(&prepared)?;
        eprintln!(
            "[{}] {} split {}/{n_splits}: test LL {:.3}, RMSE {:.3} ({:.1} s) {}",
            dataset,
            method.name(),
            k + 1,
            outcome.test_ll,
            outcome.test_rmse,
            t0.elapsed().as_secs_f64(),
            outcome.detail
        );
        let record = SplitRecord {
            seed,
            budget: unit.budget,
            k,
            outcome: outcome.clone(),
        };
        let mut line = serde_json::to_string(&record)?;
        line.push('\n');
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&progress)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|e| format!("{}: {e}", progress.display()))?;
        splits[k] = Some(outcome);
    }
    let _ = std::fs::remove_file(&progress);
    Ok(MethodResult {
        method: method.name().to_string(),
        dataset: dataset.clone(),
        budget: unit.budget,
        splits: splits.into_iter().flatten().collect(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The rows of an interrupted run in `out` that this run can reuse: same seed and prediction
/// samples (the budget and split count are checked per row).
fn resumable(options: &UciOptions) -> Result<Vec<MethodResult>, Box<dyn Error>> {
    let path = options.out.join("uci.partial.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", path.display()).into()),
    };
    let record: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a uci run record ({e})", path.display()))?;
    if record["options"]["seed"].as_u64() != Some(options.seed)
        || record["prediction_samples"].as_u64() != Some(PREDICTION_SAMPLES as u64)
    {
        eprintln!(
            "{}: another seed or prediction count; starting afresh",
            path.display()
        );
        return Ok(Vec::new());
    }
    Ok(serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: unreadable results ({e})", path.display()))?)
}

/// Runs one row in a child process of this executable (same protocol, explicit budget and
/// split count) and reads its record back.
fn spawn_unit(
    unit: &Unit,
    options: &UciOptions,
    dir: &Path,
) -> std::io::Result<std::process::Child> {
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.args(["uci", "--dataset", &unit.dataset.argument(), "--method"])
        .arg(unit.method.name())
        .args(["--splits", &unit.n_splits.to_string()])
        .args(["--epochs", &unit.budget.epochs.to_string()])
        .args(["--seed", &options.seed.to_string()])
        .arg("--out")
        .arg(dir)
        .stdout(std::process::Stdio::null());
    if options.quick {
        // The quick budget's other parts (MC dropout's 1 000 test passes).
        cmd.arg("--quick");
    }
    if options.resume {
        // The worker's finished splits of an interrupted run.
        cmd.arg("--resume");
    }
    if let Some(d) = &options.data_dir {
        cmd.arg("--data-dir").arg(d);
    }
    cmd.spawn()
}

fn read_unit(dir: &Path) -> Result<MethodResult, Box<dyn Error>> {
    let path = dir.join("uci.json");
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let mut rows: Vec<MethodResult> = serde_json::from_value(record["results"].clone())?;
    let row = rows
        .pop()
        .ok_or_else(|| format!("{}: a worker wrote no result", path.display()))?;
    std::fs::remove_dir_all(dir)?;
    Ok(row)
}

/// Runs the protocol and writes `uci.json`, `uci.md` and `uci.svg` to `options.out`.
pub fn run(options: &UciOptions) -> Result<Vec<MethodResult>, Box<dyn Error>> {
    let start = Instant::now();
    crate::experiment::git_revision();
    if options.jobs == 0 {
        return Err("--jobs must be at least 1".into());
    }
    if options.epochs == Some(0) {
        return Err("--epochs must be at least 1".into());
    }
    crate::experiment::prepare_out(&options.out)?;
    let all = registry();
    let methods: Vec<&dyn UciMethod> =
        crate::experiment::select(&all, &options.methods, |m| m.name())?
            .into_iter()
            .map(|m| m.as_ref())
            .collect();
    let root = DataRoot::new(options.data_dir.as_deref());
    // Load everything first: a missing or corrupt file stops the run before any training.
    let data: Vec<UciData> = options
        .datasets
        .iter()
        .map(|d| d.load(&root))
        .collect::<Result<_, _>>()?;
    let mut units = Vec::new();
    for (dataset, set) in options.datasets.iter().zip(&data) {
        let n_splits = splits_of(options, dataset, set.meta.n_splits)?;
        let n_train = set.split_indices(0)?.0.len();
        for &method in &methods {
            units.push(Unit {
                dataset,
                set,
                method,
                n_splits,
                budget: method.budget(dataset, &set.meta, n_train, options),
            });
        }
    }
    let earlier = if options.resume {
        resumable(options)?
    } else {
        Vec::new()
    };
    let mut done: Vec<Option<MethodResult>> = units
        .iter()
        .map(|u| {
            earlier
                .iter()
                .find(|r| {
                    r.dataset == *u.dataset
                        && r.method == u.method.name()
                        && r.budget == u.budget
                        && r.splits.len() == u.n_splits
                })
                .cloned()
        })
        .collect();
    let reused = done.iter().flatten().count();
    if options.resume {
        eprintln!("resuming: {reused} of {} rows reused", units.len());
    }
    std::fs::create_dir_all(&options.out)?;
    // Rows finished so far survive an interrupted long run; the final report replaces this file.
    let save_partial = |done: &[Option<MethodResult>]| -> Result<(), Box<dyn Error>> {
        let rows: Vec<MethodResult> = done.iter().flatten().cloned().collect();
        std::fs::write(
            options.out.join("uci.partial.json"),
            serde_json::to_string_pretty(&record(options, &rows, start.elapsed().as_secs_f64()))?,
        )?;
        Ok(())
    };
    let todo: Vec<usize> = (0..units.len()).filter(|&i| done[i].is_none()).collect();
    if options.jobs == 1 {
        for i in todo {
            done[i] = Some(run_unit(
                &units[i],
                options.seed,
                &options.out,
                options.resume,
            )?);
            save_partial(&done)?;
        }
    } else {
        let workers = options.out.join("workers");
        let mut queue = todo.into_iter();
        let mut running: Vec<(usize, std::process::Child, PathBuf)> = Vec::new();
        loop {
            while running.len() < options.jobs {
                let Some(i) = queue.next() else { break };
                let dir = workers.join(format!(
                    "{}-{}",
                    units[i].dataset.seed_name(),
                    units[i].method.name().replace(' ', "_")
                ));
                let child = spawn_unit(&units[i], options, &dir).map_err(|e| {
                    format!(
                        "could not start the worker for {} / {}: {e}",
                        units[i].dataset,
                        units[i].method.name()
                    )
                })?;
                running.push((i, child, dir));
            }
            if running.is_empty() {
                break;
            }
            let mut k = 0;
            while k < running.len() {
                if let Some(status) = running[k].1.try_wait()? {
                    let (i, _, dir) = running.swap_remove(k);
                    if !status.success() {
                        // Stop the other workers rather than leave them running unwatched.
                        for (_, other, _) in &mut running {
                            let _ = other.kill();
                            let _ = other.wait();
                        }
                        return Err(format!(
                            "the worker for {} / {} failed ({status}); rows done so far are in \
                             uci.partial.json (rerun with --resume)",
                            units[i].dataset,
                            units[i].method.name()
                        )
                        .into());
                    }
                    done[i] = Some(read_unit(&dir)?);
                    save_partial(&done)?;
                } else {
                    k += 1;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let _ = std::fs::remove_dir(&workers);
    }
    let results: Vec<MethodResult> = done.into_iter().flatten().collect();
    let wall = start.elapsed().as_secs_f64();
    write_report(options, &results, wall)?;
    let _ = std::fs::remove_file(options.out.join("uci.partial.json"));
    Ok(results)
}

/// The data sets of `results`: the built-in ones in table order, then the user's in the order
/// they appear.
pub fn sets_in(results: &[MethodResult]) -> Vec<DataSet> {
    let mut sets: Vec<DataSet> = UciDataset::ALL
        .into_iter()
        .map(DataSet::Builtin)
        .filter(|d| results.iter().any(|r| r.dataset == *d))
        .collect();
    for r in results {
        if r.dataset.builtin().is_none() && !sets.contains(&r.dataset) {
            sets.push(r.dataset.clone());
        }
    }
    sets
}

/// The column of a data set in the published tables (built-in sets only).
fn published_index(d: &DataSet) -> Option<usize> {
    let b = d.builtin()?;
    UciDataset::ALL.iter().position(|x| *x == b)
}

fn fmt_cell(c: Option<(f64, f64)>) -> String {
    match c {
        Some((m, se)) => format!("{m:.2} ± {se:.2}"),
        None => "–".into(),
    }
}

/// The Markdown tables: ours then the published columns, one row per data set.
pub fn markdown(options: &UciOptions, results: &[MethodResult], wall: f64) -> String {
    let methods: Vec<&str> = {
        let mut m: Vec<&str> = Vec::new();
        for r in results {
            if !m.contains(&r.method.as_str()) {
                m.push(&r.method);
            }
        }
        m
    };
    let published = uci_published::all();
    let sets = sets_in(results);
    let mut md = format!(
        "# UCI regression\n\n{} splits per set{}, seed {}, backend `{}`, wall time {:.0} s \
         ({} worker process{}; the rows' own times sum to {:.0} s). Mean ± standard error over \
         splits; ours first, then published columns (sources below).\n",
        options
            .splits
            .map(|s| s.to_string())
            .unwrap_or_else(|| if options.quick {
                "3".into()
            } else {
                "all".into()
            }),
        if options.quick { " (--quick)" } else { "" },
        options.seed,
        bnn_burn::backend_name(),
        wall,
        options.jobs,
        if options.jobs == 1 { "" } else { "es" },
        results.iter().map(|r| r.seconds).sum::<f64>()
    );
    let table = |title: &str,
                 ours: &dyn Fn(&MethodResult) -> (f64, f64),
                 theirs: &dyn Fn(&PublishedColumn, usize) -> uci_published::Cell,
                 digits: usize| {
        let mut t = format!("\n## {title}\n\n| data set | epochs |");
        for m in &methods {
            t += &format!(" {m} |");
        }
        for p in &published {
            t += &format!(" {} |", p.name);
        }
        t += "\n|---|---:|";
        t += &"---:|".repeat(methods.len() + published.len());
        t += "\n";
        for d in &sets {
            let rows: Vec<&MethodResult> = results.iter().filter(|r| r.dataset == *d).collect();
            t += &format!("| {d} | {} |", rows[0].budget.epochs);
            for m in &methods {
                let cell = rows
                    .iter()
                    .find(|r| r.method == *m)
                    .map(|r| {
                        let (v, se) = ours(r);
                        format!("{v:.digits$} ± {se:.digits$}")
                    })
                    .unwrap_or_else(|| "–".into());
                t += &format!(" {cell} |");
            }
            for p in &published {
                t += &format!(
                    " {} |",
                    fmt_cell(published_index(d).and_then(|i| theirs(p, i)))
                );
            }
            t += "\n";
        }
        t
    };
    md += &table(
        "Test log-likelihood (higher is better)",
        &|r| r.ll(),
        &|p, i| p.test_ll[i],
        2,
    );
    md += &table(
        "Test RMSE (lower is better)",
        &|r| r.rmse(),
        &|p, i| p.test_rmse[i],
        3,
    );
    // Each of our methods against the published columns that implement it.
    let pairs: Vec<(&str, &PublishedColumn)> = published
        .iter()
        .flat_map(|p| {
            p.counterparts
                .iter()
                .filter(|m| methods.contains(m))
                .map(move |m| (*m, *p))
        })
        .collect();
    if !pairs.is_empty() {
        md += "\n## Difference to the published counterpart, in combined standard errors\n\n\
               `z = (ours − published) / √(se_ours² + se_published²)`, signed so that a positive \
               value means ours is better (higher LL, lower RMSE); `–` where either cell is \
               missing or both standard errors are 0.\n";
        let ztable = |title: &str,
                      ours: &dyn Fn(&MethodResult) -> (f64, f64),
                      theirs: &dyn Fn(&PublishedColumn, usize) -> uci_published::Cell,
                      higher_is_better: bool| {
            let mut t = format!("\n{title}\n\n| data set |");
            for (m, p) in &pairs {
                t += &format!(" {m} vs {} |", p.name);
            }
            t += "\n|---|";
            t += &"---:|".repeat(pairs.len());
            t += "\n";
            for d in &sets {
                t += &format!("| {d} |");
                for (m, p) in &pairs {
                    let z = results
                        .iter()
                        .find(|r| r.dataset == *d && r.method == *m)
                        .zip(published_index(d).and_then(|i| theirs(p, i)))
                        .and_then(|(r, th)| z_score(ours(r), th, higher_is_better));
                    t += &match z {
                        Some(z) => format!(" {z:+.1} |"),
                        None => " – |".into(),
                    };
                }
                t += "\n";
            }
            t
        };
        md += &ztable(
            "Test log-likelihood:",
            &|r| r.ll(),
            &|p, i| p.test_ll[i],
            true,
        );
        md += &ztable("Test RMSE:", &|r| r.rmse(), &|p, i| p.test_rmse[i], false);
    }
    md += "\nSources: ";
    md += &published
        .iter()
        .map(|p| format!("{}: {} ({})", p.name, p.source, p.spread.describe()))
        .collect::<Vec<_>>()
        .join("; ");
    md += ".\n";
    md
}

/// `(ours − theirs)/√(se_ours² + se_theirs²)` of two `(mean, standard error)` cells, signed so
/// that positive means ours is better; `None` when both standard errors are 0.
pub fn z_score(ours: (f64, f64), theirs: (f64, f64), higher_is_better: bool) -> Option<f64> {
    let se = ours.1.hypot(theirs.1);
    if se <= 0.0 {
        return None;
    }
    let d = (ours.0 - theirs.0) / se;
    Some(if higher_is_better { d } else { -d })
}

/// The JSON record of a run: options, revision, backend, per-split results, wall time.
fn record(options: &UciOptions, results: &[MethodResult], wall: f64) -> serde_json::Value {
    crate::experiment::record(
        "uci",
        options,
        wall,
        &results,
        serde_json::json!({ "prediction_samples": PREDICTION_SAMPLES }),
    )
}

fn write_report(
    options: &UciOptions,
    results: &[MethodResult],
    wall: f64,
) -> Result<(), Box<dyn Error>> {
    check_results(results)?;
    std::fs::create_dir_all(&options.out)?;
    let md = markdown(options, results, wall);
    std::fs::write(options.out.join("uci.md"), &md)?;
    std::fs::write(
        options.out.join("uci.json"),
        serde_json::to_string_pretty(&record(options, results, wall))?,
    )?;
    plot(&options.out.join("uci.svg"), results)?;
    println!("{md}");
    Ok(())
}

/// Test LL per data set (one panel each) and method, with ±1 standard error bars.
fn plot(path: &Path, results: &[MethodResult]) -> Result<(), Box<dyn Error>> {
    use plotters::prelude::*;
    let sets = sets_in(results);
    let cols = 3usize;
    let rows = sets.len().div_ceil(cols).max(1);
    let root = SVGBackend::new(path, (330 * cols as u32, 260 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((rows, cols));
    for (area, d) in panels.iter().zip(&sets) {
        let rs: Vec<&MethodResult> = results.iter().filter(|r| r.dataset == *d).collect();
        let stats: Vec<(f64, f64)> = rs.iter().map(|r| r.ll()).collect();
        let lo = stats
            .iter()
            .map(|(m, s)| m - s)
            .fold(f64::INFINITY, f64::min);
        let hi = stats
            .iter()
            .map(|(m, s)| m + s)
            .fold(f64::NEG_INFINITY, f64::max);
        let pad = ((hi - lo) * 0.15).max(0.05);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{d}: test LL"), ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(45)
            .build_cartesian_2d(-0.5..(rs.len() as f64 - 0.5), (lo - pad)..(hi + pad))?;
        let names: Vec<String> = rs.iter().map(|r| r.method.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(rs.len())
            .x_label_formatter(&|x| {
                let i = x.round() as usize;
                names.get(i).cloned().unwrap_or_default()
            })
            .draw()?;
        for (i, (m, s)) in stats.iter().enumerate() {
            let x = i as f64;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x, m - s), (x, m + s)],
                BLACK.stroke_width(2),
            )))?;
            chart.draw_series(std::iter::once(Circle::new((x, *m), 4, BLUE.filled())))?;
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uci_published::Spread;
    use bnn_datasets::toy;

    fn meta() -> UciMeta {
        UciMeta {
            n_splits: 1,
            n_hidden: 20,
            n_epochs: 40,
            dropout_rates: vec![0.01, 0.1],
            tau_values: vec![0.5, 2.0],
        }
    }

    /// Every registered method fits a small noisy sine well above a constant predictor's LL,
    /// and the same seed gives the same numbers.
    #[test]
    fn every_method_beats_the_constant_predictor_and_is_reproducible() {
        let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
        let train_raw: RegressionData = toy::heteroscedastic(300, 1).into();
        let test_raw: RegressionData = toy::heteroscedastic(200, 2).into();
        let (sx, sy) = train_raw.fit_standardizers().unwrap();
        let meta = meta();
        let boston = DataSet::Builtin(UciDataset::Boston);
        let split = PreparedSplit {
            dataset: &boston,
            k: 0,
            train: train_raw.standardized(&sx, &sy).unwrap(),
            test_x: sx.transform(&test_raw.x),
            test_y: test_raw.y.clone(),
            y_scaler: sy.clone(),
            meta: &meta,
            budget: Budget {
                epochs: 60,
                batch_size: 32,
                learning_rate: 1e-2,
                test_passes: 100,
            },
            seed: 3,
        };
        // A Gaussian at the training mean and std: the LL any fit must beat.
        let constant_ll = bnn_burn::metrics::mean(
            &test_raw
                .y
                .iter()
                .map(|y| {
                    let z = (y - sy.mean[0]) / sy.std[0];
                    -0.5 * z * z - sy.std[0].ln() - 0.5 * (2.0 * std::f64::consts::PI).ln()
                })
                .collect::<Vec<_>>(),
        );
        for m in registry() {
            let a = m.run(&split).unwrap();
            assert!(
                a.test_ll > constant_ll + 0.3 && a.test_rmse < 0.8 * sy.std[0],
                "{}: LL {} (constant {constant_ll}), RMSE {} (std {})",
                m.name(),
                a.test_ll,
                a.test_rmse,
                sy.std[0]
            );
            let b = m.run(&split).unwrap();
            assert_eq!(
                (a.test_ll, a.test_rmse),
                (b.test_ll, b.test_rmse),
                "{}",
                m.name()
            );
        }
    }

    fn protein_options(quick: bool) -> UciOptions {
        UciOptions {
            datasets: vec![UciDataset::Protein.into()],
            methods: vec![],
            splits: None,
            epochs: None,
            seed: 0,
            quick,
            out: PathBuf::from("x"),
            data_dir: None,
            jobs: 1,
            resume: false,
        }
    }

    #[test]
    fn gal_protocol_budget_and_grid_edges() {
        let meta = meta();
        let mut o = protein_options(false);
        // 10 × n_epochs at batch 128, Adam 10⁻³, T = 10 000.
        let b = GalDropout.budget(&UciDataset::Protein.into(), &meta, 41_157, &o);
        assert_eq!(
            (b.epochs, b.batch_size, b.learning_rate, b.test_passes),
            (400, 128, 1e-3, 10_000)
        );
        o.quick = true;
        let b = GalDropout.budget(&UciDataset::Protein.into(), &meta, 41_157, &o);
        assert_eq!((b.epochs, b.test_passes), (4, 1_000));
        o.epochs = Some(7);
        assert_eq!(
            GalDropout
                .budget(&UciDataset::Boston.into(), &meta, 455, &o)
                .epochs,
            7
        );
        let grid = [0.25, 0.5, 1.0];
        assert!(on_grid_edge(0.25, &grid) && on_grid_edge(1.0, &grid));
        assert!(!on_grid_edge(0.5, &grid) && !on_grid_edge(0.5, &[0.5]));
    }

    #[test]
    fn quick_budgets_cap_the_steps_and_tables_carry_the_published_columns() {
        let meta = meta();
        let mut o = protein_options(true);
        let b = budget(&UciDataset::Protein.into(), &meta, 41_157, &o);
        assert_eq!(b.batch_size, 256);
        assert!(b.epochs * 41_157usize.div_ceil(256) <= 1500 || b.epochs == 4);
        o.quick = false;
        // 161 steps per epoch: 50 epochs reach 8000 steps, above n_epochs = 40.
        assert_eq!(
            budget(&UciDataset::Protein.into(), &meta, 41_157, &o).epochs,
            50
        );
        // Yacht: 18 steps per epoch would need 445 epochs; capped at 10 × n_epochs.
        assert_eq!(
            budget(&UciDataset::Yacht.into(), &meta, 277, &o).epochs,
            400
        );
        // Large sets keep the protocol's n_epochs when that already exceeds 8000 steps.
        assert_eq!(
            budget(&UciDataset::Kin8nm.into(), &meta, 30_000, &o).epochs,
            40
        );
        let r = MethodResult {
            method: "MAP".into(),
            dataset: UciDataset::Yacht.into(),
            budget: b,
            splits: vec![SplitOutcome {
                test_ll: -1.0,
                test_rmse: 0.5,
                detail: String::new(),
            }],
            seconds: 1.0,
        };
        let md = markdown(&o, &[r], 1.0);
        assert!(md.contains("| yacht |") && md.contains("-1.63 ± 0.02") && md.contains("PBP"));
        assert!(md.contains("Gal & Ghahramani 2016"));
        // MAP has no published counterpart: no difference table.
        assert!(!md.contains("combined standard errors"));
    }

    #[test]
    fn splits_outside_the_data_sets_range_are_errors_naming_the_flag() {
        let mut o = protein_options(false);
        assert_eq!(splits_of(&o, &UciDataset::Boston.into(), 20), Ok(20));
        o.quick = true;
        assert_eq!(splits_of(&o, &UciDataset::Boston.into(), 20), Ok(3));
        assert_eq!(splits_of(&o, &UciDataset::Protein.into(), 2), Ok(2));
        o.splits = Some(5);
        assert_eq!(splits_of(&o, &UciDataset::Protein.into(), 5), Ok(5));
        for bad in [0, 6, 1000] {
            o.splits = Some(bad);
            let err = splits_of(&o, &UciDataset::Protein.into(), 5).unwrap_err();
            assert!(
                err.contains(&format!("--splits {bad}")) && err.contains("1 to 5"),
                "{err}"
            );
        }
    }

    #[test]
    fn reports_refuse_nan_rows_and_rows_without_splits() {
        let row = |ll: Vec<f64>| MethodResult {
            method: "MAP".into(),
            dataset: UciDataset::Wine.into(),
            budget: budget(
                &UciDataset::Wine.into(),
                &meta(),
                1439,
                &protein_options(false),
            ),
            splits: ll
                .into_iter()
                .map(|test_ll| SplitOutcome {
                    test_ll,
                    test_rmse: 0.6,
                    detail: String::new(),
                })
                .collect(),
            seconds: 1.0,
        };
        assert!(check_results(&[row(vec![-1.0, -0.9])]).is_ok());
        let err = check_results(&[row(vec![-1.0, f64::NAN])]).unwrap_err();
        assert!(err.contains("wine / MAP split 2: test LL is NaN"), "{err}");
        let err = check_results(&[row(vec![])]).unwrap_err();
        assert!(err.contains("no splits"), "{err}");
    }

    #[test]
    fn data_sets_are_names_or_folders_and_old_records_still_read() {
        assert_eq!(
            DataSet::parse("kin8nm").unwrap(),
            DataSet::Builtin(UciDataset::Kin8nm)
        );
        let err = DataSet::parse("no/such/folder").unwrap_err();
        assert!(err.contains("--dataset") && err.contains("yacht"), "{err}");
        // Records written before folders existed name the set by its variant.
        let old: DataSet = serde_json::from_str("\"PowerPlant\"").unwrap();
        assert_eq!(old, DataSet::Builtin(UciDataset::PowerPlant));
        let folder = DataSet::Folder {
            name: "mine".into(),
            path: "/data/mine".into(),
        };
        let text = serde_json::to_string(&folder).unwrap();
        assert_eq!(serde_json::from_str::<DataSet>(&text).unwrap(), folder);
        // A user's set gets the batch size of the built-in sets of its size.
        for (d, n) in [
            (UciDataset::Boston, 455),
            (UciDataset::Concrete, 927),
            (UciDataset::Energy, 691),
            (UciDataset::Kin8nm, 7373),
            (UciDataset::Naval, 10_741),
            (UciDataset::PowerPlant, 8611),
            (UciDataset::Protein, 41_157),
            (UciDataset::Wine, 1439),
            (UciDataset::Yacht, 277),
        ] {
            assert_eq!(batch_size(&folder, n), batch_size(&d.into(), n), "{d}");
        }
    }

    #[test]
    fn z_scores_are_signed_so_that_positive_is_better() {
        let z = z_score((-2.0, 0.03), (-2.1, 0.04), true).unwrap();
        assert!((z - 2.0).abs() < 1e-12, "{z}");
        let z = z_score((3.0, 0.3), (2.6, 0.4), false).unwrap();
        assert!((z + 0.8).abs() < 1e-12, "{z}");
        assert_eq!(z_score((0.01, 0.0), (0.0, 0.0), false), None);
    }

    /// Gal & Ghahramani 2016's ± are standard deviations over splits: stored divided by √20
    /// (√5 for protein), and the report says so.
    #[test]
    fn published_standard_deviations_are_converted_and_labelled() {
        let gal16 = uci_published::all()
            .into_iter()
            .find(|p| p.name == "MC dropout (Gal 2016)")
            .expect("the 2016 column");
        assert_eq!(gal16.spread, Spread::ConvertedFromStandardDeviation);
        let (m, se) = gal16.test_ll[0].unwrap();
        assert_eq!(m, -2.46);
        assert!((se - 0.25 / 20f64.sqrt()).abs() < 1e-12);
        let (_, se_protein) = gal16.test_rmse[6].unwrap();
        assert!((se_protein - 0.04 / 5f64.sqrt()).abs() < 1e-12);

        let o = protein_options(false);
        let row = |method: &str, ll: [f64; 2]| MethodResult {
            method: method.into(),
            dataset: UciDataset::Boston.into(),
            budget: budget(&UciDataset::Boston.into(), &meta(), 455, &o),
            splits: ll
                .iter()
                .map(|&test_ll| SplitOutcome {
                    test_ll,
                    test_rmse: 3.0,
                    detail: String::new(),
                })
                .collect(),
            seconds: 1.0,
        };
        let md = markdown(
            &o,
            &[row("MC dropout", [-2.3, -2.5]), row("Radial", [-2.6, -2.6])],
            1.0,
        );
        assert!(md.contains("standard deviations over splits, shown here divided by √20"));
        // MC dropout −2.40 ± 0.10 vs Gal's −2.40 ± 0.04: z = 0; Radial's standard error is 0,
        // so z = (−2.60 + 2.58)/0.05 = −0.4.
        assert!(
            md.contains("| MC dropout vs MC dropout (Gal, updated) |"),
            "{md}"
        );
        assert!(md.contains("| boston | +0.0 | -0.4 |"), "{md}");
    }
}
