//! One runner for every harness: the output folder and its lock, a record per finished task
//! (sealed with a checksum, bound to what decides its numbers), resuming, worker processes and the
//! report. A harness says what its tasks are, how to run one and how to report the rows
//! ([`Harness`]); [`run`] does the rest the same way for all of them. What a run leaves in its
//! folder: the book's *Extending the library* page.

mod folder;
mod workers;

pub use folder::{LOCK_FILE, OutFolder, ReadRecord, read_record, set_aside};
pub use workers::{Worker, allow_worker_processes, worker_processes_allowed};

use bnn_burn::integrity::Digest;
use serde::{Serialize, de::DeserializeOwned};
use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A set of experiments the runner can run: its tasks, how one runs, and its report.
pub trait Harness {
    /// One unit of work: a method on a data set's split, an architecture and a method.
    type Task: Clone + Serialize + DeserializeOwned;
    /// What a task measured.
    type Row: Clone + Serialize + DeserializeOwned;

    /// Its name: the subcommand, and the stem of its record files.
    const NAME: &'static str;

    /// The version of its rows' format: a row of another version is never reused.
    const FORMAT: u32;

    /// This run's tasks, in the order they run. Everything they need was checked and loaded
    /// when the harness was built, so a bad input fails before the first task.
    fn tasks(&self) -> Vec<Self::Task>;

    /// A task's id: unique within a run and the same in every run (its files are named by it).
    fn task_id(&self, task: &Self::Task) -> String;

    /// What every row of this run shares, and a row of an earlier run in the folder must share
    /// to be reported beside them (the seed, budget settings, prediction samples).
    fn run_key(&self) -> serde_json::Value;

    /// What else decides a task's numbers: its budget, seed, and the digest of its data.
    fn task_key(&self, task: &Self::Task) -> serde_json::Value;

    /// Runs one task. `context` gives its training-state folder.
    ///
    /// # Errors
    /// The task's own errors (a fit that diverges), naming the task.
    fn run_task(
        &self,
        task: &Self::Task,
        context: &TaskContext,
    ) -> Result<Self::Row, Box<dyn Error>>;

    /// The line logged when a task finishes.
    fn describe(&self, finished: &Finished<Self::Task, Self::Row>) -> String;

    /// Writes the report of the run's rows into its output folder ([`ReportInput`]).
    ///
    /// # Errors
    /// A row the report cannot show (a non-finite number), a file that cannot be written.
    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>>;

    /// Disk room the run needs for its records and training states, checked before any work.
    fn room(&self) -> u64 {
        64 << 20
    }
}

/// What a harness's report is made of.
pub struct ReportInput<'a, H: Harness + ?Sized> {
    /// Earlier runs' kept rows first, then this run's in task order.
    pub rows: &'a [Done<H>],
    /// The output folder.
    pub out: &'a OutFolder,
    /// The run's wall time: this process's, plus the recorded time of every row it reused
    /// (so a resumed or `--report-only` run reports the whole run's).
    pub wall_seconds: f64,
}

impl<H: Harness + ?Sized> ReportInput<'_, H> {
    /// The rows alone, in order.
    pub fn rows(&self) -> Vec<H::Row> {
        rows_of(self.rows)
    }

    /// Writes the run record (`NAME.json`: `options`, the rows and `extra`) and the Markdown
    /// report `md` (`NAME.md`) into the output folder, and prints the report.
    ///
    /// # Errors
    /// A file that cannot be written.
    pub fn write_report(
        &self,
        options: &impl Serialize,
        extra: serde_json::Value,
        md: &str,
    ) -> Result<(), Box<dyn Error>> {
        let record =
            crate::experiment::record(H::NAME, options, self.wall_seconds, &self.rows(), extra);
        self.out
            .write_record(format!("{}.json", H::NAME), &record)?;
        self.out.write(format!("{}.md", H::NAME), md.as_bytes())?;
        println!("{md}");
        Ok(())
    }
}

