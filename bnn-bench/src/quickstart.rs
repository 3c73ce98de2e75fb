//! The quick start: three posterior families on the heteroscedastic toy, one table, one figure.

use crate::catalogue::Method;
use crate::decomposition::{self, Curves, Fit, Panel, Row};
use crate::runner::{Finished, Harness, ReportInput, RunnerOptions, TaskContext};
use bnn_datasets::toy;
use std::error::Error;
use std::path::Path;

const N_TRAIN: usize = 1000;
const N_TEST: usize = 1000;

/// The three families the quick start shows, in its order (each fit's seed is the run's plus
/// its position), from the catalogue at the toys' settings.
const METHODS: [&str; 3] = ["MFVI-LRT", "Radial", "MC dropout"];

fn methods() -> Vec<Method> {
    METHODS
        .iter()
        .map(|name| crate::catalogue::named(name, &crate::toy::SETTINGS))
        .collect::<Option<_>>()
        .expect("the quick start's methods are in the catalogue")
}

/// Options of the quick start (the `bnn-bench quickstart` command line).
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct QuickstartOptions {
    /// Seed for data, initialisation and training.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Training epochs per method.
    #[arg(long, default_value_t = 1500)]
    pub epochs: usize,
    /// The output folder (resuming and workers as every harness).
    #[serde(flatten)]
    #[command(flatten)]
    pub run: RunnerOptions,
}

/// [`run_with`] into a fresh `out`, with `seed` and `epochs`.
///
/// # Errors
/// As [`run_with`].
pub fn run(out: &Path, seed: u64, epochs: usize) -> Result<(), Box<dyn Error>> {
    run_with(&QuickstartOptions {
        seed,
        epochs,
        run: RunnerOptions::new(out),
    })
}

/// Trains MFVI (local reparameterisation), radial and MC dropout (2 × 50 ReLU, `epochs` each)
/// on 1 000 points of the heteroscedastic toy `y = 7 sin x + 3|cos(x/2)|·ε` (Depeweg 2019
/// eq. 4.1; data `seed`), and writes to `out` the test LL and RMSE on 1 000 fresh points beside
/// the true model's (`results.md`, `results.json`) and the predictive mean with its aleatoric
/// and epistemic ±2σ bands (`quickstart.svg`). Each fit is a task of the bench's runner
/// ([`crate::runner`]): the folder is locked while it runs, and every file is written whole.
///
/// # Errors
/// `epochs` 0, an `out` that cannot be written or that another run holds, or a fit that fails.
pub fn run_with(options: &QuickstartOptions) -> Result<(), Box<dyn Error>> {
    let QuickstartOptions { seed, epochs, .. } = *options;
    options.run.check()?;
    if epochs == 0 {
        return Err("--epochs must be at least 1".into());
    }
    let harness = Quickstart {
        seed,
        epochs,
        train_set: toy::heteroscedastic(N_TRAIN, seed),
        test_set: toy::heteroscedastic(N_TEST, seed + 1),
        methods: methods(),
    };
    crate::runner::run(&harness, &options.run)?;
    Ok(())
}

/// The quick start's three fits.
struct Quickstart {
    seed: u64,
    epochs: usize,
    train_set: toy::Regression1d,
    test_set: toy::Regression1d,
    methods: Vec<Method>,
}

/// The x grid of the figure.
fn grid() -> Vec<f64> {
    (0..241).map(|i| -6.0 + 12.0 * i as f64 / 240.0).collect()
}

impl Harness for Quickstart {
    type Task = usize;
    type Row = (Row, Curves);

    const NAME: &'static str = "quickstart";
    const FORMAT: u32 = 1;

    fn tasks(&self) -> Vec<usize> {
        (0..self.methods.len()).collect()
    }

    fn task_id(&self, i: &usize) -> String {
        self.methods[*i].name.to_string()
    }

    fn run_key(&self) -> serde_json::Value {
        serde_json::json!({ "seed": self.seed, "epochs": self.epochs })
    }

    fn task_key(&self, _: &usize) -> serde_json::Value {
        serde_json::json!({})
    }

    fn run_task(&self, &i: &usize, _: &TaskContext) -> Result<(Row, Curves), Box<dyn Error>> {
        let fit = Fit {
            hidden: [50, 50],
            epochs: self.epochs,
            seed: self.seed + i as u64,
        };
        decomposition::fit_and_draw(
            &self.methods[i],
            &self.train_set,
            &self.test_set,
            &grid(),
            fit,
        )
    }

    fn describe(&self, f: &Finished<usize, (Row, Curves)>) -> String {
        let r = &f.row.0;
        format!(
            "[quickstart] {}: test LL {:.3}, RMSE {:.3} ({:.1} s)",
            r.method, r.test_ll, r.test_rmse, r.train_seconds
        )
    }

    fn report(&self, run: ReportInput<'_, Self>) -> Result<(), Box<dyn Error>> {
        let (finished, out) = (run.rows, run.out);
        let rows: Vec<&Row> = finished.iter().map(|f| &f.row.0).collect();
        let oracle = toy::heteroscedastic_oracle_log_likelihood(&self.test_set);
        let mut table = String::from(
            "| method | test log-likelihood | test RMSE | train time (s) |\n|---|---|---|---|\n",
        );
        for r in &rows {
            table += &format!(
                "| {} | {:.3} | {:.3} | {:.1} |\n",
                r.method, r.test_ll, r.test_rmse, r.train_seconds
            );
        }
        table += &format!("| true model (oracle) | {oracle:.3} | – | – |\n");
        println!("{table}");
        let record = serde_json::json!({
            "experiment": "quickstart",
            "dataset": "heteroscedastic toy (Depeweg 2019 eq. 4.1), x ~ U[-4, 4]",
            "n_train": N_TRAIN, "n_test": N_TEST, "seed": self.seed, "epochs": self.epochs,
            "backend": bnn_burn::backend_name(),
            "version": env!("CARGO_PKG_VERSION"),
            "prediction_samples": decomposition::PRED_SAMPLES,
            "oracle_test_ll": oracle,
            "results": rows,
        });
        out.write_record("results.json", &record)?;
        out.write("results.md", table.as_bytes())?;
        let panels: Vec<Panel> = finished
            .iter()
            .map(|f| Panel {
                title: f.row.0.method.clone(),
                data: &self.train_set,
                curves: &f.row.1,
                x_range: (-6.0, 6.0),
                y_range: (-20.0, 20.0),
            })
            .collect();
        crate::plots::write_svg(out, "quickstart.svg", |p| {
            decomposition::plot(p, &panels, panels.len())
        })?;
        eprintln!(
            "wrote {}, {} and {}",
            out.join("results.md").display(),
            out.join("results.json").display(),
            out.join("quickstart.svg").display()
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn quickstart_writes_its_table_record_and_figure() {
        let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
        let dir = std::env::temp_dir().join(format!("bnn-quickstart-{}", std::process::id()));
        super::run(&dir, 3, 5).expect("quick start runs");
        let table = std::fs::read_to_string(dir.join("results.md")).unwrap();
        for method in ["MFVI-LRT", "Radial", "MC dropout", "oracle"] {
            assert!(table.contains(method), "table lacks {method}:\n{table}");
        }
        let record: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap())
                .unwrap();
        let rows = record["results"].as_array().unwrap();
        assert_eq!(rows.len(), 3);
        assert!(
            rows.iter()
                .all(|r| r["test_ll"].as_f64().unwrap().is_finite())
        );
        let svg = std::fs::read_to_string(dir.join("quickstart.svg")).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("polygon"),
            "not an SVG with bands"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
