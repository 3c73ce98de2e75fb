//! `bnn-bench perf-predict`: what a prediction costs sampling-free (moment propagation) against
//! `S`-sample Monte Carlo through the same trained net, beside the test log-likelihood each
//! gives (Haußmann 2021 ch. 3: moments replace sampling at test time too).
//!
//! Workload: the cubic toy (`y = x³ + ε`, `ε ~ N(0, 3²)`), an MLP 1-200-200-1, trained once per
//! method (MFVI-LRT by sampling, VBP by moments) on 2 000 points; then the 5 000 test points are
//! predicted both ways, each timed as the median of `rounds` repetitions. The ratio is
//! Monte Carlo's time over the moments' time in the same run.

use crate::catalogue::Method;
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::layers::Estimator;
use bnn_burn::nets::{MlpConfig, Regressor};
use bnn_burn::predict::{GaussianPrediction, Predict, PredictMode};
use bnn_burn::train::TrainConfig;
use bnn_datasets::{RegressionData, toy};
use burn::module::Module;
use std::error::Error;
use std::path::PathBuf;
use std::time::Instant;

const N_TRAIN: usize = 2_000;
const N_TEST: usize = 5_000;
const HIDDEN: [usize; 2] = [200, 200];

/// Settings of one run.
#[derive(Debug, Clone, serde::Serialize, clap::Args)]
pub struct PredictOptions {
    /// Output folder for perf-predict.md and perf-predict.json.
    #[arg(long, default_value = "runs/perf-predict")]
    pub out: PathBuf,
    /// Seed of data, initialisation and training.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Training epochs per method.
    #[arg(long, default_value_t = 300)]
    pub epochs: usize,
    /// Monte Carlo draws of the sampled prediction.
    #[arg(long, default_value_t = 100)]
    pub samples: usize,
    /// Timed repetitions of each prediction (the median is reported).
    #[arg(long, default_value_t = 11)]
    pub rounds: usize,
}

/// One trained net, predicted both ways.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PredictRow {
    /// The method the net was trained with.
    pub method: String,
    /// Milliseconds of the moment prediction of the test set (median round).
    pub moments_ms: f64,
    /// Milliseconds of the `samples`-draw Monte Carlo prediction (median round).
    pub samples_ms: f64,
    /// `samples_ms / moments_ms`.
    pub speedup: f64,
    /// Test LL per point (original units) by moments.
    pub moments_ll: f64,
    /// Test LL per point by Monte Carlo.
    pub samples_ll: f64,
    /// Test RMSE by moments.
    pub moments_rmse: f64,
    /// Test RMSE by Monte Carlo.
    pub samples_rmse: f64,
}

fn validate(o: &PredictOptions) -> Result<(), Box<dyn Error>> {
    for (flag, v) in [
        ("--epochs", o.epochs),
        ("--samples", o.samples),
        ("--rounds", o.rounds),
    ] {
        if v == 0 {
            return Err(format!("{flag} must be at least 1").into());
        }
    }
    Ok(())
}

/// Trains every method, times both predictions, writes the report.
///
/// # Errors
/// Bad options (before any work), an unwritable `--out`, a failed fit, a non-finite score.
pub fn run(o: &PredictOptions) -> Result<Vec<PredictRow>, Box<dyn Error>> {
    validate(o)?;
    let folder = crate::runner::OutFolder::open(&o.out, "--out")?;
    let start = Instant::now();
    let train_raw: RegressionData = toy::cubic(N_TRAIN, o.seed).into();
    let test_raw: RegressionData = toy::cubic(N_TEST, o.seed + 1).into();
    let (sx, sy) = train_raw.fit_standardizers()?;
    let train = train_raw.standardized(&sx, &sy)?;
    let test = test_raw.standardized(&sx, &sy)?;
    let mut rows = Vec::new();
    for method in [
        Method::mean_field(Estimator::LocalReparameterization),
        Method::vbp(10.0),
    ] {
        let model = fit(&method, &train, o)?;
        let device = model.devices()[0].clone();
        let x = matrix(&test.x, 1, &device);
        let y = matrix(&test.y, 1, &device);
        let time = |mode: PredictMode| -> Result<(f64, GaussianPrediction), Box<dyn Error>> {
            let mut times = Vec::new();
            let mut last = None;
            // One untimed call first: allocations and kernels warm up.
            model.predict(x.clone(), mode)?;
            for _ in 0..o.rounds {
                let start = Instant::now();
                let p = model.predict(x.clone(), mode)?;
                // Read the result back so that lazy backends finish the work inside the timer.
                to_vec(p.mean().sum());
                times.push(start.elapsed().as_secs_f64() * 1e3);
                last = Some(p);
            }
            times.sort_by(f64::total_cmp);
            Ok((times[times.len() / 2], last.expect("rounds ≥ 1")))
        };
        let (moments_ms, by_moments) = time(PredictMode::Moments)?;
        let (samples_ms, by_samples) = time(PredictMode::Samples(o.samples))?;
        let m = by_moments.scores(y.clone(), &sy.std);
        let s = by_samples.scores(y, &sy.std);
        let row = PredictRow {
            method: method.name.to_string(),
            moments_ms,
            samples_ms,
            speedup: samples_ms / moments_ms,
            moments_ll: m.log_likelihood,
            samples_ll: s.log_likelihood,
            moments_rmse: m.rmse,
            samples_rmse: s.rmse,
        };
        if ![
            row.moments_ll,
            row.samples_ll,
            row.moments_rmse,
            row.samples_rmse,
        ]
        .iter()
        .all(|v| v.is_finite())
        {
            return Err(format!(
                "perf-predict: {} gave a non-finite score: {row:?}",
                row.method
            )
            .into());
        }
        eprintln!(
            "[{}] moments {:.2} ms (LL {:.3}), {} samples {:.2} ms (LL {:.3}): {:.1}×",
            row.method,
            row.moments_ms,
            row.moments_ll,
            o.samples,
            row.samples_ms,
            row.samples_ll,
            row.speedup
        );
        rows.push(row);
    }
    write_report(&folder, o, &rows, start.elapsed().as_secs_f64())?;
    Ok(rows)
}

