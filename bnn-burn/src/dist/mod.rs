//! Distributions as tensors: the crate's one Gaussian log-density and the priors over weight
//! tensors (a trained posterior can be the next prior), the diagonal Gaussian [`Moments`] that
//! moment propagation carries through a network, and the [`dirichlet`] closed forms of evidential
//! classifiers.

pub mod dirichlet;
pub mod gaussian;
pub mod moments;
pub mod prior;

pub use gaussian::gaussian_log_density;
pub use moments::Moments;
pub use prior::{GaussianPrior, HyperPrior, Prior, PriorTerms, ScaleMixturePrior, WeightPrior};
