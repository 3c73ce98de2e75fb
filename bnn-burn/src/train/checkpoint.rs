//! Saving and loading every parameter of a model through burn's records (burnpack files).

use burn::module::Module;
use std::path::Path;

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
#[error("checkpoint {path}: {source}")]
pub struct CheckpointError {
    /// The file.
    pub path: String,
    /// What burn's recorder reported.
    pub source: burn::store::RecordError,
}

/// Saves every parameter of `model` to `path` (a burnpack file, full precision). Prior tensors
/// are constants of the module and are not saved.
pub fn save_checkpoint<M: Module>(
    model: &M,
    path: impl AsRef<Path>,
) -> Result<(), CheckpointError> {
    let path = path.as_ref();
    model
        .clone()
        .save_file(path)
        .map_err(|source| CheckpointError {
            path: path.display().to_string(),
            source,
        })
}

/// Loads parameters saved by [`save_checkpoint`] into `model` (which fixes the architecture).
pub fn load_checkpoint<M: Module>(model: M, path: impl AsRef<Path>) -> Result<M, CheckpointError> {
    let path = path.as_ref();
    model.try_load_file(path).map_err(|source| CheckpointError {
        path: path.display().to_string(),
        source,
    })
}
