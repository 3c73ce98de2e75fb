//! Continual learning (Nguyen et al. 2018; Farquhar 2022 ch. 5): [`run_sequence`] trains a task
//! sequence, each task from the last one's posterior made the prior or from scratch, with
//! [`k_center`] coresets and their fine-tune, scoring every task seen after each. The prior
//! comes from [`crate::nets::Bnn::with_posterior_as_prior`] (VCL) or a point network's diagonal
//! Laplace, [`crate::posthoc::NetworkLaplace::posterior_as_prior`] (EWC, online Laplace). More:
//! the book's *A posterior as the next prior* page.

mod coreset;
mod sequence;

#[cfg(test)]
mod tests;

pub use coreset::k_center;
pub use sequence::{ContinualConfig, ContinualHistory, ContinualTask, Propagation, run_sequence};
