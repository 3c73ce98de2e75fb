//! # bnn-burn
//!
//! Bayesian neural networks as ordinary [burn](https://burn.dev) modules: stochastic layers
//! with their KL terms, likelihoods and the ELBO, uncertainty decompositions, metrics and a
//! training loop. The backend is a cargo feature (see [`device`]).
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use bnn_burn::layers::Estimator;
//! use bnn_burn::model::{LayerKind, Regressor};
//! use bnn_burn::train::{train, TrainConfig};
//! use bnn_burn::{training_device, Prior};
//! use burn::module::Module;
//! use burn::tensor::{Distribution, Tensor};
//!
//! let device = training_device();
//! let x = Tensor::<2>::random([512, 1], Distribution::Uniform(-4.0, 4.0), &device);
//! let y = x.clone().sin() * 2.0 + Tensor::random([512, 1], Distribution::Normal(0.0, 0.3), &device);
//!
//! // Mean-field Gaussian weights (local reparameterisation), N(0, 1) prior, learned noise head.
//! let layer = LayerKind::MeanField {
//!     estimator: Estimator::LocalReparameterization,
//!     prior: Prior::gaussian(1.0),
//!     rho_init: -5.0,
//! };
//! let model = Regressor::new(1, vec![50, 50], 1, layer, true, &device)?;
//! // loss = mean NLL + KL / N  (= −ELBO / N), Adam, seeded minibatches.
//! let config = TrainConfig::new(30).with_learning_rate(3e-3).with_progress(false);
//! let (model, report) = train(model, x, y, &config)?;
//!
//! // 100 posterior samples → law of total variance.
//! let query = Tensor::<2>::from_floats([[0.0], [6.0]], &device.inner());
//! let pred = model.valid().predict(query, 100);
//! let aleatoric = pred.aleatoric_variance(); // E_w[σ²(x, w)]: noise in the data
//! let epistemic = pred.epistemic_variance(); // Var_w[μ(x, w)]: grows away from the data
//! assert_eq!(aleatoric.dims(), [2, 1]);
//! assert!(report.history.last().unwrap().loss < report.history[0].loss);
//! # let _ = epistemic;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

pub mod convnet;
pub mod device;
pub mod dist;
pub mod error;
pub mod host;
pub mod layers;
pub mod linalg;
pub mod metrics;
pub mod model;
pub mod objective;
pub mod posterior;
pub mod prior;
pub mod special;
pub mod testing;
pub mod train;
pub mod uncertainty;

pub use device::{backend_name, device, training_device};
pub use error::ConfigError;
pub use prior::{KlDivergence, Prior};
