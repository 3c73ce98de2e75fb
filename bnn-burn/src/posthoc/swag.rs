//! SWAG (Maddox et al. 2019; Brack 2022 eqs. 3.17–3.18): the first and second moments of a
//! point network's weights over the iterates of SGD (or Adam) after a MAP fit, and the last `K`
//! deviations from the running mean. The posterior is
//! `N(θ̄, ½ (Σ_diag + D̂ D̂ᵀ/(K − 1)))`, sampled as
//! `θ = θ̄ + Σ_diag^{1/2} z₁/√2 + D̂ z₂/√(2(K − 1))`; SWAG-diagonal is `N(θ̄, Σ_diag)`.
//! MultiSWAG is an [`super::Ensemble`] of [`Swag`]s from different initialisations.

use super::NetworkPosterior;
use crate::error::ConfigError;
use crate::layers::{FlatLayout, LayerDraw, LayerIds};
use crate::likelihood::Likelihood;
use crate::nets::{Bnn, Body};
use crate::train::{Callback, EpochStats, Flow, StepInfo, TrainError};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Distribution, Tensor};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// How SWAG collects its moments.
#[derive(Config, Debug, PartialEq)]
pub struct SwagConfig {
    /// Deviation columns kept (`K`; Maddox et al.: 20); 0 gives SWAG-diagonal.
    #[config(default = 20)]
    pub rank: usize,
    /// Collect every this many optimiser steps; 0 collects once per epoch (Maddox et al.).
    #[config(default = 0)]
    pub every_steps: usize,
    /// Epochs to skip before collecting (the iterates must have reached a mode).
    #[config(default = 0)]
    pub skip_epochs: usize,
}

/// The collected moments of a network's weights, flat over its layers in forward order.
#[derive(Debug, Clone)]
pub struct SwagMoments {
    /// Iterates collected.
    pub count: usize,
    /// Running mean `θ̄`, `[1, P]`.
    pub mean: Tensor<2>,
    /// Running mean of `θ²`, `[1, P]`.
    pub sq_mean: Tensor<2>,
    /// The last `K` deviations `θ_i − θ̄_i`, `[1, P]` each, oldest first.
    pub deviations: VecDeque<Tensor<2>>,
    /// How the layers lie in `θ`.
    pub layout: FlatLayout,
    /// Per layer, its parameter ids (checked against the network the moments are used on).
    pub ids: Vec<LayerIds>,
}

impl SwagMoments {
    fn first(draws: Vec<LayerDraw>, ids: Vec<LayerIds>) -> Self {
        let layout = FlatLayout::of(&draws);
        let theta = FlatLayout::flatten(draws);
        Self {
            count: 1,
            sq_mean: theta.clone().square(),
            mean: theta.clone(),
            deviations: VecDeque::new(),
            layout,
            ids,
        }
    }

    fn add(&mut self, draws: Vec<LayerDraw>, rank: usize) {
        let theta = FlatLayout::flatten(draws);
        let n = self.count as f64;
        self.mean = (self.mean.clone() * n + theta.clone()) / (n + 1.0);
        self.sq_mean = (self.sq_mean.clone() * n + theta.clone().square()) / (n + 1.0);
        self.count += 1;
        if rank > 0 {
            if self.deviations.len() == rank {
                self.deviations.pop_front();
            }
            self.deviations.push_back(theta - self.mean.clone());
        }
    }

    /// `Σ_diag = max(θ²̄ − θ̄², 0)`, `[1, P]`.
    pub fn diagonal_variance(&self) -> Tensor<2> {
        (self.sq_mean.clone() - self.mean.clone().square()).clamp_min(0.0)
    }

    fn moved_to(mut self, device: &Device) -> Self {
        self.mean = self.mean.to_device(device);
        self.sq_mean = self.sq_mean.to_device(device);
        self.deviations = self
            .deviations
            .into_iter()
            .map(|d| d.to_device(device))
            .collect();
        self
    }
}