/// Where a task keeps what survives an interruption.
#[derive(Debug, Clone)]
pub struct TaskContext {
    /// The task's training-state folder (created by whoever saves into it; removed by the
    /// runner when the task's row is written).
    pub state: PathBuf,
    /// Whether a state found there may be continued (`--resume`).
    pub resume: bool,
}

impl TaskContext {
    /// A part of the task finished by an interrupted run (a UCI split), saved by
    /// [`TaskContext::save_part`]; `None` without `--resume`, when there is none, or when its
    /// file is damaged (set aside with a warning).
    ///
    /// # Errors
    /// A file that exists but cannot be read.
    pub fn part<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, String> {
        if !self.resume {
            return Ok(None);
        }
        let path = self.state.join(format!("{name}.json"));
        match read_record(&path, false)? {
            ReadRecord::Missing => Ok(None),
            ReadRecord::Damaged(why) => {
                let aside = set_aside(&path);
                eprintln!("{}: {why}; moved to {}", path.display(), aside.display());
                Ok(None)
            }
            ReadRecord::Intact(v) => Ok(serde_json::from_value(v["part"].clone()).ok()),
        }
    }

    /// Saves a finished part of the task (whole, with a checksum), so that a resumed run
    /// skips it.
    ///
    /// # Errors
    /// A file that cannot be written (named).
    pub fn save_part<T: Serialize>(&self, name: &str, part: &T) -> Result<(), String> {
        std::fs::create_dir_all(&self.state)
            .map_err(|e| format!("{}: cannot create the folder: {e}", self.state.display()))?;
        let record = serde_json::json!({ "part": part });
        let path = self.state.join(format!("{name}.json"));
        bnn_burn::integrity::write_atomic(&path, bnn_burn::integrity::seal_json(&record).as_bytes())
            .map_err(|e| e.to_string())
    }
}

/// A finished task, as its record keeps it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Finished<T, R> {
    /// The task's id.
    pub id: String,
    /// The task.
    pub task: T,
    /// What it measured.
    pub row: R,
    /// Wall time of the process that finished it, s (a harness that resumes training states
    /// keeps the whole training time in its row).
    pub seconds: f64,
    /// The revisions of the builds that ran it, oldest first.
    pub revisions: Vec<String>,
}

/// What every experiment harness takes besides the runner's options: the seed, and the
/// switch to its small budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, clap::Args)]
pub struct ExperimentArgs {
    /// Seed of data, splits, initialisation and training: every task derives its own from it,
    /// so a row reproduces alone.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The command's small budget (what it shrinks, the command's help says).
    #[arg(long)]
    pub quick: bool,
}

impl ExperimentArgs {
    /// `quick` under `--quick`, else `full`: the two budgets of a setting.
    pub fn quick_or<T>(&self, quick: T, full: T) -> T {
        if self.quick { quick } else { full }
    }
}

/// Every pair of `outer` and `inner`, `outer` by `outer`, made into a task by `task`: the
/// task lists of the harnesses (data set × method, architecture × method).
pub fn grid<A, B, T>(outer: &[A], inner: &[B], task: impl Fn(&A, &B) -> T) -> Vec<T> {
    outer
        .iter()
        .flat_map(|a| inner.iter().map(|b| task(a, b)).collect::<Vec<_>>())
        .collect()
}

/// The item of `items` a task names (`is`): tasks are made from the harness's own lists, so
/// a miss is a bug, and the panic names `what` (a method, a data set).
pub fn of_task<'a, T>(items: &'a [T], what: &str, is: impl Fn(&T) -> bool) -> &'a T {
    items
        .iter()
        .find(|t| is(t))
        .unwrap_or_else(|| panic!("a task names a {what} that the run does not hold"))
}

/// The rows of `finished`, in order.
pub fn rows_of<T, R: Clone>(finished: &[Finished<T, R>]) -> Vec<R> {
    finished.iter().map(|f| f.row.clone()).collect()
}

/// A harness's finished task.
pub type Done<H> = Finished<<H as Harness>::Task, <H as Harness>::Row>;

