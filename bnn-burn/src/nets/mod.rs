//! Networks: a body (feature extractor), a head (the last Bayesian linear layer) and a
//! likelihood, in one type [`Bnn`] for every task.
//!
//! The body/head split lets last-layer methods (last-layer Laplace, evidential heads) work on
//! the features. Every network has one forward loop: prediction, training steps and fixed
//! network draws differ only in the [`Pass`] they carry.

mod conv;
mod latent;
mod mlp;
mod moments;
mod pac;
mod recurrent;

pub use conv::{ConvBlock, ConvBody, ConvNetConfig, ConvSpec, conv_features};
pub use latent::{
    BnnLv, BnnLvConfig, ClassDecomposition, Decomposition, DecompositionError, LatentRegressor,
    Sensitivity,
};
pub use mlp::{MlpBody, MlpConfig};
pub use moments::{MomentConfig, NoiseRefit};
pub use recurrent::{Cell, RecurrentBody, RecurrentConfig, RecurrentState};

use crate::batch::{Batch, Minibatch};
use crate::dist::Moments;
use crate::error::{ConfigError, DataMismatch};
use crate::layers::visit::{Collect, EmpiricalBayesPrior, LayerView, PosteriorAsPrior};
use crate::layers::{
    BayesianLinear, FlatLayout, LayerDraw, LayerInfo, LayerKind, LayerMapper, LayerVisitor, Pass,
};
use crate::likelihood::{
    Categorical, GaussianLikelihood, HeteroscedasticGaussian, Likelihood, LogitRule,
};
use crate::objective::{Inference, KlTerm, StepRequest, StepTerms};
use crate::posterior::{KlDivergence, Unsupported};
use crate::predict::{Predict, PredictError, PredictMode};
use crate::step::Model;
use burn::module::{Module, ModuleDisplay};
use burn::tensor::Tensor;

/// The part of a network before its last layer.
pub trait Body: Module + ModuleDisplay + 'static {
    /// Inputs, first axis examples.
    type Input: Batch;

    /// Features `[S, B, F]` of the pass's `S` draws.
    fn features(&self, input: Self::Input, pass: &mut Pass) -> Tensor<3>;

    /// Feature moments `[1, B, F]` under a moment pass ([`Pass::moments`]).
    ///
    /// # Errors
    /// When a layer or activation has no moment rule; the default: a body that does not
    /// propagate moments.
    fn feature_moments(
        &self,
        _input: Self::Input,
        _pass: &mut Pass,
    ) -> Result<Moments<3>, Unsupported> {
        Err(Unsupported {
            family: std::any::type_name::<Self>(),
            what: "this body does not propagate moments; predict with PredictMode::Samples(n)",
        })
    }

    /// Feature width `F`.
    fn feature_dim(&self) -> usize;

    /// Checks that `input` has rows of the shape the body takes. The default accepts anything.
    ///
    /// # Errors
    /// [`DataMismatch::Shape`] naming the shapes.
    fn check_input(&self, input: &Self::Input) -> Result<(), DataMismatch> {
        let _ = input;
        Ok(())
    }

    /// Visits every Bayesian layer, in the order [`Body::features`] uses them, indexed from 0.
    fn visit_layers<V: LayerVisitor>(&self, visitor: &mut V);

    /// Rebuilds every Bayesian layer through `mapper`, in the order of [`Body::visit_layers`].
    ///
    /// # Errors
    /// The mapper's first error.
    fn map_layers<M: LayerMapper>(self, mapper: &mut M) -> Result<Self, ConfigError>
    where
        Self: Sized;

    /// One fixed draw of every layer, in the order [`Body::features`] uses them.
    fn draw(&self) -> Vec<LayerDraw> {
        collect_layers(self, |_, l| l.draws(1))
    }

    /// Whether every layer is a point estimate.
    fn is_point(&self) -> bool {
        collect_layers(self, |_, l| l.is_point())
            .into_iter()
            .all(|p| p)
    }

    /// The KL of every layer (one element each; empty for a body without layers).
    fn layer_kls(&self) -> Vec<Tensor<1>> {
        collect_layers(self, |_, l| l.kl())
    }

    /// The same body with every layer's posterior, moment-matched, as its prior
    /// ([`crate::layers::LayerParams::with_posterior_as_prior`]): the next task's body in
    /// variational continual learning (Nguyen et al. 2018; Farquhar 2022 ch. 6).
    ///
    /// # Errors
    /// When a layer's posterior has no positive marginal variance (a point estimate).
    fn with_posterior_as_prior(self) -> Result<Self, ConfigError>
    where
        Self: Sized,
    {
        self.map_layers(&mut PosteriorAsPrior)
    }
}

