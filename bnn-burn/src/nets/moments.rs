//! Moment propagation through a whole network: the same body, head and posteriors as sampling,
//! another [`Pass`]. A network answers [`PredictMode::Moments`](crate::predict::PredictMode)
//! with it, and trains with it when [`MomentConfig::train`] is set (VBP, CLT, DVI; Haußmann
//! 2021 ch. 3–4, Wu et al. 2019).

use super::{Bnn, Body};
use crate::dist::Moments;
use crate::layers::{MomentRule, Pass};
use crate::likelihood::{Likelihood, LogitRule};
use crate::posterior::Unsupported;
use burn::config::Config;
use burn::tensor::Tensor;

/// How a network propagates moments, and whether it trains that way.
#[derive(Config, Debug, PartialEq)]
pub struct MomentConfig {
    /// How rectifiers map moments: exact Gaussian moments (CLT/DVI) or VBP's gate.
    #[config(default = "MomentRule::Clt")]
    pub rule: MomentRule,
    /// How a classifier predicts from Gaussian logits.
    #[config(default = "LogitRule::Sampled { samples: 100 }")]
    pub predict_logits: LogitRule,
    /// How a classifier's expected log-likelihood is approximated in training.
    #[config(default = "LogitRule::Taylor")]
    pub train_logits: LogitRule,
}

impl MomentConfig {
    /// VBP (Haußmann 2021 ch. 3): the gate with `C = 100`, Taylor logits (train it with
    /// [`crate::train::TrainConfig::inference`] set to moments).
    pub fn vbp() -> Self {
        Self::new().with_rule(MomentRule::vbp())
    }

    /// Gaussian (CLT/DVI) moments (Wu et al. 2019, diagonal; Haußmann 2021 ch. 4): the
    /// default rules, named.
    pub fn clt() -> Self {
        Self::new()
    }

    /// Checks every field: a gate sharpness `C` that is a finite number > 0, and at least one
    /// draw where the logits are sampled. The error names the field.
    pub fn validate(&self) -> Result<(), crate::ConfigError> {
        let check = crate::error::Check("MomentConfig");
        if let MomentRule::Vbp { gate } = self.rule {
            check.positive("rule.gate", gate)?;
        }
        for (field, rule) in [
            ("predict_logits.samples", self.predict_logits),
            ("train_logits.samples", self.train_logits),
        ] {
            if let LogitRule::Sampled { samples } | LogitRule::SampledMarginal { samples } = rule {
                check.at_least_one(field, samples)?;
            }
        }
        Ok(())
    }
}

impl<B: Body, L: Likelihood> Bnn<B, L> {
    /// The network with `config` for moment prediction (and training, if it says so).
    ///
    /// # Errors
    /// When `config` is invalid ([`MomentConfig::validate`]): the error names the field.
    pub fn with_moments(mut self, config: MomentConfig) -> Result<Self, crate::ConfigError> {
        config.validate()?;
        self.moments = config;
        Ok(self)
    }

    /// Moments of the head's outputs, `[1, B, k]`, under a moment `pass` ([`Pass::moments`]).
    ///
    /// # Errors
    /// When a layer or activation has no moment rule (e.g. tanh).
    pub fn output_moments(
        &self,
        input: B::Input,
        pass: &mut Pass,
    ) -> Result<Moments<3>, Unsupported> {
        let features = self.body.feature_moments(input, pass)?;
        self.head.moments(features, pass)
    }

    /// The outputs' moments `[B, k]` of a prediction pass with the configured rule.
    pub(crate) fn predictive_moments(&self, input: B::Input) -> Result<Moments<2>, Unsupported> {
        let m = self.output_moments(input, &mut Pass::moments(self.moments.rule))?;
        Ok(Moments::new(m.mean.squeeze_dim(0), m.var.squeeze_dim(0)))
    }
}

/// VBP's closed-form noise (Haußmann 2021 §3.2): after every epoch the Gaussian likelihood's
/// variance is set to its type-II maximum-likelihood value
/// `σ² = 1/β* = (1/N) Σ_n [(y_n − E f(x_n))² + Var f(x_n)]` over the training rows, per
/// target dimension, from the network's moments. The noise is then held out of the gradient
/// ([`crate::likelihood::NoiseFit::Fixed`]).
#[derive(Debug, Clone)]
pub struct NoiseRefit {
    pub(crate) x: Tensor<2>,
    pub(crate) y: Tensor<2>,
}

impl NoiseRefit {
    /// Refits on the training inputs `x [N, d]` and targets `y [N, D]` (any device; moved to
    /// the model's), a few thousand rows at a time.
    ///
    /// # Panics
    /// If `x` and `y` have different numbers of rows.
    pub fn new(x: Tensor<2>, y: Tensor<2>) -> Self {
        assert_eq!(
            x.dims()[0],
            y.dims()[0],
            "NoiseRefit: {} input rows but {} target rows",
            x.dims()[0],
            y.dims()[0]
        );
        Self { x, y }
    }
}

#[cfg(test)]
#[path = "moments_tests.rs"]
mod tests;