fn fit(
    method: &Method,
    train: &RegressionData,
    o: &PredictOptions,
) -> Result<Regressor, Box<dyn Error>> {
    let device = bnn_burn::training_device();
    let build =
        |d: &burn::tensor::Device| method.regressor(MlpConfig::new(1, HIDDEN.to_vec(), 1), 0.5, d);
    let x = matrix(&train.x, 1, &device);
    let y = matrix(&train.y, 1, &device);
    let config = TrainConfig::new(o.epochs)
        .with_batch_size(64)
        .with_learning_rate(if method.predicts_by_moments() {
            1e-2
        } else {
            3e-3
        })
        .with_seed(o.seed)
        .with_progress(false);
    let (model, _) = method
        .regression_trainer(config, &x, &y)?
        .build_and_fit(build, (x, y))?;
    Ok(model.valid())
}

fn write_report(
    folder: &crate::runner::OutFolder,
    o: &PredictOptions,
    rows: &[PredictRow],
    wall_seconds: f64,
) -> Result<(), Box<dyn Error>> {
    let mut md = format!(
        "# Prediction cost: moments vs {s}-sample Monte Carlo\n\n\
         Cubic toy, MLP 1-{h0}-{h1}-1, {N_TEST} test points, {N_TRAIN} training points, \
         {e} epochs, seed {seed}, backend `{b}`, revision `{rev}`; median of {r} timed predictions each (after \
         one untimed call). Speed-up = Monte Carlo time / moment time, measured in this run.\n\n\
         | trained as | moments (ms) | {s} samples (ms) | speed-up | test LL, moments | \
         test LL, samples | LL difference | RMSE, moments | RMSE, samples |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        s = o.samples,
        h0 = HIDDEN[0],
        h1 = HIDDEN[1],
        e = o.epochs,
        seed = o.seed,
        b = bnn_burn::backend_name(),
        rev = crate::experiment::git_revision(),
        r = o.rounds,
    );
    for r in rows {
        md += &format!(
            "| {} | {:.2} | {:.2} | {:.1}× | {:.3} | {:.3} | {:+.3} | {:.3} | {:.3} |\n",
            r.method,
            r.moments_ms,
            r.samples_ms,
            r.speedup,
            r.moments_ll,
            r.samples_ll,
            r.moments_ll - r.samples_ll,
            r.moments_rmse,
            r.samples_rmse
        );
    }
    folder.write("perf-predict.md", md.as_bytes())?;
    let extra = serde_json::json!({ "n_train": N_TRAIN, "n_test": N_TEST, "hidden": HIDDEN });
    let record = crate::experiment::record("perf-predict", o, wall_seconds, &rows, extra);
    folder.write_record("perf-predict.json", &record)?;
    println!("{md}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_refused_before_any_work() {
        let dir = std::env::temp_dir().join("bnn-perf-predict-bad");
        let o = PredictOptions {
            out: dir.clone(),
            seed: 0,
            epochs: 1,
            samples: 0,
            rounds: 1,
        };
        let err = run(&o).unwrap_err().to_string();
        assert!(err.contains("--samples"), "{err}");
        assert!(!dir.join("perf-predict.md").exists());
    }

    #[test]
    fn a_small_run_reports_both_predictions() {
        let _guard = bnn_burn::testing::seeded(&bnn_burn::device(), 0);
        let dir = std::env::temp_dir().join(format!("bnn-perf-predict-{}", std::process::id()));
        let o = PredictOptions {
            out: dir.clone(),
            seed: 1,
            epochs: 2,
            samples: 10,
            rounds: 1,
        };
        let rows = run(&o).unwrap();
        assert_eq!(rows.len(), 2);
        assert!(
            rows.iter()
                .all(|r| r.moments_ms > 0.0 && r.samples_ms > 0.0)
        );
        assert!(
            std::fs::read_to_string(dir.join("perf-predict.md"))
                .unwrap()
                .contains("speed-up")
        );
        std::fs::remove_dir_all(dir).ok();
    }
}
