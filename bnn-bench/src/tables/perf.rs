//! The performance page's tables, from the `perf`, `perf-pool` and `perf-predict` records and
//! the before/after studies (`assets/*/study.json`).

use super::{number, read_json};
use crate::perf::median;
use serde_json::Value;
use std::error::Error;
use std::fmt::Write as _;
use std::path::Path;

/// A `perf` record's rows (`results` in records of the runner, `rows` before it).
fn rows(path: &Path) -> Result<Vec<Value>, Box<dyn Error>> {
    let record = read_json(path)?;
    record
        .get("results")
        .or_else(|| record.get("rows"))
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| format!("{}: no rows", path.display()).into())
}

/// The row of `method` on `net` (`Mlp`, `LeNet5`).
fn row<'a>(rows: &'a [Value], net: &str, method: &str) -> Option<&'a Value> {
    rows.iter()
        .find(|r| r["net"] == net && r["method"] == method)
}

/// A ratio cell: two decimals, `–` when absent.
fn ratio(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.2}"))
}

/// The net's name in the tables.
fn net_name(net: &str) -> &str {
    match net {
        "Mlp" => "MLP 784-400-400-10, batch 128",
        "LeNet5" => "LeNet5, batch 100",
        other => other,
    }
}

/// A peer's row name in the tables.
fn method_name(method: &str) -> String {
    match method {
        "peer: torch_mfvi_mlp (2 threads)" => "PyTorch MFVI (2 threads)".into(),
        "peer: bayesian_torch_mlp (2 threads)" => "bayesian-torch (2 threads)".into(),
        "peer: torch_bedl_pac (2 threads)" => "PyTorch BEDL-PAC (2 threads)".into(),
        "peer: bayesian_torch_lenet5 (2 threads)" => "bayesian-torch (2 threads)".into(),
        "peer: torch_deterministic_mlp (2 threads)"
        | "peer: torch_deterministic_lenet5 (2 threads)" => {
            "PyTorch deterministic (2 threads)".into()
        }
        other => other.into(),
    }
}

/// The median over rounds of `a`'s time over `b`'s in the same round.
fn in_round_ratio(a: &Value, b: &Value) -> Option<f64> {
    let ra = a["rounds_ms"].as_array()?;
    let rb = b["rounds_ms"].as_array()?;
    if ra.len() != rb.len() || ra.is_empty() {
        return None;
    }
    let r: Vec<f64> = ra
        .iter()
        .zip(rb)
        .map(|(x, y)| Some(x.as_f64()? / y.as_f64()?))
        .collect::<Option<_>>()?;
    Some(median(&r))
}

