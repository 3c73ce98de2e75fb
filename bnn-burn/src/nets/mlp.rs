//! The multilayer perceptron body: Bayesian linear layers with an activation after each.

use super::{Bnn, Body};
use crate::dist::Moments;
use crate::error::{Check, ConfigError, DataMismatch};
use crate::fused::Kernels;
use crate::layers::{
    Activation, BayesianLinear, BayesianLinearConfig, LayerInfo, LayerKind, LayerMapper,
    LayerVisitor, Pass, WeightConfig,
};
use crate::likelihood::Likelihood;
use crate::posterior::{DropoutNoise, McDropout, Unsupported};
use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Tensor};

/// Configuration of an MLP [`Bnn`].
#[derive(Config, Debug)]
pub struct MlpConfig {
    /// Input width.
    pub d_input: usize,
    /// Hidden widths (the body); the head maps the last to the outputs.
    pub hidden: Vec<usize>,
    /// Target dimensions (regression) or classes (classification).
    pub d_output: usize,
    /// Weight model of every layer.
    #[config(default = "WeightConfig::new()")]
    pub weights: WeightConfig,
    /// Activation after every hidden layer.
    #[config(default = "Activation::Relu")]
    pub activation: Activation,
    /// Drop probability `p ∈ [0, 1)` of inverted dropout on every hidden layer's output in
    /// training steps only, `h ⊙ z/(1−p)` with `z ~ Bern(1−p)` (Srivastava et al. 2014; the
    /// 500 units of Sensoy et al. 2018's EDL LeNet, `p = 0.5`). Prediction keeps every unit (the
    /// expected activation); for MC dropout, which keeps the noise at prediction, use a dropout
    /// [`WeightConfig`] posterior instead. 0 (default): none.
    #[config(default = 0.0)]
    pub dropout: f64,
}

/// Hidden Bayesian linear layers, each followed by the activation.
#[derive(Module, Debug)]
pub struct MlpBody {
    /// The layers, input to output.
    pub layers: Vec<BayesianLinear>,
    /// Activation after every layer.
    #[module(skip)]
    pub activation: Activation,
    /// Input width.
    #[module(skip)]
    pub d_input: usize,
    /// Train-only dropout after every layer ([`MlpConfig::dropout`]).
    #[module(skip)]
    pub dropout: f64,
}

impl MlpConfig {
    /// The network with `likelihood`; its head has `d_output × outputs_per_target` units.
    pub fn init<L: Likelihood>(
        &self,
        likelihood: L,
        device: &Device,
    ) -> Result<Bnn<MlpBody, L>, ConfigError> {
        let check = Check("MlpConfig");
        check.at_least_one("d_output", self.d_output)?;
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(ConfigError {
                config: "MlpConfig",
                field: "dropout",
                value: format!("{}", self.dropout),
                expected: "a drop probability in [0, 1)",
            });
        }
        let mut body = MlpBody::new(
            self.d_input,
            &self.hidden,
            &self.weights,
            self.activation,
            device,
        )?;
        body.dropout = self.dropout;
        let head = BayesianLinearConfig::new(
            body.feature_dim(),
            self.d_output * likelihood.outputs_per_target(),
        )
        .with_weights(self.weights.clone())
        .init(device)?;
        Ok(Bnn::new(body, head, likelihood))
    }
}

impl MlpConfig {
    /// A [`Regressor`](super::Regressor): Gaussian likelihood with a learned noise scale
    /// (σ₀ = 1 on standardised targets); `init` with a [`GaussianLikelihoodConfig`] of your own
    /// for another.
    ///
    /// [`GaussianLikelihoodConfig`]: crate::likelihood::GaussianLikelihoodConfig
    pub fn init_regressor(&self, device: &Device) -> Result<super::Regressor, ConfigError> {
        let likelihood = crate::likelihood::GaussianLikelihoodConfig::new()
            .with_d_output(self.d_output)
            .init(device)?;
        self.init(likelihood, device)
    }

    /// A [`Classifier`](super::Classifier) over `d_output` classes (softmax likelihood).
    pub fn init_classifier(&self, device: &Device) -> Result<super::Classifier, ConfigError> {
        self.init(crate::likelihood::Categorical, device)
    }
}

impl MlpBody {
    /// [`Body::visit_layers`] with the first layer at index `first`.
    pub(crate) fn visit_from<V: LayerVisitor>(&self, first: usize, visitor: &mut V) {
        for (i, layer) in self.layers.iter().enumerate() {
            let info = LayerInfo {
                index: first + i,
                kind: LayerKind::Dense,
            };
            visitor.visit(info, &layer.params);
        }
    }

