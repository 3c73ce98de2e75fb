//! `bnn-bench toy`: the decomposition pictures. Every method, as a 2×50 ReLU net with a
//! heteroscedastic head, on the two toys of Depeweg (2019) §6.1.3 whose inputs are unevenly
//! spread, so that epistemic uncertainty has somewhere to grow: the heteroscedastic toy
//! (`y = 7 sin x + 3|cos(x/2)| ε`, x from a 3-Gaussian mixture) and the bimodal toy
//! (`y = 10 cos x` or `10 sin x` with equal odds, plus N(0, 1); `x = −0.5 + Exp(2)`, truncated at
//! 2), 750 points each. One figure, one row per toy and one panel per method.

use crate::decomposition::{self, Curves, Fit, Panel, Row};
use crate::experiment;
use crate::lv_toy::{self, BNN_LV, Draws, LvCurves};
use crate::methods::Method;
use bnn_burn::layers::Estimator;
use bnn_datasets::RegressionData;
use bnn_datasets::toy::{self, Regression1d};
use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

/// Training points per toy (Depeweg 2019 §6.1.3).
pub const N_TRAIN: usize = 750;
/// Test points per toy, drawn from the same distribution.
pub const N_TEST: usize = 2000;
/// Half-width of the window in which training points are counted around a grid point.
const WINDOW: f64 = 0.25;

/// Every method, in figure order: the quick start's settings plus a point estimate.
pub fn methods() -> Vec<Method> {
    vec![
        Method::map(1.0),
        Method::mc_dropout(0.05, 0.1),
        Method::mean_field(Estimator::LocalReparameterization),
        Method::radial(),
    ]
}

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

/// Options of one `toy` run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ToyOptions {
    /// Method names (empty: all).
    pub methods: Vec<String>,
    /// Epochs (default 2000; 300 with `--quick`).
    pub epochs: Option<usize>,
    /// Seed.
    pub seed: u64,
    /// Quick mode: fewer epochs.
    pub quick: bool,
    /// Output folder.
    pub out: PathBuf,
}