/// `f` of every layer of `body`, in forward order.
fn collect_layers<B: Body, T>(body: &B, f: impl FnMut(LayerInfo, &dyn LayerView) -> T) -> Vec<T> {
    let mut collect = Collect(Vec::new(), f);
    body.visit_layers(&mut collect);
    collect.0
}

/// A Bayesian neural network: body, head and likelihood.
#[derive(Module, Debug)]
pub struct Bnn<B: Module, L: Module> {
    /// Feature extractor.
    pub body: B,
    /// Last layer: features → the likelihood's parameters.
    pub head: BayesianLinear,
    /// Observation model.
    pub likelihood: L,
    /// Moment propagation: the rule, the logits' treatment, and whether training uses it.
    #[module(skip)]
    pub moments: MomentConfig,
}

/// A regressor with a homoscedastic Gaussian likelihood.
pub type Regressor = Bnn<MlpBody, GaussianLikelihood>;
/// A regressor with a heteroscedastic Gaussian head.
pub type HeteroscedasticRegressor = Bnn<MlpBody, HeteroscedasticGaussian>;
/// An MLP classifier.
pub type Classifier = Bnn<MlpBody, Categorical>;
/// A convolutional image classifier.
pub type ImageClassifier = Bnn<ConvBody, Categorical>;

impl<B: Body, L: Likelihood> Bnn<B, L> {
    /// The network from its parts.
    ///
    /// # Panics
    /// If the head's input width is not the body's feature width (both are named).
    pub fn new(body: B, head: BayesianLinear, likelihood: L) -> Self {
        let [head_in, _] = head.shape();
        assert_eq!(
            head_in,
            body.feature_dim(),
            "Bnn: the head takes {head_in} features, the body gives {}",
            body.feature_dim()
        );
        Self {
            body,
            head,
            likelihood,
            moments: MomentConfig::new(),
        }
    }

    /// The head's outputs (the likelihood's parameters) of the pass's draws, `[S, B, k]`.
    pub fn forward(&self, input: B::Input, pass: &mut Pass) -> Tensor<3> {
        let features = self.body.features(input, pass);
        self.head.run(features, pass)
    }

    /// Features of `samples` draws, `[S, B, F]` (for last-layer methods).
    pub fn features(&self, input: B::Input, samples: usize) -> Tensor<3> {
        self.body.features(input, &mut Pass::predict(samples))
    }

    /// Whether every layer is a point estimate (one draw is then the whole posterior).
    pub fn is_point(&self) -> bool {
        self.body.is_point() && self.head.params.is_point()
    }

    /// The same network with every layer's posterior, moment-matched, as its prior: after
    /// training on one task, the model to train on the next in variational continual learning
    /// (Nguyen et al. 2018; Farquhar 2022 ch. 6), whose KL then keeps the weights near what the
    /// earlier tasks taught. On the fused kernels the KL to such a prior (a mean and a standard
    /// deviation per weight) is computed in the draws' own passes, its gradient folded into
    /// theirs (`crate::fused::sample`'s per-weight prior). Its curvature
    /// in a mean is `1/σ₀²`, the trained posterior's inverse variance: with small posterior
    /// variances the next task needs small steps (a mean-field net at the default `σ ≈ 0.007`
    /// diverged under Adam at 10⁻², which the training loop reports, and trained at 10⁻³).
    ///
    /// # Errors
    /// When a layer's posterior has no positive marginal variance (a point estimate).
    pub fn with_posterior_as_prior(self) -> Result<Self, ConfigError> {
        self.map_layers(&mut PosteriorAsPrior)
    }

