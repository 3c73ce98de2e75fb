//! Tables generated from the run records in `assets/` into the README and the book. A page
//! holds a generated table between `<!-- generated: NAME (bnn-bench results) -->` and
//! `<!-- end generated -->`; `bnn-bench results` rewrites every such block from the records
//! (`--check`: only says which differ). Nobody edits those blocks by hand.

use crate::control::Benchmark;
use crate::mnist::{Arch, TrainSet};
use crate::uci::{MethodResult, fmt_mean_se};
use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

mod mnist;
mod perf;
mod report;

/// The text that closes a generated block.
const END: &str = "<!-- end generated -->";

/// A generated table: its name in the page's marker and how it is made from the records under
/// `assets`.
struct Generator {
    name: &'static str,
    make: fn(&Path) -> Result<String, Box<dyn Error>>,
}

const GENERATORS: &[Generator] = &[
    Generator {
        name: "eight-schools-centred",
        make: |assets| eight_schools(assets, "centred"),
    },
    Generator {
        name: "eight-schools-non-centred",
        make: |assets| eight_schools(assets, "non-centred"),
    },
    Generator {
        name: "iris-covariance",
        make: iris_covariance,
    },
    Generator {
        name: "moons-hmc",
        make: |assets| moons_hmc(assets, "moons-hmc"),
    },
    Generator {
        name: "moons-hmc-long",
        make: |assets| moons_hmc(assets, "moons-hmc-long"),
    },
    Generator {
        name: "in-between",
        make: in_between,
    },
    Generator {
        name: "lv-hmc",
        make: lv_hmc,
    },
    Generator {
        name: "active-linear",
        make: active_linear,
    },
    Generator {
        name: "control-wet-chicken",
        make: |assets| control(assets, "control-wet-chicken", Benchmark::WetChicken),
    },
    Generator {
        name: "control-industrial",
        make: |assets| control(assets, "control-industrial", Benchmark::Industrial),
    },
    Generator {
        name: "risk-industrial",
        make: risk_industrial,
    },
    Generator {
        name: "dynamics-lorenz",
        make: |assets| dynamics_lorenz(assets, "dynamics-lorenz"),
    },
    Generator {
        name: "dynamics-lorenz-code",
        make: |assets| dynamics_lorenz(assets, "dynamics-lorenz-code"),
    },
    Generator {
        name: "perf-sde",
        make: perf_sde,
    },
    Generator {
        name: "active-depeweg",
        make: active_depeweg,
    },
    Generator {
        name: "active-farquhar-mnist",
        make: |assets| active_farquhar(assets, "mnist"),
    },
    Generator {
        name: "active-farquhar-fashion",
        make: |assets| active_farquhar(assets, "fashion"),
    },
    Generator {
        name: "active-mnist",
        make: |assets| active_mnist(assets, "mnist"),
    },
    Generator {
        name: "active-fashion",
        make: |assets| active_mnist(assets, "fashion"),
    },
    Generator {
        name: "continual-split",
        make: |assets| continual(assets, "continual-split"),
    },
    Generator {
        name: "continual-permuted",
        make: |assets| continual(assets, "continual-permuted"),
    },
    Generator {
        name: "continual-entropy",
        make: continual_entropy,
    },
    Generator {
        name: "mnist-runs",
        make: mnist_runs,
    },
    Generator {
        name: "uci-glance",
        make: uci_glance,
    },
    Generator {
        name: "mnist-glance",
        make: mnist_glance,
    },
    Generator {
        name: "quickstart",
        make: quickstart,
    },
    Generator {
        name: "toy",
        make: toy,
    },
    Generator {
        name: "data-loading",
        make: data_loading,
    },
    Generator {
        name: "toy-lv",
        make: toy_lv,
    },
    Generator {
        name: "uci-ll",
        make: report::uci_ll,
    },
    Generator {
        name: "uci-rmse",
        make: report::uci_rmse,
    },
    Generator {
        name: "uci-posthoc-ll",
        make: report::uci_posthoc_ll,
    },
    Generator {
        name: "uci-posthoc-rmse",
        make: report::uci_posthoc_rmse,
    },
    Generator {
        name: "uci-posthoc-coverage",
        make: report::uci_posthoc_coverage,
    },
    Generator {
        name: "uci-eb-ll",
        make: report::uci_eb_ll,
    },
    Generator {
        name: "uci-eb-coverage",
        make: report::uci_eb_coverage,
    },
    Generator {
        name: "uci-kfac-layer-ll",
        make: report::uci_kfac_layer_ll,
    },
    Generator {
        name: "uci-kfac-layer-coverage",
        make: report::uci_kfac_layer_coverage,
    },
    Generator {
        name: "uci-eb-full-ll",
        make: report::uci_eb_full_ll,
    },
    Generator {
        name: "uci-z",
        make: report::uci_z,
    },
    Generator {
        name: "uci-mc-dropout",
        make: report::uci_mc_dropout,
    },
    Generator {
        name: "uci-vbp",
        make: report::uci_vbp,
    },
    Generator {
        name: "uci-dvi",
        make: report::uci_dvi,
    },
    Generator {
        name: "uci-bedl",
        make: report::uci_bedl,
    },
    Generator {
        name: "uci-bedl-pac",
        make: report::uci_bedl_pac,
    },
    Generator {
        name: "uci-bedl-hyper",
        make: report::uci_bedl_hyper,
    },
    Generator {
        name: "evidential-runs",
        make: mnist::evidential_runs,
    },
    Generator {
        name: "lv-mnist-models",
        make: report::lv_mnist_models,
    },
    Generator {
        name: "lv-mnist-patterns",
        make: report::lv_mnist_patterns,
    },
    Generator {
        name: "depeweg",
        make: report::depeweg_table,
    },
    Generator {
        name: "depeweg-mlp-ens",
        make: report::depeweg_mlp_ens,
    },
    Generator {
        name: "depeweg-wide",
        make: report::depeweg_wide,
    },
    Generator {
        name: "depeweg-alpha",
        make: report::depeweg_alpha,
    },
    Generator {
        name: "depeweg-targets",
        make: report::depeweg_targets,
    },
    Generator {
        name: "mnist-main",
        make: mnist::main,
    },
    Generator {
        name: "mnist-moments-quick",
        make: mnist::moments_quick,
    },
    Generator {
        name: "mnist-posthoc",
        make: mnist::posthoc,
    },
    Generator {
        name: "mnist-ood",
        make: mnist::ood_sets,
    },
    Generator {
        name: "mnist-published",
        make: mnist::published,
    },
    Generator {
        name: "perf-main",
        make: perf::main,
    },
    Generator {
        name: "perf-targets",
        make: perf::targets,
    },
    Generator {
        name: "perf-peers",
        make: perf::peers,
    },
    Generator {
        name: "perf-epoch",
        make: perf::epoch,
    },
    Generator {
        name: "perf-changes",
        make: perf::changes,
    },
    Generator {
        name: "perf-epochs",
        make: perf::epoch_changes,
    },
    Generator {
        name: "perf-bedl-pac",
        make: perf::bedl_pac,
    },
    Generator {
        name: "perf-flex",
        make: perf::flex,
    },
    Generator {
        name: "perf-laplace",
        make: perf::laplace,
    },
    Generator {
        name: "perf-pool",
        make: perf::pool,
    },
    Generator {
        name: "perf-predict",
        make: perf::predict,
    },
];