/// A training callback that collects [`SwagMoments`] of a point network's weights; read them
/// with [`SwagCollector::handle`] after training (the handle is shared with the callback the
/// trainer owns).
pub struct SwagCollector {
    config: SwagConfig,
    state: Arc<Mutex<Option<SwagMoments>>>,
}

impl SwagCollector {
    /// A collector for `config`.
    pub fn new(config: SwagConfig) -> Self {
        Self {
            config,
            state: Arc::new(Mutex::new(None)),
        }
    }

    /// A handle to the moments, filled while the trainer runs.
    pub fn handle(&self) -> Arc<Mutex<Option<SwagMoments>>> {
        self.state.clone()
    }

    fn collect<B: Body, L: Likelihood>(&self, model: &Bnn<B, L>) -> Result<(), TrainError> {
        if !model.is_point() {
            return Err(TrainError::Config(ConfigError {
                config: "SwagCollector",
                field: "model",
                value: "a network with stochastic layers".into(),
                expected: "a point network (WeightConfig with the point posterior): SWAG's \
                           moments are over SGD iterates of point weights",
            }));
        }
        let mut ids = Vec::new();
        model.visit_layers(&mut IdsOf(&mut ids));
        let draws = model.mean_draw();
        let mut state = self.state.lock().expect("the SWAG state's lock");
        match state.as_mut() {
            None => *state = Some(SwagMoments::first(draws, ids)),
            Some(m) => m.add(draws, self.config.rank),
        }
        Ok(())
    }
}

struct IdsOf<'a>(&'a mut Vec<LayerIds>);

impl crate::layers::LayerVisitor for IdsOf<'_> {
    fn visit<const DW: usize>(
        &mut self,
        _: crate::layers::LayerInfo,
        params: &crate::layers::AnyLayerParams<DW>,
    ) {
        self.0.push(params.ids());
    }
}

impl<B: Body, L: Likelihood> Callback<Bnn<B, L>> for SwagCollector {
    fn on_step(&mut self, model: &Bnn<B, L>, step: &StepInfo) -> Result<(), TrainError> {
        let every = self.config.every_steps;
        match every > 0
            && step.epoch >= self.config.skip_epochs
            && (step.global_step + 1).is_multiple_of(every)
        {
            true => self.collect(model),
            false => Ok(()),
        }
    }

    fn on_epoch_end(&mut self, model: &Bnn<B, L>, stats: &EpochStats) -> Result<Flow, TrainError> {
        if self.config.every_steps == 0 && stats.epoch >= self.config.skip_epochs {
            self.collect(model)?;
        }
        Ok(Flow::Continue)
    }
}

/// A SWAG posterior over a point network's weights.
#[derive(Debug, Clone)]
pub struct Swag<B: Body, L: Likelihood> {
    net: Bnn<B, L>,
    moments: SwagMoments,
    diagonal: bool,
}

use crate::batch::Batch;

impl<B: Body, L: Likelihood> Swag<B, L> {
    /// SWAG over `net` (the network the moments were collected on, or its copy on another
    /// device) with `moments`; with fewer than two deviations, or `diagonal`, SWAG-diagonal.
    ///
    /// # Errors
    /// When the moments were collected on another network (its layers' ids or sizes differ).
    pub fn new(net: Bnn<B, L>, moments: SwagMoments, diagonal: bool) -> Result<Self, ConfigError> {
        let mut ids = Vec::new();
        net.visit_layers(&mut IdsOf(&mut ids));
        if ids != moments.ids {
            return Err(ConfigError {
                config: "Swag",
                field: "moments",
                value: "moments of another network".into(),
                expected: "the moments a SwagCollector gathered while training this network",
            });
        }
        let device = net.devices()[0].clone();
        let diagonal = diagonal || moments.deviations.len() < 2;
        Ok(Self {
            moments: moments.moved_to(&device),
            net,
            diagonal,
        })
    }

