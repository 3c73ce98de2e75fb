//! A network's weights as a flat vector: the log joint of a [`Bnn`] on data as a
//! [`LogDensity`], and samples or a fitted [`FlatFamily`] over that vector as a
//! [`NetworkPosterior`], so that MCMC and full-covariance VI predict through
//! [`crate::posthoc::predict_network`] like SWAG and Laplace.

use super::family::FlatFamily;
use super::target::LogDensity;
use crate::batch::Batch;
use crate::error::ConfigError;
use crate::layers::{FlatLayout, LayerDraw};
use crate::likelihood::Likelihood;
use crate::nets::{Bnn, BnnLv, Body};
use crate::posthoc::NetworkPosterior;
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};

/// `ln p(θ) + (s/T) Σ_b ln p(y_b | x_b, θ)` of a network's weights `θ` (its [`FlatLayout`]),
/// the prior the layers' priors and the likelihood the network's own (a learned noise stays
/// at its value); `s = N/B` when the rows are a minibatch of `N` (1 on the whole set), `T` the
/// temperature (1 unless [`BnnTarget::with_temperature`]).
#[derive(Debug, Clone)]
pub struct BnnTarget<B: Body, L: Likelihood> {
    net: Bnn<B, L>,
    input: B::Input,
    target: L::Target,
    layout: FlatLayout,
    scale: f64,
    temperature: f64,
    device: Device,
}

impl<B: Body, L: Likelihood> BnnTarget<B, L> {
    /// The log joint of `net`'s weights on `(input, target)`; the data move to the network's
    /// device (build the network on the device the draws will be on: an autodiff device for
    /// VI and HMC).
    ///
    /// # Errors
    /// When the data's row counts differ or are zero.
    pub fn new(net: Bnn<B, L>, input: B::Input, target: L::Target) -> Result<Self, ConfigError> {
        let device = net
            .devices()
            .first()
            .cloned()
            .unwrap_or_else(crate::training_device);
        if input.len() != target.len() || input.is_empty() {
            return Err(ConfigError {
                config: "BnnTarget",
                field: "target",
                value: format!("{} rows for {} input rows", target.len(), input.len()),
                expected: "as many target rows as input rows, at least one",
            });
        }
        Ok(Self {
            layout: net.flat_layout(),
            input: input.to(&device),
            target: target.to(&device),
            scale: 1.0,
            temperature: 1.0,
            // Only θ is tracked (see `LatentTarget::new`).
            net: net.no_grad(),
            device,
        })
    }

    /// The tempered posterior `p(D | θ)^{1/T} p(θ)`: the likelihood divided by `T`. Its ELBO is
    /// the ELBO with the KL weighted by `T` ([`crate::objective::KlSchedule`]), so a sampler
    /// here is the reference of a VI fit at that weight.
    ///
    /// # Errors
    /// When `temperature` is not finite and > 0.
    pub fn with_temperature(mut self, temperature: f64) -> Result<Self, ConfigError> {
        if !(temperature.is_finite() && temperature > 0.0) {
            return Err(ConfigError {
                config: "BnnTarget",
                field: "temperature",
                value: temperature.to_string(),
                expected: "a finite number > 0",
            });
        }
        self.temperature = temperature;
        Ok(self)
    }

    /// The temperature `T`.
    pub fn temperature(&self) -> f64 {
        self.temperature
    }

    /// The same target on rows `rows` of its data, the likelihood scaled by `N/|rows|`: an
    /// unbiased minibatch estimate of the full log joint (SGLD's).
    pub fn minibatch(&self, rows: &[usize]) -> Self {
        let n = self.input.len();
        let idx: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
        let idx = Tensor::<1, Int>::from_ints(idx.as_slice(), &self.device);
        Self {
            net: self.net.clone(),
            input: self.input.clone().rows(idx.clone()),
            target: self.target.clone().rows(idx),
            layout: self.layout.clone(),
            scale: n as f64 / rows.len() as f64,
            temperature: self.temperature,
            device: self.device.clone(),
        }
    }

    /// One epoch of minibatches: the rows shuffled by `rng`, cut into batches of `batch_size`
    /// (the last one shorter), each scaled by `N/|batch|`; the whole set when `batch_size`
    /// covers it.
    pub fn epoch<R: rand::Rng + ?Sized>(&self, batch_size: usize, rng: &mut R) -> Vec<Self> {
        use rand::seq::SliceRandom;
        let n = self.rows();
        if batch_size >= n || batch_size == 0 {
            return vec![self.clone()];
        }
        let mut rows: Vec<usize> = (0..n).collect();
        rows.shuffle(rng);
        rows.chunks(batch_size).map(|b| self.minibatch(b)).collect()
    }

