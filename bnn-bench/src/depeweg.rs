//! `bnn-bench depeweg`: Tables 5.1 and 5.2 of Depeweg (2019), the reproducible rows. BNN+LV
//! under black-box α (VB at α = 10⁻⁶, α = ½, α = 1) and a BNN without latent inputs (α = 1) on
//! seven UCI sets, the heteroscedastic (n = 1000) and bimodal (n = 2500) toys and wet-chicken
//! (n = 2500 transitions of the uniform random policy, target the y-coordinate of `s_{t+1}`).
//!
//! Protocol (Depeweg 2019 §5.1–5.2, `spec/depeweg-thesis.md` §4): 5 random 90/10 splits, inputs
//! and targets standardised on the training rows, 2 hidden ReLU layers of 50 units (20 for the
//! toys and wet-chicken), Adam at 10⁻³ for 5 000 epochs in minibatches of N/25 (the code's), `K`
//! joint draws of weights and latents per step; test LL of the `K`-draw Gaussian mixture
//! (`logsumexp_k ln N(y | μ_k, σ²) − ln K`, eq. 5.7) and RMSE of its mean, in original units;
//! mean ± standard error over the splits, beside the published columns with z-scores.
//!
//! Every finished split is a file of its own under `rows/` (written whole, then renamed), so a
//! run can stop at any time, `--resume` skips what is done, and several processes can share one
//! output folder when they run different data sets or models.

use crate::experiment;
use crate::uci::{MeanSe, z_score};
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::metrics::mean_and_standard_error;
use bnn_burn::nets::{BnnLvConfig, MlpConfig, depeweg_weights};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::predict::{
    GaussianPrediction, MixtureAccumulator, Predict, PredictMode, RegressionScores,
};
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
use std::path::{Path, PathBuf};
use std::time::Instant;

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
}

/// The ten sets of the tables, in their order.
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
        }
    }

    /// The set named `s` (case-insensitive); an error lists the known names.
    pub fn parse(s: &str) -> Result<Self, String> {
        SETS.iter()
            .copied()
            .find(|d| d.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let known: Vec<_> = SETS.iter().map(|d| d.name()).collect();
                format!("--dataset {s:?}: unknown; known: {}", known.join(", "))
            })
    }

    /// Hidden units per layer (§5.2: 20 for the toys and wet-chicken, 50 elsewhere).
    pub fn hidden(self) -> usize {
        match self {
            DepewegSet::Uci(_) => 50,
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
}

/// The four model columns: Table 5.1's BNN, and BNN+LV at Table 5.2's three α.
pub const MODELS: [DepewegModel; 4] = [
    DepewegModel {
        name: "BNN",
        latent: false,
        alpha: 1.0,
    },
    DepewegModel {
        name: "BNN+LV VB",
        latent: true,
        alpha: 1e-6,
    },
    DepewegModel {
        name: "BNN+LV α=0.5",
        latent: true,
        alpha: 0.5,
    },
    DepewegModel {
        name: "BNN+LV α=1",
        latent: true,
        alpha: 1.0,
    },
];

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

/// Published test LL and RMSE (mean ± s.e. over 5 runs) of Tables 5.1 (BNN, and BNN+LV at
/// α = 1) and 5.2 (BNN+LV at VB and α = ½), in the order of [`MODELS`]; RMSE in original
/// units (naval's printed ×100 undone).
pub fn published(set: DepewegSet, model: &DepewegModel) -> Option<Published> {
    let column = MODELS.iter().position(|m| m.name == model.name)?;
    let row = SETS.iter().position(|s| *s == set)?;
    let (ll, rmse) = PUBLISHED[row];
    let scale = if set == DepewegSet::Uci(UciDataset::Naval) {
        0.01
    } else {
        1.0
    };
    let (r, r_se) = rmse[column];
    Some(Published {
        ll: ll[column],
        rmse: (r * scale, r_se * scale),
    })
}

/// One published cell pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Published {
    /// Test LL, mean ± s.e.
    pub ll: (f64, f64),
    /// Test RMSE, mean ± s.e.
    pub rmse: (f64, f64),
}

type Cells = [(f64, f64); 4];

