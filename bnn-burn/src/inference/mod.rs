//! Reference inference on small models stated as an unnormalised log density over a flat
//! parameter vector ([`LogDensity`]): variational families on that vector (every per-tensor
//! family of [`crate::posterior`], and planar, radial and IAF flows), an ELBO trainer, and the
//! PSIS `k̂` diagnostic (Vehtari et al. 2024) of any fitted `q`; HMC and NUTS with R̂ and
//! effective sample sizes as the ground truth; SGLD and SGHMC over minibatches. A network's
//! weights are such a vector ([`BnnTarget`]), and samples or a family over it a network-level
//! posterior ([`SampledPosterior`], [`FlatPosterior`]); [`dependence`] says how far draws are
//! from mean-field. Guide: the book's *Reference inference* page.

mod bnn;
mod dependence;
mod diagnostics;
mod family;
mod flows;
mod mcmc;
mod psis;
mod sgmcmc;
mod target;
mod vi;

pub use bnn::{BnnTarget, FlatPosterior, LatentTarget, SampledPosterior};
pub use dependence::{Dependence, DependenceError, assign, dependence, w2};
pub use diagnostics::{ParamSummary, ess, max_rhat, normal_quantile, rhat, summarise};
pub use family::{FlatFamily, flat, flat_at_zero};
pub use flows::{Flow, FlowConfig, FlowKind, FlowStep, Iaf, Planar, Radial};
pub use mcmc::{Chain, McmcConfig, McmcError, McmcRun, Sampler, sample};
pub use psis::{KHatBand, Psis, PsisError, gpd_fit, psis};
pub use sgmcmc::{Minibatches, SgMcmcConfig, SgMcmcError, SgRun, SgSampler, sg_sample};
pub use target::{EightSchools, Funnel, GaussianTarget, LogDensity, autodiff_value_and_grad};
pub use vi::{ViConfig, ViError, ViFit, ViReport, ViTrainer, evaluate, fit, network_check};

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