    /// The rows of the data.
    pub fn rows(&self) -> usize {
        self.input.len()
    }

    /// How the weights lie in `θ`.
    pub fn layout(&self) -> &FlatLayout {
        &self.layout
    }

    /// The network's current weights (its posterior means) as `θ`: a start for samplers.
    pub fn current(&self) -> Vec<f64> {
        crate::host::to_vec(FlatLayout::flatten(self.net.mean_draw()))
    }

    /// The network.
    pub fn net(&self) -> &Bnn<B, L> {
        &self.net
    }
}

impl<B: Body, L: Likelihood> LogDensity for BnnTarget<B, L> {
    fn dim(&self) -> usize {
        self.layout.numel()
    }

    fn log_density(&self, theta: Tensor<2>) -> Tensor<1> {
        let s = theta.dims()[0];
        let draws = self.layout.split(theta);
        let out = self.net.forward_draws(self.input.clone(), &draws);
        let log_lik = self
            .net
            .likelihood
            .log_likelihood(out, self.target.clone())
            .sum_dim(1)
            .reshape([s]);
        log_lik * (self.scale / self.temperature) + self.net.log_prior_draws(&draws)
    }

    fn device(&self) -> Device {
        self.device.clone()
    }
}

/// BNN+LV's log joint over its weights and every training row's latent, `θ = [W, z_1 … z_N]`:
/// `ln p(W) + Σ_n [ln N(z_n | 0, γ) + ln p(y_n | f(x_n, z_n; W))]` (Depeweg 2019 eq. 3.8), the
/// likelihood's noise held at its value. HMC on it is the thesis's ground truth (Fig. 6.4).
#[derive(Debug, Clone)]
pub struct LatentTarget<L: Likelihood> {
    model: BnnLv<L>,
    input: Tensor<2>,
    target: L::Target,
    layout: FlatLayout,
    device: Device,
}

impl<L: Likelihood> LatentTarget<L> {
    /// The log joint of `model`'s weights and latents on `(input, target)`, on the model's
    /// device (an autodiff one for HMC).
    ///
    /// # Errors
    /// When the data's row counts differ or are zero, or the inputs' width is not the model's.
    pub fn new(model: BnnLv<L>, input: Tensor<2>, target: L::Target) -> Result<Self, ConfigError> {
        let device = model
            .devices()
            .first()
            .cloned()
            .unwrap_or_else(crate::training_device);
        let [rows, d] = input.dims();
        if target.len() != rows || rows == 0 || d != model.d_input() {
            return Err(ConfigError {
                config: "LatentTarget",
                field: "input",
                value: format!("[{rows}, {d}] inputs, {} targets", target.len()),
                expected: "as many target rows as input rows (at least one), the model's input width",
            });
        }
        Ok(Self {
            layout: model.net.flat_layout(),
            input: input.to_device(&device),
            target: target.to(&device),
            // Only θ is tracked: chains on threads of their own would otherwise share the
            // model's parameters (a learned noise) in one autodiff graph, and deadlock on it.
            model: model.no_grad(),
            device,
        })
    }

    /// The weights' part of `θ` (its first entries).
    pub fn layout(&self) -> &FlatLayout {
        &self.layout
    }

    /// The training rows `N`.
    pub fn rows(&self) -> usize {
        self.input.dims()[0]
    }

    /// The model.
    pub fn model(&self) -> &BnnLv<L> {
        &self.model
    }

    /// `θ` at the model's current weight means and its latent table's means (zeros for an
    /// encoder's model): a start for samplers from a variational fit.
    pub fn current(&self) -> Vec<f64> {
        let mut theta = crate::host::to_vec(FlatLayout::flatten(self.model.net.mean_draw()));
        match self.model.latents.table() {
            Some(t) => theta.extend(crate::host::to_vec(t.mean.val())),
            None => theta.extend(std::iter::repeat_n(0.0, self.dim() - theta.len())),
        }
        theta
    }
}

impl<L: Likelihood> LogDensity for LatentTarget<L> {
    fn dim(&self) -> usize {
        self.layout.numel() + self.rows() * self.model.latents.d_latent()
    }

    fn log_density(&self, theta: Tensor<2>) -> Tensor<1> {
        let [s, d] = theta.dims();
        let (p, n, dz) = (
            self.layout.numel(),
            self.rows(),
            self.model.latents.d_latent(),
        );
        let draws = self.layout.split(theta.clone().slice([0..s, 0..p]));
        let z = theta.slice([0..s, p..d]).reshape([s, n, dz]);
        let gamma = self.model.latents.gamma();
        let log_prior_z = z.clone().square().sum_dim(2).sum_dim(1).reshape([s]) * (-0.5 / gamma)
            - (n * dz) as f64 * 0.5 * (2.0 * std::f64::consts::PI * gamma).ln();
        let out = self.model.forward(
            self.input.clone(),
            z,
            &mut crate::layers::Pass::fixed(&draws),
        );
        let log_lik = self
            .model
            .net
            .likelihood
            .log_likelihood(out, self.target.clone())
            .sum_dim(1)
            .reshape([s]);
        log_lik + log_prior_z + self.model.net.log_prior_draws(&draws)
    }