/// Tables 5.1/5.2 as printed: per set (LL, RMSE), columns BNN, VB, α = 0.5, α = 1.
// Boston's printed BNN RMSE 3.14 is a table value, not π.
#[allow(clippy::approx_constant)]
const PUBLISHED: [(Cells, Cells); 10] = [
    // boston
    (
        [(-2.47, 0.04), (-2.71, 0.05), (-2.63, 0.02), (-2.54, 0.04)],
        [(3.14, 0.33), (3.34, 0.34), (3.51, 0.48), (3.33, 0.35)],
    ),
    // power
    (
        [(-2.72, 0.02), (-2.72, 0.02), (-2.70, 0.02), (-2.68, 0.02)],
        [(4.06, 0.10), (3.98, 0.07), (4.00, 0.07), (3.97, 0.07)],
    ),
    // concrete
    (
        [(-2.95, 0.04), (-3.10, 0.01), (-3.07, 0.02), (-2.95, 0.03)],
        [(4.94, 0.18), (5.52, 0.09), (5.40, 0.13), (5.18, 0.21)],
    ),
    // energy
    (
        [(-0.60, 0.05), (-0.75, 0.03), (-0.64, 0.09), (-0.60, 0.05)],
        [(0.52, 0.02), (0.51, 0.03), (0.52, 0.04), (0.52, 0.03)],
    ),
    // kin8nm
    (
        [(1.31, 0.01), (1.30, 0.01), (1.32, 0.01), (1.31, 0.01)],
        [(0.07, 0.00), (0.07, 0.00), (0.07, 0.00), (0.07, 0.00)],
    ),
    // naval (RMSE ×100 as printed)
    (
        [(5.87, 0.14), (6.31, 0.24), (6.09, 0.32), (5.46, 0.39)],
        [(0.08, 0.01), (0.04, 0.01), (0.05, 0.01), (0.25, 0.11)],
    ),
    // wine (positive LL of the latent models: spikes on the integer targets, spec note)
    (
        [(-0.57, 0.09), (-0.98, 0.03), (2.33, 0.10), (2.22, 0.09)],
        [(0.67, 0.02), (0.65, 0.02), (0.68, 0.02), (0.66, 0.02)],
    ),
    // heteroscedastic
    (
        [(-1.69, 0.05), (-1.71, 0.06), (-1.68, 0.05), (-1.67, 0.06)],
        [(1.83, 0.12), (1.84, 0.11), (1.83, 0.10), (1.83, 0.11)],
    ),
    // bimodal
    (
        [(-2.39, 0.17), (-2.12, 0.01), (-2.07, 0.01), (-2.07, 0.02)],
        [(5.20, 0.06), (5.19, 0.05), (5.18, 0.05), (5.18, 0.06)],
    ),
    // wet-chicken
    (
        [(-0.89, 0.02), (-0.56, 0.11), (-0.09, 0.04), (-0.62, 0.02)],
        [(1.43, 0.02), (1.41, 0.02), (1.39, 0.02), (1.40, 0.02)],
    ),
];

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
    /// Output folder.
    pub out: PathBuf,
    /// Data folder (default search when `None`).
    pub data_dir: Option<PathBuf>,
    /// Reuse the finished splits in `out/rows` with this budget and seed.
    pub resume: bool,
    /// Write the report from the finished rows in `out` and train nothing.
    pub report_only: bool,
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

/// A table row: one (data set, model) over its finished splits.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TableRow {
    /// Data set name.
    pub dataset: String,
    /// Model name.
    pub model: String,
    /// Finished splits.
    pub splits: usize,
    /// Test LL, mean ± s.e. over splits (no s.e. for a single split).
    pub ll: MeanSe,
    /// Test RMSE, mean ± s.e.
    pub rmse: MeanSe,
    /// Published LL and RMSE.
    pub published_ll: Option<(f64, f64)>,
    /// Published RMSE.
    pub published_rmse: Option<(f64, f64)>,
    /// z of the LL against the published (higher is better; combined s.e.).
    pub z_ll: Option<f64>,
    /// z of the RMSE against the published (positive: ours lower).
    pub z_rmse: Option<f64>,
    /// `(T, LL mean ± s.e., z)` of the `T`-draw mixtures, when every split measured one of `T`.
    pub wide: Option<(usize, MeanSe, Option<f64>)>,
    /// Sum of the splits' seconds.
    pub seconds: f64,
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

/// The test mixture of [`run`]'s second LL estimate has this many times the budget's draws.
pub const WIDE_DRAWS_FACTOR: usize = 25;

/// One fit's scores, in original units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FitScores {
    /// Test LL per point of the budget's `test_draws`-draw mixture.
    pub test_ll: f64,
    /// Test RMSE of the predictive mean (the same draws).
    pub test_rmse: f64,
    /// Learned noise std `√Σ`.
    pub noise_std: f64,
    /// `Some((T, LL))`: the test LL of the mixture of `T` draws of the same trained net, its
    /// first `test_draws` those of `test_ll` (`ln (1/T) Σ_t p_t(y)` is biased low by an amount
    /// that shrinks with `T`, most for spiky predictives such as wine's).
    pub wide: Option<(usize, f64)>,
}

