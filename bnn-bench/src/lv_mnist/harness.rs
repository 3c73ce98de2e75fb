//! The three models on the runner: a task per scenario (standard, label noise, subsampled).

use super::*;
use crate::runner::{Finished, Harness, ReportInput, TaskContext};
use std::cell::RefCell;

/// The scenarios' training sets and the test images.
pub(crate) struct LvMnistHarness<'a> {
    options: &'a LvMnistOptions,
    sets: Vec<(String, ImageSet)>,
    test: &'a ImageSet,
    /// Digest of every training set and the test images.
    digest: String,
    /// The report of the last run.
    pub(crate) report: RefCell<Option<LvMnistReport>>,
}

impl<'a> LvMnistHarness<'a> {
    pub(crate) fn new(
        options: &'a LvMnistOptions,
        sets: Vec<(String, ImageSet)>,
        test: &'a ImageSet,
    ) -> Self {
        let digest = crate::experiment::image_digest(sets.iter().map(|(_, s)| s).chain([test]));
        Self {
            options,
            sets,
            test,
            digest,
            report: RefCell::new(None),
        }
    }
}

impl Harness for LvMnistHarness<'_> {
    type Task = usize;
    type Row = ScenarioResult;

    const NAME: &'static str = "lv-mnist";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<usize> {
        (0..self.sets.len()).collect()
    }

    fn task_id(&self, &k: &usize) -> String {
        self.sets[k].0.clone()
    }

    fn run_key(&self) -> serde_json::Value {
        let o = self.options;
        serde_json::json!({
            "seed": o.seed,
            "epochs": o.epochs,
            "train_samples": o.train_samples,
            "n_w": o.n_w,
            "n_z": o.n_z,
            "data": self.digest,
        })
    }

    fn task_key(&self, _: &usize) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, &k: &usize, _: &TaskContext) -> Result<ScenarioResult, Box<dyn Error>> {
        let (name, set) = &self.sets[k];
        run_scenario(k, name, set, self.test, self.options)
    }

    fn describe(&self, f: &Finished<usize, ScenarioResult>) -> String {
        let r = &f.row;
        format!(
            "[lv-mnist] {}: error {:.2} %, LL {:.4}, misclassification AUROC {:.3} ({:.0} s)",
            r.scenario, r.error_pct, r.log_likelihood, r.misclassification_auroc, r.train_seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let (scenarios, out) = (run.rows(), run.out);
        let report = LvMnistReport {
            options: self.options.clone(),
            findings: findings(&scenarios),
            scenarios,
            backend: bnn_burn::backend_name().to_string(),
            revision: experiment::git_revision(),
            wall_seconds: run.wall_seconds,
        };
        out.write_record("lv-mnist.json", &serde_json::to_value(&report)?)?;
        out.write("lv-mnist.md", markdown(&report).as_bytes())?;
        crate::plots::write_svg(out, "lv-mnist.svg", |p| plot(p, &report))?;
        *self.report.borrow_mut() = Some(report);
        Ok(())
    }
}