/// One (toy, method) result: test metrics and where the epistemic band is wide.
#[derive(Debug, Clone, serde::Serialize)]
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
    let start = Instant::now();
    let all = methods;
    if let Some(m) = all.iter().find(|m| m.name.eq_ignore_ascii_case(BNN_LV)) {
        return Err(format!(
            "a method is named {:?}, the name of the toy's own {BNN_LV} fit: rename it",
            m.name
        )
        .into());
    }
    // BNN+LV is fitted by its own path (lv_toy): picked by name beside the catalogue's methods.
    let is_lv = |m: &String| m.eq_ignore_ascii_case(BNN_LV);
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
    let draws = if options.quick {
        Draws {
            n_w: 50,
            n_z: 50,
            k: 10,
        }
    } else {
        Draws {
            n_w: 100,
            n_z: 100,
            k: 25,
        }
    };
    let epochs = options
        .epochs
        .unwrap_or(if options.quick { 300 } else { 2000 });
    if epochs == 0 {
        return Err("--epochs must be at least 1".into());
    }
    experiment::prepare_out(&options.out)?;
    let toys = toys(options.seed);
    let mut results = Vec::new();
    let mut curves = Vec::new();
    let mut lv_curves = Vec::new();
    for t in &toys {
        let grid: Vec<f64> = (0..=240)
            .map(|i| t.x_range.0 + (t.x_range.1 - t.x_range.0) * i as f64 / 240.0)
            .collect();
        for method in &selected {
            let fit = Fit {
                hidden: [50, 50],
                epochs,
                seed: experiment::derive(options.seed, &[t.name, method.name], 0),
            };
            let (row, c) = decomposition::fit_and_draw(method, &t.train, &t.test, &grid, fit)?;
            let (epistemic_dense, epistemic_sparse, aleatoric_dense) =
                density_split(&c, &t.train.x);
            eprintln!(
                "[toy] {} / {}: test LL {:.3} (oracle {:.3}), epistemic std dense {:.3}, \
                 sparse {:.3}",
                t.name, row.method, row.test_ll, t.oracle_ll, epistemic_dense, epistemic_sparse
            );
            results.push(ToyResult {
                toy: t.name.to_string(),
                row,
                oracle_ll: t.oracle_ll,
                epistemic_dense,
                epistemic_sparse,
                aleatoric_dense,
            });
            curves.push(c);
        }
        if want_lv {
            let (result, c, lv) = fit_lv(t, &grid, epochs, draws, options.seed)?;
            results.push(result);
            curves.push(c);
            lv_curves.push(lv);
        }
    }
    let wet_chicken = if want_lv {
        let (n, side) = if options.quick {
            (2500, 11)
        } else {
            (7500, 21)
        };
        eprintln!("[toy] wet-chicken / {BNN_LV}: {n} transitions, {epochs} epochs");
        let seed = experiment::derive(options.seed, &["wet-chicken", BNN_LV], 0);
        let maps = lv_toy::wet_chicken_maps(n, side, epochs, draws, seed)?;
        lv_toy::plot_curves(&options.out.join("toy-lv.svg"), &lv_curves)?;
        lv_toy::plot_wet_chicken(&options.out.join("wet-chicken.svg"), &maps)?;
        Some(maps)
    } else {
        None
    };
    let wall = start.elapsed().as_secs_f64();
    std::fs::create_dir_all(&options.out)?;
    let mut md = markdown(options, epochs, &results, wall);
    if let Some(m) = &wet_chicken {
        md.push_str(&lv_markdown(m, draws));
    }
    std::fs::write(options.out.join("toy.md"), &md)?;
    let record = experiment::record(
        "toy",
        options,
        wall,
        &results,
        serde_json::json!({
            "epochs": epochs,
            "n_train": N_TRAIN,
            "n_test": N_TEST,
            "prediction_samples": decomposition::PRED_SAMPLES,
            "bnn_lv_draws": draws,
            "bnn_lv_curves": lv_curves,
            "wet_chicken": wet_chicken,
        }),
    );
    std::fs::write(
        options.out.join("toy.json"),
        serde_json::to_string_pretty(&record)?,
    )?;
    let panels: Vec<Panel> = results
        .iter()
        .zip(&curves)
        .map(|(r, c)| {
            let t = toys
                .iter()
                .find(|t| t.name == r.toy)
                .expect("toy of a result");
            Panel {
                title: format!("{}: {}", r.toy, r.row.method),
                data: &t.train,
                curves: c,
                x_range: t.x_range,
                y_range: t.y_range,
            }
        })
        .collect();
    let cols = selected.len() + usize::from(want_lv);
    decomposition::plot(&options.out.join("toy.svg"), &panels, cols)?;
    println!("{md}");
    Ok(results)
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
    let lv = lv_toy::fit(
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
    };
    decomposition::check(&row, &c)?;
    let (epistemic_dense, epistemic_sparse, aleatoric_dense) = density_split(&c, &t.train.x);
    eprintln!(
        "[toy] {} / {BNN_LV}: test LL {test_ll:.3} (oracle {:.3}), epistemic std dense \
         {epistemic_dense:.3}, sparse {epistemic_sparse:.3}",
        t.name, t.oracle_ll
    );
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

fn lv_markdown(m: &lv_toy::WetChickenMaps, draws: Draws) -> String {
    format!(
        "\n## {BNN_LV} decomposition\n\n{BNN_LV} rows: 2×20 units, black-box α = 1, K = 25 draws \
         per step, batch N/25 (Depeweg 2019 §6.1; the other rows: 2×50, heteroscedastic head). \
         Decomposition from {} weight draws × {} latent draws, k-NN entropies with k = {}: \
         `toy.svg` shows its variance form, `toy-lv.svg` both forms over the training inputs.\n\n\
         Wet-chicken (`wet-chicken.svg`): {} random-policy transitions, the next y-coordinate \
         at a = (0, 0) on a {}×{} grid of states; test LL {:.3}, {:.0} s of training.\n\n\
         | mean over states | epistemic entropy I(y'; W) | aleatoric entropy E_W H[y'|W] |\n\
         |---|---:|---:|\n\
         | x > 2.5 and y > 2.5 (the waterfall's corner) | {:.3} | |\n\
         | elsewhere | {:.3} | |\n\
         | x < 2.5 (little drift, strong turbulence) | | {:.3} |\n\
         | x > 2.5 | | {:.3} |\n",
        draws.n_w,
        draws.n_z,
        draws.k,
        m.n_train,
        m.side,
        m.side,
        m.test_ll,
        m.train_seconds,
        m.epistemic_top_right,
        m.epistemic_elsewhere,
        m.aleatoric_left,
        m.aleatoric_right,
    )
}

