//! `bnn-bench toy`: the decomposition pictures. Every method, as a 2×50 ReLU net with a
//! heteroscedastic head, on the two toys of Depeweg (2019) §6.1.3 whose inputs are unevenly
//! spread, so that epistemic uncertainty has somewhere to grow: the heteroscedastic toy
//! (`y = 7 sin x + 3|cos(x/2)| ε`, x from a 3-Gaussian mixture) and the bimodal toy
//! (`y = 10 cos x` or `10 sin x` with equal odds, plus N(0, 1); `x = −0.5 + Exp(2)`, truncated at
//! 2), 750 points each. One figure, one row per toy and one panel per method.

use crate::catalogue::{Method, Protocol, Settings};
use crate::decomposition::{self, Curves, Fit, Panel, Row};
use crate::experiment;
use bnn_datasets::RegressionData;
use bnn_datasets::toy::{self, Regression1d};
use lv::{BNN_LV, Draws, LvCurves};
use std::error::Error;

mod harness;
pub mod lv;
mod report;
#[cfg(test)]
mod tests;

pub use harness::{ToyRow, ToyTask};
use report::*;

/// Training points per toy (Depeweg 2019 §6.1.3).
pub const N_TRAIN: usize = 750;
/// Test points per toy, drawn from the same distribution.
pub const N_TEST: usize = 2000;
/// Half-width of the window in which training points are counted around a grid point.
const WINDOW: f64 = 0.25;

/// Every method the catalogue runs here by default, in figure order
/// ([`crate::catalogue::ENTRIES`]), under [`SETTINGS`].
pub fn methods() -> Vec<Method> {
    crate::catalogue::defaults(Protocol::Toy, &SETTINGS)
}

/// The toys' (and the quick start's) values of the catalogue's task settings: MC dropout at
/// p = 0.05 with length-scale 0.1; the moment methods at Haußmann's regression prior
/// precision α = 10.
pub const SETTINGS: Settings = Settings {
    drop_rate: 0.05,
    length_scale: 0.1,
    moment_alpha: crate::uci::HAUSSMANN_REGRESSION_ALPHA,
    sampled_dvi_alpha: crate::uci::HAUSSMANN_REGRESSION_ALPHA,
};

/// One toy problem.
pub struct Toy {
    /// Name in tables.
    pub name: &'static str,
    /// Training points.
    pub train: Regression1d,
    /// Test points.
    pub test: Regression1d,
    /// Test LL of the true generative model.
    pub oracle_ll: f64,
    /// Plotted x range.
    pub x_range: (f64, f64),
    /// Plotted y range.
    pub y_range: (f64, f64),
}

/// The two toys, seeded.
pub fn toys(seed: u64) -> Vec<Toy> {
    let hetero_test = toy::heteroscedastic_mixture(N_TEST, seed + 1);
    let bimodal_test = toy::bimodal_exponential(N_TEST, seed + 3);
    vec![
        Toy {
            name: "heteroscedastic",
            train: toy::heteroscedastic_mixture(N_TRAIN, seed),
            oracle_ll: toy::heteroscedastic_oracle_log_likelihood(&hetero_test),
            test: hetero_test,
            x_range: (-7.0, 7.0),
            y_range: (-20.0, 20.0),
        },
        Toy {
            name: "bimodal",
            train: toy::bimodal_exponential(N_TRAIN, seed + 2),
            oracle_ll: toy::bimodal_oracle_log_likelihood(&bimodal_test),
            test: bimodal_test,
            x_range: (-1.5, 3.0),
            y_range: (-20.0, 20.0),
        },
    ]
}

/// Options of one `toy` run (the `bnn-bench toy` command line).
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct ToyOptions {
    /// Methods (MAP, "MC dropout", MFVI-LRT, Radial, BNN+LV: also its entropy-form figure
    /// toy-lv.svg and the wet-chicken maps wet-chicken.svg); repeatable [default: all].
    #[arg(long = "method")]
    pub methods: Vec<String>,
    /// Training epochs [default: 2000; 300 with --quick].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// The seed, and `quick`: the small budget (see the command's help).
    #[serde(flatten)]
    #[command(flatten)]
    pub exp: crate::runner::ExperimentArgs,
    /// The output folder, resuming (the finished fits in `out/rows` of this seed and budget)
    /// and worker processes (one fit each at a time).
    #[serde(flatten)]
    #[command(flatten)]
    pub run: crate::runner::RunnerOptions,
}

/// One (toy, method) result: test metrics and where the epistemic band is wide.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ToyResult {
    /// Toy.
    pub toy: String,
    /// Metrics.
    #[serde(flatten)]
    pub row: Row,
    /// Test LL of the true model.
    pub oracle_ll: f64,
    /// Mean epistemic std on grid points with at least 5 % of the training points within
    /// ±0.25.
    pub epistemic_dense: f64,
    /// Mean epistemic std on grid points with no training point within ±0.25.
    pub epistemic_sparse: f64,
    /// Mean aleatoric std on the dense grid points.
    pub aleatoric_dense: f64,
}

/// Mean epistemic std where the training data are dense and where there are none, and the
/// mean aleatoric std where they are dense.
pub fn density_split(curves: &Curves, train_x: &[f64]) -> (f64, f64, f64) {
    let epi = curves.epistemic_std();
    let dense_min = (0.05 * train_x.len() as f64).max(1.0);
    let (mut dense, mut sparse, mut ale) = (Vec::new(), Vec::new(), Vec::new());
    for (i, &g) in curves.x.iter().enumerate() {
        let near = train_x.iter().filter(|&&x| (x - g).abs() <= WINDOW).count() as f64;
        if near >= dense_min {
            dense.push(epi[i]);
            ale.push(curves.aleatoric_std[i]);
        } else if near == 0.0 {
            sparse.push(epi[i]);
        }
    }
    let m = |v: &[f64]| {
        if v.is_empty() {
            f64::NAN
        } else {
            bnn_burn::metrics::mean(v)
        }
    };
    (m(&dense), m(&sparse), m(&ale))
}

