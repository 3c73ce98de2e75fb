//! Objectives: likelihoods that turn network outputs into per-sample NLLs and predictive
//! distributions, and the ELBO that adds the KL term.

pub mod elbo;
pub mod likelihood;

pub use elbo::{Elbo, ElboConfig, ElboTerms, KlSchedule};
pub use likelihood::{
    Categorical, GaussianLikelihood, GaussianLikelihoodConfig, HeteroscedasticGaussian,
};
