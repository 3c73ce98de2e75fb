//! The MNIST/OOD protocol on the runner: a task is a method as one architecture; its training
//! state is saved every minute in the task's state folder, so an interrupted row continues
//! from its last saved epoch.

use super::*;
use crate::runner::{Finished, Harness, ReportInput, TaskContext};
use bnn_burn::integrity::Digest;

/// Version of the rows' format.
const FORMAT: u32 = 1;

/// A row of the tables: a method as one architecture.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct MnistTask {
    /// The network shape.
    pub arch: Arch,
    /// The method's name.
    pub method: String,
}

/// The protocol with its methods, architectures and loaded images.
pub(crate) struct MnistHarness<'a> {
    options: &'a MnistOptions,
    methods: Vec<&'a Method>,
    archs: Vec<Arch>,
    data: MnistData,
    /// Digest of every image and label of the run.
    digest: String,
}

impl<'a> MnistHarness<'a> {
    pub(crate) fn new(
        options: &'a MnistOptions,
        methods: Vec<&'a Method>,
        archs: Vec<Arch>,
        data: MnistData,
    ) -> Self {
        let mut digest = Digest::new();
        digest.text(data.family.name());
        for set in [
            &data.train,
            &data.test,
            &data.ood,
            &data.noise,
            &data.inverted,
        ] {
            digest
                .text(&format!("{:?} {}", set.shape(), set.n_classes))
                .number(set.pixels.len() as u64)
                .update(&set.pixels)
                .number(set.labels.len() as u64)
                .update(&set.labels);
        }
        Self {
            options,
            methods,
            archs,
            data,
            digest: digest.hex(),
        }
    }

    fn method(&self, name: &str) -> &Method {
        crate::runner::of_task::<&Method>(&self.methods, "method", |m| m.name == name)
    }
}

impl Harness for MnistHarness<'_> {
    type Task = MnistTask;
    type Row = MnistResult;

    const NAME: &'static str = "mnist";
    const FORMAT: u32 = FORMAT;

    fn tasks(&self) -> Vec<MnistTask> {
        crate::runner::grid(&self.archs, &self.methods, |&arch, m| MnistTask {
            arch,
            method: m.name.to_string(),
        })
    }

    fn task_id(&self, task: &MnistTask) -> String {
        format!("{} / {}", task.arch.name(), task.method)
    }

    fn run_key(&self) -> serde_json::Value {
        serde_json::json!({
            "seed": self.options.exp.seed,
            "family": self.options.family,
            "epochs": self.options.epochs(),
            "prediction_samples": self.options.prediction_samples,
            "batch_size": self.options.batch_size,
            "n_train": self.data.train.len(),
            "n_test": self.data.test.len(),
            "n_ood": self.data.ood.len(),
            "data": self.digest,
        })
    }

    fn task_key(&self, _task: &MnistTask) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(
        &self,
        task: &MnistTask,
        context: &TaskContext,
    ) -> Result<MnistResult, Box<dyn Error>> {
        let method = self.method(&task.method);
        let (arch, epochs) = (task.arch, self.options.epochs());
        let seed = experiment::derive(self.options.exp.seed, &[arch.name(), method.name], 0);
        eprintln!(
            "[mnist] {} / {}: training {} epochs on {} images{}",
            arch.name(),
            method.name,
            epochs,
            self.data.train.len(),
            match context.resume && context.state.join("state.json").is_file() {
                true => " (resuming its saved training state)",
                false => "",
            }
        );
        let budget = RowBudget {
            epochs,
            batch_size: self.options.batch_size,
            samples: self.options.prediction_samples,
            seed,
        };
        run_one(arch, method, &self.data, budget, Some(&context.state))
    }

    fn describe(&self, finished: &Finished<MnistTask, MnistResult>) -> String {
        let r = &finished.row;
        format!(
            "[mnist] {} / {}: error {:.2} %, NLL {:.4}, ECE {:.4}, AUROC(H) {:.3}, AUROC(MI) \
             {:.3}, ECDF area {:.3} ({:.0} s)",
            r.arch.name(),
            r.method,
            r.error_pct,
            r.nll,
            r.ece,
            r.auroc_entropy,
            r.auroc_mi,
            r.ecdf_area,
            r.train_seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        write_report(
            self.options,
            &self.data,
            &run.rows(),
            run.wall_seconds,
            run.out,
        )
    }

    fn room(&self) -> u64 {
        // Records and figures, and one row's training state (parameters, Adam's moments).
        128 << 20
    }
}