/// Runs every method of [`methods`] and BNN+LV on both toys; writes `toy.md`, `toy.json` and
/// `toy.svg` ([`run_with`]).
///
/// # Errors
/// Those of [`run_with`].
pub fn run(options: &ToyOptions) -> Result<Vec<ToyResult>, Box<dyn Error>> {
    run_with(options, methods())
}

/// [`run`] on `methods` in place of the built-in ones: a user's own catalogue entries (a
/// [`Method`], e.g. `Method { name: "MAP, σ₀ = 3", ..Method::map(3.0) }`), alone or beside
/// [`methods`]', on the same toys, nets, budgets, decomposition and figure. BNN+LV is fitted by
/// its own path (with the wet-chicken maps): `options.methods` selects by name among `methods`
/// and `"BNN+LV"` (case-insensitive; empty: all of them and BNN+LV).
///
/// # Errors
/// Before any work: two methods of one name, a method named `BNN+LV`, a name in
/// `options.methods` that none has, zero epochs, an output folder that cannot be made; then a
/// method's training error.
pub fn run_with(
    options: &ToyOptions,
    methods: Vec<Method>,
) -> Result<Vec<ToyResult>, Box<dyn Error>> {
    let runner = &options.run;
    runner.check()?;
    let all = methods;
    if let Some(m) = all.iter().find(|m| experiment::same_name(m.name, BNN_LV)) {
        return Err(format!(
            "a method is named {:?}, the name of the toy's own {BNN_LV} fit: rename it",
            m.name
        )
        .into());
    }
    experiment::refuse_repeats("--method", options.methods.iter().map(String::as_str))?;
    // BNN+LV is fitted by its own path (lv): picked by name beside the catalogue's methods.
    let is_lv = |m: &String| experiment::same_name(m, BNN_LV);
    let want_lv = options.methods.is_empty() || options.methods.iter().any(is_lv);
    let others: Vec<String> = options
        .methods
        .iter()
        .filter(|m| !is_lv(m))
        .cloned()
        .collect();
    // Two methods of one name are refused even when only BNN+LV is selected.
    experiment::select(&all, &[], |m| m.name)?;
    let selected = if others.is_empty() && !options.methods.is_empty() {
        Vec::new()
    } else {
        experiment::select(&all, &others, |m| m.name).map_err(|e| format!("{e}, {BNN_LV}"))?
    };
    if options.epochs == Some(0) {
        return Err("--epochs must be at least 1".into());
    }
    let harness = harness::ToyHarness::new(options, selected, want_lv);
    crate::runner::run(&harness, runner)?;
    Ok(harness.results.take())
}

impl ToyOptions {
    /// Training epochs of every fit (2000; 300 with `--quick`; `--epochs` when given).
    pub fn epochs(&self) -> usize {
        self.epochs
            .unwrap_or(if self.exp.quick { 300 } else { 2000 })
    }

    /// The draws of BNN+LV's decomposition.
    pub fn draws(&self) -> Draws {
        match self.exp.quick {
            true => Draws {
                n_w: 50,
                n_z: 50,
                k: 10,
            },
            false => Draws {
                n_w: 100,
                n_z: 100,
                k: 25,
            },
        }
    }
}

/// Fits the BNN+LV on toy `t` (2 × 20 units as Depeweg §6.1) and decomposes its predictive on
/// `grid`: the table row, the bands of `toy.svg` (variance form) and the curves of
/// `toy-lv.svg`.
fn fit_lv(
    t: &Toy,
    grid: &[f64],
    epochs: usize,
    draws: Draws,
    seed: u64,
) -> Result<(ToyResult, Curves, LvCurves), Box<dyn Error>> {
    let train: RegressionData = t.train.clone().into();
    let test: RegressionData = t.test.clone().into();
    eprintln!("training {BNN_LV} ({epochs} epochs)");
    let lv = lv::fit(
        &train,
        20,
        epochs,
        experiment::derive(seed, &[t.name, BNN_LV], 0),
    )?;
    let (test_ll, test_rmse) = lv.scores(&test, decomposition::PRED_SAMPLES)?;
    let parts = lv.decompose(grid, draws)?;
    let c = Curves {
        x: grid.to_vec(),
        mean: parts.iter().map(|p| p.mean).collect(),
        aleatoric_std: parts.iter().map(|p| p.aleatoric_variance.sqrt()).collect(),
        total_std: parts
            .iter()
            .map(|p| p.total_variance.max(p.aleatoric_variance).sqrt())
            .collect(),
    };
    let row = Row {
        method: BNN_LV.into(),
        test_ll,
        test_rmse,
        train_seconds: lv.seconds,
        k_hat: None,
    };
    decomposition::check(&row, &c)?;
    let (epistemic_dense, epistemic_sparse, aleatoric_dense) = density_split(&c, &t.train.x);
    Ok((
        ToyResult {
            toy: t.name.into(),
            row,
            oracle_ll: t.oracle_ll,
            epistemic_dense,
            epistemic_sparse,
            aleatoric_dense,
        },
        c,
        LvCurves {
            toy: t.name.into(),
            x: grid.to_vec(),
            parts,
            train_x: t.train.x.clone(),
        },
    ))
}
