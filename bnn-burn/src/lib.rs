//! # bnn-burn
//!
//! Bayesian neural networks as ordinary [burn](https://burn.dev) modules.
#![warn(missing_docs)]

pub mod device;
pub mod error;
pub mod layers;
pub mod metrics;
pub mod model;
pub mod objective;
pub mod prior;
pub mod special;
pub mod testing;
pub mod train;
pub mod uncertainty;

pub use device::{backend_name, device, training_device};
pub use error::ConfigError;
pub use prior::{KlDivergence, Prior};