    /// Collects SWAG's moments while `trainer` continues training `net` on `data` (constant
    /// learning rate, e.g. SGD from the MAP fit), and returns the posterior.
    ///
    /// # Errors
    /// The trainer's errors; [`TrainError::Config`] when no iterate was collected (fewer
    /// epochs than `skip_epochs`).
    pub fn fit<D>(
        net: Bnn<B, L>,
        trainer: crate::train::Trainer<Bnn<B, L>>,
        data: D,
        config: SwagConfig,
    ) -> Result<Self, TrainError>
    where
        D: crate::train::TrainData<Input = B::Input, Target = L::Target>,
    {
        let collector = SwagCollector::new(config);
        let handle = collector.handle();
        let (net, _) = trainer.with_callback(collector).fit(net, data)?;
        let moments = handle
            .lock()
            .expect("the SWAG state's lock")
            .take()
            .ok_or_else(|| {
                TrainError::Config(ConfigError {
                    config: "SwagConfig",
                    field: "skip_epochs",
                    value: "no iterate collected".into(),
                    expected: "fewer skipped epochs than the trainer runs",
                })
            })?;
        Ok(Self::new(net.valid(), moments, false)?)
    }

    /// SWAG from `net` by plain SGD under `config` (its epochs, batch size and seed; its
    /// optimiser is replaced) at [`sgd_posterior_learning_rate`] from `batches` minibatches,
    /// at most `config.learning_rate` (the rule's curvature is the data's: where they leave the
    /// loss flat, a MAP fit that separates its classes, it allows steps no network survives);
    /// where the SGD phase diverges (a MAP fit not yet at a mode, where the rate's
    /// curvature estimate is too low) or its loss overflows, the rate is halved and the phase run
    /// again, at most [`RATE_HALVINGS`] times. Returns the posterior and the rate it ran at.
    ///
    /// # Errors
    /// The rate's errors; the trainer's, the last divergence included.
    pub fn fit_at_posterior_rate(
        net: Bnn<B, L>,
        input: B::Input,
        target: L::Target,
        config: crate::train::TrainConfig,
        swag: SwagConfig,
        batches: usize,
    ) -> Result<(Self, f64), TrainError> {
        let b = config.batch_size.min(input.len()).max(1);
        let posterior = sgd_posterior_learning_rate(&net, &input, &target, b, batches)?;
        let mut rate = posterior.min(config.learning_rate);
        let sgd = crate::train::OptimizerConfig::Sgd {
            momentum: 0.0,
            nesterov: false,
        };
        for halving in 0..=RATE_HALVINGS {
            let config = config
                .clone()
                .with_batch_size(b)
                .with_learning_rate(rate)
                .with_optimizer(sgd.clone());
            let trainer = crate::train::Trainer::new(config);
            let data = (input.clone(), target.clone());
            match Self::fit(net.clone(), trainer, data, swag.clone()) {
                Err(TrainError::Diverged { .. } | TrainError::NonFinite { .. })
                    if halving < RATE_HALVINGS =>
                {
                    rate /= 2.0
                }
                result => return result.map(|s| (s, rate)),
            }
        }
        unreachable!("the last halving returns")
    }

    /// The moments.
    pub fn moments(&self) -> &SwagMoments {
        &self.moments
    }
}

impl<B: Body, L: Likelihood> NetworkPosterior for Swag<B, L> {
    type Body = B;
    type Likelihood = L;

    fn network(&self) -> &Bnn<B, L> {
        &self.net
    }