    fn device(&self) -> Device {
        self.device.clone()
    }
}

/// A network-level posterior given by rows `θ_m` of a flat weight vector (MCMC samples): a
/// prediction with `Samples(n)` uses `n` of them, evenly spaced (all of them, cycling, when `n`
/// exceeds their number).
#[derive(Debug, Clone)]
pub struct SampledPosterior<B: Body, L: Likelihood> {
    net: Bnn<B, L>,
    samples: Tensor<2>,
    layout: FlatLayout,
}

impl<B: Body, L: Likelihood> SampledPosterior<B, L> {
    /// `samples` (rows of `net`'s [`FlatLayout`]) as a posterior over `net`'s weights.
    ///
    /// # Errors
    /// When there are no samples or a sample has the wrong length.
    pub fn new(net: Bnn<B, L>, samples: &[Vec<f64>]) -> Result<Self, ConfigError> {
        let layout = net.flat_layout();
        let p = layout.numel();
        if samples.is_empty() || samples.iter().any(|s| s.len() != p) {
            return Err(ConfigError {
                config: "SampledPosterior",
                field: "samples",
                value: format!(
                    "{} samples of lengths {:?}",
                    samples.len(),
                    samples.first().map(Vec::len)
                ),
                expected: "at least one sample, each as long as the network's flat layout",
            });
        }
        let device = net.devices().first().cloned().unwrap_or_else(crate::device);
        let flat: Vec<f64> = samples.concat();
        Ok(Self {
            samples: crate::host::matrix(&flat, p, &device),
            net,
            layout,
        })
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.samples.dims()[0]
    }

    /// Whether there are none (never: [`Self::new`] refuses).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<B: Body, L: Likelihood> NetworkPosterior for SampledPosterior<B, L> {
    type Body = B;
    type Likelihood = L;

    fn network(&self) -> &Bnn<B, L> {
        &self.net
    }

    fn joint_draws(&self, n: usize) -> Vec<LayerDraw> {
        let m = self.len();
        let rows: Vec<i64> = (0..n)
            .map(|i| if n <= m { i * m / n } else { i % m } as i64)
            .collect();
        let idx = Tensor::<1, Int>::from_ints(rows.as_slice(), &self.samples.device());
        self.layout.split(self.samples.clone().select(0, idx))
    }
}

/// A network-level posterior given by a [`FlatFamily`] over a network's flat weights (a
/// full-covariance Gaussian over every layer, a flow): joint draws across layers.
#[derive(Debug, Clone)]
pub struct FlatPosterior<B: Body, L: Likelihood, Q: FlatFamily> {
    net: Bnn<B, L>,
    family: Q,
    layout: FlatLayout,
}

impl<B: Body, L: Likelihood, Q: FlatFamily> FlatPosterior<B, L, Q> {
    /// `family` (over `net`'s [`FlatLayout`]) as a posterior over `net`'s weights.
    ///
    /// # Errors
    /// When the family's dimension is not the layout's.
    pub fn new(net: Bnn<B, L>, family: Q) -> Result<Self, ConfigError> {
        let layout = net.flat_layout();
        if let Err(e) = family.sample_log_q(1) {
            return Err(ConfigError {
                config: "FlatPosterior",
                field: "family",
                value: e.to_string(),
                expected: "a family with a density over the network's flat weights",
            });
        }
        if family.dim() != layout.numel() {
            return Err(ConfigError {
                config: "FlatPosterior",
                field: "family",
                value: format!("over {} entries", family.dim()),
                expected: "a family over the network's flat weights (BnnTarget::dim)",
            });
        }
        Ok(Self {
            net,
            family,
            layout,
        })
    }

    /// The family.
    pub fn family(&self) -> &Q {
        &self.family
    }
}

impl<B: Body, L: Likelihood, Q: FlatFamily> NetworkPosterior for FlatPosterior<B, L, Q> {
    type Body = B;
    type Likelihood = L;

    fn network(&self) -> &Bnn<B, L> {
        &self.net
    }

    fn joint_draws(&self, n: usize) -> Vec<LayerDraw> {
        let (theta, _) = self
            .family
            .sample_log_q(n)
            .expect("a family with a density: FlatPosterior::new took it");
        self.layout.split(theta)
    }
}