/// The marker that opens block `name`.
fn opening(name: &str) -> String {
    format!("<!-- generated: {name} (bnn-bench results) -->")
}

/// A record's JSON (a sealed record, or one written before records carried a checksum).
fn read_json(path: &Path) -> Result<serde_json::Value, Box<dyn Error>> {
    match crate::runner::read_record(path, true)? {
        crate::runner::ReadRecord::Intact(v) => Ok(v),
        crate::runner::ReadRecord::Missing => {
            Err(format!("{}: no such record", path.display()).into())
        }
        crate::runner::ReadRecord::Damaged(why) => Err(format!("{}: {why}", path.display()).into()),
    }
}

/// The number at `key` of a record's row, or an error naming the record and the key: a table
/// never shows NaN for a number its record lacks.
pub(super) fn number(row: &serde_json::Value, key: &str, record: &Path) -> Result<f64, String> {
    row[key]
        .as_f64()
        .ok_or_else(|| format!("{}: a row without a number at `{key}`", record.display()))
}

/// The methods of the UCI glance table, in its column order.
const UCI_GLANCE: [&str; 7] = [
    "MFVI",
    "MFVI-LRT",
    "Radial",
    "Low-rank",
    "MC dropout",
    "VBP",
    "DVI",
];

/// Test LL per data set of the full protocol's record (`assets/uci/uci.json`), mean ± s.e.
/// over its splits, beside the best published column of each set.
fn uci_glance(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("uci/uci.json");
    let record = read_json(&path)?;
    let rows: Vec<MethodResult> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: unreadable results ({e})", path.display()))?;
    let published = crate::published::uci::all();
    let mut md = format!(
        "| data set | splits | {} | best published |\n|---|---:|{}---|\n",
        UCI_GLANCE.join(" | "),
        "---:|".repeat(UCI_GLANCE.len())
    );
    for set in crate::uci::sets_in(&rows) {
        let of = |m: &str| rows.iter().find(|r| r.dataset == set && r.method == m);
        let splits = UCI_GLANCE
            .iter()
            .filter_map(|m| of(m))
            .map(|r| r.splits.len())
            .max()
            .unwrap_or(0);
        let cells: Vec<String> = UCI_GLANCE
            .iter()
            .map(|m| match of(m) {
                Some(r) => {
                    let (mean, se) = r.ll();
                    fmt_mean_se(mean, se, 2)
                }
                None => "–".into(),
            })
            .collect();
        let best = crate::uci::published_index(&set).and_then(|i| {
            published
                .iter()
                .filter_map(|c| c.test_ll[i].map(|cell| (cell, &c.column.name)))
                .max_by(|a, b| a.0.0.total_cmp(&b.0.0))
        });
        let best = match best {
            Some(((mean, se), name)) => format!("{} ({name})", fmt_mean_se(mean, Some(se), 2)),
            None => "–".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {splits} | {} | {best} |",
            set.name(),
            cells.join(" | ")
        );
    }
    Ok(md)
}

