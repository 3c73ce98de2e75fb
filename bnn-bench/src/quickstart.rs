//! The quick start: three posterior families on the heteroscedastic toy, one table, one figure.

use bnn_burn::host::{matrix, to_vec};
use bnn_burn::layers::{DropoutNoise, Estimator};
use bnn_burn::metrics::{mean, rmse};
use bnn_burn::model::{LayerKind, Regressor};
use bnn_burn::train::{TrainConfig, train};
use bnn_burn::{Prior, training_device};
use bnn_datasets::Standardizer;
use bnn_datasets::toy::{self, Regression1d};
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use plotters::prelude::*;
use std::error::Error;
use std::path::Path;

const N_TRAIN: usize = 1000;
const N_TEST: usize = 1000;
const PRED_SAMPLES: usize = 200;

/// One method's results.
#[derive(serde::Serialize)]
struct Row {
    method: String,
    test_ll: f64,
    test_rmse: f64,
    train_seconds: f64,
}

/// Curves for the figure, in original units.
struct Curves {
    x: Vec<f64>,
    mean: Vec<f64>,
    aleatoric_std: Vec<f64>,
    total_std: Vec<f64>,
}

fn methods() -> Vec<LayerKind> {
    vec![
        LayerKind::MeanField {
            estimator: Estimator::LocalReparameterization,
            prior: Prior::gaussian(1.0),
            rho_init: -5.0,
        },
        LayerKind::Radial {
            prior: Prior::gaussian(1.0),
            rho_init: -5.0,
        },
        LayerKind::McDropout {
            p: 0.05,
            noise: DropoutNoise::Bernoulli,
            length_scale: 0.1,
        },
    ]
}

pub fn run(out: &Path, seed: u64, epochs: usize) -> Result<(), Box<dyn Error>> {
    std::fs::create_dir_all(out)?;
    let device = training_device();
    let train_set = toy::heteroscedastic(N_TRAIN, seed);
    let test_set = toy::heteroscedastic(N_TEST, seed + 1);
    // Standardise with training statistics; metrics go back to original units.
    let sx = Standardizer::fit(&train_set.x, 1)?;
    let sy = Standardizer::fit(&train_set.y, 1)?;
    let x = matrix(&sx.transform(&train_set.x), 1, &device);
    let y = matrix(&sy.transform(&train_set.y), 1, &device);
    let plain = device.clone().inner();
    let grid: Vec<f64> = (0..241).map(|i| -6.0 + 12.0 * i as f64 / 240.0).collect();

    let mut rows = Vec::new();
    let mut curves = Vec::new();
    for (i, kind) in methods().iter().enumerate() {
        // Initialisation draws from the device RNG: seed it so that reruns are identical.
        device.seed(seed + i as u64);
        let model = Regressor::new(1, vec![50, 50], 1, *kind, true, &device)?;
        let config = TrainConfig::new(epochs)
            .with_batch_size(100)
            .with_learning_rate(3e-3)
            .with_train_samples(1)
            .with_seed(seed + i as u64);
        eprintln!("training {} ({epochs} epochs)", kind.name());
        let (model, report) = train(model, x.clone(), y.clone(), &config)?;
        let model = model.valid();
        let (ll, err) = evaluate(&model, &test_set, (&sx, &sy), &plain);
        rows.push(Row {
            method: kind.name().to_string(),
            test_ll: ll,
            test_rmse: err,
            train_seconds: report.seconds,
        });
        let pred = model.predict(matrix(&sx.transform(&grid), 1, &plain), PRED_SAMPLES);
        let std_of = |var: Tensor<2>| {
            sy.inverse_scale(&to_vec(var).iter().map(|v| v.sqrt()).collect::<Vec<_>>())
        };
        let mean = sy.inverse(&to_vec(pred.predictive_mean()));
        let ale = std_of(pred.aleatoric_variance());
        let tot = std_of(pred.predictive_variance());
        curves.push((
            kind.name(),
            Curves {
                x: grid.clone(),
                mean,
                aleatoric_std: ale,
                total_std: tot,
            },
        ));
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
        "prediction_samples": PRED_SAMPLES,
        "oracle_test_ll": oracle,
        "results": rows,
    });
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&record)?,
    )?;
    let figure = out.join("quickstart.svg");
    plot(&figure, &train_set, &curves)?;
    eprintln!(
        "wrote {}, {} and {}",
        out.join("results.md").display(),
        out.join("results.json").display(),
        figure.display()
    );
    Ok(())
}

/// Test log-likelihood (mixture over samples, original units) and RMSE of the predictive mean.
fn evaluate(
    model: &Regressor,
    test: &Regression1d,
    (sx, sy): (&Standardizer, &Standardizer),
    device: &Device,
) -> (f64, f64) {
    let pred = model.predict(matrix(&sx.transform(&test.x), 1, device), PRED_SAMPLES);
    let y_std = sy.transform(&test.y);
    let ll = to_vec(pred.log_likelihood(matrix(&y_std, 1, device)));
    let ll = mean(&ll) + sy.log_jacobian();
    let m = to_vec(pred.predictive_mean());
    (ll, rmse(&m, &y_std, sy.std[0]))
}

fn plot(path: &Path, data: &Regression1d, curves: &[(&str, Curves)]) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (420 * curves.len() as u32, 380)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, curves.len()));
    for (area, (name, c)) in panels.iter().zip(curves) {
        let mut chart = ChartBuilder::on(area)
            .caption(*name, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(-6.0..6.0, -20.0..20.0)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("x")
            .y_desc("y")
            .draw()?;
        let band = |k: &dyn Fn(usize) -> f64, sign: f64| {
            c.x.iter()
                .enumerate()
                .map(move |(i, x)| (*x, c.mean[i] + sign * 2.0 * k(i)))
                .collect::<Vec<_>>()
        };
        let total = |i: usize| c.total_std[i];
        let ale = |i: usize| c.aleatoric_std[i];
        let mut outer = band(&total, 1.0);
        outer.extend(band(&total, -1.0).into_iter().rev());
        chart
            .draw_series(std::iter::once(Polygon::new(
                outer,
                RGBColor(255, 160, 122).mix(0.6),
            )))?
            .label("±2σ total (epistemic part)")
            .legend(|(x, y)| {
                Rectangle::new(
                    [(x, y - 5), (x + 12, y + 5)],
                    RGBColor(255, 160, 122).filled(),
                )
            });
        let mut inner = band(&ale, 1.0);
        inner.extend(band(&ale, -1.0).into_iter().rev());
        chart
            .draw_series(std::iter::once(Polygon::new(
                inner,
                RGBColor(100, 149, 237).mix(0.6),
            )))?
            .label("±2σ aleatoric")
            .legend(|(x, y)| {
                Rectangle::new(
                    [(x, y - 5), (x + 12, y + 5)],
                    RGBColor(100, 149, 237).filled(),
                )
            });
        chart.draw_series(
            data.x
                .iter()
                .zip(&data.y)
                .step_by(2)
                .map(|(x, y)| Circle::new((*x, *y), 1, BLACK.mix(0.4).filled())),
        )?;
        chart
            .draw_series(LineSeries::new(
                c.x.iter().zip(&c.mean).map(|(x, m)| (*x, *m)),
                BLACK.stroke_width(2),
            ))?
            .label("predictive mean")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], BLACK));
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn quickstart_writes_its_table_record_and_figure() {
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
