//! 1-D regression pictures of the uncertainty decomposition, shared by `quickstart` and `toy`:
//! train a heteroscedastic regressor, evaluate it on a test sample, and draw the predictive
//! mean with its ±2σ aleatoric band inside the ±2σ total band (law of total variance,
//! `Var[y] = E_w[σ²] + Var_w[μ]`; Depeweg 2019 §3.2).

use crate::catalogue::Method;
use bnn_burn::host::{matrix, to_vec};
use bnn_burn::likelihood::HeteroscedasticGaussian;
use bnn_burn::nets::{HeteroscedasticRegressor, MlpConfig};
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::train::TrainConfig;
use bnn_burn::training_device;
use bnn_datasets::Standardizer;
use bnn_datasets::toy::Regression1d;
use burn::module::Module;
use burn::tensor::{Device, Tensor};
use plotters::prelude::*;
use std::error::Error;
use std::path::Path;

/// Posterior samples per prediction.
pub const PRED_SAMPLES: usize = 200;

/// One fit's test metrics.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Row {
    /// Method.
    pub method: String,
    /// Mean test log-likelihood, original units.
    pub test_ll: f64,
    /// Test RMSE of the predictive mean, original units.
    pub test_rmse: f64,
    /// Training wall time, s.
    pub train_seconds: f64,
    /// PSIS `k̂` of the fitted posterior against the log joint on the training rows
    /// ([`bnn_burn::inference::network_check`], [`K_HAT_DRAWS`] joint draws): above 0.7 its
    /// importance weights are not to be trusted. `None` where the posterior has no density
    /// (point weights, dropout masks) or the method is not checked.
    #[serde(default)]
    pub k_hat: Option<f64>,
}

/// Joint weight draws of each fit's `k̂`.
pub const K_HAT_DRAWS: usize = 2000;

/// Curves for a figure panel, in original units.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Curves {
    /// Grid of inputs.
    pub x: Vec<f64>,
    /// Predictive mean.
    pub mean: Vec<f64>,
    /// `√E_w[σ²]`.
    pub aleatoric_std: Vec<f64>,
    /// `√(E_w[σ²] + Var_w[μ])`.
    pub total_std: Vec<f64>,
}

impl Curves {
    /// `√Var_w[μ]` on the grid (total minus aleatoric variance).
    pub fn epistemic_std(&self) -> Vec<f64> {
        self.total_std
            .iter()
            .zip(&self.aleatoric_std)
            .map(|(t, a)| (t * t - a * a).max(0.0).sqrt())
            .collect()
    }
}

/// Training settings of one fit.
#[derive(Debug, Clone, Copy)]
pub struct Fit {
    /// Hidden widths.
    pub hidden: [usize; 2],
    /// Epochs.
    pub epochs: usize,
    /// Seed of initialisation, shuffling and sampling.
    pub seed: u64,
}

/// Trains a heteroscedastic regressor of `method` on `train_set` (standardised with its
/// statistics), returns its test metrics and its curves on `grid`.
pub fn fit_and_draw(
    method: &Method,
    train_set: &Regression1d,
    test_set: &Regression1d,
    grid: &[f64],
    fit: Fit,
) -> Result<(Row, Curves), Box<dyn Error>> {
    let device = training_device();
    let sx = Standardizer::fit(&train_set.x, 1)?;
    let sy = Standardizer::fit(&train_set.y, 1)?;
    let x = matrix(&sx.transform(&train_set.x), 1, &device);
    let y = matrix(&sy.transform(&train_set.y), 1, &device);
    let plain = device.clone().inner();
    let config = TrainConfig::new(fit.epochs)
        .with_batch_size(100)
        .with_learning_rate(3e-3)
        .with_train_samples(1)
        .with_seed(fit.seed);
    eprintln!("training {} ({} epochs)", method.name, fit.epochs);
    // The seed fixes the initial parameters too.
    let build = |d: &Device| {
        let net = MlpConfig::new(1, fit.hidden.to_vec(), 1)
            .with_weights(method.weights.clone())
            .init(HeteroscedasticGaussian, d)?;
        method.with_moments(net)
    };
    let (model, report) = method.trainer(&config)?.build_and_fit(build, (x, y))?;
    let model = model.valid();
    let k_hat = match bnn_burn::inference::network_check(
        &model,
        matrix(&sx.transform(&train_set.x), 1, &plain),
        matrix(&sy.transform(&train_set.y), 1, &plain),
        K_HAT_DRAWS,
    ) {
        Ok(report) => Some(report.psis.k_hat),
        Err(bnn_burn::inference::ViError::Unsupported(_)) => None,
        Err(e) => return Err(format!("{}: k̂: {e}", method.name).into()),
    };
    let (test_ll, test_rmse) = evaluate(&model, test_set, (&sx, &sy), &plain)?;
    let grid_x = matrix(&sx.transform(grid), 1, &plain);
    let pred = model.predict(grid_x, PredictMode::Samples(PRED_SAMPLES))?;
    let std_of = |var: Tensor<2>| {
        sy.inverse_scale(&to_vec(var).iter().map(|v| v.sqrt()).collect::<Vec<_>>())
    };
    let curves = Curves {
        x: grid.to_vec(),
        mean: sy.inverse(&to_vec(pred.mean())),
        aleatoric_std: std_of(pred.aleatoric_variance()),
        total_std: std_of(pred.variance()),
    };
    let row = Row {
        method: method.name.to_string(),
        test_ll,
        test_rmse,
        train_seconds: report.seconds,
        k_hat,
    };
    check(&row, &curves)?;
    Ok((row, curves))
}

