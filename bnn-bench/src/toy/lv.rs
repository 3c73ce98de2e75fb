//! The BNN+LV pictures of `toy` (Depeweg 2019 §6.1): the uncertainty decomposition of a BNN+LV
//! under black-box α = 1 on the two chapter-6 toys, in its variance form (law of total variance)
//! and its entropy form (k-NN entropies: `H[y*] = E_W H[y*|W] + I(y*; W)`), and the wet-chicken
//! maps of aleatoric and epistemic entropy of the next y-coordinate over the river at the
//! action `a = (0, 0)`.

use bnn_burn::host::{matrix, to_vec};
use bnn_burn::layers::Pass;
use bnn_burn::nets::{BnnLvConfig, Decomposition, LatentRegressor, MlpConfig};
use bnn_burn::objective::AlphaConfig;
use bnn_burn::predict::{Predict, PredictMode};
use bnn_burn::recipes::depeweg_weights;
use bnn_burn::train::{TrainConfig, Trainer};
use bnn_burn::training_device;
use bnn_datasets::dynamics::WetChicken;
use bnn_datasets::{RegressionData, Standardizer};
use burn::module::Module;
use plotters::prelude::*;
use std::error::Error;
use std::path::Path;
use std::time::Instant;

/// The method's name in `toy`'s tables and on its command line.
pub const BNN_LV: &str = "BNN+LV";

/// Draws of the decomposition: weight draws, latent draws per weight draw, and the k-NN
/// neighbour (the thesis: 500 × 500 or 250 joint draws, `k = 25`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Draws {
    /// Weight draws `n_w`.
    pub n_w: usize,
    /// Latent (and noise) draws per weight draw `n_z`.
    pub n_z: usize,
    /// Neighbour of the entropy estimator.
    pub k: usize,
}

/// A trained BNN+LV with the scalers of its training rows.
pub struct LvFit {
    /// The model (no autodiff).
    pub model: LatentRegressor,
    /// Input scaler.
    pub sx: Standardizer,
    /// Target scaler.
    pub sy: Standardizer,
    /// Training wall time, s.
    pub seconds: f64,
}

/// Trains a BNN+LV of two hidden ReLU layers of `hidden` units with Depeweg's weights under
/// black-box α = 1 (§6.1: α = 1) on `train` (original units, one target; standardised here):
/// `K = 25` joint draws per step (the thesis's code's advice for CPUs), minibatches of N/25,
/// Adam at 3·10⁻³ (the other `toy` methods' rate; the thesis: 10⁻³ for 5 000 epochs).
///
/// # Errors
/// Shapes, a diverged fit.
pub fn fit(
    train: &RegressionData,
    hidden: usize,
    epochs: usize,
    seed: u64,
) -> Result<LvFit, Box<dyn Error>> {
    let start = Instant::now();
    let (sx, sy) = train.fit_standardizers()?;
    let std = train.standardized(&sx, &sy)?;
    let d = std.n_features;
    let device = training_device();
    let x = matrix(&std.x, d, &device);
    let y = matrix(&std.y, 1, &device);
    let n = std.len();
    let config = TrainConfig::new(epochs)
        .with_batch_size(n.div_ceil(25).max(1))
        .with_learning_rate(3e-3)
        .with_train_samples(25)
        .with_seed(seed)
        .with_progress(false);
    let mlp = MlpConfig::new(d, vec![hidden, hidden], 1).with_weights(depeweg_weights(1.0));
    let (net, _) = Trainer::new(config)
        .with_objective(AlphaConfig::new().with_alpha(1.0).init()?)
        .build_and_fit(|d| BnnLvConfig::new(mlp).init_regressor(n, d), (x, y))?;
    Ok(LvFit {
        model: net.valid(),
        sx,
        sy,
        seconds: start.elapsed().as_secs_f64(),
    })
}

impl LvFit {
    /// Test LL of the `draws`-component mixture and RMSE of its mean, original units.
    ///
    /// # Errors
    /// Shapes.
    pub fn scores(
        &self,
        test: &RegressionData,
        draws: usize,
    ) -> Result<(f64, f64), Box<dyn Error>> {
        let device = self.model.devices()[0].clone();
        let d = test.n_features;
        let x = matrix(&self.sx.transform(&test.x), d, &device);
        let y = matrix(&self.sy.transform(&test.y), 1, &device);
        let s = self
            .model
            .predict(x, PredictMode::Samples(draws))?
            .scores(y, &self.sy.std);
        Ok((s.log_likelihood, s.rmse))
    }

    /// The decomposition at the inputs `x` (original units, row-major), in original units:
    /// the mean shifted and scaled back, variances × s², entropies + ln s (the mutual
    /// information does not change with the scale).
    ///
    /// # Errors
    /// Bad draw counts, shapes, draws the entropy estimator refuses.
    pub fn decompose(&self, x: &[f64], draws: Draws) -> Result<Vec<Decomposition>, Box<dyn Error>> {
        self.decompose_by(x, |xs| {
            self.model.decompose(xs, draws.n_w, draws.n_z, draws.k)
        })
    }

