//! Post-hoc and network-level posteriors over trained networks: deep ensembles, SWAG and
//! MultiSWAG, last-layer and whole-network (diagonal, KFAC) Laplace, and calibration on held-out
//! data (temperature scaling, split-conformal intervals and sets). A [`NetworkPosterior`] gives
//! joint draws of every layer's weights (or a linearised predictive) that feed the likelihood's
//! usual prediction types, so [`crate::predict::Predict::predict`], the metrics and the bench
//! harnesses work unchanged. Guide: the book's *Post-hoc posteriors* page.

mod calibration;
mod ensemble;
mod laplace;
mod network_laplace;
mod swag;

pub use calibration::{ConformalRegression, ConformalSets, TemperatureScaling};
pub use ensemble::{Ensemble, Pool};
pub use laplace::{LaplaceConfig, LaplaceError, LastLayerLaplace, PriorPrecision};
pub use network_laplace::{
    CurvatureEstimate, LaplaceStructure, NetworkLaplace, NetworkLaplaceConfig,
};
pub use swag::{
    RATE_HALVINGS, Swag, SwagCollector, SwagConfig, SwagMoments, sgd_posterior_learning_rate,
};

use crate::dist::Moments;
use crate::layers::LayerDraw;
use crate::likelihood::{Likelihood, LogitRule};
use crate::nets::{Bnn, Body, check_outputs_finite, predict_from_moments};
use crate::posterior::Unsupported;
use crate::predict::{PredictError, PredictMode};
use burn::tensor::Tensor;

/// Joint draws per forward pass are capped so that a chunk holds at most this many weights.
const CHUNK_WEIGHTS: usize = 1 << 24;

/// A posterior over every layer's weights of one trained network.
pub trait NetworkPosterior {
    /// The network's body.
    type Body: Body;
    /// The network's likelihood.
    type Likelihood: Likelihood;

    /// The trained network (its likelihood and architecture; its weights are the posterior's
    /// location).
    fn network(&self) -> &Bnn<Self::Body, Self::Likelihood>;

    /// `n` joint draws of every layer, in forward order, `[n, numel]` each
    /// ([`Bnn::forward_draws`]).
    fn joint_draws(&self, n: usize) -> Vec<LayerDraw>;

    /// The outputs' moments `[B, k]` of the network linearised at its weights (the GLM
    /// predictive, Immer et al. 2021), where the posterior has one.
    ///
    /// # Errors
    /// When it has none (the default).
    fn linearised(&self, _input: <Self::Body as Body>::Input) -> Result<Moments<2>, Unsupported> {
        Err(Unsupported {
            family: std::any::type_name::<Self>(),
            what: "this posterior has no linearised predictive; predict with \
                   PredictMode::Samples(n)",
        })
    }

    /// How a classifier turns the linearised predictive's Gaussian logits into probabilities
    /// (MacKay's probit approximation by default).
    fn logit_rule(&self) -> LogitRule {
        LogitRule::Probit
    }
}

/// The prediction of a network-level posterior: `Samples(n)` runs `n` joint draws through the
/// network (in chunks of at most 2²⁴ weights), `Moments` its linearised predictive.
///
/// # Errors
/// As [`crate::predict::Predict::predict`].
pub fn predict_network<P: NetworkPosterior>(
    posterior: &P,
    input: <P::Body as Body>::Input,
    mode: PredictMode,
) -> Result<<P::Likelihood as Likelihood>::Prediction, PredictError> {
    let _flushed = crate::device::SubnormalsFlushed::enter();
    let net = posterior.network();
    net.check_prediction_input(&input)?;
    let n = match mode {
        PredictMode::Samples(0) => return Err(PredictError::NoSamples),
        PredictMode::Samples(n) => n,
        PredictMode::Moments => {
            let m = posterior.linearised(input);
            return predict_from_moments(&net.likelihood, m, posterior.logit_rule());
        }
    };
    let weights = net.flat_layout().numel();
    let chunk = (CHUNK_WEIGHTS / weights.max(1)).clamp(1, n);
    let mut outs = Vec::with_capacity(n.div_ceil(chunk));
    let mut done = 0;
    while done < n {
        let m = chunk.min(n - done);
        let draws = posterior.joint_draws(m);
        outs.push(net.forward_draws(input.clone(), &draws));
        done += m;
    }
    let out = Tensor::cat(outs, 0);
    check_outputs_finite(out.clone())?;
    Ok(net.likelihood.predict(out))
}

/// The minimiser of `f` on `[a, b]` (`f` unimodal there) by `iterations` golden-section steps.
pub(crate) fn golden_min(f: impl Fn(f64) -> f64, mut a: f64, mut b: f64, iterations: usize) -> f64 {
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..iterations {
        let x = b - ratio * (b - a);
        let y = a + ratio * (b - a);
        match f(x) < f(y) {
            true => b = y,
            false => a = x,
        }
    }
    (a + b) / 2.0
}

/// `Predict` for a [`NetworkPosterior`] type, by [`predict_network`].
macro_rules! network_predict {
    ($posterior:ident) => {
        impl<B: Body, L: Likelihood> crate::predict::Predict for $posterior<B, L> {
            type Input = B::Input;
            type Prediction = L::Prediction;

            fn predict(
                &self,
                input: B::Input,
                mode: crate::predict::PredictMode,
            ) -> Result<L::Prediction, crate::predict::PredictError> {
                super::predict_network(self, input, mode)
            }
        }
    };
}
use network_predict;

#[cfg(test)]
mod tests;