/// The main record (`assets/perf/perf.json`): every workload on both nets, with the reference
/// (burn-op) time of the `--kernels both` run (`assets/perf/with-reference.json`) and the
/// reference over the fused time, both from that run.
pub(super) fn main(assets: &Path) -> Result<String, Box<dyn Error>> {
    let main_path = assets.join("perf/perf.json");
    let main = rows(&main_path)?;
    let both = rows(&assets.join("perf/with-reference.json"))?;
    let mut md = String::new();
    for net in ["Mlp", "LeNet5"] {
        let of_net: Vec<&Value> = main.iter().filter(|r| r["net"] == net).collect();
        if of_net.is_empty() {
            continue;
        }
        let torch = of_net.iter().any(|r| r["vs_bayesian_torch"].is_number());
        let det_torch = of_net.iter().any(|r| r["vs_torch"].is_number());
        if !md.is_empty() {
            md.push('\n');
        }
        let _ = writeln!(
            md,
            "| {} | ms/step | × det. burn step | × det. + fused Adam |{}{} × PyTorch BEDL-PAC | \
             peak heap (MiB) | reference ms/step | reference ÷ fused |",
            net_name(net),
            if torch { " × bayesian-torch |" } else { "" },
            if det_torch { " × PyTorch det. |" } else { "" }
        );
        let _ = writeln!(
            md,
            "|---|---:|---:|---:|{}{}---:|---:|---:|---:|",
            if torch { "---:|" } else { "" },
            if det_torch { "---:|" } else { "" }
        );
        for r in of_net {
            let method = r["method"].as_str().unwrap_or("–");
            let heap = r["peak_heap_bytes"]
                .as_f64()
                .map_or_else(|| "–".into(), |b| format!("{:.1}", b / f64::from(1 << 20)));
            let reference = row(&both, net, &format!("{method} (reference)"));
            let fused = row(&both, net, method);
            let (ref_ms, ref_ratio) = match (reference, fused) {
                (Some(re), Some(fu)) => (
                    ratio(re["ms_per_step"].as_f64()),
                    ratio(in_round_ratio(re, fu)),
                ),
                _ => ("–".into(), "–".into()),
            };
            let _ = writeln!(
                md,
                "| {} | {:.2} | {} | {} |{}{} {} | {heap} | {ref_ms} | {ref_ratio} |",
                method_name(method),
                number(r, "ms_per_step", &main_path)?,
                ratio(r["vs_deterministic"].as_f64()),
                ratio(r["vs_deterministic_fused_adam"].as_f64()),
                if torch {
                    format!(" {} |", ratio(r["vs_bayesian_torch"].as_f64()))
                } else {
                    String::new()
                },
                if det_torch {
                    format!(" {} |", ratio(r["vs_torch"].as_f64()))
                } else {
                    String::new()
                },
                ratio(r["vs_torch_bedl_pac"].as_f64()),
            );
        }
    }
    Ok(md)
}

/// The training-step targets (MLP), in each of the three full runs of the main record.
pub(super) fn targets(assets: &Path) -> Result<String, Box<dyn Error>> {
    const RUNS: [(&str, &str); 3] = [
        ("perf/perf.json", "main run"),
        ("perf/second-run.json", "second run"),
        ("perf/with-reference.json", "`--kernels both` run"),
    ];
    // (row, ratio field, its name, target)
    const TARGETS: [(&str, &str, &str, f64); 5] = [
        ("MFVI", "vs_bayesian_torch", "× bayesian-torch", 0.6),
        ("MFVI", "vs_deterministic", "× det. burn step", 1.25),
        ("Radial", "vs_deterministic", "× det. burn step", 1.4),
        ("MFVI-LRT", "vs_deterministic", "× det. burn step", 2.0),
        ("MFVI-Flipout", "vs_deterministic", "× det. burn step", 2.5),
    ];
    let runs: Vec<Vec<Value>> = RUNS
        .iter()
        .map(|(p, _)| rows(&assets.join(p)))
        .collect::<Result<_, _>>()?;
    let mut md = format!(
        "| MLP row | ratio | target | {} | met in |\n|---|---|---:|{}---:|\n",
        RUNS.map(|(_, n)| n).join(" | "),
        "---:|".repeat(RUNS.len())
    );
    for (method, field, name, target) in TARGETS {
        let values: Vec<Option<f64>> = runs
            .iter()
            .map(|rs| row(rs, "Mlp", method).and_then(|r| r[field].as_f64()))
            .collect();
        let met = values.iter().flatten().filter(|v| **v <= target).count();
        let _ = writeln!(
            md,
            "| {method} | {name} | ≤ {target} | {} | {met} of {} |",
            values
                .iter()
                .map(|v| ratio(*v))
                .collect::<Vec<_>>()
                .join(" | "),
            values.iter().flatten().count()
        );
    }
    Ok(md)
}