/// The rows of the MNIST records `assets/mnist` and `assets/mnist-posthoc`: error, NLL, ECE and
/// the Fashion-MNIST OOD AUROC of the predictive entropy, one run each.
fn mnist_glance(assets: &Path) -> Result<String, Box<dyn Error>> {
    let mut md = String::from(
        "| net | method | epochs | error % | NLL | ECE | AUROC, Fashion-MNIST by entropy |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for folder in ["mnist", "mnist-posthoc"] {
        let path = assets.join(folder).join("mnist.json");
        let record = read_json(&path)?;
        let results = record["results"]
            .as_array()
            .ok_or_else(|| format!("{}: no results", path.display()))?;
        for r in results {
            let num = |k: &str| number(r, k, &path);
            let fashion = r["ood_sets"]
                .as_array()
                .and_then(|s| s.iter().find(|o| o["set"] == "Fashion-MNIST"))
                .and_then(|o| o["auroc_entropy"].as_f64());
            let net = match r["arch"].as_str() {
                Some("Mlp") => "MLP 784-400-400-10",
                Some("LeNet5") => "LeNet5 (strided)",
                Some(other) => other,
                None => "–",
            };
            let _ = writeln!(
                md,
                "| {net} | {} | {} | {:.2} | {:.3} | {:.3} | {} |",
                r["method"].as_str().unwrap_or("–"),
                r["epochs"],
                num("error_pct")?,
                num("nll")?,
                num("ece")?,
                fashion.map_or("–".into(), |a| format!("{a:.3}"))
            );
        }
    }
    Ok(md)
}

