//! Running rows: in this process or in worker processes, split-level progress files and
//! resuming an interrupted run.

use super::*;

/// One row of a run: a method on a data set.
pub(crate) struct Unit<'a> {
    pub(crate) dataset: &'a DataSet,
    pub(crate) set: &'a UciData,
    pub(crate) method: &'a dyn UciMethod,
    pub(crate) n_splits: usize,
    pub(crate) budget: Budget,
}

/// One finished split of a row, as its progress file keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct SplitRecord {
    seed: u64,
    budget: Budget,
    k: usize,
    outcome: SplitOutcome,
    /// Wall time of the split (0 in files written before it was recorded).
    #[serde(default)]
    seconds: f64,
    /// The revision the bench that ran the split was built from (empty in files written
    /// before it was recorded).
    #[serde(default)]
    revision: String,
}

/// Where a row's finished splits are kept while it runs (removed when the row is done): a
/// resumed run reuses those of the same seed and budget, so an interrupted long row loses at
/// most the split in progress.
pub(crate) fn progress_path(unit: &Unit, out: &Path) -> PathBuf {
    out.join(format!(
        "{}-{}.splits.jsonl",
        unit.dataset.seed_name(),
        unit.method.name().replace(' ', "_")
    ))
}

/// A finished split's outcome, its wall time in seconds and the revision that ran it.
type Finished = (SplitOutcome, f64, String);

/// The splits of `unit` already finished under `seed` (split number → outcome and seconds).
pub(crate) fn finished_splits(
    path: &Path,
    unit: &Unit,
    seed: u64,
) -> Result<Vec<Option<Finished>>, Box<dyn Error>> {
    let mut done: Vec<Option<Finished>> = vec![None; unit.n_splits];
    let Some(text) = crate::experiment::read_if_exists(path)? else {
        return Ok(done);
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
            done[r.k] = Some((r.outcome, r.seconds, r.revision));
        }
    }
    Ok(done)
}

/// Runs one row in this process, printing a line per split. With `resume`, the splits finished
/// by an interrupted run of the same row (seed and budget) are reused.
pub(crate) fn run_unit(
    unit: &Unit,
    seed: u64,
    out: &Path,
    resume: bool,
) -> Result<MethodResult, Box<dyn Error>> {
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
        let t0 = Instant::now();
        let prepared = prepare(
            dataset,
            set,
            k,
            unit.budget,
            split_seed(seed, dataset, method.name(), k),
        )?;
        let outcome = method.run(&prepared)?;
        let seconds = t0.elapsed().as_secs_f64();
        eprintln!(
            "[{}] {} split {}/{n_splits}: test LL {:.3}, RMSE {:.3} ({:.1} s) {}",
            dataset,
            method.name(),
            k + 1,
            outcome.test_ll,
            outcome.test_rmse,
            seconds,
            outcome.detail
        );
        let revision = crate::experiment::git_revision();
        let record = SplitRecord {
            seed,
            budget: unit.budget,
            k,
            outcome: outcome.clone(),
            seconds,
            revision: revision.clone(),
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
        splits[k] = Some((outcome, seconds, revision));
    }
    let _ = std::fs::remove_file(&progress);
    let mut revisions = Vec::new();
    let (splits, times): (Vec<SplitOutcome>, Vec<f64>) = splits
        .into_iter()
        .flatten()
        .map(|(outcome, seconds, revision)| {
            revisions.push(revision);
            (outcome, seconds)
        })
        .unzip();
    let revisions = crate::experiment::distinct(revisions.into_iter().filter(|r| !r.is_empty()));
    Ok(MethodResult {
        method: method.name().to_string(),
        dataset: dataset.clone(),
        budget: unit.budget,
        splits,
        // The splits' own times, reused ones included: a resumed row reports its whole cost.
        seconds: times.iter().sum(),
        revisions,
    })
}

/// The finished rows in `out` that this run can reuse or must keep: those of a finished run
/// (`uci.json`), replaced by those of an interrupted one (`uci.partial.json`) for the same data
/// set and method; each record only with this run's seed and prediction samples (the budget and
/// split count are checked per row).
pub(crate) fn resumable(options: &UciOptions) -> Result<Vec<MethodResult>, Box<dyn Error>> {
    let mut rows: Vec<MethodResult> = Vec::new();
    for name in ["uci.json", "uci.partial.json"] {
        for row in record_rows(&options.out.join(name), options)? {
            crate::experiment::replace_or_push(&mut rows, row, MethodResult::same_row);
        }
    }
    Ok(rows)
}

/// The rows of the run record at `path` (none when it does not exist, or has another seed or
/// prediction count).
fn record_rows(path: &Path, options: &UciOptions) -> Result<Vec<MethodResult>, Box<dyn Error>> {
    let Some(text) = crate::experiment::read_if_exists(path)? else {
        return Ok(Vec::new());
    };
    let record: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a uci run record ({e})", path.display()))?;
    if record["options"]["seed"].as_u64() != Some(options.seed)
        || record["prediction_samples"].as_u64() != Some(PREDICTION_SAMPLES as u64)
    {
        eprintln!(
            "{}: another seed or prediction count; not reused",
            path.display()
        );
        return Ok(Vec::new());
    }
    Ok(serde_json::from_value(record["results"].clone())
        .map_err(|e| format!("{}: unreadable results ({e})", path.display()))?)
}

/// Runs one row in a child process of this executable (same protocol, explicit budget and
/// split count) and reads its record back.
pub(crate) fn spawn_unit(
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

pub(crate) fn read_unit(dir: &Path) -> Result<MethodResult, Box<dyn Error>> {
    let path = dir.join("uci.json");
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let mut rows: Vec<MethodResult> = serde_json::from_value(record["results"].clone())?;
    let row = rows
        .pop()
        .ok_or_else(|| format!("{}: a worker wrote no result", path.display()))?;
    std::fs::remove_dir_all(dir)?;
    Ok(row)
}