    fn joint_draws(&self, n: usize) -> Vec<LayerDraw> {
        crate::device::uses_generator();
        let m = &self.moments;
        let device = m.mean.device();
        let p = m.mean.dims()[1];
        let z1 = Tensor::<2>::random([n, p], Distribution::Normal(0.0, 1.0), &device);
        let diag = m.diagonal_variance().sqrt();
        let theta = match self.diagonal {
            true => m.mean.clone() + z1 * diag,
            false => {
                let k = m.deviations.len();
                let d = Tensor::cat(m.deviations.iter().cloned().collect(), 0);
                let z2 = Tensor::<2>::random([n, k], Distribution::Normal(0.0, 1.0), &device);
                m.mean.clone()
                    + z1 * diag * std::f64::consts::FRAC_1_SQRT_2
                    + z2.matmul(d) / (2.0 * (k as f64 - 1.0)).sqrt()
            }
        };
        m.layout.split(theta)
    }
}

/// Halvings of the SGD rate [`Swag::fit_at_posterior_rate`] tries after a divergence.
pub const RATE_HALVINGS: usize = 6;

/// The constant SGD learning rate whose iterates best match the Laplace posterior in KL
/// (Mandt et al. 2017, eq. 15): `η* = 2 B P / (N tr C)`, `P` the parameter count, `N` the
/// training rows and `C` the per-example gradient covariance of the mean negative
/// log-likelihood at `net`'s weights, estimated from `batches` random minibatches of `batch_size`
/// rows as `tr C ≈ B/(R − 1) Σ_b ‖g_b − ḡ‖² · (N − 1)/(N − B)`, capped at
/// `2B/(N λ_max(C) + p₀)`, `p₀` the largest prior precision: with `C ≈ H` at a mode, SGD's
/// stationary variance `η/(2B)` along the stiffest direction is then no wider than the
/// posterior's `1/(N λ_max + p₀)` (isotropic SGD cannot match every direction; this errs
/// narrow, and stays finite where the data leave the loss flat). The rate for SWAG's SGD phase when no validation search is
/// run; `net` must live on an autodiff device.
///
/// # Errors
/// Fewer than two batches, a batch size above the rows, a network with stochastic layers, or
/// gradients without noise (`tr C = 0`).
pub fn sgd_posterior_learning_rate<B: Body, L: Likelihood>(
    net: &Bnn<B, L>,
    input: &B::Input,
    target: &L::Target,
    batch_size: usize,
    batches: usize,
) -> Result<f64, ConfigError> {
    use crate::batch::Batch;
    use crate::step::{Model, StepRequest};
    let n = input.len();
    let bad = |field: &'static str, value: String, expected: &'static str| ConfigError {
        config: "sgd_posterior_learning_rate",
        field,
        value,
        expected,
    };
    if batches < 2 {
        return Err(bad("batches", batches.to_string(), "at least 2"));
    }
    if batch_size == 0 || batch_size > n {
        return Err(bad(
            "batch_size",
            batch_size.to_string(),
            "between 1 and the rows",
        ));
    }
    if !net.is_point() {
        return Err(bad("net", "stochastic layers".into(), "a point network"));
    }
    let device = net.devices()[0].clone();
    crate::device::uses_generator();
    let mut gradients: Vec<Tensor<1>> = Vec::with_capacity(batches);
    for _ in 0..batches {
        let rows = Tensor::<1>::random([n], Distribution::Default, &device)
            .argsort(0)
            .slice(0..batch_size);
        let batch = crate::batch::Minibatch {
            input: input.rows(rows.clone()),
            target: target.rows(rows.clone()),
            rows,
            n_train: n,
        };
        let request = StepRequest {
            weight_kl: false,
            ..StepRequest::new(1)
        };
        let terms = net.step(batch, request).map_err(|e| {
            bad(
                "net",
                e.to_string(),
                "a network whose step has a likelihood",
            )
        })?;
        let grads = terms.log_likelihood.mean().neg().backward();
        let mut flat = Vec::new();
        net.visit_layers(&mut PointGradients(&grads, &mut flat));
        if flat.is_empty() {
            return Err(bad(
                "net",
                "no weight gradients".into(),
                "point layers whose weights the likelihood depends on",
            ));
        }
        gradients.push(Tensor::cat(flat, 0));
    }
    let p = gradients[0].dims()[0];
    // C ≈ s Gᵀ G over the centred batch gradients G [R, P]; a batch drawn without replacement
    // has `Var = (C/B)(N − B)/(N − 1)`. Only the R × R Gram matrix G Gᵀ leaves the device.
    let g = Tensor::stack::<2>(gradients, 0);
    let centred = g.clone() - g.mean_dim(0);
    let finite = (n as f64 - 1.0) / (n - batch_size).max(1) as f64;
    let s = batch_size as f64 * finite / (batches - 1) as f64;
    let gram: Vec<f64> = crate::host::to_vec(centred.clone().matmul(centred.transpose()))
        .into_iter()
        .map(|v| v * s)
        .collect();
    let trace: f64 = (0..batches).map(|i| gram[i * batches + i]).sum();
    if !(trace > 0.0 && trace.is_finite()) {
        return Err(bad(
            "net",
            format!("tr C = {trace}"),
            "gradients that vary between batches",
        ));
    }
    // The largest eigenvalue of C (that of the R × R Gram matrix) bounds the rate: with C ≈ H at
    // a mode, SGD's stationary variance along an eigendirection is η/(2B), the posterior's
    // 1/(N λ); at η ≤ 2B/(N λ_max) no direction is wider than the posterior.
    let top = crate::linalg::dense::symmetric_eigenvalues(gram, batches)
        .last()
        .copied()
        .unwrap_or(trace);
    // The prior's curvature adds to the likelihood's: where the data leave a direction flat
    // (C ≈ 0, a separable class problem), the posterior's width is the prior's.
    let mut prior = PriorPrecision(0.0);
    net.visit_layers(&mut prior);
    let b = batch_size as f64;
    let mandt = 2.0 * b * p as f64 / (n as f64 * trace);
    Ok(mandt.min(2.0 * b / (n as f64 * top + prior.0)))
}