    /// The network with every layer's prior scale at the ELBO's optimum for its current
    /// posterior, per tensor ([`crate::layers::LayerParams::with_empirical_bayes_prior`]);
    /// between epochs, [`crate::train::EmpiricalBayesPrior`] alternates it with the ELBO's
    /// steps.
    ///
    /// # Errors
    /// A layer whose prior is not a scalar Gaussian, or whose posterior sits at the prior mean.
    pub fn with_empirical_bayes_prior(self) -> Result<Self, ConfigError> {
        self.map_layers(&mut EmpiricalBayesPrior)
    }

    /// One weight draw of the whole network, held fixed across calls (roll-outs, SDE paths).
    pub fn draw(&self) -> NetDraw<B, L> {
        let mut draws = self.body.draw();
        draws.push(self.head.params.draw());
        NetDraw {
            model: self.clone(),
            draws,
        }
    }

    /// Visits every Bayesian layer, the body's then the head (the last index).
    pub fn visit_layers<V: LayerVisitor>(&self, visitor: &mut V) {
        self.body.visit_layers(visitor);
        let info = LayerInfo {
            index: self.layer_count() - 1,
            kind: LayerKind::Dense,
        };
        visitor.visit(info, &self.head.params);
    }

    /// Rebuilds every Bayesian layer through `mapper`, the body's then the head.
    ///
    /// # Errors
    /// The mapper's first error.
    pub fn map_layers<M: LayerMapper>(self, mapper: &mut M) -> Result<Self, ConfigError> {
        let index = self.layer_count() - 1;
        let Self {
            body,
            mut head,
            likelihood,
            moments,
        } = self;
        let body = body.map_layers(mapper)?;
        let info = LayerInfo {
            index,
            kind: LayerKind::Dense,
        };
        head.params = mapper.map(info, head.params)?;
        Ok(Self {
            body,
            head,
            likelihood,
            moments,
        })
    }

    /// Refuses inputs without rows, of another shape than the body takes, or with NaN or an
    /// infinity (the checks of [`Predict::predict`], for predictions built on this network).
    ///
    /// # Errors
    /// The first problem, naming the row where there is one.
    pub fn check_prediction_input(&self, input: &B::Input) -> Result<(), PredictError> {
        self.check_prediction_shape(input)?;
        match input.first_non_finite() {
            Some(row) => Err(PredictError::NonFiniteInput { row }),
            None => Ok(()),
        }
    }

    /// The checks of [`Self::check_prediction_input`] that read nothing back: rows, and the
    /// body's shape.
    fn check_prediction_shape(&self, input: &B::Input) -> Result<(), PredictError> {
        if input.is_empty() {
            return Err(DataMismatch::Empty { part: "inputs" }.into());
        }
        self.body.check_input(input)?;
        Ok(())
    }

    /// [`Predict::predict`] on a device that cannot read back synchronously (WebGPU in a
    /// browser): the same checks, their reads awaited, and the noise keyed by `key` instead of
    /// drawn from the device's generator (a read). The same `key` gives the same draws.
    ///
    /// # Errors
    /// As [`Predict::predict`].
    pub async fn predict_async(
        &self,
        input: B::Input,
        mode: PredictMode,
        key: u64,
    ) -> Result<L::Prediction, PredictError> {
        self.check_prediction_shape(&input)?;
        if let Some(counts) = input.non_finite_counts()
            && let Some(row) = crate::host::first_positive(&crate::host::to_vec_async(counts).await)
        {
            return Err(PredictError::NonFiniteInput { row });
        }
        let samples = match mode {
            PredictMode::Samples(0) => return Err(PredictError::NoSamples),
            PredictMode::Samples(_) if self.is_point() => 1,
            PredictMode::Samples(n) => n,
            PredictMode::Moments => {
                let m = {
                    let _flushed = crate::device::SubnormalsFlushed::enter();
                    self.predictive_moments(input)
                        .map_err(moments_unsupported)?
                };
                let counts = crate::host::to_vec_async(output_counts(moment_rows(&m))).await;
                first_non_finite_output(&counts)?;
                let logits = self.moments.predict_logits;
                return self
                    .likelihood
                    .predict_moments(m, logits)
                    .map_err(moments_unsupported);
            }
        };
        let mut pass = Pass::predict(samples).with_noise_key(Some(key));
        let out = {
            let _flushed = crate::device::SubnormalsFlushed::enter();
            self.forward(input, &mut pass)
        };
        first_non_finite_output(&crate::host::to_vec_async(output_counts(out.clone())).await)?;
        Ok(self.likelihood.predict(out))
    }

