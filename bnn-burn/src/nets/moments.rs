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
    /// Train by moment propagation (one deterministic pass per step, the expected
    /// log-likelihood in closed form) instead of by sampling.
    #[config(default = false)]
    pub train: bool,
}

impl MomentConfig {
    /// VBP (Haußmann 2021 ch. 3): the gate with `C = 100`, Taylor logits, trained by moments.
    pub fn vbp() -> Self {
        Self::new().with_rule(MomentRule::vbp()).with_train(true)
    }

    /// Gaussian (CLT/DVI) moments, trained by moments (Wu et al. 2019, diagonal; Haußmann 2021
    /// ch. 4).
    pub fn clt() -> Self {
        Self::new().with_train(true)
    }
}

impl<B: Body, L: Likelihood> Bnn<B, L> {
    /// The network with `config` for moment prediction (and training, if it says so).
    pub fn with_moments(mut self, config: MomentConfig) -> Self {
        self.moments = config;
        self
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

#[cfg(test)]
#[path = "moments_tests.rs"]
mod tests;
