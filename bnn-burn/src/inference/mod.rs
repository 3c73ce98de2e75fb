//! Reference inference on small models stated as an unnormalised log density over a flat
//! parameter vector ([`LogDensity`]): variational families on that vector (every per-tensor
//! family of [`crate::posterior`], and planar, radial and IAF flows), an ELBO trainer, and the
//! PSIS `k̂` diagnostic (Vehtari et al. 2024) of any fitted `q`. Brack 2022 Table 5.1 is the
//! eight-schools benchmark of these families. Guide: the book's *Reference inference* page.

mod family;
mod flows;
mod psis;
mod target;
mod vi;

pub use family::{FlatFamily, flat, flat_at_zero};
pub use flows::{Flow, FlowConfig, FlowKind, FlowStep, Iaf, Planar, Radial};
pub use psis::{KHatBand, Psis, PsisError, gpd_fit, psis};
pub use target::{EightSchools, Funnel, GaussianTarget, LogDensity, autodiff_value_and_grad};
pub use vi::{ViConfig, ViError, ViFit, ViReport, evaluate, fit};

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