    /// Bayesian layers, the head included.
    pub fn layer_count(&self) -> usize {
        collect_layers(&self.body, |_, _| ()).len() + 1
    }

    /// The posterior means of every layer as one network draw (a MAP net's weights).
    pub fn mean_draw(&self) -> Vec<LayerDraw> {
        let mut draws = collect_layers(&self.body, |_, l| l.mean_draw());
        draws.push(self.head.params.mean_draw());
        draws
    }

    /// `n` joint draws of every layer from its posterior (independent across layers), one
    /// [`LayerDraw`] per layer holding `[n, numel]`: `n` networks to hold fixed (roll-outs).
    pub fn joint_draws(&self, n: usize) -> Vec<LayerDraw> {
        let mut draws = collect_layers(&self.body, |_, l| l.draws(n));
        draws.push(self.head.params.draws(n));
        draws
    }

    /// `n` joint draws of every layer from its posterior (independent across layers), with
    /// `ln q` of each, `[n]`: the proposal of importance sampling ([`crate::inference`]'s
    /// `network_check`).
    ///
    /// # Errors
    /// When a layer's posterior has no density (a point mass, a dropout mask).
    pub fn draws_with_log_q(&self, n: usize) -> Result<(Vec<LayerDraw>, Tensor<1>), Unsupported> {
        let mut layers = collect_layers(&self.body, |_, l| l.draws_with_log_q(n));
        layers.push(self.head.params.draws_with_log_q(n));
        let mut draws = Vec::with_capacity(layers.len());
        let mut total: Option<Tensor<1>> = None;
        for layer in layers {
            let (draw, log_q) = layer?;
            total = Some(match total {
                Some(t) => t + log_q,
                None => log_q,
            });
            draws.push(draw);
        }
        Ok((draws, total.expect("a head")))
    }

    /// How this network's weights lie in one flat vector ([`FlatLayout`]).
    pub fn flat_layout(&self) -> FlatLayout {
        FlatLayout::of(&self.mean_draw())
    }

    /// `ln p(θ_s)` of `S` joint draws of every layer (as [`Self::forward_draws`] takes them)
    /// under the layers' priors, `[S]`.
    ///
    /// # Panics
    /// If `draws` does not have one entry per layer.
    pub fn log_prior_draws(&self, draws: &[LayerDraw]) -> Tensor<1> {
        assert_eq!(
            draws.len(),
            self.layer_count(),
            "a network draw has one entry per Bayesian layer"
        );
        let mut parts = collect_layers(&self.body, |info, l| l.log_prior(&draws[info.index]));
        parts.push(self.head.params.log_prior(&draws[draws.len() - 1]));
        parts.into_iter().reduce(|a, b| a + b).expect("a head")
    }

    /// The head's outputs `[S, B, k]` under `S` joint draws of every layer's weights (one
    /// [`LayerDraw`] per layer in forward order, `[S, numel]` each): the prediction path of a
    /// network-level posterior ([`crate::posthoc`]).
    ///
    /// # Panics
    /// If `draws` does not have one entry per layer, or its layers hold different `S`.
    pub fn forward_draws(&self, input: B::Input, draws: &[LayerDraw]) -> Tensor<3> {
        assert_eq!(
            draws.len(),
            self.layer_count(),
            "a network draw has one entry per Bayesian layer"
        );
        self.forward(input, &mut Pass::fixed(draws))
    }
}

