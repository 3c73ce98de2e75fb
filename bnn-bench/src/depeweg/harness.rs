//! The tables on the runner: a task is one model on one split of one set.

use super::*;
use crate::runner::{Finished, Harness, ReportInput, TaskContext};
use bnn_burn::integrity::Digest;
use std::cell::RefCell;
use std::time::Instant;

/// Version of the rows' format.
const FORMAT: u32 = 1;

/// One fit of the tables: a model on one split of a set.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DepewegTask {
    /// The set's name.
    pub dataset: String,
    /// The model's name.
    pub model: String,
    /// The split (0-based).
    pub split: usize,
}

/// The protocol with its loaded sets and selected models.
pub(crate) struct DepewegHarness<'a> {
    options: &'a DepewegOptions,
    /// Each set with all its rows and their digest.
    data: Vec<(DepewegSet, RegressionData, String)>,
    models: Vec<DepewegModel>,
    /// The table of the last report.
    pub(crate) table: RefCell<Vec<TableRow>>,
}

impl<'a> DepewegHarness<'a> {
    pub(crate) fn new(
        options: &'a DepewegOptions,
        data: Vec<(DepewegSet, RegressionData)>,
        models: Vec<DepewegModel>,
    ) -> Self {
        let data = data
            .into_iter()
            .map(|(set, rows)| {
                let digest = Digest::new()
                    .floats(&rows.x)
                    .floats(&rows.y)
                    .number(rows.n_features as u64)
                    .hex();
                (set, rows, digest)
            })
            .collect();
        Self {
            options,
            data,
            models,
            table: RefCell::new(Vec::new()),
        }
    }

    fn set(&self, name: &str) -> &(DepewegSet, RegressionData, String) {
        crate::runner::of_task(&self.data, "data set", |(s, _, _)| s.name() == name)
    }
}

impl Harness for DepewegHarness<'_> {
    type Task = DepewegTask;
    type Row = SplitRow;

    const NAME: &'static str = "depeweg";
    const FORMAT: u32 = FORMAT;

    fn tasks(&self) -> Vec<DepewegTask> {
        let splits: Vec<usize> = (0..self.options.splits).collect();
        let pairs = crate::runner::grid(&self.data, &self.models, |(set, ..), model| {
            (set.name(), model.name)
        });
        crate::runner::grid(&pairs, &splits, |&(dataset, model), &split| DepewegTask {
            dataset: dataset.into(),
            model: model.into(),
            split,
        })
    }

    fn task_id(&self, task: &DepewegTask) -> String {
        format!("{} / {} / split {}", task.dataset, task.model, task.split)
    }

    fn run_key(&self) -> serde_json::Value {
        serde_json::json!({ "seed": self.options.seed, "budget": self.options.budget })
    }

    fn task_key(&self, task: &DepewegTask) -> serde_json::Value {
        serde_json::json!({ "data": self.set(&task.dataset).2 })
    }

    fn run_task(&self, task: &DepewegTask, _: &TaskContext) -> Result<SplitRow, Box<dyn Error>> {
        let t = Instant::now();
        let (set, all, _) = self.set(&task.dataset);
        let model = crate::runner::of_task(&MODELS, "model", |m| m.name == task.model);
        let k = task.split;
        let (train_rows, test_rows) = random_split(all.len(), self.options.seed, *set, k);
        let train = all.select(&train_rows)?;
        let test = all.select(&test_rows)?;
        let seed = experiment::derive(self.options.seed, &[set.name(), model.name], k as u64);
        eprintln!(
            "[depeweg] {} / {} split {}/{}: {} epochs on {} rows",
            set.name(),
            model.name,
            k + 1,
            self.options.splits,
            self.options.budget.epochs,
            train.len()
        );
        let hidden = [set.hidden(); 2];
        let wide = self.options.budget.test_draws * WIDE_DRAWS_FACTOR;
        let fit = fit_and_score(
            model,
            &hidden,
            &train,
            &test,
            &self.options.budget,
            seed,
            wide,
        )?;
        Ok(SplitRow {
            dataset: set.name().into(),
            model: model.name.into(),
            split: k,
            seed: self.options.seed,
            budget: self.options.budget,
            n_train: train.len(),
            test_ll: fit.test_ll,
            test_rmse: fit.test_rmse,
            coverage_90: Some(fit.coverage_90),
            conformal_coverage_90: fit.conformal_coverage_90,
            noise_std: fit.noise_std,
            wide: fit.wide,
            seconds: t.elapsed().as_secs_f64(),
            git_revision: experiment::git_revision(),
        })
    }

    fn describe(&self, finished: &Finished<DepewegTask, SplitRow>) -> String {
        let r = &finished.row;
        format!(
            "[depeweg] {} / {} split {}: test LL {:.3}{}, RMSE {:.4}, {:.0} s",
            r.dataset,
            r.model,
            r.split + 1,
            r.test_ll,
            r.wide
                .map(|(t, ll)| format!(" ({ll:.3} with {t} draws)"))
                .unwrap_or_default(),
            r.test_rmse,
            r.seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let table = write_report(self.options, run.rows(), run.wall_seconds, run.out)?;
        *self.table.borrow_mut() = table;
        Ok(())
    }
}
