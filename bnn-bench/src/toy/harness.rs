//! The toys on the runner: a task is one method on one toy, BNN+LV on one toy, or BNN+LV's
//! wet-chicken maps.

use super::*;
use crate::runner::{Finished, Harness, ReportInput, TaskContext};
use bnn_burn::integrity::Digest;
use std::cell::RefCell;

/// Version of the rows' format.
const FORMAT: u32 = 1;

/// One fit of the figure.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum ToyTask {
    /// A catalogue method on a toy.
    Fit {
        /// The toy's name.
        toy: String,
        /// The method's name.
        method: String,
    },
    /// BNN+LV on a toy, with its decomposition.
    Lv {
        /// The toy's name.
        toy: String,
    },
    /// BNN+LV on wet-chicken, with the maps of its decomposition.
    WetChicken,
}

/// What a task measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum ToyRow {
    /// A method's row and bands.
    Fit {
        /// The table row.
        result: ToyResult,
        /// The bands of `toy.svg`.
        curves: Curves,
    },
    /// BNN+LV's row, bands and both forms of its decomposition.
    Lv {
        /// The table row.
        result: ToyResult,
        /// The bands of `toy.svg`.
        curves: Curves,
        /// The curves of `toy-lv.svg`.
        lv: LvCurves,
    },
    /// The wet-chicken maps.
    WetChicken(lv::WetChickenMaps),
}

/// The toys with the selected methods.
pub(crate) struct ToyHarness<'a> {
    options: &'a ToyOptions,
    methods: Vec<&'a Method>,
    want_lv: bool,
    toys: Vec<Toy>,
    /// Digest of each toy's training and test points.
    digests: Vec<String>,
    /// The table rows of the last report.
    pub(crate) results: RefCell<Vec<ToyResult>>,
}

impl<'a> ToyHarness<'a> {
    pub(crate) fn new(options: &'a ToyOptions, methods: Vec<&'a Method>, want_lv: bool) -> Self {
        let toys = toys(options.exp.seed);
        let digests = toys
            .iter()
            .map(|t| {
                Digest::new()
                    .floats(&t.train.x)
                    .floats(&t.train.y)
                    .floats(&t.test.x)
                    .floats(&t.test.y)
                    .hex()
            })
            .collect();
        Self {
            options,
            methods,
            want_lv,
            toys,
            digests,
            results: RefCell::new(Vec::new()),
        }
    }

    fn toy(&self, name: &str) -> (&Toy, &str) {
        let i = self
            .toys
            .iter()
            .position(|t| t.name == name)
            .expect("a task's toy exists");
        (&self.toys[i], &self.digests[i])
    }

    /// The plotting grid of toy `t`.
    fn grid(t: &Toy) -> Vec<f64> {
        (0..=240)
            .map(|i| t.x_range.0 + (t.x_range.1 - t.x_range.0) * i as f64 / 240.0)
            .collect()
    }

    /// Wet-chicken's transitions and grid side (fewer with `--quick`).
    fn wet_chicken_size(&self) -> (usize, usize) {
        match self.options.exp.quick {
            true => (2500, 11),
            false => (7500, 21),
        }
    }
}

