//! The protocol on the runner: a task is a method on a data set over its splits; a finished
//! split is saved in the task's state folder, so an interrupted row loses at most the split in
//! progress.

use super::*;
use crate::runner::{Finished, Harness, ReportInput, TaskContext};
use bnn_burn::integrity::Digest;

/// Version of the rows' format.
const FORMAT: u32 = 1;

/// A row of the tables: a method on a data set, over its splits.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct UciTask {
    /// The data set.
    pub dataset: DataSet,
    /// The method's name.
    pub method: String,
    /// Splits of the row (the first ones of the set).
    pub n_splits: usize,
    /// The budget of every fit.
    pub budget: Budget,
}

/// One finished split, as a task's state folder keeps it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct SplitPart {
    outcome: SplitOutcome,
    seconds: f64,
    revision: String,
}

/// A data set loaded and checked for a run: every split it will run read and validated.
pub(crate) struct LoadedSet {
    pub(crate) dataset: DataSet,
    pub(crate) data: UciData,
    pub(crate) n_splits: usize,
    pub(crate) n_train: usize,
    /// Digest of the rows, the settings and every used split's indices.
    digest: String,
}

impl LoadedSet {
    /// Loads `dataset` and reads every split a run of `options` uses.
    pub(crate) fn load(
        dataset: &DataSet,
        root: &DataRoot,
        options: &UciOptions,
    ) -> Result<Self, Box<dyn Error>> {
        let data = dataset.load(root)?;
        let n_splits = splits_of(options, dataset, data.meta.n_splits)?;
        let mut digest = Digest::new();
        digest
            .floats(&data.data.x)
            .floats(&data.data.y)
            .number(data.data.n_features as u64)
            .text(&serde_json::to_string(&data.meta)?);
        let mut n_train = 0;
        for k in 0..n_splits {
            // Every split's files are read now: a bad one fails before any training.
            let (train, test) = data.split_indices(k)?;
            if k == 0 {
                n_train = train.len();
            }
            for rows in [&train, &test] {
                digest.number(rows.len() as u64);
                for &i in rows {
                    digest.number(i as u64);
                }
            }
        }
        Ok(Self {
            dataset: dataset.clone(),
            data,
            n_splits,
            n_train,
            digest: digest.hex(),
        })
    }
}

/// The protocol with its methods and loaded data sets.
pub(crate) struct UciHarness<'a> {
    pub(crate) options: &'a UciOptions,
    pub(crate) methods: Vec<&'a dyn UciMethod>,
    pub(crate) sets: Vec<LoadedSet>,
    /// What the report should say about settings that look wrong for the data.
    pub(crate) warnings: Vec<String>,
}

impl UciHarness<'_> {
    fn set(&self, d: &DataSet) -> &LoadedSet {
        crate::runner::of_task(&self.sets, "data set", |s| s.dataset == *d)
    }

    fn method(&self, name: &str) -> &dyn UciMethod {
        *crate::runner::of_task(&self.methods, "method", |m| m.name() == name)
    }
}

impl Harness for UciHarness<'_> {
    type Task = UciTask;
    type Row = MethodResult;

    const NAME: &'static str = "uci";
    const FORMAT: u32 = FORMAT;

    fn tasks(&self) -> Vec<UciTask> {
        crate::runner::grid(&self.sets, &self.methods, |set, method| UciTask {
            dataset: set.dataset.clone(),
            method: method.name().to_string(),
            n_splits: set.n_splits,
            budget: method.budget(&set.dataset, &set.data.meta, set.n_train, self.options),
        })
    }

    fn task_id(&self, task: &UciTask) -> String {
        format!("{} / {}", task.dataset, task.method)
    }

    fn run_key(&self) -> serde_json::Value {
        serde_json::json!({
            "seed": self.options.exp.seed,
            "prediction_samples": PREDICTION_SAMPLES,
        })
    }

    fn task_key(&self, task: &UciTask) -> serde_json::Value {
        serde_json::json!({
            "budget": task.budget,
            "n_splits": task.n_splits,
            "data": self.set(&task.dataset).digest,
        })
    }

    fn run_task(
        &self,
        task: &UciTask,
        context: &TaskContext,
    ) -> Result<MethodResult, Box<dyn Error>> {
        let set = self.set(&task.dataset);
        let method = self.method(&task.method);
        let dataset = &set.dataset;
        let mut parts = Vec::with_capacity(task.n_splits);
        let mut reused = 0;
        for k in 0..task.n_splits {
            let name = format!("split-{k}");
            if let Some(part) = context.part::<SplitPart>(&name)? {
                reused += 1;
                parts.push(part);
                continue;
            }
            let t0 = Instant::now();
            let seed = split_seed(self.options.exp.seed, dataset, method.name(), k);
            let prepared = prepare(dataset, &set.data, k, task.budget, seed)?;
            let outcome = method.run(&prepared)?;
            let seconds = t0.elapsed().as_secs_f64();
            eprintln!(
                "[{dataset}] {} split {}/{}: test LL {:.3}, RMSE {:.3} ({seconds:.1} s) {}",
                method.name(),
                k + 1,
                task.n_splits,
                outcome.test_ll,
                outcome.test_rmse,
                outcome.detail
            );
            let part = SplitPart {
                outcome,
                seconds,
                revision: crate::experiment::git_revision(),
            };
            context.save_part(&name, &part)?;
            parts.push(part);
        }
        if reused > 0 {
            eprintln!(
                "[{dataset}] {}: {reused} finished splits reused",
                method.name()
            );
        }
        let revisions = crate::experiment::distinct(
            parts
                .iter()
                .map(|p| p.revision.clone())
                .filter(|r| !r.is_empty()),
        );
        Ok(MethodResult {
            method: task.method.clone(),
            dataset: dataset.clone(),
            budget: task.budget,
            // The splits' own times, reused ones included: a resumed row reports its whole cost.
            seconds: parts.iter().map(|p| p.seconds).sum(),
            splits: parts.into_iter().map(|p| p.outcome).collect(),
            revisions,
        })
    }

    fn describe(&self, finished: &Finished<UciTask, MethodResult>) -> String {
        let r = &finished.row;
        let (ll, se) = r.ll();
        format!(
            "[{}] {}: test LL {} over {} split{} ({:.0} s)",
            r.dataset,
            r.method,
            fmt_mean_se(ll, se, 3),
            r.splits.len(),
            if r.splits.len() == 1 { "" } else { "s" },
            r.seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let warnings = &self.warnings;
        write_report(
            self.options,
            &run.rows(),
            run.wall_seconds,
            warnings,
            run.out,
        )
    }
}
