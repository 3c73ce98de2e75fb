//! Continual learning's pieces (Nguyen et al. 2018; Farquhar 2022 ch. 5): [`k_center`] picks a
//! task's coreset by greedy farthest-point selection, as VCL's code does. A task's posterior
//! becomes the next task's prior through [`crate::nets::Bnn::with_posterior_as_prior`] (VCL),
//! or a point network's diagonal Laplace through
//! [`crate::posthoc::NetworkLaplace::posterior_as_prior`] (EWC and online Laplace). More: the
//! book's *A posterior as the next prior* page.

mod coreset;

pub use coreset::k_center;
