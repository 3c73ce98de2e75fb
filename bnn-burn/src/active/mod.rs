//! Active learning as a library loop (Haußmann 2021 ch. 4, Farquhar 2022 ch. 5, Depeweg 2019
//! §6.4): [`ActiveLearning`] moves rows from a pool to a labelled set round by round with an
//! [`Acquire`] rule ([`Acquisition`]: a [`Scorer`] and a [`Selection`]), retrains through the user's
//! [`ActiveTask`], records every pick with its probability `q`, and resumes from its state
//! folder. [`pure_weights`] and [`lure_weights`] turn the `q`s into per-row weights that make
//! the training risk unbiased (Farquhar 2022 eqs. 5.7–5.8); [`active_test`] estimates a fixed
//! model's test risk from a few chosen labels. More: the book's *Active learning* page.

mod learn;
mod ral;
mod risk;
mod score;
mod select;
mod weights;

#[cfg(test)]
mod tests;

pub use learn::{
    Acquire, AcquireContext, Acquisition, ActiveConfig, ActiveHistory, ActiveLearning, ActiveTask,
    Retrain, Risk, Round,
};
pub use ral::{Episode, Ral, RalConfig};
pub use risk::{ActiveTest, active_test};
pub use score::{
    ClassScore, ClassScorer, CltScorer, DistanceScorer, LatentScorer, RegressionScore,
    RegressionScorer, Scorer,
};
pub use select::{Pick, Selection, boltzmann_pick, boltzmann_probabilities, select};
pub use weights::{lure_weights, pure_weights};

/// Why an active-learning run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ActiveError {
    /// A setting out of range (the field named).
    #[error(transparent)]
    Config(#[from] crate::error::ConfigError),
    /// The model could not predict the pool.
    #[error(transparent)]
    Predict(#[from] crate::predict::PredictError),
    /// BNN+LV's decomposition refused its draws.
    #[error(transparent)]
    Decomposition(#[from] crate::nets::DecompositionError),
    /// The model cannot propagate moments (CLT scores).
    #[error(transparent)]
    Moments(#[from] crate::posterior::Unsupported),
    /// A score the model's prediction cannot give.
    #[error("active scorer: {0}")]
    Unsupported(&'static str),
    /// Training failed.
    #[error(transparent)]
    Train(#[from] crate::train::TrainError),
    /// A warm-start model could not be saved or loaded.
    #[error(transparent)]
    Checkpoint(#[from] crate::train::CheckpointError),
    /// The state folder holds another run's history, or a damaged one.
    #[error("active-learning state {path}: {problem}")]
    State {
        /// The file.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// A metric of the user's evaluation is NaN or infinite.
    #[error("active learning round {round}: metric `{metric}` = {value}")]
    NonFinite {
        /// The round.
        round: usize,
        /// The metric's name.
        metric: String,
        /// Its value.
        value: f64,
    },
    /// The user's task failed.
    #[error(transparent)]
    Task(#[from] Box<dyn std::error::Error + Send + Sync>),
}
