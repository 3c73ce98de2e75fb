//! The report: Markdown tables beside the published columns, differences in combined
//! standard errors, the JSON record, and the refusal of non-finite numbers.

use super::*;

/// The last printed digit of every published UCI cell (all sources print two decimals).
pub const PUBLISHED_DIGIT: f64 = 0.01;

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
            for (what, c) in [
                ("coverage", s.coverage_90),
                ("conformal coverage", s.conformal_coverage_90),
            ] {
                if let Some(c) = c.filter(|c| !(0.0..=1.0).contains(c)) {
                    return Err(format!("{row}: {what} {c} outside [0, 1]"));
                }
            }
        }
    }
    Ok(())
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
pub(crate) fn published_index(d: &DataSet) -> Option<usize> {
    let b = d.builtin()?;
    UciDataset::ALL.iter().position(|x| *x == b)
}

pub(crate) fn fmt_cell(c: Option<(f64, f64)>) -> String {
    match c {
        Some((m, se)) => fmt_mean_se(m, Some(se), 2),
        None => "–".into(),
    }
}

/// A mean over splits with its standard error (`None` for a single split, which has none:
/// [`bnn_burn::metrics::mean_and_standard_error`]).
pub type MeanSe = (f64, Option<f64>);

/// `mean ± se` to `digits` decimals; `mean ± –` without a standard error (a single split has
/// none, where `± 0.00` would claim an exact value).
pub(crate) fn fmt_mean_se(m: f64, se: Option<f64>, digits: usize) -> String {
    match se {
        Some(se) => format!("{m:.digits$} ± {se:.digits$}"),
        None => format!("{m:.digits$} ± –"),
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
    let sets = sets_in(results);
    // Published columns only where a row is one of the 9 sets: a user's own sets have none.
    let published = match sets.iter().any(|d| d.builtin().is_some()) {
        true => uci_published::all(),
        false => Vec::new(),
    };
    let splits = options
        .splits
        .map(|s| s.to_string())
        .unwrap_or_else(|| if options.exp.quick { "3" } else { "all" }.into());
    let mut md = format!(
        "# UCI regression\n\n{splits} split{} per set{}, seed {}, backend `{}`, wall time {:.0} s \
         ({} worker process{}; the rows' own times sum to {:.0} s). Mean ± standard error over \
         splits (`± –`: a single split, which has no standard error); ours first, then \
         published columns (sources below). `epochs`: the training epochs of most of a set's \
         rows; a cell trained for another count says so.\n",
        if options.splits == Some(1) { "" } else { "s" },
        if options.exp.quick { " (--quick)" } else { "" },
        options.exp.seed,
        bnn_burn::backend_name(),
        wall,
        options.run.jobs,
        if options.run.jobs == 1 { "" } else { "es" },
        results.iter().map(|r| r.seconds).sum::<f64>()
    );
    let provenance: Vec<(String, Vec<String>)> = results
        .iter()
        .map(|r| (format!("{} / {}", r.dataset, r.method), r.revisions.clone()))
        .collect();
    md += &format!("\n{}\n", crate::experiment::revisions_line(&provenance));
    let table = |title: &str,
                 ours: &dyn Fn(&MethodResult) -> MeanSe,
                 theirs: &dyn Fn(&PublishedColumn, usize) -> uci_published::Cell,
                 digits: usize| {
        let mut t = format!("\n## {title}\n\n| data set | epochs |");
        for m in &methods {
            t += &format!(" {m} |");
        }
        for p in &published {
            t += &format!(" {} |", p.column.name);
        }
        t += "\n|---|---:|";
        t += &"---:|".repeat(methods.len() + published.len());
        t += "\n";
        for d in &sets {
            let rows: Vec<&MethodResult> = results.iter().filter(|r| r.dataset == *d).collect();
            let epochs = usual_epochs(&rows);
            t += &format!("| {d} | {epochs} |");
            for m in &methods {
                let cell = rows
                    .iter()
                    .find(|r| r.method == *m)
                    .map(|r| {
                        let (v, se) = ours(r);
                        let cell = fmt_mean_se(v, se, digits);
                        match r.budget.epochs {
                            e if e == epochs => cell,
                            e => format!("{cell} ({e} ep.)"),
                        }
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
        3,
    );
    md += &table(
        "Test RMSE (lower is better)",
        &|r| r.rmse(),
        &|p, i| p.test_rmse[i],
        3,
    );
    md += &coverage_table(&methods, &sets, results);
    // Each of our methods against the published columns that implement it.
    let pairs: Vec<(&str, &PublishedColumn)> = published
        .iter()
        .flat_map(|p| {
            p.column
                .counterparts
                .iter()
                .filter(|m| methods.contains(&m.as_str()))
                .map(move |m| (m.as_str(), p))
        })
        .collect();
    if !pairs.is_empty() {
        md += "\n## Difference to the published counterpart, in combined standard errors\n\n\
               `z = (ours − published) / √(se_ours² + se_published² + 0.01²/12)` (the last \
               term: the published cell's rounding to two decimals), signed so that a positive \
               value means ours is better (higher LL, lower RMSE); `–` where either cell is \
               missing or ours has a single split.\n";
        // A pair without a single published cell in this metric gets no column, and a metric
        // without any, no table (e.g. Haußmann's Table 3.1 has no RMSE).
        let ztable = |title: &str,
                      ours: &dyn Fn(&MethodResult) -> MeanSe,
                      theirs: &dyn Fn(&PublishedColumn, usize) -> uci_published::Cell,
                      higher_is_better: bool| {
            let z = |d: &DataSet, m: &str, p: &PublishedColumn| {
                results
                    .iter()
                    .find(|r| r.dataset == *d && r.method == m)
                    .zip(published_index(d).and_then(|i| theirs(p, i)))
                    .and_then(|(r, th)| z_score(ours(r), th, higher_is_better))
            };
            let shown: Vec<_> = pairs
                .iter()
                .filter(|(m, p)| sets.iter().any(|d| z(d, m, p).is_some()))
                .collect();
            if shown.is_empty() {
                return String::new();
            }
            let mut t = format!("\n{title}\n\n| data set |");
            for (m, p) in &shown {
                t += &format!(" {m} vs {} |", p.column.name);
            }
            t += "\n|---|";
            t += &"---:|".repeat(shown.len());
            t += "\n";
            for d in &sets {
                t += &format!("| {d} |");
                for (m, p) in &shown {
                    t += &match z(d, m, p) {
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
    if published.is_empty() {
        return md;
    }
    md += "\nSources: ";
    md += &published
        .iter()
        .map(|p| {
            format!(
                "{}: {} ({})",
                p.column.name,
                p.column.source,
                p.describe_spread()
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    md += ".\n";
    md
}

/// Our rows' coverage of the central 90 % predictive interval (the papers report none); empty
/// when no row measured it.
fn coverage_table(methods: &[&str], sets: &[DataSet], results: &[MethodResult]) -> String {
    let raw = coverage_of(
        methods,
        sets,
        results,
        MethodResult::coverage_90,
        "\n## Coverage of the central 90 % predictive interval (nominal 0.90)\n\nThe fraction \
         of test targets inside their interval, mean ± standard error over splits; `–`: a row \
         that did not measure it.\n\n",
    );
    let conformal = coverage_of(
        methods,
        sets,
        results,
        MethodResult::conformal_coverage_90,
        "\n## Split-conformal coverage (nominal 0.90)\n\nThe same intervals calibrated by \
         split-conformal prediction on the predictive CDF: the score `|F(y) − ½|` of the \
         even-numbered test rows sets the level, the odd-numbered rows measure the coverage \
         (at least 0.90 in expectation over exchangeable rows); `–`: a row written before it \
         was measured.\n\n",
    );
    let k_hat = coverage_of(
        methods,
        sets,
        results,
        MethodResult::k_hat,
        "\n## PSIS k̂ of the fitted posterior\n\nEach split's posterior as an importance \
         proposal for the true posterior on its training rows (1000 joint draws): above 0.7 \
         its draws cannot be trusted as posterior samples. Mean ± standard error over splits; \
         `–`: a posterior without a density, or a row written before it was measured.\n\n",
    );
    raw + &conformal + &k_hat
}

/// One coverage table of `cell` per (data set, method); empty when no row has it.
fn coverage_of(
    methods: &[&str],
    sets: &[DataSet],
    results: &[MethodResult],
    cell: fn(&MethodResult) -> Option<MeanSe>,
    heading: &str,
) -> String {
    if !results.iter().any(|r| cell(r).is_some()) {
        return String::new();
    }
    let mut t = format!("{heading}| data set |");
    for m in methods {
        t += &format!(" {m} |");
    }
    t += "\n|---|";
    t += &"---:|".repeat(methods.len());
    t += "\n";
    for d in sets {
        t += &format!("| {d} |");
        for m in methods {
            let cell = results
                .iter()
                .find(|r| r.dataset == *d && r.method == *m)
                .and_then(cell)
                .map(|(v, se)| fmt_mean_se(v, se, 3))
                .unwrap_or_else(|| "–".into());
            t += &format!(" {cell} |");
        }
        t += "\n";
    }
    t
}

/// The epoch count most of `rows` trained for (the smallest of equally common ones).
pub fn usual_epochs(rows: &[&MethodResult]) -> usize {
    let mut counts = std::collections::BTreeMap::new();
    for r in rows {
        *counts.entry(r.budget.epochs).or_insert(0usize) += 1;
    }
    let best = counts.values().copied().max().unwrap_or(0);
    counts
        .into_iter()
        .find(|&(_, c)| c == best)
        .map_or(0, |(e, _)| e)
}

/// `(ours − theirs)/√(se_ours² + se_theirs² + u²/12)` of two `(mean, standard error)` cells,
/// signed so that positive means ours is better. `u` = [`PUBLISHED_DIGIT`]: a published cell
/// is rounded to it, an error uniform on `±u/2` (standard deviation `u/√12`), which decides
/// cells printed as `0.00 ± 0.00` (naval's RMSE). `None` where ours has no standard error (a
/// single split: taking it as 0 would inflate `z`), or for a non-positive combined error, which
/// the rounding term rules out for finite inputs.
pub fn z_score(ours: MeanSe, theirs: (f64, f64), higher_is_better: bool) -> Option<f64> {
    let rounding = PUBLISHED_DIGIT / 12f64.sqrt();
    let se = ours.1?.hypot(theirs.1).hypot(rounding);
    if se <= 0.0 {
        return None;
    }
    let d = (ours.0 - theirs.0) / se;
    Some(if higher_is_better { d } else { -d })
}

/// The JSON record of a run: options, revision, backend, per-split results, wall time.
pub(crate) fn record(
    options: &UciOptions,
    results: &[MethodResult],
    wall: f64,
) -> serde_json::Value {
    crate::experiment::record(
        "uci",
        options,
        wall,
        &results,
        serde_json::json!({ "prediction_samples": PREDICTION_SAMPLES }),
    )
}

pub(crate) fn write_report(
    options: &UciOptions,
    results: &[MethodResult],
    wall: f64,
    warnings: &[String],
    out: &crate::runner::OutFolder,
) -> Result<(), Box<dyn Error>> {
    check_results(results)?;
    let mut md = markdown(options, results, wall);
    if !warnings.is_empty() {
        md += "\n## Warnings\n\n";
        for w in warnings {
            md += &format!("- {w}\n");
        }
    }
    out.write_record("uci.json", &record(options, results, wall))?;
    out.write("uci.md", md.as_bytes())?;
    out.write("uci.svg", plot(results)?.as_bytes())?;
    println!("{md}");
    Ok(())
}

/// The `bnn-bench uci-report` command line.
#[derive(Debug, Clone, clap::Args)]
pub struct UciReportArgs {
    /// Output folder for uci.md, uci.json and uci.svg.
    #[arg(long)]
    pub out: PathBuf,
    /// Run records, in order of precedence (later wins).
    #[arg(required = true)]
    pub records: Vec<PathBuf>,
}

/// Combines the rows of several `uci` run records (`uci.json`) into one report in `out`, without training: a row (data set, method) of a later record replaces the
/// same row of an earlier one. The options shown are the first record's; the wall time is the
/// sum of the records'. Every record is read and checked before anything is written.
///
/// # Errors
/// A file that cannot be read or is not a `uci` record (its path named), non-finite numbers,
/// an unwritable `out`.
pub fn combine(records: &[PathBuf], out: &Path) -> Result<Vec<MethodResult>, Box<dyn Error>> {
    let (options, rows, wall) = joined(records, out)?;
    let folder = crate::runner::OutFolder::open(out, "--out")?;
    write_report(&options, &rows, wall, &[], &folder)?;
    Ok(rows)
}

/// The rows of several `uci` records joined as [`combine`] joins them, the options of a report
/// on them (the first record's, writing to `out`) and the records' summed wall time.
///
/// # Errors
/// As [`combine`], before anything is written.
pub fn joined(
    records: &[PathBuf],
    out: &Path,
) -> Result<(UciOptions, Vec<MethodResult>, f64), Box<dyn Error>> {
    if records.is_empty() {
        return Err("uci-report: give at least one uci.json".into());
    }
    let mut rows: Vec<MethodResult> = Vec::new();
    let mut wall = 0.0;
    let mut first: Option<serde_json::Value> = None;
    for path in records {
        // Records written before they carried a checksum still read; a damaged one does not.
        let record = match crate::runner::read_record(path, true)? {
            crate::runner::ReadRecord::Intact(v) => v,
            crate::runner::ReadRecord::Missing => {
                return Err(format!("{}: no such file", path.display()).into());
            }
            crate::runner::ReadRecord::Damaged(why) => {
                return Err(format!("{}: {why}", path.display()).into());
            }
        };
        if record["experiment"] != "uci" {
            return Err(format!("{}: not a uci run record", path.display()).into());
        }
        let results: Vec<MethodResult> = serde_json::from_value(record["results"].clone())
            .map_err(|e| format!("{}: unreadable results ({e})", path.display()))?;
        wall += record["wall_seconds"].as_f64().unwrap_or(0.0);
        for r in results {
            crate::experiment::replace_or_push(&mut rows, r, MethodResult::same_row);
        }
        first.get_or_insert(record);
    }
    let first = first.expect("at least one record");
    let o = &first["options"];
    let mut methods: Vec<String> = Vec::new();
    for r in &rows {
        if !methods.contains(&r.method) {
            methods.push(r.method.clone());
        }
    }
    let options = UciOptions {
        datasets: sets_in(&rows),
        methods,
        splits: o["splits"].as_u64().map(|s| s as usize),
        epochs: None,
        exp: crate::runner::ExperimentArgs {
            seed: o["seed"].as_u64().unwrap_or(0),
            quick: o["quick"].as_bool().unwrap_or(false),
        },
        data_dir: None,
        run: crate::runner::RunnerOptions {
            jobs: o["jobs"].as_u64().unwrap_or(1) as usize,
            ..crate::runner::RunnerOptions::new(out)
        },
    };
    Ok((options, rows, wall))
}
