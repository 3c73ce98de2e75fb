//! Why training could not run or could not finish.

use crate::error::ConfigError;
use crate::posterior::Unsupported;

/// Why training could not run or could not finish.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A configuration value is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The objective weighs a KL folded into the layers otherwise than it was folded.
    #[error(transparent)]
    KlFold(#[from] crate::step::KlFoldMismatch),
    /// No training examples.
    #[error("training data is empty: there must be at least one example")]
    Empty,
    /// A training example holds NaN or an infinity (found before the first step).
    #[error(
        "the training {part} hold NaN or infinity in row {row} (0-based; a value beyond f32's \
         range, ±3.4e38, becomes infinity): remove, rescale or impute such rows before training"
    )]
    NonFiniteData {
        /// `"inputs"` or `"targets"`.
        part: &'static str,
        /// The first such row.
        row: usize,
    },
    /// Inputs and targets disagree on the number of examples.
    #[error("inputs have {inputs} examples but targets have {targets}")]
    LengthMismatch {
        /// Number of input rows.
        inputs: usize,
        /// Number of target rows.
        targets: usize,
    },
    /// The model lives on a device without autodiff.
    #[error(
        "the model's parameters live on a device without autodiff ({device}): build the model on \
         bnn_burn::training_device() (or device.autodiff()) to train it"
    )]
    NotAutodiff {
        /// The device, formatted.
        device: String,
    },
    /// The model has no parameters to train.
    #[error("the model has no parameters to train")]
    NoParameters,
    /// The loss of a step was NaN or infinite.
    #[error(
        "the loss became {value} in epoch {epoch}, step {step}: lower the learning rate, check \
         the data for NaN, or standardise the targets"
    )]
    NonFinite {
        /// Epoch (0-based).
        epoch: usize,
        /// Step within the epoch (0-based).
        step: usize,
        /// The value seen.
        value: f64,
    },
    /// The parameters after an update are unusable although that step's loss was finite.
    #[error(
        "training diverged at epoch {epoch}, step {step} (after the update): {detail}; lower the \
         learning rate"
    )]
    Diverged {
        /// Epoch (0-based).
        epoch: usize,
        /// Step within the epoch (0-based).
        step: usize,
        /// What was found.
        detail: String,
    },
    /// The objective needs a term the model cannot give.
    #[error("the objective needs a term the model cannot give: {0}")]
    Unsupported(#[from] Unsupported),
    /// An example could not be read.
    #[error("could not read a training example: {0}")]
    Data(String),
    /// The data do not fit the model (a width, a class label, a row count), found before the
    /// first step.
    #[error("the training data do not fit the model: {0}")]
    Mismatch(#[from] crate::error::DataMismatch),
    /// The untrained model's objective is not finite on the first training rows: the data
    /// overflow the network's `f32` arithmetic (or its initial parameters are not finite).
    #[error(
        "before any training step, the objective on the first training rows is {value} \
         (largest |input| {max_input:.2e}): the data overflow the network's f32 arithmetic; \
         standardise the inputs and targets"
    )]
    Overflow {
        /// The objective per point found.
        value: f64,
        /// The largest magnitude among the inputs of those rows (`NaN` when unknown).
        max_input: f64,
    },
    /// A checkpoint could not be written.
    #[error(transparent)]
    Checkpoint(#[from] super::CheckpointError),
    /// A saved training state could not be written, read or resumed.
    #[error("cannot resume training from {path}: {reason}")]
    Resume {
        /// The file or folder.
        path: String,
        /// What went wrong.
        reason: String,
    },
}
