//! MNIST tables from `mnist` records: a record's rows, its other OOD sets, and the published
//! rows of Haußmann (2021).

use super::{number, read_json};
use crate::mnist::{Arch, TrainSet};
use crate::published::mnist::PublishedMnist;
use serde_json::Value;
use std::error::Error;
use std::fmt::Write as _;
use std::path::Path;

/// The rows of the `mnist` record in `folder`.
fn rows(assets: &Path, folder: &str) -> Result<Vec<Value>, Box<dyn Error>> {
    let path = assets.join(folder).join("mnist.json");
    read_json(&path)?["results"]
        .as_array()
        .cloned()
        .ok_or_else(|| format!("{}: no results", path.display()).into())
}

/// A net's name in the tables.
fn arch(r: &Value) -> &str {
    match r["arch"].as_str() {
        Some("Mlp") => "MLP",
        Some("LeNet5") => "LeNet5",
        Some(other) => other,
        None => "–",
    }
}

/// An OOD set's scores of row `r`.
fn ood<'a>(r: &'a Value, set: &str) -> Option<&'a Value> {
    r["ood_sets"]
        .as_array()
        .and_then(|s| s.iter().find(|o| o["set"] == set))
}

/// Three decimals, `–` when absent.
fn f3(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.3}"))
}

/// Every row of the record in `folder`: error, NLL, ECE, Brier, the first OOD set's AUROC by
/// entropy and by mutual information and its entropy-ECDF area, the misclassification AUROC,
/// the training time.
fn record_table(assets: &Path, folder: &str) -> Result<String, Box<dyn Error>> {
    let path = assets.join(folder).join("mnist.json");
    let rows = rows(assets, folder)?;
    let mut md = String::from(
        "| net | method | epochs | error % | NLL | ECE | Brier | AUROC H (Fashion) | AUROC MI | \
         ECDF area ↓ | AUROC misclassified | train s |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in &rows {
        let num = |k: &str| r[k].as_f64();
        let first = r["ood_sets"].as_array().and_then(|s| s.first());
        let of_first = |k: &str| first.and_then(|o| o[k].as_f64());
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {:.0} |",
            arch(r),
            r["method"].as_str().unwrap_or("–"),
            r["epochs"],
            number(r, "error_pct", &path)?,
            f3(num("nll")),
            f3(num("ece")),
            f3(num("brier")),
            f3(of_first("auroc_entropy")),
            f3(of_first("auroc_mi")),
            f3(of_first("ecdf_area")),
            f3(num("misclassification_auroc")),
            number(r, "train_seconds", &path)?,
        );
    }
    Ok(md)
}

/// The full-budget sampled methods on MNIST (`assets/mnist`).
pub(super) fn main(assets: &Path) -> Result<String, Box<dyn Error>> {
    record_table(assets, "mnist")
}

/// The sampling-free methods at the quick budget with 10 epochs (`assets/mnist-moments-quick`).
pub(super) fn moments_quick(assets: &Path) -> Result<String, Box<dyn Error>> {
    record_table(assets, "mnist-moments-quick")
}

/// The post-hoc methods on the strided LeNet5 (`assets/mnist-posthoc`): every row's scores,
/// then temperature scaling and conformal sets beside the raw predictive.
pub(super) fn posthoc(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("mnist-posthoc/mnist.json");
    let results: Vec<crate::mnist::MnistResult> =
        serde_json::from_value(Value::Array(rows(assets, "mnist-posthoc")?))
            .map_err(|e| format!("{}: unreadable results ({e})", path.display()))?;
    Ok(format!(
        "{}\n{}",
        record_table(assets, "mnist-posthoc")?,
        crate::mnist::calibration_rows(&results)
    ))
}