/// Fits `model` on one split and scores the test rows. `train`, `test` are in original units;
/// the standardisation is fitted here on `train` ([`fit_standardised`]); `wide_draws > 0` adds
/// the LL of a mixture of that many draws ([`FitScores::wide`]).
///
/// # Errors
/// Shapes, a diverged fit (the trainer's check), a non-finite score.
pub fn fit_and_score(
    model: &DepewegModel,
    hidden: &[usize],
    train: &RegressionData,
    test: &RegressionData,
    budget: &DepewegBudget,
    seed: u64,
    wide_draws: usize,
) -> Result<FitScores, Box<dyn Error>> {
    let (sx, sy) = train.fit_standardizers()?;
    fit_standardised(
        model,
        hidden,
        &train.standardized(&sx, &sy)?,
        &sx.transform(&test.x),
        &sy.transform(&test.y),
        sy.std[0],
        budget,
        seed,
        wide_draws,
    )
}

/// Fits `model` (a 2-layer-or-other MLP of `hidden` ReLU units with Depeweg's weights,
/// [`depeweg_weights`]; with a latent input when `model.latent`) by black-box α on standardised
/// training rows, and scores standardised test rows by the `budget.test_draws`-draw mixture.
/// `y_std` is the target's training std: LL, RMSE and noise std come back in original units.
/// `wide_draws > budget.test_draws` adds the LL of the mixture of `wide_draws` draws, the first
/// `budget.test_draws` of them the budget's, the rest drawn after in chunks.
///
/// # Errors
/// Shapes, a diverged fit (the trainer's check), a non-finite score.
#[allow(clippy::too_many_arguments)]
pub fn fit_standardised(
    model: &DepewegModel,
    hidden: &[usize],
    train: &RegressionData,
    test_x: &[f64],
    test_y: &[f64],
    y_std: f64,
    budget: &DepewegBudget,
    seed: u64,
    wide_draws: usize,
) -> Result<FitScores, Box<dyn Error>> {
    let d = train.n_features;
    let device = training_device();
    device.seed(seed);
    let x = matrix(&train.x, d, &device);
    let y = matrix(&train.y, 1, &device);
    let plain = device.clone().inner();
    let xt = matrix(test_x, d, &plain);
    let yt = matrix(test_y, 1, &plain);
    let n = train.len();
    let config = TrainConfig::new(budget.epochs)
        .with_batch_size(n.div_ceil(budget.batches).max(1))
        .with_learning_rate(budget.learning_rate)
        .with_train_samples(budget.train_samples)
        .with_seed(seed)
        .with_progress(false);
    let objective = AlphaConfig::new().with_alpha(model.alpha).init()?;
    let mlp = MlpConfig::new(d, hidden.to_vec(), 1).with_weights(depeweg_weights(1.0));
    let draws = budget.test_draws;
    // The budget's mixture, then (when asked) the wide one: its first draws those, the rest
    // drawn after in chunks and accumulated.
    type Scores = (RegressionScores, Option<(usize, f64)>);
    let score = |net: &dyn Predict<Input = Tensor<2>, Prediction = GaussianPrediction>|
     -> Result<Scores, Box<dyn Error>> {
        let first = net.predict(xt.clone(), PredictMode::Samples(draws))?;
        let scores = first.scores(yt.clone(), &[y_std]);
        let chunks: Vec<usize> = wide_chunks(wide_draws, draws, test_y.len(), hidden, d).collect();
        if chunks.is_empty() {
            return Ok((scores, None));
        }
        let mut acc = MixtureAccumulator::new(yt.clone());
        let rest = chunks
            .into_iter()
            .map(|k| net.predict(xt.clone(), PredictMode::Samples(k)));
        for p in std::iter::once(Ok(first)).chain(rest) {
            let GaussianPrediction::Samples(s) = p? else {
                return Err("a sampled prediction returned moments".into());
            };
            acc.add(&s);
        }
        Ok((scores, Some((acc.draws(), acc.scores(&[y_std]).log_likelihood))))
    };
    let ((scores, wide), noise) = if model.latent {
        let net = BnnLvConfig::new(mlp).init_regressor(n, &device)?;
        let (net, _) = Trainer::new(config)
            .with_objective(objective)
            .fit(net, (x, y))?;
        let net = net.valid();
        (score(&net)?, to_vec(net.net.likelihood.noise_std())[0])
    } else {
        let net = mlp.init_regressor(&device)?;
        let (net, _) = Trainer::new(config)
            .with_objective(objective)
            .fit(net, (x, y))?;
        let net = net.valid();
        (score(&net)?, to_vec(net.likelihood.noise_std())[0])
    };
    Ok(FitScores {
        test_ll: scores.log_likelihood,
        test_rmse: scores.rmse,
        noise_std: noise * y_std,
        wide,
    })
}

