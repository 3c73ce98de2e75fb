//! Ready-made models assembled from the layers: an MLP whose every layer uses the posterior
//! family chosen by [`LayerKind`], and regression / classification wrappers that own their
//! likelihood, so that one training loop and one prediction path serve every method.

use crate::error::{Check, ConfigError};
use crate::layers::{
    DropConnectLinear, DropoutLinearConfig, DropoutNoise, Estimator, McDropoutLinear,
    MeanFieldLinear, MeanFieldLinearConfig, RadialLinear, RadialLinearConfig,
};
use crate::objective::{
    Categorical, GaussianLikelihood, GaussianLikelihoodConfig, HeteroscedasticGaussian,
};
use crate::prior::{KlDivergence, Prior};
use crate::uncertainty::{ClassPrediction, GaussianPrediction};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::activation::relu;
use burn::tensor::module::linear;
use burn::tensor::{Device, Distribution, Int, Tensor};

/// The posterior family of every layer of a [`BayesianMlp`].
#[derive(Config, Debug, PartialEq, Copy)]
pub enum LayerKind {
    /// Point estimate (MAP with a Gaussian prior of std `prior_std`: the KL slot carries
    /// `−ln p(W) = ‖W‖²/(2σ₀²)` up to a constant).
    Deterministic {
        /// Prior standard deviation σ₀ (weight decay `1/(2σ₀² N)` per point).
        prior_std: f64,
    },
    /// Mean-field Gaussian (Bayes by Backprop).
    MeanField {
        /// Gradient estimator.
        estimator: Estimator,
        /// Prior.
        prior: Prior,
        /// Initial `ρ`.
        rho_init: f64,
    },
    /// Radial posterior (Farquhar et al. 2020).
    Radial {
        /// Prior.
        prior: Prior,
        /// Initial `ρ`.
        rho_init: f64,
    },
    /// MC dropout on every layer input (Gal 2016).
    McDropout {
        /// Drop probability.
        p: f64,
        /// Noise distribution.
        noise: DropoutNoise,
        /// Prior length-scale `l`.
        length_scale: f64,
    },
    /// DropConnect on every weight.
    DropConnect {
        /// Drop probability.
        p: f64,
        /// Prior length-scale `l`.
        length_scale: f64,
    },
}

impl LayerKind {
    /// A short name for tables and legends.
    pub fn name(&self) -> &'static str {
        match self {
            LayerKind::Deterministic { .. } => "MAP",
            LayerKind::MeanField {
                estimator: Estimator::Reparameterization,
                ..
            } => "MFVI",
            LayerKind::MeanField {
                estimator: Estimator::LocalReparameterization,
                ..
            } => "MFVI-LRT",
            LayerKind::MeanField {
                estimator: Estimator::Flipout,
                ..
            } => "MFVI-Flipout",
            LayerKind::Radial { .. } => "Radial",
            LayerKind::McDropout { .. } => "MC dropout",
            LayerKind::DropConnect { .. } => "DropConnect",
        }
    }
}

/// A point-estimate linear layer whose "KL" is the negative log Gaussian prior (MAP).
#[derive(Module, Debug)]
pub struct MapLinear {
    /// `[d_input, d_output]` weight.
    pub weight: Param<Tensor<2>>,
    /// `[d_output]` bias (no prior).
    pub bias: Param<Tensor<1>>,
    /// Prior standard deviation σ₀.
    pub prior_std: f64,
}

/// The MAP "KL" of a weight tensor under a zero-mean Gaussian prior of std σ₀:
/// `−ln p(W) = ‖W‖² / (2σ₀²)` up to a constant.
pub(crate) fn gaussian_penalty<const D: usize>(weight: Tensor<D>, prior_std: f64) -> Tensor<1> {
    (weight.square().sum() / (2.0 * prior_std * prior_std)).reshape([1])
}

impl KlDivergence for MapLinear {
    fn kl(&self) -> Tensor<1> {
        gaussian_penalty(self.weight.val(), self.prior_std)
    }
}

/// One layer of a [`BayesianMlp`], of any family.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum StochasticLinear {
    /// Point estimate.
    Map(MapLinear),
    /// Mean-field Gaussian.
    MeanField(MeanFieldLinear),
    /// Radial.
    Radial(RadialLinear),
    /// MC dropout.
    McDropout(McDropoutLinear),
    /// DropConnect.
    DropConnect(DropConnectLinear),
}