/// The peers' record (`assets/perf-peers/perf.json`): the sampled families on both nets beside
/// bayesian-torch and PyTorch's deterministic step in the same rounds, then the kernels'
/// targets read off it.
pub(super) fn peers(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("perf-peers/perf.json");
    let rows = rows(&path)?;
    let mut md = String::new();
    for net in ["Mlp", "LeNet5"] {
        let _ = writeln!(
            md,
            "{}| {} | ms/step | × det. + fused Adam | × bayesian-torch | × PyTorch det. |\n\
             |---|---:|---:|---:|---:|",
            if md.is_empty() { "" } else { "\n" },
            net_name(net)
        );
        for r in rows.iter().filter(|r| r["net"] == net) {
            let _ = writeln!(
                md,
                "| {} | {:.2} | {} | {} | {} |",
                method_name(r["method"].as_str().unwrap_or("–")),
                number(r, "ms_per_step", &path)?,
                ratio(r["vs_deterministic_fused_adam"].as_f64()),
                ratio(r["vs_bayesian_torch"].as_f64()),
                ratio(r["vs_torch"].as_f64()),
            );
        }
    }
    // (net, row, ratio field, its name, target)
    const TARGETS: [(&str, &str, &str, &str, f64); 14] = [
        (
            "Mlp",
            "MFVI",
            "vs_deterministic_fused_adam",
            "× det. + fused Adam",
            1.25,
        ),
        (
            "Mlp",
            "Radial",
            "vs_deterministic_fused_adam",
            "× det. + fused Adam",
            1.25,
        ),
        (
            "Mlp",
            "MFVI-LRT",
            "vs_deterministic_fused_adam",
            "× det. + fused Adam",
            1.8,
        ),
        (
            "Mlp",
            "MFVI-Flipout",
            "vs_deterministic_fused_adam",
            "× det. + fused Adam",
            1.8,
        ),
        (
            "Mlp",
            "Low-rank",
            "vs_deterministic_fused_adam",
            "× det. + fused Adam",
            1.8,
        ),
        (
            "LeNet5",
            "MFVI",
            "vs_deterministic_fused_adam",
            "× det. + fused Adam",
            1.5,
        ),
        (
            "LeNet5",
            "Radial",
            "vs_deterministic_fused_adam",
            "× det. + fused Adam",
            1.5,
        ),
        (
            "LeNet5",
            "MFVI-LRT",
            "vs_deterministic_fused_adam",
            "× det. + fused Adam",
            1.5,
        ),
        (
            "LeNet5",
            "MFVI-Flipout",
            "vs_deterministic_fused_adam",
            "× det. + fused Adam",
            1.5,
        ),
        (
            "LeNet5",
            "Low-rank",
            "vs_deterministic_fused_adam",
            "× det. + fused Adam",
            1.5,
        ),
        (
            "LeNet5",
            "MFVI",
            "vs_bayesian_torch",
            "× bayesian-torch",
            0.5,
        ),
        (
            "LeNet5",
            "burn deterministic + burn Adam",
            "vs_torch",
            "× PyTorch det.",
            1.0,
        ),
        (
            "LeNet5",
            "burn deterministic + fused Adam",
            "vs_torch",
            "× PyTorch det.",
            1.0,
        ),
        // The library's own deterministic LeNet5: its layers with point weights.
        (
            "LeNet5",
            "MAP (point weights)",
            "vs_torch",
            "× PyTorch det.",
            1.0,
        ),
    ];
    md.push_str("\n| net | row | ratio | target | measured | met |\n|---|---|---|---:|---:|---|\n");
    for (net, method, field, name, target) in TARGETS {
        let value = row(&rows, net, method).and_then(|r| r[field].as_f64());
        let met = match value {
            Some(v) if v <= target => "yes",
            Some(_) => "no",
            None => "–",
        };
        let _ = writeln!(
            md,
            "| {} | {method} | {name} | ≤ {target} | {} | {met} |",
            if net == "Mlp" { "MLP" } else { net },
            ratio(value)
        );
    }
    Ok(md)
}

/// One study of a `study.json`: the file, its folder under `assets`, and the study.
struct Study {
    path: std::path::PathBuf,
    folder: String,
    study: Value,
}

/// Every study of every `study.json` under `assets`, in path order.
///
/// # Errors
/// A file that cannot be read, or one without its `studies` list.
fn studies(assets: &Path) -> Result<Vec<Study>, Box<dyn Error>> {
    let mut out = Vec::new();
    for path in super::files_under(assets, |p| p.file_name().is_some_and(|n| n == "study.json")) {
        let record = read_json(&path)?;
        let list = record["studies"]
            .as_array()
            .ok_or_else(|| format!("{}: no studies", path.display()))?;
        let folder = path
            .parent()
            .and_then(|p| p.strip_prefix(assets).ok())
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        for study in list {
            out.push(Study {
                path: path.clone(),
                folder: folder.clone(),
                study: study.clone(),
            });
        }
    }
    Ok(out)
}