    /// [`LvFit::decompose`] under given weights (rows of the network's flat layout, in the
    /// standardised units the model was fitted in: MCMC samples) instead of `q(W)`'s draws.
    ///
    /// # Errors
    /// As [`LvFit::decompose`].
    pub fn decompose_samples(
        &self,
        x: &[f64],
        weights: &[Vec<f64>],
        draws: Draws,
    ) -> Result<Vec<Decomposition>, Box<dyn Error>> {
        let device = self.model.devices()[0].clone();
        let p = weights.first().map_or(0, Vec::len);
        let flat: Vec<f64> = weights.iter().flatten().copied().collect();
        let w = matrix(&flat, p, &device);
        self.decompose_by(x, |xs| {
            self.model
                .decompose_samples(xs, w.clone(), draws.n_z, draws.k)
        })
    }

    /// The network's output at the latent's prior mean, `f(x, z = 0; W)`, for each row of
    /// `weights` (the network's flat layout, standardised units) at the inputs `x` (original
    /// units, row-major), in original units: `[draw][input]`. A deterministic function of `W`,
    /// so chains can be compared on it (function-level R̂).
    ///
    /// # Errors
    /// Rows of `weights` that are not the network's length, or inputs not a whole number of
    /// rows.
    pub fn functions(
        &self,
        x: &[f64],
        weights: &[Vec<f64>],
    ) -> Result<Vec<Vec<f64>>, Box<dyn Error>> {
        let device = self.model.devices()[0].clone();
        let layout = self.model.net.flat_layout();
        let d = self.sx.width();
        if d == 0 || !x.len().is_multiple_of(d) {
            return Err(format!("functions: {} inputs are not rows of {d}", x.len()).into());
        }
        if let Some(w) = weights.iter().find(|w| w.len() != layout.numel()) {
            return Err(format!(
                "functions: a weight row of {} for a network of {}",
                w.len(),
                layout.numel()
            )
            .into());
        }
        let b = x.len() / d;
        let xs = matrix(&self.sx.transform(x), d, &device);
        let (m, s) = (self.sy.mean[0], self.sy.std[0]);
        let mut out = Vec::with_capacity(weights.len());
        // In chunks, so that a long chain's activations stay small.
        for chunk in weights.chunks(100) {
            let flat: Vec<f64> = chunk.iter().flatten().copied().collect();
            let t = matrix(&flat, layout.numel(), &device);
            let z = burn::tensor::Tensor::zeros(
                [chunk.len(), b, self.model.latents.d_latent()],
                &device,
            );
            let f = to_vec(
                self.model
                    .forward(xs.clone(), z, &mut Pass::fixed(&layout.split(t))),
            );
            out.extend(f.chunks(b).map(|r| r.iter().map(|v| m + s * v).collect()));
        }
        Ok(out)
    }

    /// The decomposition `parts` gives for standardised inputs, in original units.
    fn decompose_by(
        &self,
        x: &[f64],
        parts: impl Fn(
            burn::tensor::Tensor<2>,
        ) -> Result<Vec<Decomposition>, bnn_burn::nets::DecompositionError>,
    ) -> Result<Vec<Decomposition>, Box<dyn Error>> {
        let device = self.model.devices()[0].clone();
        let d = self.sx.width();
        let (m, s) = (self.sy.mean[0], self.sy.std[0]);
        let mut out = Vec::with_capacity(x.len() / d.max(1));
        // Chunks of 64 inputs: a weight draw's pass holds n_z · 64 rows.
        for chunk in x.chunks(64 * d) {
            let xs = matrix(&self.sx.transform(chunk), d, &device);
            let parts = parts(xs)?;
            out.extend(parts.into_iter().map(|p| Decomposition {
                mean: m + s * p.mean,
                total_variance: p.total_variance * s * s,
                aleatoric_variance: p.aleatoric_variance * s * s,
                epistemic_variance: p.epistemic_variance * s * s,
                total_entropy: p.total_entropy + s.ln(),
                aleatoric_entropy: p.aleatoric_entropy + s.ln(),
                epistemic_entropy: p.epistemic_entropy,
            }));
        }
        for (i, p) in out.iter().enumerate() {
            for (field, v) in [
                ("mean", p.mean),
                ("total variance", p.total_variance),
                ("total entropy", p.total_entropy),
                ("aleatoric entropy", p.aleatoric_entropy),
            ] {
                crate::experiment::check_finite(&format!("{BNN_LV} at input {i}"), field, v)?;
            }
        }
        Ok(out)
    }