/// A group of full-budget MNIST runs: one method on one net, each run a record folder under
/// `assets/` (its row of that method and net).
struct Runs {
    family: TrainSet,
    arch: Arch,
    method: &'static str,
    folders: &'static [&'static str],
}

/// Every full-budget run of the evidential and moment-propagation pages, by method and net.
const MNIST_RUNS: [Runs; 13] = [
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::LeNet5,
        method: "VBP",
        folders: &[
            "mnist-moments-100",
            "mnist-vbp-seed1-100",
            "mnist-vbp-seed2-100",
        ],
    },
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::LeNet5,
        method: "DVI",
        folders: &["mnist-moments-100"],
    },
    Runs {
        family: TrainSet::FashionMnist,
        arch: Arch::LeNet5,
        method: "VBP",
        folders: &["fashion-moments-100"],
    },
    Runs {
        family: TrainSet::FashionMnist,
        arch: Arch::LeNet5,
        method: "DVI",
        folders: &["fashion-moments-100", "fashion-dvi-seed1-100"],
    },
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::LeNet5,
        method: "DVI-sampled",
        folders: &["mnist-dvi-sampled-e20", "mnist-dvi-sampled-seed1-e20"],
    },
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::LeNet5Pooled,
        method: "DVI-sampled",
        folders: &[
            "mnist-dvi-sampled-pool-e20",
            "mnist-dvi-sampled-pool-seed1-e20",
            "mnist-dvi-sampled-pool-seed2-e20",
        ],
    },
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::LeNet5,
        method: "BEDL",
        folders: &["mnist-bedl-e20", "mnist-bedl-seed1-e20"],
    },
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::LeNet5Pooled,
        method: "BEDL",
        folders: &["mnist-bedl-pool-e20"],
    },
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::LeNet5,
        method: "BEDL-PAC",
        folders: &[
            "mnist-bedl-pac-e20",
            "mnist-bedl-pac-seed1-e20",
            "mnist-bedl-pac-seed2-e20",
            "mnist-bedl-pac-seed3-e20",
            "mnist-bedl-pac-seed4-e20",
            "mnist-bedl-pac-seed5-e20",
        ],
    },
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::LeNet5Pooled,
        method: "BEDL-PAC",
        folders: &[
            "mnist-bedl-pac-pool-e20",
            "mnist-bedl-pac-pool-seed1-e20",
            "mnist-bedl-pac-pool-seed2-e20",
            "mnist-bedl-pac-pool-seed3-e20",
            "mnist-bedl-pac-pool-seed4-e20",
            "mnist-bedl-pac-pool-seed5-e20",
            "mnist-bedl-pac-pool-seed6-e20",
        ],
    },
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::Conv96,
        method: "BEDL",
        folders: &["mnist-bedl-conv96-e50"],
    },
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::Conv96,
        method: "BEDL-PAC",
        folders: &["mnist-bedl-pac-conv96-e50"],
    },
    Runs {
        family: TrainSet::Mnist,
        arch: Arch::LeNet5Sensoy,
        method: "EDL",
        folders: &["mnist-edl-sensoy-e50"],
    },
];

