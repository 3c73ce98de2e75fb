//! The quick start: three posterior families on the heteroscedastic toy, one table, one figure.

use crate::decomposition::{self, Fit, Panel};
use crate::methods::Method;
use bnn_burn::layers::Estimator;
use bnn_datasets::toy;
use std::error::Error;
use std::path::Path;

const N_TRAIN: usize = 1000;
const N_TEST: usize = 1000;

fn methods() -> Vec<Method> {
    vec![
        Method::mean_field(Estimator::LocalReparameterization),
        Method::radial(),
        Method::mc_dropout(0.05, 0.1),
    ]
}

/// Trains MFVI (local reparameterisation), radial and MC dropout (2 × 50 ReLU, `epochs` each)
/// on 1 000 points of the heteroscedastic toy `y = 7 sin x + 3|cos(x/2)|·ε` (Depeweg 2019
/// eq. 4.1; data `seed`), and writes to `out` the test LL and RMSE on 1 000 fresh points beside
/// the true model's (`results.md`, `results.json`) and the predictive mean with its aleatoric
/// and epistemic ±2σ bands (`quickstart.svg`).
///
/// # Errors
/// `epochs` 0, an `out` that cannot be written, or a fit that fails.
pub fn run(out: &Path, seed: u64, epochs: usize) -> Result<(), Box<dyn Error>> {
    if epochs == 0 {
        return Err("--epochs must be at least 1".into());
    }
    crate::experiment::prepare_out(out)?;
    let train_set = toy::heteroscedastic(N_TRAIN, seed);
    let test_set = toy::heteroscedastic(N_TEST, seed + 1);
    let grid: Vec<f64> = (0..241).map(|i| -6.0 + 12.0 * i as f64 / 240.0).collect();

    let mut rows = Vec::new();
    let mut curves = Vec::new();
    for (i, method) in methods().iter().enumerate() {
        let fit = Fit {
            hidden: [50, 50],
            epochs,
            seed: seed + i as u64,
        };
        let (row, c) = decomposition::fit_and_draw(method, &train_set, &test_set, &grid, fit)?;
        rows.push(row);
        curves.push(c);
    }

    let oracle = toy::heteroscedastic_oracle_log_likelihood(&test_set);
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
    std::fs::write(out.join("results.md"), &table)?;
    let record = serde_json::json!({
        "experiment": "quickstart",
        "dataset": "heteroscedastic toy (Depeweg 2019 eq. 4.1), x ~ U[-4, 4]",
        "n_train": N_TRAIN, "n_test": N_TEST, "seed": seed, "epochs": epochs,
        "backend": bnn_burn::backend_name(),
        "version": env!("CARGO_PKG_VERSION"),
        "prediction_samples": decomposition::PRED_SAMPLES,
        "oracle_test_ll": oracle,
        "results": rows,
    });
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&record)?,
    )?;
    let figure = out.join("quickstart.svg");
    let panels: Vec<Panel> = rows
        .iter()
        .zip(&curves)
        .map(|(r, c)| Panel {
            title: r.method.clone(),
            data: &train_set,
            curves: c,
            x_range: (-6.0, 6.0),
            y_range: (-20.0, 20.0),
        })
        .collect();
    decomposition::plot(&figure, &panels, panels.len())?;
    eprintln!(
        "wrote {}, {} and {}",
        out.join("results.md").display(),
        out.join("results.json").display(),
        figure.display()
    );
    Ok(())
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