/// How a run is carried out: the part of every harness's options the runner reads, and the
/// command-line flags every harness shares.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct RunnerOptions {
    /// Output folder: the report, its record and figures, and rows/ with a record per
    /// finished task.
    #[arg(long)]
    pub out: PathBuf,
    /// Reuse the finished rows in the output folder computed under the same settings and data
    /// (and continue a task stopped part-way from its saved state); rows there of other
    /// tasks under the same settings are kept in the report.
    #[arg(long)]
    pub resume: bool,
    /// Worker processes, each running one task at a time; the numbers do not depend on it
    /// (every task has its own seed).
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Set in a worker process: the one task it runs for its parent (`PID:TASK`).
    #[serde(skip)]
    #[arg(long, hide = true, value_parser = Worker::parse)]
    pub worker: Option<Worker>,
    /// Train nothing: write the report from the finished rows in the output folder computed
    /// under the same settings and data.
    #[arg(long)]
    pub report_only: bool,
}

impl RunnerOptions {
    /// A fresh run into `out`: no resuming, one process.
    pub fn new(out: impl Into<PathBuf>) -> Self {
        Self {
            out: out.into(),
            resume: false,
            jobs: 1,
            worker: None,
            report_only: false,
        }
    }

    /// Checks the counts before any work (the error names the flag).
    ///
    /// # Errors
    /// `jobs` 0, or above 1 in a program that cannot start workers.
    pub fn check(&self) -> Result<(), String> {
        if self.jobs == 0 {
            return Err("--jobs must be at least 1".into());
        }
        if self.jobs > 1 && !worker_processes_allowed() {
            return Err(format!(
                "--jobs {}: tasks run in worker processes of the bnn-bench binary, and this \
                 program is not one (see runner::allow_worker_processes); use jobs = 1",
                self.jobs
            ));
        }
        Ok(())
    }
}

/// A row's record: the finished task and the key it was computed under.
fn row_record<H: Harness>(
    key: &serde_json::Value,
    finished: &Finished<H::Task, H::Row>,
) -> Result<serde_json::Value, Box<dyn Error>> {
    let mut record = serde_json::to_value(finished)?;
    let object = record.as_object_mut().ok_or("a row record is an object")?;
    object.insert("harness".into(), H::NAME.into());
    object.insert("format".into(), H::FORMAT.into());
    object.insert("key".into(), key.clone());
    Ok(record)
}

/// The key a task's row is computed under.
fn key_of<H: Harness>(harness: &H, task: &H::Task) -> serde_json::Value {
    serde_json::json!({
        "harness": H::NAME,
        "format": H::FORMAT,
        "run": harness.run_key(),
        "task": harness.task_key(task),
    })
}

/// A file-name form of `id` that stays unique: its slug and a digest of the id itself.
fn file_stem(id: &str) -> String {
    let slug: String = crate::experiment::slug(id).chars().take(80).collect();
    format!("{slug}-{:08x}", Digest::new().text(id).value() as u32)
}

/// The first 12 hex digits of `key`'s digest.
fn key_hex(key: &serde_json::Value) -> String {
    Digest::new().text(&key.to_string()).hex()[..12].to_string()
}

/// The record of task `id` under `key` in `out`.
pub fn row_path(out: &Path, id: &str, key: &serde_json::Value) -> PathBuf {
    out.join("rows")
        .join(format!("{}-{}.json", file_stem(id), key_hex(key)))
}

/// The training-state folder of task `id` under `key`.
pub fn state_path(out: &Path, id: &str, key: &serde_json::Value) -> PathBuf {
    out.join("state")
        .join(format!("{}-{}", file_stem(id), key_hex(key)))
}