/// The chunk sizes of the draws after the first `first` up to `wide` in all, each holding at
/// most `PASS_CHUNK_ELEMENTS` activations of the widest layer over `rows` test rows
/// ([`crate::uci::draws_per_chunk`]).
fn wide_chunks(
    wide: usize,
    first: usize,
    rows: usize,
    hidden: &[usize],
    d: usize,
) -> impl Iterator<Item = usize> {
    let widest = hidden.iter().copied().chain([d]).max().unwrap_or(1);
    let chunk = crate::uci::draws_per_chunk(widest, rows);
    let rest = wide.saturating_sub(first);
    (0..rest.div_ceil(chunk)).map(move |i| chunk.min(rest - i * chunk))
}

/// The file of one split's row under `out`: named by set, model, budget, seed and split, so
/// runs of other budgets in the same folder keep their rows.
pub fn row_path(
    out: &Path,
    options: &DepewegOptions,
    set: DepewegSet,
    model: &DepewegModel,
    k: usize,
) -> PathBuf {
    let b = &options.budget;
    let slug = crate::experiment::slug(&format!(
        "{}__{}__e{}-lr{:e}-n{}-k{}-t{}-s{}__{k}",
        set.name(),
        model.name,
        b.epochs,
        b.learning_rate,
        b.batches,
        b.train_samples,
        b.test_draws,
        options.seed
    ));
    out.join("rows").join(format!("{slug}.json"))
}