impl StochasticLinear {
    /// A `d_input → d_output` layer of family `kind`.
    pub fn new(
        kind: &LayerKind,
        d_input: usize,
        d_output: usize,
        device: &Device,
    ) -> Result<Self, ConfigError> {
        Ok(match *kind {
            LayerKind::Deterministic { prior_std } => {
                Check("LayerKind::Deterministic").positive("prior_std", prior_std)?;
                let he = (2.0 / d_input as f64).sqrt();
                StochasticLinear::Map(MapLinear {
                    weight: Param::from_tensor(Tensor::random(
                        [d_input, d_output],
                        Distribution::Normal(0.0, he),
                        device,
                    )),
                    bias: Param::from_tensor(Tensor::zeros([d_output], device)),
                    prior_std,
                })
            }
            LayerKind::MeanField {
                estimator,
                prior,
                rho_init,
            } => StochasticLinear::MeanField(
                MeanFieldLinearConfig::new(d_input, d_output)
                    .with_estimator(estimator)
                    .with_prior(prior)
                    .with_rho_init(rho_init)
                    .init(device)?,
            ),
            LayerKind::Radial { prior, rho_init } => StochasticLinear::Radial(
                RadialLinearConfig::new(d_input, d_output)
                    .with_prior(prior)
                    .with_rho_init(rho_init)
                    .init(device)?,
            ),
            LayerKind::McDropout {
                p,
                noise,
                length_scale,
            } => StochasticLinear::McDropout(
                DropoutLinearConfig::new(d_input, d_output, p)
                    .with_noise(noise)
                    .with_length_scale(length_scale)
                    .init_mc_dropout(device)?,
            ),
            LayerKind::DropConnect { p, length_scale } => StochasticLinear::DropConnect(
                DropoutLinearConfig::new(d_input, d_output, p)
                    .with_length_scale(length_scale)
                    .init_drop_connect(device)?,
            ),
        })
    }

    /// `S` samples: `[S, B, d_input]` → `[S, B, d_output]`.
    pub fn forward_samples(&self, x: Tensor<3>) -> Tensor<3> {
        match self {
            StochasticLinear::Map(l) => linear(x, l.weight.val(), Some(l.bias.val())),
            StochasticLinear::MeanField(l) => l.forward_samples(x),
            StochasticLinear::Radial(l) => l.forward_samples(x),
            StochasticLinear::McDropout(l) => l.forward_samples(x),
            StochasticLinear::DropConnect(l) => l.forward_samples(x),
        }
    }
}

impl StochasticLinear {
    /// [`Self::forward_samples`] and the layer's KL in one call; the posterior families evaluate
    /// `σ = softplus(ρ)` once for both.
    pub fn forward_samples_kl(&self, x: Tensor<3>) -> (Tensor<3>, Tensor<1>) {
        match self {
            StochasticLinear::MeanField(l) => l.forward_samples_kl(x),
            StochasticLinear::Radial(l) => l.forward_samples_kl(x),
            other => (other.forward_samples(x), other.kl()),
        }
    }
}

impl KlDivergence for StochasticLinear {
    fn kl(&self) -> Tensor<1> {
        match self {
            StochasticLinear::Map(l) => l.kl(),
            StochasticLinear::MeanField(l) => l.kl(),
            StochasticLinear::Radial(l) => l.kl(),
            StochasticLinear::McDropout(l) => l.kl(),
            StochasticLinear::DropConnect(l) => l.kl(),
        }
    }
}

/// Configuration of a [`BayesianMlp`].
#[derive(Config, Debug)]
pub struct BayesianMlpConfig {
    /// Input width.
    pub d_input: usize,
    /// Hidden widths (ReLU after each).
    pub hidden: Vec<usize>,
    /// Output width (for a heteroscedastic head, twice the target dimension).
    pub d_output: usize,
    /// Posterior family of every layer.
    pub layer: LayerKind,
}

/// A ReLU MLP whose every layer is of one posterior family.
#[derive(Module, Debug)]
pub struct BayesianMlp {
    /// The layers, input to output.
    pub layers: Vec<StochasticLinear>,
}

impl BayesianMlpConfig {
    /// The network.
    pub fn init(&self, device: &Device) -> Result<BayesianMlp, ConfigError> {
        let check = Check("BayesianMlpConfig");
        check.at_least_one("d_input", self.d_input)?;
        check.at_least_one("d_output", self.d_output)?;
        for h in &self.hidden {
            check.at_least_one("hidden", *h)?;
        }
        let mut widths = vec![self.d_input];
        widths.extend(&self.hidden);
        widths.push(self.d_output);
        let layers = widths
            .windows(2)
            .map(|w| StochasticLinear::new(&self.layer, w[0], w[1], device))
            .collect::<Result<_, _>>()?;
        Ok(BayesianMlp { layers })
    }
}

impl BayesianMlp {
    /// `S` stochastic passes in one call: `[B, d_input]` → `[S, B, d_output]`.
    pub fn forward_samples(&self, x: Tensor<2>, samples: usize) -> Tensor<3> {
        assert!(
            samples >= 1,
            "BayesianMlp::forward_samples needs samples >= 1"
        );
        let mut h = x.unsqueeze::<3>().repeat_dim(0, samples);
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.forward_samples(h);
            if i < last {
                h = relu(h);
            }
        }
        h
    }
}