/// `lo–hi` of `v` at two decimals (one value alone).
fn range(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if v.len() == 1 || (hi - lo) < 0.005 {
        format!("{lo:.2}")
    } else {
        format!("{lo:.2}–{hi:.2}")
    }
}

/// The before/after studies: for each change, net and row, the runs of the build before and
/// after it, alternated on one machine: ms/step and × the deterministic burn step of the same
/// rounds (ranges over the runs), and the ratio of the median × det. (the machine's drift
/// cancels within a round, not between runs). A change's name is printed on its first row.
pub(super) fn changes(assets: &Path) -> Result<String, Box<dyn Error>> {
    let mut md = String::from(
        "| change | net | row | runs | ms/step before | after | × det. before | after | \
         × det. before ÷ after | record |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for Study {
        path,
        folder,
        study,
    } in studies(assets)?
    {
        if !study["measurements"].is_null() {
            continue;
        }
        let side = |s: &str| -> Result<Vec<Vec<Value>>, Box<dyn Error>> {
            study[s]["runs"]
                .as_array()
                .ok_or_else(|| format!("{}: no {s} runs", path.display()))?
                .iter()
                .map(|f| rows(&path.with_file_name(f.as_str().unwrap_or(""))))
                .collect()
        };
        let (before, after) = (side("before")?, side("after")?);
        let change = study["change"].as_str().unwrap_or("–");
        let note = study["row_note"]
            .as_str()
            .map_or(String::new(), |n| format!(" ({n})"));
        let mut first = true;
        for method in study["rows"].as_array().into_iter().flatten() {
            let method = method.as_str().unwrap_or("");
            for net in ["Mlp", "LeNet5"] {
                let pick = |runs: &[Vec<Value>], k: &str| -> Vec<f64> {
                    runs.iter()
                        .filter_map(|rs| row(rs, net, method).and_then(|r| r[k].as_f64()))
                        .collect()
                };
                let (b_ms, a_ms) = (pick(&before, "ms_per_step"), pick(&after, "ms_per_step"));
                if b_ms.is_empty() || a_ms.is_empty() {
                    continue;
                }
                let (b_x, a_x) = (
                    pick(&before, "vs_deterministic"),
                    pick(&after, "vs_deterministic"),
                );
                let name = if std::mem::take(&mut first) {
                    change
                } else {
                    ""
                };
                let _ = writeln!(
                    md,
                    "| {name} | {} | {method}{note} | {} + {} | {} | {} | {} | {} | {:.2} | \
                     `{folder}` |",
                    if net == "Mlp" { "MLP" } else { "LeNet5" },
                    b_ms.len(),
                    a_ms.len(),
                    range(&b_ms),
                    range(&a_ms),
                    range(&b_x),
                    range(&a_x),
                    median(&b_x) / median(&a_x),
                );
            }
        }
    }
    Ok(md)
}

/// The studies measured as whole training runs (`measurements` in a `study.json`: seconds of
/// training per run before and after the change, and the test error): ranges over the runs and
/// the ratio of the median times.
pub(super) fn epoch_changes(assets: &Path) -> Result<String, Box<dyn Error>> {
    let mut md = String::from(
        "| change | net | row | runs | training s before | after | before ÷ after | error % \
         before | after | record |\n|---|---|---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for Study {
        path,
        folder,
        study,
    } in studies(assets)?
    {
        if study["measurements"].is_null() {
            continue;
        }
        let mut first = true;
        for m in study["measurements"].as_array().into_iter().flatten() {
            let secs = |k: &str| -> Vec<f64> {
                m[k].as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_f64)
                    .collect()
            };
            let (b, a) = (secs("before_s"), secs("after_s"));
            if b.is_empty() || a.is_empty() {
                return Err(format!("{}: a measurement without its runs", path.display()).into());
            }
            let name = if std::mem::take(&mut first) {
                study["change"].as_str().unwrap_or("–")
            } else {
                ""
            };
            let _ = writeln!(
                md,
                "| {name} | {} | {} | {} + {} | {} | {} | {:.2} | {:.2} | {:.2} | `{folder}` |",
                if m["net"] == "Mlp" { "MLP" } else { "LeNet5" },
                m["row"].as_str().unwrap_or("–"),
                b.len(),
                a.len(),
                range(&b),
                range(&a),
                median(&b) / median(&a),
                number(m, "error_before_pct", &path)?,
                number(m, "error_after_pct", &path)?,
            );
        }
    }
    Ok(md)
}