/// The LeNet5 rows of `assets/mnist` on the other OOD sets (uniform noise, inverted digits) and
/// their error on rotated digits.
pub(super) fn ood_sets(assets: &Path) -> Result<String, Box<dyn Error>> {
    let rows = rows(assets, "mnist")?;
    let mut md = String::from(
        "| LeNet5 | noise AUROC H / MI | noise ECDF area | inverted AUROC H / MI | inverted ECDF \
         area | error % at 0° / 90° / 180° |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for r in rows.iter().filter(|r| r["arch"] == "LeNet5") {
        let pair = |set: &str| match ood(r, set) {
            Some(o) => format!(
                "{} / {}",
                f3(o["auroc_entropy"].as_f64()),
                f3(o["auroc_mi"].as_f64())
            ),
            None => "–".into(),
        };
        let area = |set: &str| f3(ood(r, set).and_then(|o| o["ecdf_area"].as_f64()));
        let at = |deg: f64| {
            r["rotations"]
                .as_array()
                .and_then(|a| a.iter().find(|x| x["degrees"].as_f64() == Some(deg)))
                .and_then(|x| x["error_pct"].as_f64())
                .map_or_else(|| "–".into(), |e| format!("{e:.1}"))
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} / {} / {} |",
            r["method"].as_str().unwrap_or("–"),
            pair("uniform noise"),
            area("uniform noise"),
            pair("inverted MNIST"),
            area("inverted MNIST"),
            at(0.0),
            at(90.0),
            at(180.0),
        );
    }
    Ok(md)
}

/// Haußmann (2021)'s published rows (`published/mnist.csv`): task, net, error (± its run-to-run
/// standard deviation where printed), log-likelihood and the first OOD set's ECDF area.
pub(super) fn published(_assets: &Path) -> Result<String, Box<dyn Error>> {
    let mut md = String::from(
        "| source | task | net | method | error % | test LL | OOD ECDF area ↓ |\n\
         |---|---|---|---|---:|---:|---:|\n",
    );
    for p in crate::published::mnist::all() {
        let source = p.source.split(" (").next().unwrap_or(&p.source);
        let _ = writeln!(
            md,
            "| {source} | {} | {} | {} | {} | {} | {} |",
            p.family.name(),
            p.net.name(),
            p.method,
            published_error(&p),
            p.log_likelihood
                .map_or_else(|| "–".into(), |v| format!("{v:.2}")),
            f3(p.ecdf_area),
        );
    }
    Ok(md)
}

/// A published error, with its run-to-run standard deviation where printed.
fn published_error(p: &PublishedMnist) -> String {
    match p.error_std {
        Some(sd) => format!("{:.2} ± {sd:.2} sd", p.error_pct),
        None => format!("{:.2}", p.error_pct),
    }
}

/// The published error and OOD ECDF area of `method` on `family` (Haußmann 2021), on the
/// strided LeNet5 where `arch` is another LeNet5; `–` where none is published.
pub(super) fn published_cells(
    published: &[PublishedMnist],
    method: &str,
    family: TrainSet,
    arch: Arch,
) -> (String, String) {
    let base = match arch {
        Arch::LeNet5Pooled | Arch::LeNet5Sensoy => Arch::LeNet5,
        a => a,
    };
    match published
        .iter()
        .find(|p| p.counterpart == method && p.family == family && p.net == base)
    {
        Some(p) => {
            // The source's short name: its words before the first parenthesis.
            let source = p.source.split(" (").next().unwrap_or(&p.source);
            let error = format!("{} ({source})", published_error(p));
            (error, f3(p.ecdf_area))
        }
        None => ("–".into(), "–".into()),
    }
}

/// One run of the evidential page's table: its label, record folder, method and net.
struct Run {
    label: &'static str,
    folder: &'static str,
    method: &'static str,
    arch: Arch,
}