/// The finished row in `path` when its record is intact and was computed under `key`; a
/// damaged record is set aside (with a warning) and counts as missing.
fn stored<H: Harness>(
    harness: &H,
    path: &Path,
    key: Option<&serde_json::Value>,
) -> Result<Option<Done<H>>, Box<dyn Error>> {
    match read_record(path, false)? {
        ReadRecord::Missing => Ok(None),
        ReadRecord::Damaged(why) => {
            let aside = set_aside(path);
            eprintln!(
                "[{}] {}: {why}; moved to {} and its task runs again",
                H::NAME,
                path.display(),
                aside.display()
            );
            Ok(None)
        }
        ReadRecord::Intact(record) => {
            let fits = match key {
                Some(key) => record["key"] == *key,
                None => {
                    record["harness"] == H::NAME
                        && record["format"] == H::FORMAT
                        && record["key"]["run"] == harness.run_key()
                }
            };
            if !fits {
                return Ok(None);
            }
            match serde_json::from_value(record) {
                Ok(f) => Ok(Some(f)),
                Err(e) => {
                    eprintln!(
                        "[{}] {}: not a row of this build ({e}); not reused",
                        H::NAME,
                        path.display()
                    );
                    Ok(None)
                }
            }
        }
    }
}

/// Runs `harness`'s tasks into `options.out`: those finished before are reused with
/// `--resume`, the others run here or in worker processes, each row written as it finishes,
/// then the report. Returns every row reported. In a worker process (`options.worker`), runs
/// its one task and returns nothing.
///
/// # Errors
/// Before any work: bad options, a folder that cannot be written, is held by another run or
/// lacks room, tasks with one id. Then a task's error (the rows finished so far stay in the
/// folder; `--resume` continues), or the report's.
pub fn run<H: Harness>(
    harness: &H,
    options: &RunnerOptions,
) -> Result<Vec<Done<H>>, Box<dyn Error>> {
    let start = Instant::now();
    options.check()?;
    let tasks = harness.tasks();
    let ids: Vec<String> = tasks.iter().map(|t| harness.task_id(t)).collect();
    for (i, id) in ids.iter().enumerate() {
        if ids[..i].contains(id) {
            return Err(format!("{}: the task {id:?} is asked for twice", H::NAME).into());
        }
    }
    if let Some(worker) = &options.worker {
        let out = OutFolder::held_by_parent(&options.out)?;
        worker.watch_parent();
        let i = ids
            .iter()
            .position(|id| *id == worker.task)
            .ok_or_else(|| format!("worker: no task {:?} in this run", worker.task))?;
        run_here(harness, &out, &tasks[i], &ids[i], options.resume)?;
        return Ok(Vec::new());
    }
    let out = OutFolder::open(&options.out, "--out")?;
    out.check_room(harness.room())?;
    let keys: Vec<serde_json::Value> = tasks.iter().map(|t| key_of(harness, t)).collect();
    let mut done: Vec<Option<Done<H>>> = Vec::with_capacity(tasks.len());
    for (id, key) in ids.iter().zip(&keys) {
        done.push(match options.resume || options.report_only {
            true => stored(harness, &row_path(out.path(), id, key), Some(key))?,
            false => None,
        });
    }
    // A task killed after writing its row but before removing its training state leaves the
    // state behind: the row is final, so the state goes now.
    for ((id, key), row) in ids.iter().zip(&keys).zip(&done) {
        let state = state_path(out.path(), id, key);
        if row.is_some() && state.exists() && !options.report_only {
            let _ = std::fs::remove_dir_all(&state);
        }
    }
    let reused = done.iter().flatten().count();
    if options.report_only {
        eprintln!(
            "[{}] report only: {reused} of {} tasks finished in the folder",
            H::NAME,
            tasks.len()
        );
    } else if options.resume {
        eprintln!(
            "[{}] resuming: {reused} of {} tasks finished before",
            H::NAME,
            tasks.len()
        );
    }
    let mut reused_seconds: f64 = done.iter().flatten().map(|d| d.seconds).sum();
    let todo: Vec<usize> = match options.report_only {
        true => Vec::new(),
        false => (0..tasks.len()).filter(|&i| done[i].is_none()).collect(),
    };
    if options.jobs == 1 {
        for i in todo {
            done[i] = Some(run_here(harness, &out, &tasks[i], &ids[i], options.resume)?);
        }
    } else {
        let mut read_back = |i: usize| -> Result<(), Box<dyn Error>> {
            let path = row_path(out.path(), &ids[i], &keys[i]);
            done[i] = Some(stored(harness, &path, Some(&keys[i]))?.ok_or_else(|| {
                format!(
                    "{}: the worker for {} ended without its row",
                    path.display(),
                    ids[i]
                )
            })?);
            Ok(())
        };
        workers::run_in_workers(&ids, &todo, options, H::NAME, &mut read_back)?;
    }
    // Rows of other tasks in the folder, under this run's settings, stay in the report.
    let mut rows: Vec<Done<H>> = Vec::new();
    if options.resume || options.report_only {
        rows = kept(harness, &out, &ids)?;
        reused_seconds += rows.iter().map(|d| d.seconds).sum::<f64>();
        if !rows.is_empty() {
            eprintln!(
                "[{}] {} rows of other tasks in the folder kept in the report",
                H::NAME,
                rows.len()
            );
        }
    }
    rows.extend(done.into_iter().flatten());
    harness.report(ReportInput {
        rows: &rows,
        out: &out,
        wall_seconds: start.elapsed().as_secs_f64() + reused_seconds,
    })?;
    let _ = std::fs::remove_dir(out.join("state"));
    Ok(rows)
}