fn markdown(options: &ToyOptions, epochs: usize, results: &[ToyResult], wall: f64) -> String {
    let mut md = format!(
        "# Toy decomposition\n\n{N_TRAIN} training and {N_TEST} test points per toy (Depeweg \
         2019 §6.1.3); 2×50 ReLU nets with a heteroscedastic head, {epochs} epochs, Adam lr \
         3·10⁻³, batch 100; {} prediction samples; seed {}{}, backend `{}`, wall time {wall:.0} \
         s.\n\nEpistemic std: √Var_w[μ(x, w)] averaged over grid points with ≥ 5 % of the \
         training inputs within ±{WINDOW} (dense) and with none (sparse).\n\n\
         | toy | method | test LL | oracle LL | test RMSE | epistemic std dense | epistemic std \
         sparse | aleatoric std dense | train s |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        decomposition::PRED_SAMPLES,
        options.seed,
        if options.quick { " (--quick)" } else { "" },
        bnn_burn::backend_name(),
    );
    for r in results {
        md.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} |\n",
            r.toy,
            r.row.method,
            r.row.test_ll,
            r.oracle_ll,
            r.row.test_rmse,
            r.epistemic_dense,
            r.epistemic_sparse,
            r.aleatoric_dense,
            r.row.train_seconds
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn density_split_separates_dense_and_empty_regions() {
        let curves = Curves {
            x: vec![0.0, 1.0, 2.0],
            mean: vec![0.0; 3],
            aleatoric_std: vec![1.0, 1.0, 1.0],
            total_std: vec![1.25f64.sqrt(), 1.0, 5f64.sqrt()],
        };
        // All training inputs near 0: grid point 0 is dense, 1 and 2 are empty.
        let (dense, sparse, ale) = density_split(&curves, &[0.0, 0.1, -0.1]);
        assert!((dense - 0.5).abs() < 1e-12, "{dense}");
        assert!((sparse - 1.0).abs() < 1e-12, "{sparse}");
        assert!((ale - 1.0).abs() < 1e-12);
    }

    /// A user's own methods run through [`run_with`] under their own names and settings (a
    /// point estimate has no epistemic band, a dropout posterior has one), without BNN+LV
    /// unless selected; bad catalogues and names are refused before the folder is made.
    #[test]
    fn a_users_methods_run_alone_and_bad_catalogues_are_refused() {
        let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
        let dir = std::env::temp_dir().join(format!("bnn-toy-own-{}", std::process::id()));
        std::fs::remove_dir_all(&dir).ok();
        let own = || {
            vec![
                Method {
                    name: "Point, sd 3",
                    ..Method::map(3.0)
                },
                Method {
                    name: "Dropout 0.2",
                    ..Method::mc_dropout(0.2, 0.1)
                },
            ]
        };
        let options = ToyOptions {
            methods: vec!["point, SD 3".into(), "Dropout 0.2".into()],
            epochs: Some(20),
            seed: 0,
            quick: true,
            out: dir.clone(),
        };
        for (methods, names, expected) in [
            (
                vec![Method::map(1.0), Method::map(2.0)],
                vec![],
                "two methods are named \"MAP\"",
            ),
            (
                vec![Method {
                    name: "bnn+lv",
                    ..Method::map(1.0)
                }],
                vec![],
                "a method is named \"bnn+lv\"",
            ),
            (
                own(),
                vec!["MFVI".to_string()],
                "known: Point, sd 3, Dropout 0.2, BNN+LV",
            ),
        ] {
            let err = run_with(
                &ToyOptions {
                    methods: names,
                    ..options.clone()
                },
                methods,
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains(expected), "{err}");
            assert!(!dir.exists(), "{err}: the folder was made");
        }
        let results = run_with(&options, own()).unwrap();
        let names: Vec<_> = results
            .iter()
            .map(|r| (r.toy.as_str(), r.row.method.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("heteroscedastic", "Point, sd 3"),
                ("heteroscedastic", "Dropout 0.2"),
                ("bimodal", "Point, sd 3"),
                ("bimodal", "Dropout 0.2"),
            ]
        );
        for r in &results {
            assert!(r.row.test_ll.is_finite(), "{} {}", r.toy, r.row.method);
            if r.row.method == "Point, sd 3" {
                assert!(r.epistemic_dense < 1e-3 && r.epistemic_sparse < 1e-3);
            } else {
                assert!(r.epistemic_dense > 1e-3, "{} {}", r.toy, r.epistemic_dense);
            }
        }
        let svg = std::fs::read_to_string(dir.join("toy.svg")).unwrap();
        assert!(svg.contains("bimodal: Dropout 0.2") && !svg.contains("BNN+LV"));
        assert!(!dir.join("wet-chicken.svg").exists());
        std::fs::remove_dir_all(dir).ok();
    }

    /// A short run: every method on both toys, the files are written, and the Bayesian
    /// methods' epistemic band is wider where there are no training inputs than where they
    /// are dense, while the point estimate has none.
    #[test]
    fn every_method_draws_both_toys_and_epistemic_grows_away_from_data() {
        let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
        let dir = std::env::temp_dir().join(format!("bnn-toy-test-{}", std::process::id()));
        let options = ToyOptions {
            methods: vec![],
            epochs: Some(150),
            seed: 0,
            quick: true,
            out: dir.clone(),
        };
        let results = run(&options).unwrap();
        assert_eq!(results.len(), 2 * (methods().len() + 1));
        for r in &results {
            assert!(r.row.test_ll.is_finite(), "{} {}", r.toy, r.row.method);
            if r.row.method == "MAP" {
                assert!(r.epistemic_dense < 1e-3 && r.epistemic_sparse < 1e-3);
            } else {
                assert!(
                    r.epistemic_sparse > r.epistemic_dense,
                    "{} {}: sparse {} dense {}",
                    r.toy,
                    r.row.method,
                    r.epistemic_sparse,
                    r.epistemic_dense
                );
            }
        }
        let svg = std::fs::read_to_string(dir.join("toy.svg")).unwrap();
        assert!(svg.contains("heteroscedastic: BNN+LV"));
        let lv = std::fs::read_to_string(dir.join("toy-lv.svg")).unwrap();
        assert!(lv.contains("bimodal: BNN+LV, entropy") && lv.contains("I(y*; W)"));
        // The wet-chicken maps: one decomposition per state of the 11 × 11 quick grid, finite,
        // its variance form adding up. (The thesis's finding, epistemic highest in the
        // waterfall's corner, needs a longer fit than this test's: the full run's toy.md.)
        let record: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("toy.json")).unwrap()).unwrap();
        let wet = &record["wet_chicken"];
        let parts = wet["parts"].as_array().unwrap();
        assert_eq!((parts.len(), wet["side"].as_u64()), (121, Some(11)));
        for p in parts {
            let f = |k: &str| p[k].as_f64().unwrap();
            assert!(f("aleatoric_entropy").is_finite() && f("epistemic_entropy").is_finite());
            let sum = f("aleatoric_variance") + f("epistemic_variance");
            assert!((f("total_variance") - sum).abs() <= 1e-9 * sum.abs().max(1.0));
            assert!(f("aleatoric_variance") > 0.0);
        }
        assert!(
            std::fs::read_to_string(dir.join("wet-chicken.svg"))
                .unwrap()
                .contains("epistemic entropy")
        );
        // The same seed gives the same numbers.
        let again = run(&ToyOptions {
            methods: vec!["Radial".into()],
            ..options.clone()
        })
        .unwrap();
        let first: Vec<_> = results
            .iter()
            .filter(|r| r.row.method == "Radial")
            .collect();
        for (a, b) in again.iter().zip(first) {
            assert_eq!(
                (a.row.test_ll, a.epistemic_sparse),
                (b.row.test_ll, b.epistemic_sparse)
            );
        }
        let svg = std::fs::read_to_string(dir.join("toy.svg")).unwrap();
        assert!(svg.contains("polygon") && svg.contains("bimodal: Radial"));

        assert!(
            std::fs::read_to_string(dir.join("toy.md"))
                .unwrap()
                .contains("oracle LL")
        );
        std::fs::remove_dir_all(dir).ok();
    }
}