/// The largest prior precision `1/σ₀²` over every layer's weights and biases.
struct PriorPrecision(f64);

impl crate::layers::LayerVisitor for PriorPrecision {
    fn visit<const DW: usize>(
        &mut self,
        _: crate::layers::LayerInfo,
        params: &crate::layers::AnyLayerParams<DW>,
    ) {
        use crate::dist::WeightPrior;
        fn precision<const D: usize>(prior: &WeightPrior<D>) -> f64 {
            match prior {
                WeightPrior::Gaussian(g) => match g.scalars() {
                    Some((_, s)) => 1.0 / (s * s),
                    None => {
                        let min = crate::host::to_vec(g.std().min())[0];
                        1.0 / (min * min)
                    }
                },
                WeightPrior::ScaleMixture(m) => 1.0 / m.sigma1.min(m.sigma2).powi(2),
            }
        }
        self.0 = self.0.max(precision(&params.weight_prior));
        if let Some(b) = &params.bias_prior {
            self.0 = self.0.max(precision(b));
        }
    }
}

/// Appends every point layer's weight and bias gradients, flat, in forward order.
pub(crate) struct PointGradients<'a>(
    pub(crate) &'a burn::tensor::Gradients,
    pub(crate) &'a mut Vec<Tensor<1>>,
);

impl crate::layers::LayerVisitor for PointGradients<'_> {
    fn visit<const DW: usize>(
        &mut self,
        _: crate::layers::LayerInfo,
        params: &crate::layers::AnyLayerParams<DW>,
    ) {
        use crate::posterior::AnyPosterior;
        if let AnyPosterior::Point(w) = &params.weight
            && let Some(g) = w.weight.val().grad(self.0)
        {
            self.1.push(g.flatten(0, DW - 1));
        }
        if let Some(AnyPosterior::Point(b)) = &params.bias
            && let Some(g) = b.weight.val().grad(self.0)
        {
            self.1.push(g.flatten(0, 0));
        }
    }
}

super::network_predict!(Swag);