/// The evidential heads' single runs on MNIST: variants and budgets beside the defaults (the
/// defaults' repeated runs are in the full-budget table). † marks a variant the bench no
/// longer has as an option.
const EVIDENTIAL_RUNS: [Run; 14] = [
    Run {
        label: "EDL, without the L2 penalty †",
        folder: "mnist-evidential-e1",
        method: "EDL",
        arch: Arch::LeNet5,
    },
    Run {
        label: "EDL, L2 `0.005‖W‖²/2` on the dense weights (the default, Sensoy's code)",
        folder: "mnist-edl-dense-l2-e1",
        method: "EDL",
        arch: Arch::LeNet5,
    },
    Run {
        label: "EDL, without the L2 penalty †",
        folder: "mnist-edl-e20",
        method: "EDL",
        arch: Arch::LeNet5,
    },
    Run {
        label: "EDL, L2 `0.005‖θ‖²/2` on every parameter †",
        folder: "mnist-edl-l2-e20",
        method: "EDL",
        arch: Arch::LeNet5,
    },
    Run {
        label: "EDL, the default",
        folder: "mnist-edl-dense-l2-e20",
        method: "EDL",
        arch: Arch::LeNet5,
    },
    Run {
        label: "EDL, the default",
        folder: "mnist-edl-pool-e1",
        method: "EDL",
        arch: Arch::LeNet5Pooled,
    },
    Run {
        label: "EDL, the default, batch 1 000",
        folder: "mnist-edl-sensoy-e1",
        method: "EDL",
        arch: Arch::LeNet5Sensoy,
    },
    Run {
        label: "EDL, the default, batch 1 000 (Sensoy's recipe)",
        folder: "mnist-edl-sensoy-e50",
        method: "EDL",
        arch: Arch::LeNet5Sensoy,
    },
    Run {
        label: "BEDL",
        folder: "mnist-evidential-e1",
        method: "BEDL",
        arch: Arch::LeNet5,
    },
    Run {
        label: "BEDL-PAC, one point's KL (the reference code) †",
        folder: "mnist-evidential-e1",
        method: "BEDL-PAC",
        arch: Arch::LeNet5,
    },
    Run {
        label: "BEDL-PAC, `KL(Q ‖ P) = Σ_n KL_n` (eq. 5.10, the default)",
        folder: "mnist-bedl-pac-e1",
        method: "BEDL-PAC",
        arch: Arch::LeNet5,
    },
    Run {
        label: "BEDL-PAC, the default",
        folder: "mnist-bedl-pac-e50",
        method: "BEDL-PAC",
        arch: Arch::LeNet5,
    },
    Run {
        label: "BEDL-PAC, the default",
        folder: "mnist-bedl-pac-pool-e1",
        method: "BEDL-PAC",
        arch: Arch::LeNet5Pooled,
    },
    Run {
        label: "MAP (a baseline, no published row)",
        folder: "mnist-map-conv96-e5",
        method: "MAP",
        arch: Arch::Conv96,
    },
];

/// [`EVIDENTIAL_RUNS`]: each run's error and Fashion-MNIST ECDF area beside the published row.
pub(super) fn evidential_runs(assets: &Path) -> Result<String, Box<dyn Error>> {
    let published = crate::published::mnist::all();
    let mut md = String::from(
        "| run | net | epochs | error % | published | Fashion ECDF area ↓ | published | record |\n\
         |---|---|---:|---:|---:|---:|---:|---|\n",
    );
    for run in &EVIDENTIAL_RUNS {
        let rows = rows(assets, run.folder)?;
        let r = rows
            .iter()
            .find(|r| r["method"] == run.method && r["arch"] == serde_json::json!(run.arch))
            .ok_or_else(|| {
                format!(
                    "assets/{}: no {} row on {}",
                    run.folder,
                    run.method,
                    run.arch.name()
                )
            })?;
        let (p_err, p_area) = published_cells(&published, run.method, TrainSet::Mnist, run.arch);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.2} | {p_err} | {} | {p_area} | `{}` |",
            run.label,
            run.arch.name(),
            r["epochs"],
            number(r, "error_pct", &assets.join(run.folder).join("mnist.json"))?,
            f3(r["ecdf_area"].as_f64()),
            run.folder,
        );
    }
    Ok(md)
}