/// Full-budget MNIST runs grouped by method and net: test error and the first OOD set's
/// entropy-ECDF area, mean ± standard error over the runs (each its own seed), beside the
/// published row of that method (on the strided LeNet5 where the run's net is another
/// LeNet5).
fn mnist_runs(assets: &Path) -> Result<String, Box<dyn Error>> {
    let published = crate::published::mnist::all();
    let mut md = String::from(
        "| task | net | method | epochs | runs | error % | published | OOD ECDF area ↓ | published |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for g in &MNIST_RUNS {
        let mut rows = Vec::new();
        for folder in g.folders {
            let path = assets.join(folder).join("mnist.json");
            let record = read_json(&path)?;
            let row = record["results"]
                .as_array()
                .and_then(|rs| {
                    rs.iter()
                        .find(|r| r["method"] == g.method && r["arch"] == serde_json::json!(g.arch))
                })
                .ok_or_else(|| {
                    format!(
                        "{}: no {} row on {}",
                        path.display(),
                        g.method,
                        g.arch.name()
                    )
                })?
                .clone();
            rows.push((path, row));
        }
        let stat = |k: &str| -> Result<String, Box<dyn Error>> {
            let v: Vec<f64> = rows
                .iter()
                .map(|(path, r)| number(r, k, path))
                .collect::<Result<_, _>>()?;
            let (m, se) = bnn_burn::metrics::mean_and_standard_error(&v);
            Ok(fmt_mean_se(m, se, 2 + usize::from(k == "ecdf_area")))
        };
        let epochs = rows[0].1["epochs"].as_u64().unwrap_or(0);
        let (p_err, p_area) = mnist::published_cells(&published, g.method, g.family, g.arch);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {epochs} | {} | {} | {p_err} | {} | {p_area} |",
            g.family.name(),
            g.arch.name(),
            g.method,
            rows.len(),
            stat("error_pct")?,
            stat("ecdf_area")?
        );
    }
    Ok(md)
}

/// The quick start's record (`assets/quickstart/results.json`).
fn quickstart(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("quickstart/results.json");
    let record = read_json(&path)?;
    let mut md = String::from("| method | test log-likelihood | test RMSE |\n|---|---:|---:|\n");
    for r in record["results"].as_array().into_iter().flatten() {
        let _ = writeln!(
            md,
            "| {} | {:.3} | {:.3} |",
            r["method"].as_str().unwrap_or("–"),
            number(r, "test_ll", &path)?,
            number(r, "test_rmse", &path)?
        );
    }
    let oracle = record["oracle_test_ll"]
        .as_f64()
        .ok_or_else(|| format!("{}: no oracle_test_ll", path.display()))?;
    let _ = writeln!(md, "| true model (oracle) | {oracle:.3} | – |");
    Ok(md)
}

/// The toys' record (`assets/toy/toy.json`): test LL and the epistemic std where the training
/// inputs are dense and where there are none.
fn toy(assets: &Path) -> Result<String, Box<dyn Error>> {
    toy_table(assets, "toy")
}

/// BNN+LV on the toys (`assets/toy-lv/toy.json`), as [`toy`].
fn toy_lv(assets: &Path) -> Result<String, Box<dyn Error>> {
    toy_table(assets, "toy-lv")
}

/// One parameterisation's part of the `eight-schools` record (`assets/eight-schools`): the
/// families beside Brack (2022) Table 5.1, then the NUTS reference and the peer comparison when
/// the record has them, as the harness's own report prints them.
fn eight_schools(assets: &Path, model: &str) -> Result<String, Box<dyn Error>> {
    use crate::eight_schools::{Row, nuts_table, peer_table, table};
    let path = assets.join("eight-schools").join("eight-schools.json");
    let record = read_json(&path)?;
    let rows: Vec<Row> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    let mut md = table(&rows, model)?;
    for r in &rows {
        match r {
            Row::Nuts(n) if n.model == model => {
                md.push('\n');
                md.push_str(&nuts_table(n));
            }
            Row::Peer(p) if p.model == model => {
                md.push('\n');
                md.push_str(&peer_table(p));
            }
            _ => {}
        }
    }
    Ok(md)
}

