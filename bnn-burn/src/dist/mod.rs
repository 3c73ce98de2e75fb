//! Distributions as tensors: the crate's one Gaussian log-density and the priors over weight
//! tensors (a trained posterior can be the next prior).

pub mod gaussian;
pub mod prior;

pub use gaussian::gaussian_log_density;
pub use prior::{GaussianPrior, Prior, ScaleMixturePrior, WeightPrior};