/// Runs one task in this process and writes its row; its training state is removed after.
fn run_here<H: Harness>(
    harness: &H,
    out: &OutFolder,
    task: &H::Task,
    id: &str,
    resume: bool,
) -> Result<Done<H>, Box<dyn Error>> {
    let key = key_of(harness, task);
    let state = state_path(out.path(), id, &key);
    if !resume && state.exists() {
        std::fs::remove_dir_all(&state).map_err(|e| format!("{}: {e}", state.display()))?;
    }
    // Noted before the work, so a task interrupted and resumed by another build names both.
    let revisions = crate::experiment::note_revision(&state)?;
    let t0 = Instant::now();
    let context = TaskContext {
        state: state.clone(),
        resume,
    };
    let row = harness
        .run_task(task, &context)
        .map_err(|e| format!("{id}: {e}"))?;
    let finished = Finished {
        id: id.to_string(),
        task: task.clone(),
        row,
        seconds: t0.elapsed().as_secs_f64(),
        revisions,
    };
    let record = row_record::<H>(&key, &finished)?;
    out.write_record(row_path(Path::new(""), id, &key), &record)?;
    eprintln!("{}", harness.describe(&finished));
    let _ = std::fs::remove_dir_all(&state);
    Ok(finished)
}

/// Whether `name` is a row record's file name (`<stem>-<8 hex>-<12 hex>.json`): other files in
/// `rows/` (a harness's records from before the runner) are left alone.
fn is_row_file(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".json") else {
        return false;
    };
    let mut parts = stem.rsplitn(3, '-');
    let hex = |p: Option<&str>, n: usize| {
        p.is_some_and(|p| p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    hex(parts.next(), 12) && hex(parts.next(), 8) && parts.next().is_some()
}

/// The intact rows in `out/rows` of tasks other than `ids`, of this harness and run key; of
/// several rows of one task (its data changed between runs), the last written.
fn kept<H: Harness>(
    harness: &H,
    out: &OutFolder,
    ids: &[String],
) -> Result<Vec<Done<H>>, Box<dyn Error>> {
    let dir = out.join("rows");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut paths: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| is_row_file(&e.file_name().to_string_lossy()))
        .map(|e| {
            let written = e.metadata().and_then(|m| m.modified());
            (written.unwrap_or(std::time::UNIX_EPOCH), e.path())
        })
        .collect();
    // Newest first, so that the first row of a task is its last written.
    paths.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut rows: Vec<Done<H>> = Vec::new();
    for (_, path) in paths {
        if let Some(f) = stored(harness, &path, None)?
            && !ids.contains(&f.id)
            && !rows.iter().any(|r| r.id == f.id)
        {
            rows.push(f);
        }
    }
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(rows)
}

#[cfg(test)]
mod tests;