impl Harness for ToyHarness<'_> {
    type Task = ToyTask;
    type Row = ToyRow;

    const NAME: &'static str = "toy";
    const FORMAT: u32 = FORMAT;

    fn tasks(&self) -> Vec<ToyTask> {
        let mut tasks = Vec::new();
        for t in &self.toys {
            for m in &self.methods {
                tasks.push(ToyTask::Fit {
                    toy: t.name.into(),
                    method: m.name.into(),
                });
            }
            if self.want_lv {
                tasks.push(ToyTask::Lv { toy: t.name.into() });
            }
        }
        if self.want_lv {
            tasks.push(ToyTask::WetChicken);
        }
        tasks
    }

    fn task_id(&self, task: &ToyTask) -> String {
        match task {
            ToyTask::Fit { toy, method } => format!("{toy} / {method}"),
            ToyTask::Lv { toy } => format!("{toy} / {BNN_LV}"),
            ToyTask::WetChicken => format!("wet-chicken / {BNN_LV}"),
        }
    }

    fn run_key(&self) -> serde_json::Value {
        serde_json::json!({
            "seed": self.options.exp.seed,
            "epochs": self.options.epochs(),
            "draws": self.options.draws(),
            "n_train": N_TRAIN,
            "n_test": N_TEST,
        })
    }

    fn task_key(&self, task: &ToyTask) -> serde_json::Value {
        match task {
            ToyTask::Fit { toy, .. } | ToyTask::Lv { toy } => {
                serde_json::json!({ "data": self.toy(toy).1 })
            }
            ToyTask::WetChicken => serde_json::json!({ "size": self.wet_chicken_size() }),
        }
    }

    fn run_task(&self, task: &ToyTask, _: &TaskContext) -> Result<ToyRow, Box<dyn Error>> {
        let (seed, epochs) = (self.options.exp.seed, self.options.epochs());
        match task {
            ToyTask::Fit { toy, method } => {
                let t = self.toy(toy).0;
                let method = crate::runner::of_task(&self.methods, "method", |m| m.name == method);
                let fit = Fit {
                    hidden: [50, 50],
                    epochs,
                    seed: experiment::derive(seed, &[t.name, method.name], 0),
                };
                let grid = Self::grid(t);
                let (row, curves) =
                    decomposition::fit_and_draw(method, &t.train, &t.test, &grid, fit)?;
                let (epistemic_dense, epistemic_sparse, aleatoric_dense) =
                    density_split(&curves, &t.train.x);
                Ok(ToyRow::Fit {
                    result: ToyResult {
                        toy: t.name.to_string(),
                        row,
                        oracle_ll: t.oracle_ll,
                        epistemic_dense,
                        epistemic_sparse,
                        aleatoric_dense,
                    },
                    curves,
                })
            }
            ToyTask::Lv { toy } => {
                let t = self.toy(toy).0;
                let (result, curves, lv) =
                    fit_lv(t, &Self::grid(t), epochs, self.options.draws(), seed)?;
                Ok(ToyRow::Lv { result, curves, lv })
            }
            ToyTask::WetChicken => {
                let (n, side) = self.wet_chicken_size();
                eprintln!("[toy] wet-chicken / {BNN_LV}: {n} transitions, {epochs} epochs");
                let seed = experiment::derive(seed, &["wet-chicken", BNN_LV], 0);
                let draws = self.options.draws();
                Ok(ToyRow::WetChicken(lv::wet_chicken_maps(
                    n, side, epochs, draws, seed,
                )?))
            }
        }
    }

    fn describe(&self, finished: &Finished<ToyTask, ToyRow>) -> String {
        match &finished.row {
            ToyRow::Fit { result: r, .. } | ToyRow::Lv { result: r, .. } => format!(
                "[toy] {} / {}: test LL {:.3} (oracle {:.3}), epistemic std dense {:.3}, \
                 sparse {:.3}",
                r.toy,
                r.row.method,
                r.row.test_ll,
                r.oracle_ll,
                r.epistemic_dense,
                r.epistemic_sparse
            ),
            ToyRow::WetChicken(m) => format!(
                "[toy] wet-chicken / {BNN_LV}: test LL {:.3}, epistemic entropy {:.3} in the \
                 waterfall's corner, {:.3} elsewhere",
                m.test_ll, m.epistemic_top_right, m.epistemic_elsewhere
            ),
        }
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        // Toy by toy, each toy's rows in the order they came.
        let mut ordered: Vec<&ToyRow> = Vec::new();
        for t in &self.toys {
            for f in run.rows {
                if let ToyRow::Fit { result, .. } | ToyRow::Lv { result, .. } = &f.row
                    && result.toy == t.name
                {
                    ordered.push(&f.row);
                }
            }
        }
        let wet = run.rows.iter().find_map(|f| match &f.row {
            ToyRow::WetChicken(m) => Some(m),
            _ => None,
        });
        write_report(self, &ordered, wet, run.out, run.wall_seconds)
    }
}

impl ToyHarness<'_> {
    /// The toys of this run.
    pub(crate) fn toys(&self) -> &[Toy] {
        &self.toys
    }

    /// The run's options.
    pub(crate) fn options(&self) -> &ToyOptions {
        self.options
    }
}