/// A network with one fixed weight draw.
#[derive(Debug, Clone)]
pub struct NetDraw<B: Body, L: Likelihood> {
    model: Bnn<B, L>,
    draws: Vec<LayerDraw>,
}

impl<B: Body, L: Likelihood> NetDraw<B, L> {
    /// The head's outputs under the fixed weights, `[B, k]`.
    pub fn forward(&self, input: B::Input) -> Tensor<2> {
        self.model
            .forward(input, &mut Pass::fixed(&self.draws))
            .squeeze_dim(0)
    }

    /// The likelihood's prediction under the fixed weights (one draw). Unlike
    /// [`Predict::predict`] it does not look for NaN or infinities in `input` first (a
    /// roll-out calls it at every step, and the check reads the input back): a non-finite
    /// input row gives a non-finite prediction for that row.
    pub fn predict(&self, input: B::Input) -> L::Prediction {
        let out = self.model.forward(input, &mut Pass::fixed(&self.draws));
        self.model.likelihood.predict(out)
    }
}

impl<B: Body, L: Likelihood> KlDivergence for Bnn<B, L> {
    fn kl(&self) -> Tensor<1> {
        self.body
            .layer_kls()
            .into_iter()
            .fold(self.head.kl(), |acc, kl| acc + kl)
    }
}

impl<B: Body, L: Likelihood> Predict for Bnn<B, L> {
    type Input = B::Input;
    type Prediction = L::Prediction;

    fn predict(&self, input: B::Input, mode: PredictMode) -> Result<L::Prediction, PredictError> {
        // Subnormals flushed to zero (see `device::flush_subnormals`): the moment pass
        // multiplies small variances together.
        let _flushed = crate::device::SubnormalsFlushed::enter();
        self.check_prediction_input(&input)?;
        let samples = match mode {
            PredictMode::Samples(0) => return Err(PredictError::NoSamples),
            PredictMode::Samples(_) if self.is_point() => 1,
            PredictMode::Samples(n) => n,
            PredictMode::Moments => {
                let m = self.predictive_moments(input);
                return predict_from_moments(&self.likelihood, m, self.moments.predict_logits);
            }
        };
        let out = self.forward(input, &mut Pass::predict(samples));
        check_outputs_finite(out.clone())?;
        Ok(self.likelihood.predict(out))
    }
}

/// The likelihood's prediction from output moments `[B, k]` (after checking they are finite),
/// or why there is none.
pub(crate) fn predict_from_moments<L: Likelihood>(
    likelihood: &L,
    moments: Result<Moments<2>, Unsupported>,
    logits: LogitRule,
) -> Result<L::Prediction, PredictError> {
    let m = moments.map_err(moments_unsupported)?;
    check_outputs_finite(moment_rows(&m))?;
    likelihood
        .predict_moments(m, logits)
        .map_err(moments_unsupported)
}

/// Output moments `[B, k]` as the rows `[1, B, 2k]` of the finite check.
fn moment_rows(m: &Moments<2>) -> Tensor<3> {
    Tensor::cat(vec![m.mean.clone(), m.var.clone()], 1).unsqueeze()
}

/// A moment rule the model cannot follow, as the prediction error.
fn moments_unsupported(why: Unsupported) -> PredictError {
    PredictError::Unsupported {
        model: why.family,
        mode: PredictMode::Moments,
        reason: why.what,
    }
}

/// Refuses outputs `[S, B, k]` with a NaN or an infinity from finite inputs (an overflow),
/// naming the first such row.
///
/// # Errors
/// [`PredictError::NonFiniteOutput`] with the first such row.
pub(crate) fn check_outputs_finite(out: Tensor<3>) -> Result<(), PredictError> {
    first_non_finite_output(&crate::host::to_vec(output_counts(out)))
}