/// Writes `text` to `path` whole: a temporary file beside it, then a rename, so a stop in the
/// middle never leaves a half-written row.
pub fn write_whole(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| format!("{}: cannot write: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// The finished row of split `k` in `out` when it has this run's budget and seed.
fn reusable(path: &Path, options: &DepewegOptions) -> Result<Option<SplitRow>, String> {
    let Some(text) = experiment::read_if_exists(path)? else {
        return Ok(None);
    };
    let row: SplitRow = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a split row: {e}", path.display()))?;
    Ok((row.budget == options.budget && row.seed == options.seed).then_some(row))
}

/// Every row file in `out/rows` with `options`' budget and seed.
pub fn read_rows(out: &Path, options: &DepewegOptions) -> Result<Vec<SplitRow>, String> {
    let dir = out.join("rows");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let mut rows = Vec::new();
    for p in paths {
        if let Some(row) = reusable(&p, options)? {
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The table rows of `rows` (every (set, model) present, in table order).
pub fn table(rows: &[SplitRow]) -> Result<Vec<TableRow>, String> {
    let mut out = Vec::new();
    for set in SETS {
        for model in MODELS {
            let mine: Vec<&SplitRow> = rows
                .iter()
                .filter(|r| r.dataset == set.name() && r.model == model.name)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let label = format!("{} / {}", set.name(), model.name);
            for r in &mine {
                experiment::check_finite(&label, "test LL", r.test_ll)?;
                experiment::check_finite(&label, "test RMSE", r.test_rmse)?;
            }
            let ll = mean_and_standard_error(&mine.iter().map(|r| r.test_ll).collect::<Vec<_>>());
            let rmse =
                mean_and_standard_error(&mine.iter().map(|r| r.test_rmse).collect::<Vec<_>>());
            let p = published(set, &model);
            let wide = match mine.iter().map(|r| r.wide).collect::<Option<Vec<_>>>() {
                Some(w) if w.iter().all(|&(t, _)| t == w[0].0) => {
                    let lls: Vec<f64> = w.iter().map(|&(_, ll)| ll).collect();
                    experiment::check_finite(&label, "wide test LL", lls.iter().sum())?;
                    let ll = mean_and_standard_error(&lls);
                    Some((w[0].0, ll, p.and_then(|p| z_score(ll, p.ll, true))))
                }
                _ => None,
            };
            out.push(TableRow {
                wide,
                dataset: set.name().into(),
                model: model.name.into(),
                splits: mine.len(),
                ll,
                rmse,
                published_ll: p.map(|p| p.ll),
                published_rmse: p.map(|p| p.rmse),
                z_ll: p.and_then(|p| z_score(ll, p.ll, true)),
                z_rmse: p.and_then(|p| z_score(rmse, p.rmse, false)),
                seconds: mine.iter().map(|r| r.seconds).sum(),
            });
        }
    }
    Ok(out)
}

/// The target of the issue: BNN+LV (α = 1, Table 5.1's column) at or above the published test
/// LL within one combined s.e. (`z ≥ −1`): (met, finished rows with a z). A row counts once
/// all `splits` of its splits are finished.
pub fn targets_met(rows: &[TableRow], splits: usize) -> (usize, usize) {
    count_met(rows, splits, |r| r.z_ll)
}

/// [`targets_met`] with each row's z of its wide mixture ([`TableRow::wide`]) where it has one.
pub fn targets_met_wide(rows: &[TableRow], splits: usize) -> (usize, usize) {
    count_met(rows, splits, |r| r.wide.and_then(|w| w.2).or(r.z_ll))
}

fn count_met(
    rows: &[TableRow],
    splits: usize,
    z: impl Fn(&TableRow) -> Option<f64>,
) -> (usize, usize) {
    let zs: Vec<f64> = rows
        .iter()
        .filter(|r| r.model == MODELS[3].name && r.splits >= splits)
        .filter_map(z)
        .collect();
    (zs.iter().filter(|&&z| z >= -1.0).count(), zs.len())
}

fn cell(v: MeanSe, digits: usize) -> String {
    crate::uci::fmt_mean_se(v.0, v.1, digits)
}

fn opt_cell(v: Option<(f64, f64)>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| cell((v.0, Some(v.1)), digits))
}

fn z_cell(z: Option<f64>) -> String {
    z.map_or_else(|| "–".into(), |z| format!("{z:+.2}"))
}

/// The Markdown report of `rows` under `options`.
pub fn markdown(options: &DepewegOptions, rows: &[TableRow]) -> String {
    let b = &options.budget;
    let mut s = format!(
        "# Depeweg (2019) Tables 5.1 / 5.2: BNN and BNN+LV under black-box α\n\n\
         Random 90/10 splits (mean ± standard error over the finished splits, `± –` and no z \
         for a single one; the thesis: 5, its ± also s.e.); 2 hidden ReLU layers (50 units, 20 \
         for the toys and wet-chicken); {} epochs (the thesis: 5 000), Adam {}, minibatch N/{}, \
         K = {} draws per step, test mixture of {} draws. z = (ours − published) / √(s.e.² + \
         s.e.² + rounding²), signed so that positive is better. Naval RMSE ×100 as printed.\n\n",
        b.epochs, b.learning_rate, b.batches, b.train_samples, b.test_draws
    );
    let (met, of) = targets_met(rows, options.splits);
    s.push_str(&format!(
        "BNN+LV α = 1 at or above Table 5.1's BNN+LV test LL within one combined s.e.: {met} \
         of {of} sets with all {} split{} finished (the issue's target: 7 of 10). Rows with \
         fewer splits are marked *.\n\n",
        options.splits,
        if options.splits == 1 { "" } else { "s" }
    ));
    s.push_str(
        "| data set | model | splits | test LL | published | z | test RMSE | published | z | s |\n",
    );
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let scale = if r.dataset == "naval" { 100.0 } else { 1.0 };
        let sc = |v: (f64, f64)| (v.0 * scale, v.1 * scale);
        let sc_ours = |v: MeanSe| (v.0 * scale, v.1.map(|se| se * scale));
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} |\n",
            r.dataset,
            r.model,
            if r.splits < options.splits {
                format!("{}*", r.splits)
            } else {
                r.splits.to_string()
            },
            cell(r.ll, 3),
            opt_cell(r.published_ll, 2),
            z_cell(r.z_ll),
            cell(sc_ours(r.rmse), 3),
            opt_cell(r.published_rmse.map(sc), 2),
            z_cell(r.z_rmse),
            r.seconds
        ));
    }
    let wide: Vec<_> = rows.iter().filter_map(|r| r.wide.map(|w| (r, w))).collect();
    if !wide.is_empty() {
        s.push_str(
            "\nThe same nets' test LL under wider mixtures (the first draws those above; the \
             estimate `ln (1/T) Σ_t p_t(y)` is biased low by an amount that shrinks with `T`, \
             most where the predictive is spiky). Rows whose every split measured it:\n\n\
             | data set | model | splits | T | test LL | published | z |\n\
             |---|---|---:|---:|---:|---:|---:|\n",
        );
        for (r, (t, ll, z)) in wide {
            s.push_str(&format!(
                "| {} | {} | {} | {t} | {} | {} | {} |\n",
                r.dataset,
                r.model,
                r.splits,
                cell(ll, 3),
                opt_cell(r.published_ll, 2),
                z_cell(z)
            ));
        }
        let (met, of) = targets_met_wide(rows, options.splits);
        s.push_str(&format!(
            "\nWith these estimates where a row has one (else the {}-draw one): {met} of {of} sets \
             at or above Table 5.1's BNN+LV test LL within one combined s.e.\n",
            b.test_draws
        ));
    }
    s
}