    /// The learned noise std `√Σ`, original units.
    pub fn noise_std(&self) -> f64 {
        to_vec(self.model.net.likelihood.noise_std())[0] * self.sy.std[0]
    }
}

/// The curves of one toy's decomposition on a grid, original units.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LvCurves {
    /// Toy.
    pub toy: String,
    /// Grid.
    pub x: Vec<f64>,
    /// Decomposition per grid point.
    pub parts: Vec<Decomposition>,
    /// Training inputs (for the density rug; not in records: the toy's seed gives them).
    #[serde(skip)]
    pub train_x: Vec<f64>,
}

/// A named curve of a panel.
type Series<'a> = (&'a str, Vec<f64>);

/// Draws `toy-lv.svg`: one row per toy; left the standard deviations of the variance form
/// (total, aleatoric, epistemic), right the entropy form (`H[y*]`, `E_W H[y*|W]`,
/// `I(y*; W)`), each over a rug of the training inputs.
pub fn plot_curves(path: &Path, curves: &[LvCurves]) -> Result<(), Box<dyn Error>> {
    let rows = curves.len().max(1);
    let root = SVGBackend::new(path, (900, 340 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((rows, 2));
    let colors = [BLACK, RGBColor(100, 149, 237), RGBColor(230, 85, 13)];
    for (r, c) in curves.iter().enumerate() {
        let (x0, x1) = (c.x[0], c.x[c.x.len() - 1]);
        let forms: [(&str, [Series; 3]); 2] = [
            (
                "standard deviation",
                [
                    (
                        "total",
                        c.parts
                            .iter()
                            .map(|p| p.total_variance.max(0.0).sqrt())
                            .collect(),
                    ),
                    (
                        "aleatoric",
                        c.parts
                            .iter()
                            .map(|p| p.aleatoric_variance.max(0.0).sqrt())
                            .collect(),
                    ),
                    (
                        "epistemic",
                        c.parts
                            .iter()
                            .map(|p| p.epistemic_variance.max(0.0).sqrt())
                            .collect(),
                    ),
                ],
            ),
            (
                "entropy (nats)",
                [
                    ("H[y*]", c.parts.iter().map(|p| p.total_entropy).collect()),
                    (
                        "E_W H[y*|W]",
                        c.parts.iter().map(|p| p.aleatoric_entropy).collect(),
                    ),
                    (
                        "I(y*; W)",
                        c.parts.iter().map(|p| p.epistemic_entropy).collect(),
                    ),
                ],
            ),
        ];
        for (j, (label, series)) in forms.iter().enumerate() {
            let lo = series
                .iter()
                .flat_map(|(_, v)| v.iter().copied())
                .fold(f64::INFINITY, f64::min)
                .min(0.0);
            let hi = series
                .iter()
                .flat_map(|(_, v)| v.iter().copied())
                .fold(f64::NEG_INFINITY, f64::max);
            let axis = crate::plots::axis_range(lo, hi, 0.05, 0.05e-6)
                .map_err(|e| format!("toy-lv.svg, {}: {e}", c.toy))?;
            let (lo, hi) = (axis.start, axis.end);
            let mut chart = ChartBuilder::on(&areas[2 * r + j])
                .caption(format!("{}: {BNN_LV}, {label}", c.toy), ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(45)
                .build_cartesian_2d(x0..x1, lo..hi)?;
            chart.configure_mesh().disable_mesh().x_desc("x").draw()?;
            // The training inputs as a rug on the lower edge.
            let tick = 0.04 * (hi - lo);
            chart.draw_series(
                c.train_x
                    .iter()
                    .filter(|x| (x0..=x1).contains(*x))
                    .map(|&x| PathElement::new(vec![(x, lo), (x, lo + tick)], BLACK.mix(0.25))),
            )?;
            for ((name, v), color) in series.iter().zip(colors) {
                chart
                    .draw_series(LineSeries::new(
                        c.x.iter().copied().zip(v.iter().copied()),
                        color.stroke_width(2),
                    ))?
                    .label(*name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], color));
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}

/// The wet-chicken maps: the decomposition of the next y-coordinate over a grid of states at
/// `a = (0, 0)`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct WetChickenMaps {
    /// Transitions trained on.
    pub n_train: usize,
    /// Grid points per side over `[0, 5]²`.
    pub side: usize,
    /// States `(x, y)` of the grid, row-major with `y` fastest.
    pub states: Vec<[f64; 2]>,
    /// Decomposition per state.
    pub parts: Vec<Decomposition>,
    /// Mean epistemic entropy where `x > 2.5` and `y > 2.5` (the waterfall's corner, where
    /// the thesis finds it highest).
    pub epistemic_top_right: f64,
    /// Mean epistemic entropy elsewhere.
    pub epistemic_elsewhere: f64,
    /// Mean aleatoric entropy where `x < 2.5` (little drift, strong turbulence).
    pub aleatoric_left: f64,
    /// Mean aleatoric entropy where `x > 2.5`.
    pub aleatoric_right: f64,
    /// Test LL of the fit on fresh transitions, original units.
    pub test_ll: f64,
    /// Training wall time, s.
    pub train_seconds: f64,
}

/// Fits the BNN+LV on `n` random-policy transitions (2 × 20 units, §6.1: 7 500) predicting the
/// next y-coordinate, and maps its decomposition on a `side × side` grid of states at
/// `a = (0, 0)`.
///
/// # Errors
/// As [`fit`] and [`LvFit::decompose`].
pub fn wet_chicken_maps(
    n: usize,
    side: usize,
    epochs: usize,
    draws: Draws,
    seed: u64,
) -> Result<WetChickenMaps, Box<dyn Error>> {
    let target_y = |t: &bnn_datasets::dynamics::WetChickenTransitions| {
        let full = t.next_state_regression();
        let y = full.y.chunks(2).map(|s| s[1]).collect();
        RegressionData::new(full.x, y, full.n_features, 1)
    };
    let world = WetChicken::default();
    let train = target_y(&world.random_transitions(n, seed))?;
    let test = target_y(&world.random_transitions(2500, seed ^ 0x5eed))?;
    let lv = fit(&train, 20, epochs, seed)?;
    let (test_ll, _) = lv.scores(&test, 200)?;
    let step = 5.0 / (side - 1).max(1) as f64;
    let states: Vec<[f64; 2]> = (0..side)
        .flat_map(|i| (0..side).map(move |j| [i as f64 * step, j as f64 * step]))
        .collect();
    let inputs: Vec<f64> = states.iter().flat_map(|s| [s[0], s[1], 0.0, 0.0]).collect();
    let parts = lv.decompose(&inputs, draws)?;
    let mean_where = |keep: &dyn Fn(&[f64; 2]) -> bool, f: &dyn Fn(&Decomposition) -> f64| {
        let v: Vec<f64> = states
            .iter()
            .zip(&parts)
            .filter(|(s, _)| keep(s))
            .map(|(_, p)| f(p))
            .collect();
        bnn_burn::metrics::mean(&v)
    };
    let corner = |s: &[f64; 2]| s[0] > 2.5 && s[1] > 2.5;
    Ok(WetChickenMaps {
        n_train: n,
        side,
        epistemic_top_right: mean_where(&corner, &|p| p.epistemic_entropy),
        epistemic_elsewhere: mean_where(&|s| !corner(s), &|p| p.epistemic_entropy),
        aleatoric_left: mean_where(&|s| s[0] < 2.5, &|p| p.aleatoric_entropy),
        aleatoric_right: mean_where(&|s| s[0] > 2.5, &|p| p.aleatoric_entropy),
        states,
        parts,
        test_ll,
        train_seconds: lv.seconds,
    })
}

/// Draws `wet-chicken.svg`: aleatoric entropy, epistemic entropy (mutual information) and the
/// epistemic standard deviation of the next y-coordinate over the states at `a = (0, 0)`, each on
/// its own colour scale (light: low, dark: high).
pub fn plot_wet_chicken(path: &Path, maps: &WetChickenMaps) -> Result<(), Box<dyn Error>> {
    let root = SVGBackend::new(path, (1260, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((1, 3));
    let half = 2.5 / (maps.side - 1).max(1) as f64;
    let panels: [(&str, Vec<f64>); 3] = [
        (
            "aleatoric entropy E_W H[y'|W]",
            maps.parts.iter().map(|p| p.aleatoric_entropy).collect(),
        ),
        (
            "epistemic entropy I(y'; W)",
            maps.parts.iter().map(|p| p.epistemic_entropy).collect(),
        ),
        (
            "epistemic std √Var_W E[y'|W]",
            maps.parts
                .iter()
                .map(|p| p.epistemic_variance.max(0.0).sqrt())
                .collect(),
        ),
    ];
    for (area, (title, v)) in areas.iter().zip(&panels) {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let span = (hi - lo).max(1e-12);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{title} [{lo:.2}, {hi:.2}]"), ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(35)
            .build_cartesian_2d(-half..5.0 + half, -half..5.0 + half)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("x (drift grows →)")
            .y_desc("y (waterfall at 5)")
            .draw()?;
        chart.draw_series(maps.states.iter().zip(v).map(|(s, &val)| {
            let t = (val - lo) / span;
            let shade = |a: f64, b: f64| (a + (b - a) * t) as u8;
            let color = RGBColor(shade(255.0, 8.0), shade(245.0, 48.0), shade(235.0, 107.0));
            Rectangle::new(
                [(s[0] - half, s[1] - half), (s[0] + half, s[1] + half)],
                color.filled(),
            )
        }))?;
    }
    root.present()?;
    Ok(())
}