/// Tables and figures refuse NaN and ±∞: the error names the method, the quantity and the
/// grid point.
pub fn check(row: &Row, curves: &Curves) -> Result<(), String> {
    crate::experiment::check_finite(&row.method, "test LL", row.test_ll)?;
    crate::experiment::check_finite(&row.method, "test RMSE", row.test_rmse)?;
    for (field, values) in [
        ("predictive mean", &curves.mean),
        ("aleatoric std", &curves.aleatoric_std),
        ("total std", &curves.total_std),
    ] {
        for (x, v) in curves.x.iter().zip(values) {
            crate::experiment::check_finite(&row.method, &format!("{field} at x = {x}"), *v)?;
        }
    }
    Ok(())
}

/// Test log-likelihood (mixture over samples) and RMSE of the predictive mean, original units.
pub fn evaluate(
    model: &HeteroscedasticRegressor,
    test: &Regression1d,
    (sx, sy): (&Standardizer, &Standardizer),
    device: &Device,
) -> Result<(f64, f64), Box<dyn Error>> {
    let x = matrix(&sx.transform(&test.x), 1, device);
    let pred = model.predict(x, PredictMode::Samples(PRED_SAMPLES))?;
    let scores = pred.scores(matrix(&sy.transform(&test.y), 1, device), &sy.std);
    Ok((scores.log_likelihood, scores.rmse))
}

/// One panel of a decomposition figure.
pub struct Panel<'a> {
    /// Caption.
    pub title: String,
    /// Training points drawn behind the bands.
    pub data: &'a Regression1d,
    /// The model's curves.
    pub curves: &'a Curves,
    /// x range.
    pub x_range: (f64, f64),
    /// y range.
    pub y_range: (f64, f64),
}

/// Draws `panels` in a grid of `cols` columns: training points, ±2σ total band (orange, its
/// excess over the inner band is epistemic), ±2σ aleatoric band (blue), predictive mean; the
/// legend is in the first panel.
pub fn plot(path: &Path, panels: &[Panel], cols: usize) -> Result<(), Box<dyn Error>> {
    let cols = cols.clamp(1, panels.len().max(1));
    let rows = panels.len().div_ceil(cols).max(1);
    let root = SVGBackend::new(path, (420 * cols as u32, 380 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((rows, cols));
    for (k, (area, p)) in areas.iter().zip(panels).enumerate() {
        let c = p.curves;
        let mut chart = ChartBuilder::on(area)
            .caption(&p.title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(p.x_range.0..p.x_range.1, p.y_range.0..p.y_range.1)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("x")
            .y_desc("y")
            .draw()?;
        let (lo, hi) = p.y_range;
        let band = |k: &dyn Fn(usize) -> f64, sign: f64| {
            c.x.iter()
                .enumerate()
                .map(move |(i, x)| (*x, (c.mean[i] + sign * 2.0 * k(i)).clamp(lo, hi)))
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
            p.data
                .x
                .iter()
                .zip(&p.data.y)
                .step_by(2)
                .filter(|(_, y)| (lo..=hi).contains(*y))
                .map(|(x, y)| Circle::new((*x, *y), 1, BLACK.mix(0.4).filled())),
        )?;
        chart
            .draw_series(LineSeries::new(
                c.x.iter().zip(&c.mean).map(|(x, m)| (*x, m.clamp(lo, hi))),
                BLACK.stroke_width(2),
            ))?
            .label("predictive mean")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], BLACK));
        // One legend for the figure, where it hides no data in either toy.
        if k > 0 {
            continue;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