/// Writes `depeweg.md` and `depeweg.json` from every finished row in `options.out` with this
/// run's budget and seed.
fn write_report(options: &DepewegOptions, wall: f64) -> Result<Vec<TableRow>, Box<dyn Error>> {
    let rows = read_rows(&options.out, options)?;
    let table = table(&rows)?;
    let md = markdown(options, &table);
    write_whole(&options.out.join("depeweg.md"), &md)?;
    let record = experiment::record(
        "depeweg",
        options,
        wall,
        &table,
        serde_json::json!({ "splits_finished": rows }),
    );
    write_whole(
        &options.out.join("depeweg.json"),
        &serde_json::to_string_pretty(&record)?,
    )?;
    Ok(table)
}

/// Runs the selected (set, model, split) fits not yet finished, writing each split's row as it
/// finishes and the report after each; returns the table of every finished row in `out`.
///
/// # Errors
/// Bad options (named), an unknown set or model, an unwritable `out`, a missing data file, a
/// diverged fit.
pub fn run(options: &DepewegOptions) -> Result<Vec<TableRow>, Box<dyn Error>> {
    let start = Instant::now();
    options.check()?;
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
    experiment::prepare_out(&options.out)?;
    let rows_dir = options.out.join("rows");
    std::fs::create_dir_all(&rows_dir)
        .map_err(|e| format!("--out {}: cannot create rows/: {e}", options.out.display()))?;
    let root = DataRoot::new(options.data_dir.as_deref());
    // Every data set loads before any training: a missing file fails now.
    let data: Vec<(DepewegSet, RegressionData)> = sets
        .iter()
        .filter(|_| !options.report_only)
        .map(|&s| Ok((s, s.load(&root, options.seed)?)))
        .collect::<Result<_, Box<dyn Error>>>()?;
    for (set, all) in &data {
        for model in &models {
            for k in 0..options.splits {
                let path = row_path(&options.out, options, *set, model, k);
                if options.resume && reusable(&path, options)?.is_some() {
                    continue;
                }
                let t = Instant::now();
                let (train_rows, test_rows) = random_split(all.len(), options.seed, *set, k);
                let train = all.select(&train_rows)?;
                let test = all.select(&test_rows)?;
                let seed = experiment::derive(options.seed, &[set.name(), model.name], k as u64);
                eprintln!(
                    "[depeweg] {} / {} split {}/{}: {} epochs on {} rows",
                    set.name(),
                    model.name,
                    k + 1,
                    options.splits,
                    options.budget.epochs,
                    train.len()
                );
                let hidden = [set.hidden(); 2];
                let wide = options.budget.test_draws * WIDE_DRAWS_FACTOR;
                let fit = fit_and_score(model, &hidden, &train, &test, &options.budget, seed, wide)
                    .map_err(|e| format!("{} / {} split {}: {e}", set.name(), model.name, k + 1))?;
                let (test_ll, test_rmse) = (fit.test_ll, fit.test_rmse);
                let row = SplitRow {
                    dataset: set.name().into(),
                    model: model.name.into(),
                    split: k,
                    seed: options.seed,
                    budget: options.budget,
                    n_train: train.len(),
                    test_ll,
                    test_rmse,
                    noise_std: fit.noise_std,
                    wide: fit.wide,
                    seconds: t.elapsed().as_secs_f64(),
                    git_revision: experiment::git_revision(),
                };
                eprintln!(
                    "[depeweg] {} / {} split {}: test LL {test_ll:.3}{}, RMSE {test_rmse:.4}, {:.0} s",
                    set.name(),
                    model.name,
                    k + 1,
                    row.wide
                        .map(|(t, ll)| format!(" ({ll:.3} with {t} draws)"))
                        .unwrap_or_default(),
                    row.seconds
                );
                write_whole(&path, &serde_json::to_string_pretty(&row)?)?;
                write_report(options, start.elapsed().as_secs_f64())?;
            }
        }
    }
    let table = write_report(options, start.elapsed().as_secs_f64())?;
    println!("{}", markdown(options, &table));
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_ones_are_listed() {
        assert_eq!(
            DepewegSet::parse("Wet-Chicken").unwrap(),
            DepewegSet::WetChicken
        );
        assert_eq!(
            DepewegSet::parse("power").unwrap(),
            DepewegSet::Uci(UciDataset::PowerPlant)
        );
        let err = DepewegSet::parse("yachts").unwrap_err();
        assert!(
            err.contains("--dataset") && err.contains("bimodal"),
            "{err}"
        );
        for (s, want) in [
            ("bnn", 0),
            ("BNN+LV VB", 1),
            ("bnn+lv-vb", 1),
            ("BNN+LV alpha=0.5", 2),
            ("bnn+lv α=0.5", 2),
            ("BNN+LV a=1", 3),
            ("BNN+LV-alpha-1", 3),
        ] {
            assert_eq!(DepewegModel::parse(s).unwrap(), MODELS[want], "{s}");
        }
        let err = DepewegModel::parse("BNN+LV α=2").unwrap_err();
        assert!(err.contains("--model") && err.contains("α=0.5"), "{err}");
    }

    #[test]
    fn published_cells_follow_the_tables() {
        let p = published(DepewegSet::Bimodal, &MODELS[3]).unwrap();
        assert_eq!(p.ll, (-2.07, 0.02));
        let p = published(DepewegSet::WetChicken, &MODELS[2]).unwrap();
        assert_eq!(p.ll, (-0.09, 0.04));
        let p = published(DepewegSet::Uci(UciDataset::Naval), &MODELS[0]).unwrap();
        assert!((p.rmse.0 - 0.0008).abs() < 1e-12 && p.ll == (5.87, 0.14));
        assert_eq!(
            published(DepewegSet::Uci(UciDataset::Yacht), &MODELS[0]),
            None
        );
    }

    #[test]
    fn only_finished_alpha_one_rows_count_for_the_target() {
        let row = |dataset: &str, model: &str, splits: usize, z: f64| TableRow {
            dataset: dataset.into(),
            model: model.into(),
            splits,
            ll: (0.0, Some(0.1)),
            rmse: (1.0, Some(0.1)),
            published_ll: Some((0.0, 0.1)),
            published_rmse: Some((1.0, 0.1)),
            z_ll: Some(z),
            z_rmse: Some(0.0),
            wide: None,
            seconds: 1.0,
        };
        let rows = [
            row("boston", "BNN+LV α=1", 5, -0.5),  // met
            row("power", "BNN+LV α=1", 5, -1.5),   // missed
            row("energy", "BNN+LV α=1", 3, 2.0),   // unfinished: not counted
            row("kin8nm", "BNN+LV α=0.5", 5, 2.0), // another column
        ];
        assert_eq!(targets_met(&rows, 5), (1, 2));
        assert_eq!(targets_met(&rows, 3), (2, 3));
        // A wide mixture's z replaces the row's own where the row has one.
        let mut wide = rows.clone();
        wide[1].wide = Some((5000, (0.0, Some(0.1)), Some(-0.5)));
        wide[0].wide = Some((5000, (0.0, Some(0.1)), Some(-1.5)));
        assert_eq!(targets_met_wide(&wide, 5), (1, 2));
        wide[0].wide = None;
        assert_eq!(targets_met_wide(&wide, 5), (2, 2));
        assert_eq!(targets_met(&wide, 5), (1, 2));
    }

    #[test]
    fn splits_are_90_10_disjoint_and_differ_by_index() {
        let (tr, te) = random_split(1000, 0, DepewegSet::Bimodal, 0);
        assert_eq!((tr.len(), te.len()), (900, 100));
        let mut all: Vec<usize> = tr.iter().chain(&te).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
        let (_, te1) = random_split(1000, 0, DepewegSet::Bimodal, 1);
        assert_ne!(te, te1);
        assert_eq!(random_split(1000, 0, DepewegSet::Bimodal, 0).1, te);
    }

    #[test]
    fn wet_chicken_targets_are_the_next_y_coordinate() {
        let data = DepewegSet::WetChicken
            .load(&DataRoot::new(None), 0)
            .unwrap();
        assert_eq!((data.len(), data.n_features, data.n_targets), (2500, 4, 1));
        // y' lies on the river, and the next row starts where this one ended.
        assert!(data.y.iter().all(|&y| (0.0..=5.0).contains(&y)));
        for i in 0..data.len() - 1 {
            assert_eq!(data.y[i], data.x[(i + 1) * 4 + 1]);
        }
    }

    #[test]
    fn bad_options_are_refused_before_work() {
        let mut o = DepewegOptions {
            datasets: vec![],
            models: vec![],
            splits: 5,
            budget: DepewegBudget {
                epochs: 10,
                learning_rate: 1e-3,
                batches: 25,
                train_samples: 1,
                test_draws: 100,
            },
            seed: 0,
            out: std::env::temp_dir().join("bnn-depeweg-never-written"),
            data_dir: None,
            resume: false,
            report_only: false,
        };
        assert!(o.check().unwrap_err().contains("--train-samples 1"));
        o.budget.train_samples = 8;
        o.budget.learning_rate = f64::NAN;
        assert!(o.check().unwrap_err().contains("--lr"));
        o.budget.learning_rate = 1e-3;
        o.splits = 0;
        assert!(o.check().unwrap_err().contains("--splits 0"));
        o.splits = 2;
        o.datasets = vec!["nope".into()];
        let err = run(&o).unwrap_err().to_string();
        assert!(err.contains("--dataset \"nope\""), "{err}");
        assert!(
            !o.out.exists(),
            "nothing is written before the options are checked"
        );
    }

    /// A resumed run reuses the finished split files, recomputes none of them, and the report
    /// shows every (set, model) found; a changed budget does not reuse them.
    #[test]
    fn finished_splits_are_reused_and_reported() {
        let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 100);
        let out = std::env::temp_dir().join(format!("bnn-depeweg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let options = DepewegOptions {
            datasets: vec!["heteroscedastic".into()],
            models: vec!["BNN+LV α=1".into()],
            splits: 2,
            budget: DepewegBudget {
                epochs: 2,
                learning_rate: 1e-2,
                batches: 5,
                train_samples: 2,
                test_draws: 10,
            },
            seed: 3,
            out: out.clone(),
            data_dir: None,
            resume: true,
            report_only: false,
        };
        let table = run(&options).unwrap();
        assert_eq!(table.len(), 1);
        assert_eq!(table[0].splits, 2);
        assert!(table[0].published_ll.is_some() && table[0].z_ll.is_some());
        let wide = table[0].wide.unwrap();
        assert_eq!(wide.0, 10 * WIDE_DRAWS_FACTOR);
        assert!(wide.1.0.is_finite() && wide.2.is_some(), "{wide:?}");
        let md = std::fs::read_to_string(out.join("depeweg.md")).unwrap();
        assert!(
            md.contains("| heteroscedastic | BNN+LV α=1 | 2 | 250 |"),
            "{md}"
        );
        let path = row_path(&out, &options, DepewegSet::Heteroscedastic, &MODELS[3], 1);
        let before = std::fs::read_to_string(&path).unwrap();
        // A planted marker survives a resumed run: the split is not refitted. A row written
        // before the wide mixture was measured (no `wide`) still loads; its group shows none.
        let mut row: serde_json::Value = serde_json::from_str(&before).unwrap();
        row["seconds"] = 12345.0.into();
        row.as_object_mut().unwrap().remove("wide");
        write_whole(&path, &serde_json::to_string(&row).unwrap()).unwrap();
        let again = run(&options).unwrap();
        assert_eq!(again[0].splits, 2);
        assert!(again[0].seconds >= 12345.0);
        assert_eq!(again[0].wide, None);
        // Another budget neither reuses nor reports nor replaces the rows of this one.
        let mut other = options.clone();
        other.budget.epochs = 1;
        other.splits = 1;
        let t = run(&other).unwrap();
        assert_eq!(t[0].splits, 1);
        assert!(t[0].seconds < 12345.0);
        // One split: a mean without a standard error, and no z beside the published cell.
        assert!(t[0].ll.1.is_none() && t[0].rmse.1.is_none(), "{:?}", t[0]);
        assert!(t[0].published_ll.is_some() && t[0].z_ll.is_none() && t[0].z_rmse.is_none());
        let md = std::fs::read_to_string(out.join("depeweg.md")).unwrap();
        assert!(md.contains("heteroscedastic | BNN+LV α=1 | 1 |"), "{md}");
        assert!(md.contains(" ± – | -1.67 ± 0.06 | – |"), "{md}");
        assert!(md.contains("0 of 0 sets with all 1 split finished"), "{md}");
        assert!(std::fs::read_to_string(&path).unwrap().contains("12345"));
        // The report alone, from the rows: nothing is trained (no new split of split 3).
        let report = run(&DepewegOptions {
            splits: 3,
            report_only: true,
            ..options.clone()
        })
        .unwrap();
        assert_eq!((report.len(), report[0].splits), (1, 2));
        assert_eq!(std::fs::read_dir(out.join("rows")).unwrap().count(), 3);
        let _ = std::fs::remove_dir_all(&out);
    }
}
