//! The browser demo: a mean-field Bayesian MLP fitted to the points a user clicks, its
//! predictive drawn with the aleatoric band `σ²` and the epistemic band `Var_w[μ]` (law of
//! total variance). It trains on flex (burn's CPU backend) and predicts there or on
//! WebGPU. Built for `wasm32-unknown-unknown`; the page is `index.html`.
#![cfg(target_arch = "wasm32")]

use bnn_burn::burn;
use bnn_burn::host::to_vec_async;
use bnn_burn::prelude::*;
use wasm_bindgen::prelude::*;

/// Inputs are divided by this before they reach the net (the page's x axis spans ±5).
const X_SCALE: f64 = 2.5;

/// The page's model: points, the trained net, and where it runs.
#[wasm_bindgen]
pub struct Demo {
    xs: Vec<f64>,
    ys: Vec<f64>,
    model: Option<Regressor>,
    device: Device,
}

use burn::tensor::Device;

#[wasm_bindgen]
impl Demo {
    /// A demo without points, on flex (burn's CPU backend, one thread in a browser).
    #[wasm_bindgen(constructor)]
    pub fn new() -> Demo {
        std::panic::set_hook(Box::new(|info| console_error(&info.to_string())));
        Demo {
            xs: Vec::new(),
            ys: Vec::new(),
            model: None,
            device: Device::flex(),
        }
    }

    /// Adds a point in the page's data coordinates.
    pub fn add_point(&mut self, x: f64, y: f64) -> Result<(), JsError> {
        if !(x.is_finite() && y.is_finite()) {
            return Err(JsError::new(&format!("point ({x}, {y}) is not finite")));
        }
        self.xs.push(x);
        self.ys.push(y);
        Ok(())
    }

    /// Removes every point and the trained net.
    pub fn clear(&mut self) {
        self.xs.clear();
        self.ys.clear();
        self.model = None;
    }

    /// The points, `x₀, y₀, x₁, y₁, …`.
    pub fn points(&self) -> Vec<f64> {
        self.xs
            .iter()
            .zip(&self.ys)
            .flat_map(|(x, y)| [*x, *y])
            .collect()
    }

    /// Trains a fresh net on the points for `epochs` full-batch Adam steps of the ELBO under
    /// Gaussian noise of standard deviation `noise_std`; returns the final loss (mean NLL +
    /// KL / N).
    pub fn train(&mut self, epochs: usize, seed: u64, noise_std: f64) -> Result<f64, JsError> {
        if self.xs.len() < 2 {
            return Err(JsError::new("click at least two points before training"));
        }
        let device = self.device.clone().autodiff();
        let x = bnn_burn::host::matrix(&scaled(&self.xs), 1, &device);
        let y = bnn_burn::host::matrix(&self.ys, 1, &device);
        let config = TrainConfig::new(epochs)
            .with_batch_size(self.xs.len())
            .with_learning_rate(1e-2)
            .with_seed(seed)
            .with_progress(false);
        let weights = WeightConfig::of(PosteriorConfig::mean_field())
            .with_estimator(Estimator::Reparameterization);
        // Seeded, then built and trained on flex (`train_built` would build on the library's
        // selected backend, wgpu in this build, which a browser must set up asynchronously).
        device.seed(seed);
        let likelihood = GaussianLikelihoodConfig::new()
            .with_noise_std(noise_std)
            .with_fit(NoiseFit::Fixed)
            .init(&device)
            .map_err(js)?;
        let model = MlpConfig::new(1, vec![50], 1)
            .with_weights(weights)
            .init(likelihood, &device)
            .map_err(js)?;
        let (model, report) = train(model, (x, y), &config).map_err(js)?;
        self.model = Some(model.valid());
        Ok(report.history.last().map_or(f64::NAN, |e| e.loss))
    }

    /// [`Self::predict`] on WebGPU: the net moves to `gpu`, its draws are keyed by `key`, and
    /// the reads are awaited (a browser's WebGPU cannot read back synchronously).
    pub fn predict_on(
        &self,
        gpu: &Gpu,
        grid: Vec<f64>,
        samples: usize,
        key: u64,
    ) -> Result<js_sys::Promise, JsError> {
        let model = self.trained()?.clone().to_device(&gpu.device);
        let x = bnn_burn::host::matrix(&scaled(&grid), 1, &gpu.device);
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            let pred = model
                .predict_async(x, PredictMode::Samples(samples), key)
                .await
                .map_err(|e| JsValue::from(js(e)))?;
            let all = to_vec_async(bands(&pred)).await;
            Ok(js_sys::Float64Array::from(&all[..]).into())
        }))
    }

    /// The predictive at `grid` (data coordinates) from `samples` weight draws: the means, then
    /// the aleatoric standard deviations `√E_w[σ²]`, then the epistemic ones `√Var_w[μ]`.
    pub fn predict(&self, grid: Vec<f64>, samples: usize) -> Result<Vec<f64>, JsError> {
        let model = self.trained()?;
        let x = bnn_burn::host::matrix(&scaled(&grid), 1, &self.device);
        let pred = model
            .predict(x, PredictMode::Samples(samples))
            .map_err(js)?;
        Ok(bnn_burn::host::to_vec(bands(&pred)))
    }
}

impl Demo {
    /// The trained net, or an error that says to train first.
    fn trained(&self) -> Result<&Regressor, JsError> {
        self.model
            .as_ref()
            .ok_or_else(|| JsError::new("train the net before asking for its predictive"))
    }
}

/// A browser's WebGPU device, for [`Demo::predict_on`].
#[wasm_bindgen]
pub struct Gpu {
    device: Device,
}

#[wasm_bindgen]
impl Gpu {
    /// Asks the browser for a WebGPU adapter and sets burn's wgpu runtime up on it.
    pub async fn init() -> Result<Gpu, JsError> {
        let device = Device::wgpu_options()
            .init_async()
            .await
            .map_err(|e| JsError::new(&format!("no WebGPU device: {e:?}")))?;
        Ok(Gpu { device })
    }
}

/// The means, the aleatoric and the epistemic standard deviations `[3, B]`, one read back.
fn bands(pred: &bnn_burn::predict::GaussianPrediction) -> burn::tensor::Tensor<2> {
    let columns = [
        pred.mean(),
        pred.aleatoric_variance().sqrt(),
        pred.epistemic_variance().sqrt(),
    ];
    burn::tensor::Tensor::cat(columns.to_vec(), 1).transpose()
}

/// The net's inputs for points of the page's x axis.
fn scaled(xs: &[f64]) -> Vec<f64> {
    xs.iter().map(|x| x / X_SCALE).collect()
}

impl Default for Demo {
    fn default() -> Self {
        Self::new()
    }
}

/// A Rust error as a JavaScript `Error` with its message.
fn js(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

#[wasm_bindgen]
extern "C" {
    /// `console.error`, where panics are reported.
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str);
}
