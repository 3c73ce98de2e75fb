//! # bnn-burn
//!
//! Bayesian neural networks as ordinary [burn](https://burn.dev) modules: posteriors over weight
//! tensors ([`posterior`], [`dist`]), layers generic over them ([`layers`]), networks with a
//! body/head split ([`nets`], [`latent`]), likelihoods, objectives, a training loop ([`train`]),
//! predictions with aleatoric/epistemic decompositions ([`predict`]), metrics, fused kernels
//! ([`fused`]), reference inference ([`inference`]), active learning's risks ([`active`]) and
//! a random-feature GP baseline ([`gp`]).
//! The backend is a cargo feature ([`mod@device`]). The README's example and the book's library
//! pages run as doctests; guide and method pages: the book (`book/`, `mdbook serve book`).

#![warn(missing_docs)]

pub mod active;
pub mod batch;
pub mod continual;
pub mod convert;
pub mod device;
pub mod dist;
pub mod error;
pub mod fused;
pub mod gp;
pub mod host;
pub mod inference;
pub mod integrity;
pub mod latent;
pub mod layers;
pub mod likelihood;
pub mod linalg;
pub mod metrics;
pub mod nets;
pub mod objective;
pub mod posterior;
pub mod posthoc;
pub mod predict;
pub mod recipes;
pub mod reduce;
pub mod rollout;
pub mod sde;
pub mod special;
pub mod step;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;
pub mod train;

/// burn itself, with the features this crate was built with: `bnn_burn::burn::…` needs no
/// `burn` dependency (or guessing its features) in your own `Cargo.toml`.
pub use burn;

/// What the README's example uses, in one import: configs, constructors, training, prediction,
/// and burn's `Tensor`, `Distribution`, `Int` and `Module`.
pub mod prelude {
    pub use crate::layers::{Estimator, WeightConfig};
    pub use crate::likelihood::{
        Categorical, GaussianLikelihoodConfig, HeteroscedasticGaussian, MultiLabelProbit, NoiseFit,
    };
    pub use crate::nets::{
        Classifier, ConvNetConfig, HeteroscedasticRegressor, ImageClassifier, MlpConfig, Regressor,
    };
    pub use crate::posterior::PosteriorConfig;
    pub use crate::predict::{Predict, PredictMode};
    pub use crate::train::{TrainConfig, train, train_built};
    pub use crate::{Prior, device, training_device};
    pub use burn::module::Module;
    pub use burn::tensor::{Distribution, Int, Tensor};
}

pub use device::{BACKEND_ENV, BackendKind, backend_name, device, training_device};
pub use dist::Prior;
pub use error::ConfigError;
pub use posterior::KlDivergence;

/// The README's Rust examples, compiled and run as doctests exactly as printed.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The book's pages on the library, their Rust blocks compiled and run as doctests exactly as
/// printed (pages that use the data crate or the bench are bnn-bench's doctests).
#[cfg(doctest)]
pub mod book {
    #[doc = include_str!("../../book/src/introduction.md")]
    pub struct Introduction;
    #[doc = include_str!("../../book/src/concepts/overview.md")]
    pub struct ConceptsOverview;
    #[doc = include_str!("../../book/src/concepts/posteriors.md")]
    pub struct ConceptsPosteriors;
    #[doc = include_str!("../../book/src/concepts/estimators.md")]
    pub struct ConceptsEstimators;
    #[doc = include_str!("../../book/src/concepts/networks.md")]
    pub struct ConceptsNetworks;
    #[doc = include_str!("../../book/src/concepts/likelihoods.md")]
    pub struct ConceptsLikelihoods;
    #[doc = include_str!("../../book/src/concepts/objectives.md")]
    pub struct ConceptsObjectives;
    #[doc = include_str!("../../book/src/concepts/training.md")]
    pub struct ConceptsTraining;
    #[cfg(feature = "learner")]
    #[doc = include_str!("../../book/src/concepts/learner.md")]
    pub struct ConceptsLearner;
    #[doc = include_str!("../../book/src/concepts/callbacks.md")]
    pub struct ConceptsCallbacks;
    #[doc = include_str!("../../book/src/concepts/prediction.md")]
    pub struct ConceptsPrediction;
    #[doc = include_str!("../../book/src/concepts/backends.md")]
    pub struct ConceptsBackends;
    #[doc = include_str!("../../book/src/concepts/browser.md")]
    pub struct ConceptsBrowser;
    #[doc = include_str!("../../book/src/concepts/fused-kernels.md")]
    pub struct ConceptsFusedKernels;
    #[doc = include_str!("../../book/src/methods/variational.md")]
    pub struct MethodsVariational;
    #[doc = include_str!("../../book/src/methods/mc-dropout.md")]
    pub struct MethodsMcDropout;
    #[doc = include_str!("../../book/src/methods/continual.md")]
    pub struct MethodsContinual;
    #[doc = include_str!("../../book/src/methods/active-learning.md")]
    pub struct MethodsActiveLearning;
    #[doc = include_str!("../../book/src/methods/control.md")]
    pub struct MethodsControl;
    #[doc = include_str!("../../book/src/methods/sde.md")]
    pub struct MethodsSde;
    #[doc = include_str!("../../book/src/methods/variational-rnn.md")]
    pub struct MethodsVariationalRnn;
    #[doc = include_str!("../../book/src/methods/moment-propagation.md")]
    pub struct MethodsMomentPropagation;
    #[doc = include_str!("../../book/src/methods/bnn-lv.md")]
    pub struct MethodsBnnLv;
    #[doc = include_str!("../../book/src/methods/evidential.md")]
    pub struct MethodsEvidential;
    #[doc = include_str!("../../book/src/methods/post-hoc.md")]
    pub struct MethodsPostHoc;
    #[doc = include_str!("../../book/src/methods/convert.md")]
    pub struct MethodsConvert;
    #[doc = include_str!("../../book/src/methods/reference-inference.md")]
    pub struct MethodsReferenceInference;
    #[doc = include_str!("../../book/src/contributing/architecture.md")]
    pub struct ContributingArchitecture;
    #[doc = include_str!("../../book/src/contributing/extending.md")]
    pub struct ContributingExtending;
    #[doc = include_str!("../../book/src/contributing/testing.md")]
    pub struct ContributingTesting;
    #[doc = include_str!("../../book/src/contributing/ci.md")]
    pub struct ContributingCi;
    #[doc = include_str!("../../book/src/contributing/dependencies.md")]
    pub struct ContributingDependencies;
}
