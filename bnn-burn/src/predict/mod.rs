//! Prediction: one call for every method, `predict(x, mode)`, returning a distribution:
//! [`ClassPrediction`] (class probabilities of `S` draws, or a Dirichlet) or [`GaussianPrediction`]
//! (per-draw Gaussians, or moments). The decompositions follow Fortuna's names:
//! `aleatoric_entropy`, `epistemic_entropy` (the mutual information, BALD), `aleatoric_variance`,
//! `epistemic_variance`, and `entropy`/`variance` for the totals (Depeweg 2019 §3.2; Gal 2016
//! §3.3). Guide: the book's *Prediction and the decomposition* page.

mod class;
mod entropy;
mod gaussian;

pub use class::{ClassPrediction, ClassSamples, DirichletPrediction};
pub use entropy::{EntropyError, knn_entropy};
pub use gaussian::{
    GaussianMoments, GaussianPrediction, GaussianSamples, INTERVAL_LEVEL, MixtureAccumulator,
    RegressionScores,
};

/// A predictive distribution that scores targets of type `T`: `ln p(y_b | x_b)`, `[B]`
/// (the inherent `log_prob` of [`ClassPrediction`] and [`GaussianPrediction`]), for code
/// generic over the likelihood (the PAC-Bayes bound's empirical risk).
pub trait PredictiveLogProb<T> {
    /// `ln p(y_b | x_b)` per example.
    fn log_prob(&self, target: T) -> burn::tensor::Tensor<1>;
}

impl PredictiveLogProb<burn::tensor::Tensor<1, burn::tensor::Int>> for ClassPrediction {
    fn log_prob(
        &self,
        labels: burn::tensor::Tensor<1, burn::tensor::Int>,
    ) -> burn::tensor::Tensor<1> {
        ClassPrediction::log_prob(self, labels)
    }
}

impl PredictiveLogProb<burn::tensor::Tensor<2>> for GaussianPrediction {
    fn log_prob(&self, y: burn::tensor::Tensor<2>) -> burn::tensor::Tensor<1> {
        GaussianPrediction::log_prob(self, y)
    }
}

/// How a model is asked to predict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PredictMode {
    /// `n ≥ 1` posterior draws (a point estimate answers with one: every draw is the same).
    Samples(usize),
    /// Propagated moments, without sampling.
    Moments,
}

/// Why a model could not predict.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PredictError {
    /// `Samples(0)`.
    #[error("PredictMode::Samples(0): a prediction needs at least one posterior sample")]
    NoSamples,
    /// An input holds NaN or an infinity (checked before the passes).
    #[error("input row {row} (0-based) holds NaN or infinity: a prediction needs finite inputs")]
    NonFiniteInput {
        /// The first such row.
        row: usize,
    },
    /// The inputs do not fit the model (no rows, or rows of another shape).
    #[error("the inputs do not fit the model: {0}")]
    Mismatch(#[from] crate::error::DataMismatch),
    /// A finite input gave a prediction that is not: the network's `f32` arithmetic
    /// overflowed on it.
    #[error(
        "input row {row} (0-based) is finite, but the network's outputs for it are not: its \
         values overflow the network's f32 arithmetic; standardise the inputs as the training \
         inputs were"
    )]
    NonFiniteOutput {
        /// The first such row.
        row: usize,
    },
    /// The model cannot predict in this mode.
    #[error("{model} cannot predict in mode {mode:?}: {reason}")]
    Unsupported {
        /// The model, or the part of it that cannot (an activation, a likelihood, a body).
        model: &'static str,
        /// The mode asked for.
        mode: PredictMode,
        /// Why, and what to use instead.
        reason: &'static str,
    },
}

/// A model that predicts a distribution for a batch of inputs.
pub trait Predict {
    /// Inputs, first axis examples.
    type Input;
    /// The predictive distribution.
    type Prediction;

    /// The predictive distribution of `input` in `mode`.
    ///
    /// # Errors
    /// [`PredictError::NoSamples`] for `Samples(0)`; [`PredictError::NonFiniteInput`] for an
    /// input with NaN or an infinity; [`PredictError::Mismatch`] for inputs without rows or of
    /// another shape than the model takes; [`PredictError::NonFiniteOutput`] for finite inputs
    /// whose outputs overflow; [`PredictError::Unsupported`] for a mode the model cannot do.
    fn predict(
        &self,
        input: Self::Input,
        mode: PredictMode,
    ) -> Result<Self::Prediction, PredictError>;
}

/// A boxed model predicts as the model it holds (models of several kinds in one list).
impl<P: Predict + ?Sized> Predict for Box<P> {
    type Input = P::Input;
    type Prediction = P::Prediction;

    fn predict(
        &self,
        input: Self::Input,
        mode: PredictMode,
    ) -> Result<Self::Prediction, PredictError> {
        (**self).predict(input, mode)
    }
}

/// `p ln p` is 0 at `p = 0`: probabilities are floored inside logarithms.
pub(crate) const P_FLOOR: f64 = 1e-30;