impl BayesianMlp {
    /// [`Self::forward_samples`] and the network's KL from one evaluation of every layer's
    /// posterior scales: what a training step needs.
    pub fn forward_samples_kl(&self, x: Tensor<2>, samples: usize) -> (Tensor<3>, Tensor<1>) {
        assert!(
            samples >= 1,
            "BayesianMlp::forward_samples_kl needs samples >= 1"
        );
        let mut h = x.unsqueeze::<3>().repeat_dim(0, samples);
        let mut kl: Option<Tensor<1>> = None;
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            let (out, layer_kl) = layer.forward_samples_kl(h);
            h = if i < last { relu(out) } else { out };
            kl = Some(match kl {
                Some(k) => k + layer_kl,
                None => layer_kl,
            });
        }
        (h, kl.expect("an MLP has at least one layer"))
    }
}

impl KlDivergence for BayesianMlp {
    fn kl(&self) -> Tensor<1> {
        let device = self.devices()[0].clone();
        self.layers
            .iter()
            .fold(Tensor::zeros([1], &device), |acc, l| acc + l.kl())
    }
}

/// The likelihood of a [`Regressor`].
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum RegressionLikelihood {
    /// Homoscedastic noise (fixed or learned).
    Homoscedastic(GaussianLikelihood),
    /// Input-dependent noise from a second head.
    Heteroscedastic(HeteroscedasticGaussian),
}

/// A Bayesian regression model: network plus Gaussian likelihood.
#[derive(Module, Debug)]
pub struct Regressor {
    /// The network.
    pub net: BayesianMlp,
    /// The likelihood (its noise parameter is trained with the network).
    pub likelihood: RegressionLikelihood,
}

impl Regressor {
    /// A regressor for `d_target` outputs; a heteroscedastic head doubles the network output.
    pub fn new(
        d_input: usize,
        hidden: Vec<usize>,
        d_target: usize,
        layer: LayerKind,
        heteroscedastic: bool,
        device: &Device,
    ) -> Result<Self, ConfigError> {
        let d_output = if heteroscedastic {
            2 * d_target
        } else {
            d_target
        };
        let net = BayesianMlpConfig::new(d_input, hidden, d_output, layer).init(device)?;
        let likelihood = if heteroscedastic {
            RegressionLikelihood::Heteroscedastic(HeteroscedasticGaussian)
        } else {
            RegressionLikelihood::Homoscedastic(
                GaussianLikelihoodConfig::new()
                    .with_d_output(d_target)
                    .with_noise_std(0.5)
                    .init(device)?,
            )
        };
        Ok(Self { net, likelihood })
    }

    /// Per-sample predictive Gaussians `[S, B, D]`.
    pub fn predict(&self, x: Tensor<2>, samples: usize) -> GaussianPrediction {
        let out = self.net.forward_samples(x, samples);
        match &self.likelihood {
            RegressionLikelihood::Homoscedastic(l) => l.predict(out),
            RegressionLikelihood::Heteroscedastic(h) => h.predict(out),
        }
    }
}

impl KlDivergence for Regressor {
    fn kl(&self) -> Tensor<1> {
        self.net.kl()
    }
}

impl crate::train::Supervised for Regressor {
    type Input = Tensor<2>;
    type Target = Tensor<2>;

    fn nll(&self, x: Tensor<2>, y: Tensor<2>, samples: usize) -> Tensor<2> {
        let out = self.net.forward_samples(x, samples);
        self.likelihood_nll(out, y)
    }

    fn nll_and_kl(&self, x: Tensor<2>, y: Tensor<2>, samples: usize) -> (Tensor<2>, Tensor<1>) {
        let (out, kl) = self.net.forward_samples_kl(x, samples);
        (self.likelihood_nll(out, y), kl)
    }
}

impl Regressor {
    fn likelihood_nll(&self, out: Tensor<3>, y: Tensor<2>) -> Tensor<2> {
        match &self.likelihood {
            RegressionLikelihood::Homoscedastic(l) => l.nll(out, y),
            RegressionLikelihood::Heteroscedastic(h) => h.nll(out, y),
        }
    }
}

/// A Bayesian classifier: network plus categorical likelihood.
#[derive(Module, Debug)]
pub struct Classifier {
    /// The network (outputs logits).
    pub net: BayesianMlp,
}

impl Classifier {
    /// Class probabilities of `S` samples `[S, B, C]`.
    pub fn predict(&self, x: Tensor<2>, samples: usize) -> ClassPrediction {
        Categorical.predict(self.net.forward_samples(x, samples))
    }
}

impl KlDivergence for Classifier {
    fn kl(&self) -> Tensor<1> {
        self.net.kl()
    }
}

impl crate::train::Supervised for Classifier {
    type Input = Tensor<2>;
    type Target = Tensor<1, Int>;

    fn nll(&self, x: Tensor<2>, y: Tensor<1, Int>, samples: usize) -> Tensor<2> {
        Categorical.nll(self.net.forward_samples(x, samples), y)
    }

    fn nll_and_kl(
        &self,
        x: Tensor<2>,
        y: Tensor<1, Int>,
        samples: usize,
    ) -> (Tensor<2>, Tensor<1>) {
        let (out, kl) = self.net.forward_samples_kl(x, samples);
        (Categorical.nll(out, y), kl)
    }
}