/// One MNIST epoch here and in bayesian-torch (`bnn-bench perf-epoch`): the records under
/// `assets/perf-epoch` (MFVI-LRT) and `assets/perf-epoch/mfvi`.
pub(super) fn epoch(assets: &Path) -> Result<String, Box<dyn Error>> {
    let mut md = String::from(
        "| ours (LeNet5, 60 000 images) | s/epoch | bayesian-torch s/epoch | bayesian-torch ÷ \
         ours | per round | record |\n|---|---:|---:|---:|---|---|\n",
    );
    for folder in ["perf-epoch", "perf-epoch/mfvi"] {
        let path = assets.join(folder).join("perf-epoch.json");
        let r = super::read_json(&path)?;
        let rounds: Vec<f64> = r["rounds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| x["ratio"].as_f64())
            .collect();
        if rounds.is_empty() {
            return Err(format!("{}: no rounds", path.display()).into());
        }
        let per_round: Vec<String> = rounds.iter().map(|x| format!("{x:.2}")).collect();
        let _ = writeln!(
            md,
            "| {} | {:.2} | {:.2} | **{:.2}** | {} | `{folder}` |",
            r["options"]["method"].as_str().unwrap_or("–"),
            number(&r, "ours_median_s", &path)?,
            number(&r, "peer_median_s", &path)?,
            number(&r, "ratio", &path)?,
            per_round.join(", "),
        );
    }
    Ok(md)
}

/// BEDL-PAC's step against its PyTorch implementation (`assets/perf-bedl-pac/perf.json`).
pub(super) fn bedl_pac(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("perf-bedl-pac/perf.json");
    let rs = rows(&path)?;
    let mut md = String::from(
        "| net | BEDL-PAC ms/step | PyTorch ms/step | × PyTorch's time | × det. burn step |\n\
         |---|---:|---:|---:|---:|\n",
    );
    for net in ["LeNet5", "Mlp"] {
        let (Some(ours), Some(theirs)) = (
            row(&rs, net, "BEDL-PAC (CLT moments)"),
            row(&rs, net, "peer: torch_bedl_pac (2 threads)"),
        ) else {
            continue;
        };
        let _ = writeln!(
            md,
            "| {} | {:.2} | {:.2} | **{}** | {} |",
            net_name(net),
            number(ours, "ms_per_step", &path)?,
            number(theirs, "ms_per_step", &path)?,
            ratio(ours["vs_torch_bedl_pac"].as_f64()),
            ratio(ours["vs_deterministic"].as_f64()),
        );
    }
    Ok(md)
}

/// burn-flex with and without its `rayon` and `simd` features
/// (`assets/perf/flex-rayon-simd.json`, `assets/perf/flex-serial.json`).
pub(super) fn flex(assets: &Path) -> Result<String, Box<dyn Error>> {
    let (on_path, off_path) = (
        assets.join("perf/flex-rayon-simd.json"),
        assets.join("perf/flex-serial.json"),
    );
    let (on, off) = (rows(&on_path)?, rows(&off_path)?);
    let mut md = String::from(
        "| net | row | ms/step, `rayon` + `simd` | ms/step, neither | ratio |\n\
         |---|---|---:|---:|---:|\n",
    );
    for net in ["Mlp", "LeNet5"] {
        for r in on.iter().filter(|r| r["net"] == net) {
            let method = r["method"].as_str().unwrap_or("");
            let Some(o) = row(&off, net, method) else {
                continue;
            };
            let (a, b) = (
                number(r, "ms_per_step", &on_path)?,
                number(o, "ms_per_step", &off_path)?,
            );
            let _ = writeln!(
                md,
                "| {} | {method} | {a:.2} | {b:.2} | {:.2} |",
                net_name(net),
                b / a
            );
        }
    }
    Ok(md)
}

/// Max pooling by moments, the fused kernel against the composition
/// (`assets/perf-pool/perf-pool.json`).
pub(super) fn pool(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("perf-pool/perf-pool.json");
    let record = read_json(&path)?;
    let mut md = String::from(
        "| input | window, stride | fused ms | composition ms | speed-up | largest relative \
         difference (values, gradients) |\n|---|---|---:|---:|---:|---|\n",
    );
    for r in record["results"].as_array().into_iter().flatten() {
        let shape: Vec<String> = r["input"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| d.to_string())
            .collect();
        let f = |k: &str| number(r, k, &path);
        let (k, stride) = (&r["kernel"], &r["stride"]);
        let _ = writeln!(
            md,
            "| `[{}]` | {k}×{k}, {stride} | {:.1} | {:.1} | {:.2} | {:.1e}, {:.1e} |",
            shape.join(", "),
            f("fused_ms")?,
            f("reference_ms")?,
            f("speedup")?,
            f("max_rel_diff_values")?,
            f("max_rel_diff_grads")?,
        );
    }
    Ok(md)
}

/// Laplace here and in laplace-torch on one MAP LeNet5 (`assets/perf-laplace/perf-laplace.json`).
pub(super) fn laplace(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("perf-laplace/perf-laplace.json");
    let record = read_json(&path)?;
    let mut md = String::from(
        "| Laplace | side | error % | NLL | ECE | AUROC(H) | λ | fit (s) | predict (s) | time \
         ratio | largest prob. difference |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in record["results"].as_array().into_iter().flatten() {
        let variant = r["variant"].as_str().unwrap_or("?");
        for (side, key) in [("bnn-burn", "ours"), ("laplace-torch", "peer")] {
            let s = &r[key];
            let f = |k: &str| number(s, k, &path);
            let (ratio, diff) = match key {
                "ours" => (
                    format!("{:.2}", number(r, "time_ratio", &path)?),
                    format!("{:.1e}", number(r, "max_prob_diff", &path)?),
                ),
                _ => (String::new(), String::new()),
            };
            let _ = writeln!(
                md,
                "| {variant} | {side} | {:.2} | {:.4} | {:.4} | {:.3} | {:.3} | {:.1} | {:.1} | \
                 {ratio} | {diff} |",
                f("error_pct")?,
                f("nll")?,
                f("ece")?,
                f("auroc_entropy")?,
                f("prior_precision")?,
                f("fit_seconds")?,
                f("predict_seconds")?,
            );
        }
    }
    Ok(md)
}

/// Prediction by moments against 100-sample Monte Carlo (`assets/perf-predict/perf-predict.json`).
pub(super) fn predict(assets: &Path) -> Result<String, Box<dyn Error>> {
    let path = assets.join("perf-predict/perf-predict.json");
    let rs = rows(&path)?;
    let mut md = String::from(
        "| trained as | moments (ms) | 100 samples (ms) | speed-up | test LL, moments | test LL, \
         samples | LL difference | RMSE, moments | RMSE, samples |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in &rs {
        let f = |k: &str| number(r, k, &path);
        let _ = writeln!(
            md,
            "| {} | {:.2} | {:.2} | {:.1}× | {:.3} | {:.3} | {:+.3} | {:.3} | {:.3} |",
            r["method"].as_str().unwrap_or("–"),
            f("moments_ms")?,
            f("samples_ms")?,
            f("speedup")?,
            f("moments_ll")?,
            f("samples_ll")?,
            f("moments_ll")? - f("samples_ll")?,
            f("moments_rmse")?,
            f("samples_rmse")?,
        );
    }
    Ok(md)
}