/// How many NaN or infinite outputs each input row `b` of `out [S, B, k]` has, `[B]`.
fn output_counts(out: Tensor<3>) -> Tensor<1> {
    let [s, b, k] = out.dims();
    crate::host::non_finite_counts(out.swap_dims(0, 1).reshape([b, s * k]))
}

/// The error for the first row with a positive count of non-finite outputs.
fn first_non_finite_output(counts: &[f64]) -> Result<(), PredictError> {
    match crate::host::first_positive(counts) {
        None => Ok(()),
        Some(row) => Err(PredictError::NonFiniteOutput { row }),
    }
}

/// The weight a step's request folded into the layers: only when it collects the KL.
pub(crate) fn folded(request: &StepRequest) -> Option<f64> {
    request.kl_fold.filter(|_| request.weight_kl)
}

impl<B: Body, L: Likelihood> Model for Bnn<B, L> {
    type Input = B::Input;
    type Target = L::Target;

    fn check_data(&self, input: &B::Input, target: &L::Target) -> Result<(), DataMismatch> {
        self.body.check_input(input)?;
        let [_, outputs] = self.head.shape();
        target.check_as_target(outputs / self.likelihood.outputs_per_target().max(1))
    }

    fn step(
        &self,
        batch: Minibatch<B::Input, L::Target>,
        request: StepRequest,
    ) -> Result<StepTerms, Unsupported> {
        if request.inference == Inference::Moments {
            return self.moment_step(batch, request);
        }
        let mut pass = Pass::train(request.samples, request.log_ratio)
            .with_kernels(request.kernels)
            .with_noise_key(request.noise_key)
            .collecting_kl(request.weight_kl);
        if let Some(weight) = request.kl_fold {
            pass = pass.fold_kl(weight);
        }
        let out = self.forward(batch.input, &mut pass);
        let device = out.device();
        let local_kl = self.likelihood.local_kl(&out, &batch.target);
        let log_likelihood = self.likelihood.log_likelihood(out, batch.target);
        let (kl, log_ratio) = pass.into_terms(&device);
        Ok(StepTerms {
            log_likelihood,
            kl: KlTerm::of_request(kl, folded(&request)),
            local_kl,
            log_ratio: log_ratio?,
            local_log_ratio: None,
        })
    }
}

impl<B: Body, L: Likelihood> Bnn<B, L> {
    /// A training step by moment propagation: `E_q[ln p(y | f)]` from the outputs' moments,
    /// one deterministic pass on the request's kernels, the layers' KL when it asks for it
    /// (folded into the fused layers' backward passes when it says how).
    fn moment_step(
        &self,
        batch: Minibatch<B::Input, L::Target>,
        request: StepRequest,
    ) -> Result<StepTerms, Unsupported> {
        if request.log_ratio {
            return Err(Unsupported {
                family: "moment propagation",
                what: "has no per-draw ln q(w) − ln p(w): train it with the ELBO",
            });
        }
        let mut pass = Pass::train_moments(self.moments.rule)
            .with_kernels(request.kernels)
            .collecting_kl(request.weight_kl);
        if let Some(weight) = request.kl_fold {
            pass = pass.fold_kl(weight);
        }
        let out = self.output_moments(batch.input, &mut pass)?;
        let device = out.mean.device();
        let out = Moments::new(out.mean.squeeze_dim(0), out.var.squeeze_dim(0));
        let b = out.dims()[0];
        let local_kl = self.likelihood.expected_local_kl(
            out.clone(),
            &batch.target,
            self.moments.train_logits,
        )?;
        let ll = self.likelihood.expected_log_likelihood(
            out,
            batch.target,
            self.moments.train_logits,
        )?;
        let (kl, _) = pass.into_terms(&device);
        Ok(StepTerms {
            log_likelihood: ll.reshape([1, b]),
            kl: KlTerm::of_request(kl, folded(&request)),
            local_kl,
            log_ratio: None,
            local_log_ratio: None,
        })
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

#[cfg(test)]
#[path = "bad_input_tests.rs"]
mod bad_input_tests;