    /// [`Body::map_layers`] with the first layer at index `first`.
    pub(crate) fn map_from<M: LayerMapper>(
        mut self,
        first: usize,
        mapper: &mut M,
    ) -> Result<Self, ConfigError> {
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let info = LayerInfo {
                index: first + i,
                kind: LayerKind::Dense,
            };
            layer.params = mapper.map(info, layer.params.clone())?;
        }
        Ok(self)
    }

    /// Layers `d_input → hidden[0] → … → hidden[last]`.
    pub fn new(
        d_input: usize,
        hidden: &[usize],
        weights: &WeightConfig,
        activation: Activation,
        device: &Device,
    ) -> Result<Self, ConfigError> {
        let check = Check("MlpConfig");
        check.at_least_one("d_input", d_input)?;
        for &h in hidden {
            check.at_least_one("hidden", h)?;
        }
        let mut widths = vec![d_input];
        widths.extend(hidden);
        let layers = widths
            .windows(2)
            .map(|w| {
                BayesianLinearConfig::new(w[0], w[1])
                    .with_weights(weights.clone())
                    .init(device)
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            layers,
            activation,
            d_input,
            dropout: 0.0,
        })
    }

    /// Whether this pass drops units: a training step on an autodiff device (as burn's
    /// `Dropout`, so a `valid()` copy never drops) with a positive [`Self::dropout`].
    fn drops(&self, pass: &Pass, device: &Device) -> bool {
        self.dropout > 0.0 && pass.is_training() && device.is_autodiff()
    }

    /// `[S, B, d_input]` through every layer and activation (and the train-only dropout: the
    /// fused dropout kernel, `crate::fused::dropout`, unless the pass runs the reference
    /// kernels): the one forward loop of dense layers, also used after the convolutions of a
    /// [`super::ConvBody`].
    pub fn propagate(&self, mut h: Tensor<3>, pass: &mut Pass) -> Tensor<3> {
        for layer in &self.layers {
            h = self.activation.forward(layer.run(h, pass));
            if self.drops(pass, &h.device()) {
                let dropout = McDropout {
                    p: self.dropout,
                    noise: DropoutNoise::Bernoulli,
                };
                let key = (pass.kernels() == Kernels::Fused).then(|| pass.next_key(&h.device()));
                h = dropout.forward_keyed(h, key);
            }
        }
        h
    }

    /// The moment form of [`MlpBody::propagate`]: each layer's linear moment rule, then the
    /// activation's moment rule of the pass; a training step's dropout keeps the mean and
    /// turns the variance into `(Var h + E[h]²)/(1−p) − E[h]²`.
    ///
    /// # Errors
    /// When the activation or a posterior has no moment rule.
    pub fn propagate_moments(
        &self,
        mut m: Moments<3>,
        pass: &mut Pass,
    ) -> Result<Moments<3>, Unsupported> {
        for layer in &self.layers {
            m = self
                .activation
                .pass_moments(layer.moments(m, pass)?, pass)?;
            if self.drops(pass, &m.mean.device()) {
                // z/(1−p) independent of h: the mean is kept, E[(hz)²] = E[h²]/(1−p).
                let keep = 1.0 - self.dropout;
                let var = m.second_moment() / keep - m.mean.clone().square();
                m = Moments::new(m.mean, var);
            }
        }
        Ok(m)
    }

    /// Inside a forward pass, a shape the entry points' checks let through is a bug.
    fn assert_input(&self, dims: [usize; 2]) {
        let [b, d] = dims;
        assert!(
            d == self.d_input,
            "MlpBody: input shape [{b}, {d}] has width {d}, but the network expects d_input = {}",
            self.d_input
        );
    }
}

impl Body for MlpBody {
    type Input = Tensor<2>;

    fn features(&self, x: Tensor<2>, pass: &mut Pass) -> Tensor<3> {
        self.assert_input(x.dims());
        self.propagate(x.unsqueeze::<3>().repeat_dim(0, pass.samples()), pass)
    }

    fn feature_moments(&self, x: Tensor<2>, pass: &mut Pass) -> Result<Moments<3>, Unsupported> {
        self.assert_input(x.dims());
        self.propagate_moments(Moments::deterministic(x.unsqueeze::<3>()), pass)
    }

    fn feature_dim(&self) -> usize {
        self.layers.last().map_or(self.d_input, |l| l.shape()[1])
    }

    fn check_input(&self, x: &Tensor<2>) -> Result<(), DataMismatch> {
        match x.dims()[1] == self.d_input {
            true => Ok(()),
            false => Err(DataMismatch::Shape {
                part: "inputs",
                expected: vec![self.d_input],
                found: vec![x.dims()[1]],
            }),
        }
    }

    fn visit_layers<V: LayerVisitor>(&self, visitor: &mut V) {
        self.visit_from(0, visitor);
    }

    fn map_layers<M: LayerMapper>(self, mapper: &mut M) -> Result<Self, ConfigError> {
        self.map_from(0, mapper)
    }
}