/// Farquhar Fig. 3.11 from the `iris-covariance` record: each cell's best seeds.
fn iris_covariance(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("iris-covariance").join("iris-covariance.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::iris_covariance::Row> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    let best = record["best"]
        .as_u64()
        .ok_or_else(|| format!("{}: no `best`", path.display()))?;
    Ok(crate::iris_covariance::table(&rows, best as usize))
}

/// Farquhar Table A.4 (reduced) from the `moons-hmc` record in `folder` (`moons-hmc-long`: the
/// longer chains).
fn moons_hmc(assets: &Path, folder: &str) -> Result<String, Box<dyn Error>> {
    let path = assets.join(folder).join("moons-hmc.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::moons_hmc::Row> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    Ok(crate::moons_hmc::table(&rows))
}

/// Farquhar Figs. 3.6/3.7 from the `in-between` record: the gap's uncertainty per method.
fn in_between(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("in-between").join("in-between.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::in_between::Row> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    Ok(crate::in_between::table(&rows))
}

/// Depeweg Fig. 6.4 (reduced) from the `lv-hmc` record: each method's epistemic entropy.
fn lv_hmc(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("lv-hmc").join("lv-hmc.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::lv_hmc::Row> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    Ok(crate::lv_hmc::table(&rows))
}

/// A row of Depeweg Table 7.1 from the `control-wet-chicken` or `control-industrial` record.
fn control(assets: &Path, record: &str, benchmark: Benchmark) -> Result<String, Box<dyn Error>> {
    let path = assets.join(record).join("control.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::control::Row> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    Ok(crate::control::table(
        &rows,
        benchmark,
        record["optimal"].as_f64(),
    ))
}

/// Haußmann Table 6.1 from a `dynamics` record (`name`: its folder).
fn dynamics_lorenz(assets: &Path, name: &str) -> Result<String, Box<dyn Error>> {
    let path = assets.join(name).join("dynamics.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::dynamics::Row> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    Ok(crate::dynamics::table(&rows))
}

/// Haußmann Table 6.3 measured, from the `perf-sde` record.
fn perf_sde(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("perf-sde").join("perf-sde.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::dynamics::costs::CostRow> =
        serde_json::from_value(record["results"].clone())
            .map_err(|e| format!("{}: results: {e}", path.display()))?;
    Ok(crate::dynamics::costs::table(&rows))
}

/// Depeweg Fig. 7.5a's points from the `risk-industrial` record.
fn risk_industrial(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("risk-industrial").join("risk.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::control::risk::Row> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    Ok(crate::control::risk::table(&rows))
}

/// Farquhar App. C.1 / Fig. 5.4 from the `active-linear` record: the three risks' bias and the
/// weighted fits' test MSE.
fn active_linear(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("active-linear").join("active.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::active::LinearRow> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    let number = |key: &str| {
        record[key]
            .as_f64()
            .ok_or_else(|| format!("{}: no number `{key}`", path.display()))
    };
    Ok(crate::active::linear_table(
        &rows,
        number("pool_risk")?,
        number("optimal_test_mse")?,
    ))
}

/// Depeweg Table 6.1 from the `active-depeweg` record: the final test LL per problem and
/// acquisition.
fn active_depeweg(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("active-depeweg").join("active.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::active::LvRow> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    Ok(crate::active::lv_table(&rows))
}

/// Farquhar Figs. 5.5–5.8 (reduced) from the `active-farquhar-mnist` or `-fashion` record:
/// the models under each risk, the training risks against the pool's, and active testing.
fn active_farquhar(assets: &Path, dataset: &str) -> Result<String, Box<dyn Error>> {
    let path = assets
        .join(format!("active-farquhar-{dataset}"))
        .join("active.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::active::FqRow> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    Ok(format!(
        "{}\n{}",
        crate::active::farquhar_risk_table(&rows),
        crate::active::farquhar_testing_table(&rows)
    ))
}

/// Haußmann Tables 4.1–4.2 from the `active-mnist` or `active-fashion` record.
fn active_mnist(assets: &Path, dataset: &str) -> Result<String, Box<dyn Error>> {
    let path = assets.join(format!("active-{dataset}")).join("active.json");
    let record = read_json(&path)?;
    let rows: Vec<crate::active::MnistRow> = serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?;
    Ok(crate::active::mnist_table(&rows, dataset))
}

/// The rows of the `continual` record in `folder`.
fn continual_rows(
    assets: &Path,
    folder: &str,
) -> Result<Vec<crate::continual::ContinualRow>, Box<dyn Error>> {
    let path = assets.join(folder).join("continual.json");
    let record = read_json(&path)?;
    Ok(serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: results: {e}", path.display()))?)
}

/// Farquhar §5.1 from the `continual` record in `folder`: the average accuracy after each task.
fn continual(assets: &Path, folder: &str) -> Result<String, Box<dyn Error>> {
    Ok(crate::continual::continual_table(&continual_rows(
        assets, folder,
    )?))
}

/// Fig. 5.1's diagnostic from the split and permuted records: the second task's predictive
/// entropy under the first task's model.
fn continual_entropy(assets: &Path) -> Result<String, Box<dyn Error>> {
    let mut rows = continual_rows(assets, "continual-split")?;
    rows.extend(continual_rows(assets, "continual-permuted")?);
    Ok(crate::continual::entropy_table(&rows))
}

/// The rows of the `toy` record in `folder`.
fn toy_table(assets: &Path, folder: &str) -> Result<String, Box<dyn Error>> {
    let path = assets.join(folder).join("toy.json");
    let record = read_json(&path)?;
    let mut md = String::from(
        "| toy | method | test LL | oracle LL | epistemic std, dense x | epistemic std, no data | \
         PSIS k̂ |\n|---|---|---:|---:|---:|---:|---:|\n",
    );
    for r in record["results"].as_array().into_iter().flatten() {
        let f = |k: &str| number(r, k, &path);
        let k_hat = r["k_hat"]
            .as_f64()
            .map_or(String::from("–"), |k| format!("{k:.2}"));
        let _ = writeln!(
            md,
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {k_hat} |",
            r["toy"].as_str().unwrap_or("–"),
            r["method"].as_str().unwrap_or("–"),
            f("test_ll")?,
            f("oracle_ll")?,
            f("epistemic_dense")?,
            f("epistemic_sparse")?
        );
    }
    Ok(md)
}

/// Loading the data sets (`assets/data/data.json`, `bnn-bench data`): milliseconds per load,
/// the data's bytes and the peak heap over them.
fn data_loading(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("data/data.json");
    let record = read_json(&path)?;
    let rows = record["rows"]
        .as_array()
        .ok_or_else(|| format!("{}: no rows", path.display()))?;
    let mut md =
        String::from("| load | ms | data (MiB) | peak heap ÷ data |\n|---|---:|---:|---:|\n");
    for r in rows {
        let f = |k: &str| number(r, k, &path);
        let _ = writeln!(
            md,
            "| {} | {:.1} | {:.2} | {:.2} |",
            r["what"].as_str().unwrap_or("–"),
            f("ms")?,
            f("data_bytes")? / f64::from(1 << 20),
            f("peak_heap_bytes")? / f("data_bytes")?,
        );
    }
    Ok(md)
}

/// The README and every page of the book, under the workspace `root`.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md")];
    out.extend(book_pages(root));
    out
}

/// Every file under `dir` (its folders walked, symbolic links not followed) whose path `keep`
/// accepts, sorted; none where `dir` cannot be read.
pub fn files_under(dir: &Path, keep: impl Fn(&Path) -> bool + Copy) -> Vec<PathBuf> {
    fn walk(dir: &Path, keep: impl Fn(&Path) -> bool + Copy, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_symlink() {
                continue;
            }
            if path.is_dir() {
                walk(&path, keep, out);
            } else if keep(&path) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, keep, &mut out);
    out.sort();
    out
}

/// Every Markdown file under `root/book/src` (the summary included; the linked assets not),
/// sorted.
pub fn book_pages(root: &Path) -> Vec<PathBuf> {
    files_under(&root.join("book/src"), |p| {
        p.extension().is_some_and(|e| e == "md")
    })
}

/// `text` with every generated block rewritten from the records under `assets`; the names of
/// the blocks whose content changed.
///
/// # Errors
/// A block without its end marker or of an unknown name, a record that cannot be read.
fn rewrite(text: &str, assets: &Path) -> Result<(String, Vec<String>), Box<dyn Error>> {
    let mut out = String::new();
    let mut changed = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<!-- generated: ") {
        let line_end = rest[start..]
            .find('\n')
            .map_or(rest.len(), |i| start + i + 1);
        let marker = rest[start..line_end].trim_end();
        let name = marker
            .trim_start_matches("<!-- generated: ")
            .split(' ')
            .next()
            .unwrap_or("");
        let generator = GENERATORS
            .iter()
            .find(|g| g.name == name)
            .ok_or_else(|| format!("unknown generated table {name:?}"))?;
        let end = rest[line_end..]
            .find(END)
            .map(|i| line_end + i)
            .ok_or_else(|| format!("generated table {name:?} has no `{END}`"))?;
        let table = (generator.make)(assets)?;
        if rest[line_end..end] != table {
            changed.push(name.to_string());
        }
        out.push_str(&rest[..start]);
        out.push_str(&opening(name));
        out.push('\n');
        out.push_str(&table);
        rest = &rest[end..];
    }
    out.push_str(rest);
    Ok((out, changed))
}

/// Rewrites every generated table of the README and the book under `root` from the records in
/// `root/assets` (`check`: writes nothing). Returns `page: table` for each that differed.
///
/// # Errors
/// A block without its end marker or of an unknown name, a record that cannot be read, a page
/// that cannot be read or written.
pub fn regenerate(root: &Path, check: bool) -> Result<Vec<String>, Box<dyn Error>> {
    let assets = root.join("assets");
    let mut differ = Vec::new();
    for page in pages(root) {
        let text =
            std::fs::read_to_string(&page).map_err(|e| format!("{}: {e}", page.display()))?;
        let (new, changed) =
            rewrite(&text, &assets).map_err(|e| format!("{}: {e}", page.display()))?;
        for name in &changed {
            differ.push(format!("{}: {name}", page.display()));
        }
        if !check && new != text {
            bnn_burn::integrity::write_atomic(&page, new.as_bytes())
                .map_err(|e| format!("{}: {e}", page.display()))?;
        }
    }
    Ok(differ)
}

/// Options of `bnn-bench results`.
#[derive(Debug, Clone, clap::Args)]
pub struct ResultsOptions {
    /// Only compare: list the tables that differ from the records, and fail if any does.
    #[arg(long)]
    pub check: bool,
    /// The workspace (README.md, book/, assets/).
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
}

/// `bnn-bench results`.
///
/// # Errors
/// As [`regenerate`]; with `--check`, tables that differ.
pub fn run(options: &ResultsOptions) -> Result<(), Box<dyn Error>> {
    let differ = regenerate(&options.root, options.check)?;
    for d in &differ {
        println!("{} {d}", if options.check { "differs:" } else { "rewrote" });
    }
    if options.check && !differ.is_empty() {
        return Err(format!(
            "{} generated table(s) differ from the records: run `bnn-bench results`",
            differ.len()
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_rewritten_and_bad_blocks_are_refused() {
        let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets");
        let page = format!(
            "intro\n{}\nold table\n{END}\nafter\n",
            opening("quickstart")
        );
        let (new, changed) = rewrite(&page, &assets).unwrap();
        assert_eq!(changed, ["quickstart"]);
        assert!(new.starts_with("intro\n") && new.ends_with(&format!("{END}\nafter\n")));
        assert!(new.contains("| true model (oracle) |"), "{new}");
        let (again, changed) = rewrite(&new, &assets).unwrap();
        assert!(changed.is_empty() && again == new);
        let unknown = format!("{}\n{END}\n", opening("nope"));
        assert!(
            rewrite(&unknown, &assets)
                .unwrap_err()
                .to_string()
                .contains("nope")
        );
        let open = format!("{}\n| a |\n", opening("toy"));
        assert!(
            rewrite(&open, &assets)
                .unwrap_err()
                .to_string()
                .contains("end generated")
        );
    }
}
